//! Precompressed siblings for the built-in server, which serves `NAME.gz` / `NAME.br`
//! files and does not compress on the fly: written before the start, removed at stop.

use crate::config::{self, Compression};
use crate::TargetError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `NAME.gz` / `NAME.br` beside each compressible file of the docroot that lacks
/// them (the built-in server serves precompressed siblings; it does not compress on the
/// fly), at the asked levels, and returns the files written so `stop` removes them.
/// Siblings already present are the caller's and are left alone. Bounded: at most
/// 10,000 files of at most 16 MiB each.
pub(super) fn precompress(docroot: &Path, c: &Compression) -> Result<Vec<PathBuf>, TargetError> {
    const MAX_FILES: usize = 10_000;
    const MAX_FILE_BYTES: u64 = 16 << 20;
    let mut created = Vec::new();
    let mut stack = vec![docroot.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(TargetError::io(format!(
            "listing {} to precompress",
            dir.display()
        )))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.to_string_lossy();
            if !meta.is_file()
                || meta.len() < config::MIN_COMPRESS_BYTES
                || meta.len() > MAX_FILE_BYTES
                || !config::is_compressible(config::mime_for(&name))
            {
                continue;
            }
            seen += 1;
            if seen > MAX_FILES {
                return Ok(created);
            }
            let data = std::fs::read(&path).map_err(TargetError::io(format!(
                "reading {} to precompress",
                path.display()
            )))?;
            let mut write = |ext: &str, bytes: Vec<u8>| -> Result<(), TargetError> {
                let out = PathBuf::from(format!("{name}.{ext}"));
                if out.exists() {
                    return Ok(());
                }
                std::fs::write(&out, bytes)
                    .map_err(TargetError::io(format!("writing {}", out.display())))?;
                created.push(out);
                Ok(())
            };
            if c.gzip {
                write("gz", gzip(&data, c.gzip_level))?;
            }
            if c.brotli {
                write("br", brotli_compress(&data, c.brotli_level))?;
            }
        }
    }
    Ok(created)
}

fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

fn brotli_compress(data: &[u8], quality: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: quality as i32,
        ..Default::default()
    };
    let _ = brotli::BrotliCompress(&mut &data[..], &mut out, &params);
    out
}
