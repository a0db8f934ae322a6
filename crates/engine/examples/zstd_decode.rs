//! Decode speed of a zstd body through the engine's own path (`BodyDecoder`, ruzstd),
//! for `bench/zstd.py`, which runs it beside the same loop over libzstd and gives the
//! ratio with its interval.
//!
//! `cargo run --release -p volley-engine --example zstd_decode -- FILE.zst SIZE PIECE MS [whole]`
//!
//! Decodes FILE.zst (whose decoded length is SIZE bytes) again and again for MS
//! milliseconds, handing it over in pieces of PIECE bytes as a socket's reads would,
//! checking every decode's length; prints the decodes done and the CPU nanoseconds each
//! took on average (the process's CPU time: on a shared machine the wall clock counts the
//! time others held the CPU too). With `whole`, ruzstd's own streaming decoder reads the whole body instead
//! (no engine adapter: what the adapter costs is the difference).

use std::time::{Duration, Instant};

use volley_engine::decode::{BodyDecoder, SeenCoding};
use volley_engine::{BodySpec, Coding};

/// This process's CPU time so far, ns (one thread: the decoding loop's).
fn cpu_ns() -> u64 {
    volley_metrics::resources::process_cpu_ns().expect("getrusage")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (file, size, piece, ms, whole) = match args.as_slice() {
        [f, s, p, m] => (f, s, p, m, false),
        [f, s, p, m, w] if w == "whole" => (f, s, p, m, true),
        _ => {
            eprintln!("usage: zstd_decode FILE.zst SIZE PIECE MS [whole]");
            std::process::exit(2);
        }
    };
    let coded = std::fs::read(file).expect("read the coded file");
    let size: u64 = size.parse().expect("SIZE: a whole number");
    let piece: usize = piece.parse().expect("PIECE: a whole number");
    let budget = Duration::from_millis(ms.parse().expect("MS: a whole number"));
    let seen = SeenCoding::Known(Coding::Zstd);
    let mut decoder = BodyDecoder::new(BodySpec {
        coding: Some(Coding::Zstd),
        expect_size: Some(size),
        expect_sha256: None,
    });
    let start = Instant::now();
    let cpu = cpu_ns();
    let mut done = 0u64;
    while start.elapsed() < budget {
        if whole {
            let mut d = ruzstd::decoding::StreamingDecoder::new(&coded[..]).expect("a frame");
            let n = std::io::copy(&mut d, &mut std::io::sink()).expect("decodes");
            assert_eq!(n, size, "decoded length");
            done += 1;
            continue;
        }
        decoder.start();
        for chunk in coded.chunks(piece.max(1)) {
            decoder.push(chunk, seen);
        }
        if let Some(e) = decoder.finish(seen) {
            eprintln!("decode failed: {e:?}");
            std::process::exit(1);
        }
        done += 1;
    }
    let ns = (cpu_ns() - cpu) as f64 / done as f64;
    println!("{done} {ns:.0}");
}
