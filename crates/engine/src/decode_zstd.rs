//! A zstd-coded body (RFC 8878) decoded as its pieces arrive, with the pure-Rust
//! `ruzstd` decoder.
//!
//! Why pure Rust: volley only decodes zstd (`--compressed zstd`; nothing in it encodes
//! zstd), and libzstd's C build was one of the two longest steps of a clean build.
//! What it costs (`bench/zstd.py`, 28 Nov 2026, 2 shared cores at load 3-3.4): CPU per
//! decoded body, ruzstd / libzstd, 1.63x [1.56, 1.71] for 10 KB of text and 5.10x
//! [4.44, 5.39] for 1 MB (level 3; 57 us and 5.9 ms here): with `--compressed zstd`
//! on large bodies the generator, not the server, may be the bound sooner (the label
//! says so).
//! Why this adapter: ruzstd decodes whole blocks from a slice (`decode_from_to`), while
//! the framer hands over pieces of any size. Coded bytes wait in `pending` until their
//! block is complete, so at most one block (128 KiB coded, RFC 8878 3.1.1.2.4) plus a
//! piece is held, never the whole body. A stream is frames one after another: each is
//! decoded in turn, a skippable frame (3.1.2) is skipped, and a frame's content
//! checksum, when it carries one, must match what was decoded.

use std::io::{self, Write};

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::FrameDecoder;

/// Largest frame header (magic 4, descriptor 1, window 1, dictionary id 4, content
/// size 8): with this many bytes pending a header is always whole.
const MAX_FRAME_HEADER: usize = 18;

/// Output buffer of one decoding step.
const OUT_BYTES: usize = 16 * 1024;

/// One response's zstd stream, decoding into `W`.
pub(crate) struct ZstdStream<W: Write> {
    decoder: FrameDecoder,
    /// Coded bytes not yet decoded (an incomplete header or block).
    pending: Vec<u8>,
    out: Box<[u8]>,
    sink: W,
    /// A frame's header was read and its end not yet decoded.
    in_frame: bool,
    /// Bytes of a skippable frame still to skip.
    skip: u64,
    /// Frames decoded to their end.
    frames: u32,
}

impl<W: Write> ZstdStream<W> {
    /// A stream decoding into `sink`.
    pub(crate) fn new(sink: W) -> ZstdStream<W> {
        ZstdStream {
            decoder: FrameDecoder::new(),
            pending: Vec::new(),
            out: vec![0; OUT_BYTES].into_boxed_slice(),
            sink,
            in_frame: false,
            skip: 0,
            frames: 0,
        }
    }

    /// Where decoded bytes went.
    pub(crate) fn sink(&self) -> &W {
        &self.sink
    }

    /// Where decoded bytes went, taken back.
    pub(crate) fn into_sink(self) -> W {
        self.sink
    }

    /// Decodes what `data` completes.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.pending.extend_from_slice(data);
        self.step(false)
    }

    /// The body ended: whether the stream ended exactly there, after at least one
    /// whole frame.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        self.step(true)?;
        if self.in_frame || self.skip > 0 || !self.pending.is_empty() || self.frames == 0 {
            return Err(io::Error::other("zstd frame truncated"));
        }
        Ok(())
    }

    /// Decodes as far as the pending bytes go. `at_end`: no more bytes will come, so a
    /// header shorter than [`MAX_FRAME_HEADER`] is read as it stands.
    fn step(&mut self, at_end: bool) -> io::Result<()> {
        loop {
            if self.skip > 0 {
                let n = self
                    .pending
                    .len()
                    .min(usize::try_from(self.skip).unwrap_or(usize::MAX));
                self.pending.drain(..n);
                self.skip -= n as u64;
                if self.skip > 0 {
                    return Ok(());
                }
            }
            if !self.in_frame {
                if self.pending.is_empty() || (self.pending.len() < MAX_FRAME_HEADER && !at_end) {
                    return Ok(());
                }
                self.open_frame()?;
                continue;
            }
            let (read, written) = self
                .decoder
                .decode_from_to(&self.pending, &mut self.out)
                .map_err(io::Error::other)?;
            if read > self.pending.len() {
                // ruzstd counts a frame's 4-byte checksum as read before it has all
                // four: wait for them.
                return Ok(());
            }
            self.pending.drain(..read);
            self.sink.write_all(&self.out[..written])?;
            if self.decoder.is_finished() && self.decoder.can_collect() == 0 {
                self.close_frame()?;
            } else if read == 0 && written == 0 {
                return Ok(());
            }
        }
    }

    /// Reads the next frame's header from `pending`; a skippable frame is skipped.
    fn open_frame(&mut self) -> io::Result<()> {
        let mut src = &self.pending[..];
        let got = self.decoder.init(&mut src);
        let used = self.pending.len() - src.len();
        self.pending.drain(..used);
        match got {
            Ok(()) => self.in_frame = true,
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => self.skip = u64::from(length),
            Err(e) => return Err(io::Error::other(e)),
        }
        Ok(())
    }

    /// The frame's last block is decoded and its output written: its checksum, when
    /// it has one, must be that of the decoded bytes.
    fn close_frame(&mut self) -> io::Result<()> {
        if let (Some(sent), Some(got)) = (
            self.decoder.get_checksum_from_data(),
            self.decoder.get_calculated_checksum(),
        ) {
            if sent != got {
                return Err(io::Error::other("zstd checksum mismatch"));
            }
        }
        self.in_frame = false;
        self.frames += 1;
        Ok(())
    }
}
