//! Response bodies checked and decoded: content codings (`--compressed`) and expected
//! size or SHA-256 (`--expect-size`, `--expect-sha256`).
//!
//! Place in the flow: `worker -> http1 framing -> **decode** -> Sample`. The HTTP/1.1
//! framer hands over the body as it came off the wire (chunked framing removed, content
//! coding kept); a [`BodyDecoder`] per connection decodes it piece by piece as the
//! pieces arrive, so a large body is never held whole. It counts decoded bytes (the
//! sample's `body_bytes`) and hashes them only when a hash was asked for.
//!
//! Why the coding is checked at all: a server that ignores `Accept-Encoding` answers
//! faster than one that compresses, and measuring it would time the wrong work
//! (docs/methodology.md, "compression actually applied when asked"). So a response whose
//! `Content-Encoding` is missing or differs from the one asked for is an
//! [`ErrorKind::Encoding`], as is one that does not decode; a decoded body of the
//! wrong size or hash is an [`ErrorKind::Validation`]. The response is still framed to
//! its end, so the connection stays usable and the error is counted at `done`.
//!
//! Both workers share it: the HTTP/1.1 worker appends to [`BodyDecoder::input`] and
//! drains, the HTTP/2 worker pushes each stream's DATA payloads with
//! [`BodyDecoder::push`] (one decoder per stream in flight).

use std::io::{self, Write};

use sha2::{Digest, Sha256};

use crate::ErrorKind;

#[path = "decode_zstd.rs"]
mod zstd;

/// A content coding volley can ask for and decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// `gzip` (RFC 1952), decoded with flate2.
    Gzip,
    /// `br` (Brotli, RFC 7932), decoded with brotli-decompressor.
    Br,
    /// `zstd` (RFC 8878), decoded with ruzstd (`decode_zstd.rs`).
    Zstd,
}

impl Coding {
    /// Every coding, in the order help texts list them.
    pub const ALL: [Coding; 3] = [Coding::Br, Coding::Gzip, Coding::Zstd];

    /// The token sent in `Accept-Encoding` and expected in `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// Parses a token as a user or a server writes it (case-insensitive; `x-gzip` is
    /// gzip, as RFC 9110 says recipients should treat it).
    pub fn parse(token: &str) -> Option<Coding> {
        match token.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Some(Coding::Gzip),
            "br" => Some(Coding::Br),
            "zstd" => Some(Coding::Zstd),
            _ => None,
        }
    }
}

/// What a response's `Content-Encoding` header said, as the framer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeenCoding {
    /// No header, or `identity`.
    #[default]
    Identity,
    /// One coding volley knows.
    Known(Coding),
    /// A coding volley does not decode, or several codings stacked (`gzip, br`).
    Other,
}

impl SeenCoding {
    /// Classifies a `Content-Encoding` header value.
    pub fn from_header(value: &[u8]) -> SeenCoding {
        let Ok(text) = std::str::from_utf8(value) else {
            return SeenCoding::Other;
        };
        let mut codings = text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("identity"));
        match (codings.next(), codings.next()) {
            (None, _) => SeenCoding::Identity,
            (Some(one), None) => Coding::parse(one).map_or(SeenCoding::Other, SeenCoding::Known),
            (Some(_), Some(_)) => SeenCoding::Other,
        }
    }
}

/// What every response body must be: encoded with `coding` (when set), and once
/// decoded of `expect_size` bytes and with SHA-256 `expect_sha256` (when set).
///
/// The request must ask for `coding` itself (an `Accept-Encoding` header in its
/// bytes): requests are prebuilt, and the engine never rewrites them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BodySpec {
    /// Content coding every response must carry.
    pub coding: Option<Coding>,
    /// Decoded body length every accepted response must have.
    pub expect_size: Option<u64>,
    /// SHA-256 of the decoded body every accepted response must have.
    pub expect_sha256: Option<[u8; 32]>,
}

impl BodySpec {
    /// Whether any check is asked for (if not, bodies are only counted, never decoded).
    pub fn is_active(&self) -> bool {
        self.coding.is_some() || self.expect_size.is_some() || self.expect_sha256.is_some()
    }
}

/// Parses 64 hex digits into a SHA-256 digest.
pub fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

/// Where decoded bytes go: counted, and hashed when a hash is expected.
#[derive(Debug, Default)]
struct Counter {
    bytes: u64,
    hasher: Option<Sha256>,
}

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len() as u64;
        if let Some(h) = self.hasher.as_mut() {
            h.update(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One response's decoder state.
enum Inner {
    /// No coding asked for: bytes pass straight to the counter.
    Plain(Counter),
    Gzip(Box<flate2::write::GzDecoder<Counter>>),
    Br(Box<brotli_decompressor::DecompressorWriter<Counter>>),
    Zstd(Box<zstd::ZstdStream<Counter>>),
}

impl Inner {
    fn counter(&self) -> &Counter {
        match self {
            Inner::Plain(c) => c,
            Inner::Gzip(d) => d.get_ref(),
            Inner::Br(d) => d.get_ref(),
            Inner::Zstd(d) => d.sink(),
        }
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Inner::Plain(c) => c.write_all(data),
            Inner::Gzip(d) => d.write_all(data),
            Inner::Br(d) => d.write_all(data),
            Inner::Zstd(d) => d.write(data),
        }
    }

    /// The body ended: whether the coded stream ended exactly there.
    fn finish(&mut self) -> io::Result<()> {
        match self {
            Inner::Plain(_) => Ok(()),
            Inner::Gzip(d) => d.try_finish(),
            Inner::Br(d) => d.close(),
            Inner::Zstd(d) => d.finish(),
        }
    }
}

/// Decodes and checks the bodies of one connection's responses, one at a time.
///
/// Per response: [`BodyDecoder::start`], then the coded body in pieces into
/// [`BodyDecoder::input`] followed by [`BodyDecoder::drain`] after each push, then
/// [`BodyDecoder::finish`] once the response is framed. The first failure is kept and
/// later bytes are ignored, so the response is still read to its end.
pub struct BodyDecoder {
    spec: BodySpec,
    /// Coded bytes handed over by the framer and not yet decoded.
    input: Vec<u8>,
    inner: Option<Inner>,
    /// Body bytes seen on the wire (still coded).
    wire_body_bytes: u64,
    failed: Option<ErrorKind>,
}

impl std::fmt::Debug for BodyDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyDecoder")
            .field("spec", &self.spec)
            .field("wire_body_bytes", &self.wire_body_bytes)
            .field("decoded_bytes", &self.decoded_bytes())
            .field("failed", &self.failed)
            .finish()
    }
}

impl BodyDecoder {
    /// A decoder for responses that must meet `spec`.
    pub fn new(spec: BodySpec) -> BodyDecoder {
        BodyDecoder {
            spec,
            input: Vec::new(),
            inner: None,
            wire_body_bytes: 0,
            failed: None,
        }
    }

    /// Prepares for the next response (keeps the input buffer's capacity).
    pub fn start(&mut self) {
        self.input.clear();
        self.inner = None;
        self.wire_body_bytes = 0;
        self.failed = None;
    }

    /// The buffer the framer appends coded body bytes to.
    pub fn input(&mut self) -> &mut Vec<u8> {
        &mut self.input
    }

    /// Decodes what [`BodyDecoder::input`] holds. `seen` is the response's
    /// `Content-Encoding` (known once its head was parsed, before any body byte).
    pub fn drain(&mut self, seen: SeenCoding) {
        let input = std::mem::take(&mut self.input);
        self.push(&input, seen);
        self.input = input;
        self.input.clear();
    }

    /// Decodes `data`, the next piece of the coded body, straight from the caller's
    /// buffer (the HTTP/2 worker's path: DATA payloads arrive as slices, and a copy
    /// into [`BodyDecoder::input`] would be wasted). `seen` as for `drain`.
    pub fn push(&mut self, data: &[u8], seen: SeenCoding) {
        if data.is_empty() {
            return;
        }
        self.wire_body_bytes += data.len() as u64;
        if self.failed.is_none() {
            if self.inner.is_none() {
                match self.open(seen) {
                    Ok(inner) => self.inner = Some(inner),
                    Err(kind) => self.failed = Some(kind),
                }
            }
            if let Some(inner) = self.inner.as_mut() {
                if inner.write(data).is_err() {
                    self.failed = Some(ErrorKind::Encoding);
                }
            }
        }
    }

    /// Picks the decoder for a body coded as `seen`, or the error it is.
    fn open(&self, seen: SeenCoding) -> Result<Inner, ErrorKind> {
        let counter = Counter {
            bytes: 0,
            hasher: self.spec.expect_sha256.map(|_| Sha256::new()),
        };
        match (self.spec.coding, seen) {
            (None, _) => Ok(Inner::Plain(counter)),
            (Some(want), SeenCoding::Known(got)) if want == got => Ok(match want {
                Coding::Gzip => Inner::Gzip(Box::new(flate2::write::GzDecoder::new(counter))),
                Coding::Br => Inner::Br(Box::new(brotli_decompressor::DecompressorWriter::new(
                    counter, 4096,
                ))),
                Coding::Zstd => Inner::Zstd(Box::new(zstd::ZstdStream::new(counter))),
            }),
            _ => Err(ErrorKind::Encoding),
        }
    }

    /// The response is complete: `None` when it meets the spec, else the error kind.
    /// `seen` is its `Content-Encoding`. A body-less response (HEAD, 204, 304, or an
    /// empty body) has nothing coded to check.
    pub fn finish(&mut self, seen: SeenCoding) -> Option<ErrorKind> {
        self.drain(seen);
        if self.failed.is_some() {
            return self.failed;
        }
        let Some(inner) = self.inner.as_mut() else {
            // No body byte arrived: the coding is only wrong if the server named
            // another one; sizes and hashes are checked against the empty body.
            if let (Some(want), SeenCoding::Known(got)) = (self.spec.coding, seen) {
                if want != got {
                    return Some(ErrorKind::Encoding);
                }
            }
            if seen == SeenCoding::Other && self.spec.coding.is_some() {
                return Some(ErrorKind::Encoding);
            }
            return self.validate(&Counter {
                bytes: 0,
                hasher: self.spec.expect_sha256.map(|_| Sha256::new()),
            });
        };
        if inner.finish().is_err() {
            self.failed = Some(ErrorKind::Encoding);
            return self.failed;
        }
        let counter = match self.inner.take() {
            Some(Inner::Plain(c)) => c,
            Some(Inner::Gzip(d)) => match d.finish() {
                Ok(c) => c,
                Err(_) => return Some(ErrorKind::Encoding),
            },
            Some(Inner::Br(d)) => match d.into_inner() {
                Ok(c) | Err(c) => c,
            },
            Some(Inner::Zstd(d)) => d.into_sink(),
            None => Counter::default(),
        };
        let verdict = self.validate(&counter);
        // Keep the counts readable for the sample.
        self.inner = Some(Inner::Plain(Counter {
            bytes: counter.bytes,
            hasher: None,
        }));
        verdict
    }

    fn validate(&self, c: &Counter) -> Option<ErrorKind> {
        if self.spec.expect_size.is_some_and(|n| n != c.bytes) {
            return Some(ErrorKind::Validation);
        }
        if let (Some(want), Some(h)) = (self.spec.expect_sha256, c.hasher.clone()) {
            if h.finalize().as_slice() != want {
                return Some(ErrorKind::Validation);
            }
        }
        None
    }

    /// Decoded body bytes of the current response so far.
    pub fn decoded_bytes(&self) -> u64 {
        self.inner.as_ref().map_or(0, |i| i.counter().bytes)
    }

    /// Coded body bytes of the current response so far (as on the wire, without
    /// chunked framing).
    pub fn wire_body_bytes(&self) -> u64 {
        self.wire_body_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zstd_of(data: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
    }

    /// Hand-made Brotli streams (no encoder is a dependency of the engine): an empty
    /// one, and "hello" as one uncompressed meta-block (WBITS 16; MNIBBLES 4,
    /// MLEN-1 = 4, ISUNCOMPRESSED; padding) then an empty last meta-block.
    const BR_EMPTY: &[u8] = &[0x06];
    const BR_HELLO: &[u8] = b"\x40\x00\x10hello\x03";

    fn text() -> Vec<u8> {
        (0..20_000u32)
            .flat_map(|i| format!("line {i} of the body\n").into_bytes())
            .collect()
    }

    /// Feeds `coded` in pieces of `step` bytes and finishes.
    fn run(
        spec: BodySpec,
        seen: SeenCoding,
        coded: &[u8],
        step: usize,
    ) -> (Option<ErrorKind>, u64, u64) {
        let mut d = BodyDecoder::new(spec);
        d.start();
        for piece in coded.chunks(step.max(1)) {
            d.input().extend_from_slice(piece);
            d.drain(seen);
        }
        let verdict = d.finish(seen);
        (verdict, d.decoded_bytes(), d.wire_body_bytes())
    }

    #[test]
    fn push_from_slices_matches_input_and_drain() {
        let body = text();
        let coded = gzip(&body);
        let spec = BodySpec {
            coding: Some(Coding::Gzip),
            expect_size: Some(body.len() as u64),
            ..BodySpec::default()
        };
        let seen = SeenCoding::Known(Coding::Gzip);
        let mut d = BodyDecoder::new(spec);
        d.start();
        for piece in coded.chunks(1000) {
            d.push(piece, seen);
        }
        assert_eq!(d.finish(seen), None);
        assert_eq!(
            (d.decoded_bytes(), d.wire_body_bytes()),
            (body.len() as u64, coded.len() as u64)
        );
        assert_eq!(
            run(spec, seen, &coded, 1000),
            (None, body.len() as u64, coded.len() as u64)
        );
        // Pushed identity bytes when gzip was asked: an Encoding error.
        d.start();
        d.push(b"plain", SeenCoding::Identity);
        assert_eq!(d.finish(SeenCoding::Identity), Some(ErrorKind::Encoding));
    }

    fn spec(coding: Coding) -> BodySpec {
        BodySpec {
            coding: Some(coding),
            ..BodySpec::default()
        }
    }

    #[test]
    fn codings_decode_in_any_piece_size() {
        let body = text();
        let cases = [(Coding::Gzip, gzip(&body)), (Coding::Zstd, zstd_of(&body))];
        for (coding, coded) in cases {
            for step in [1, 7, 1000, coded.len()] {
                let (v, decoded, wire) = run(spec(coding), SeenCoding::Known(coding), &coded, step);
                assert_eq!(v, None, "{coding:?} step {step}");
                assert_eq!(decoded, body.len() as u64, "{coding:?} step {step}");
                assert_eq!(wire, coded.len() as u64);
            }
        }
        let (v, decoded, _) = run(spec(Coding::Br), SeenCoding::Known(Coding::Br), BR_EMPTY, 1);
        assert_eq!((v, decoded), (None, 0));
        for step in [1, 3, BR_HELLO.len()] {
            let (v, decoded, wire) = run(
                spec(Coding::Br),
                SeenCoding::Known(Coding::Br),
                BR_HELLO,
                step,
            );
            assert_eq!((v, decoded, wire), (None, 5, 9), "br step {step}");
        }
        // Cut before its last meta-block: truncated.
        let (v, _, _) = run(
            spec(Coding::Br),
            SeenCoding::Known(Coding::Br),
            &BR_HELLO[..BR_HELLO.len() - 1],
            4,
        );
        assert_eq!(v, Some(ErrorKind::Encoding), "br truncated");
    }

    #[test]
    fn a_zstd_stream_of_frames_and_a_skippable_one_decodes_whole() {
        let (first, second) = (text(), b"the second frame".to_vec());
        let mut coded = zstd_of(&first);
        // A skippable frame (RFC 8878 3.1.2): magic, 4-byte length, payload.
        coded.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
        coded.extend_from_slice(&5u32.to_le_bytes());
        coded.extend_from_slice(b"skip!");
        coded.extend_from_slice(&zstd_of(&second));
        let whole = (first.len() + second.len()) as u64;
        let zstd = SeenCoding::Known(Coding::Zstd);
        for step in [1, 7, 4096, coded.len()] {
            let (v, decoded, _) = run(spec(Coding::Zstd), zstd, &coded, step);
            assert_eq!((v, decoded), (None, whole), "step {step}");
        }
        // A frame cut inside the skippable one's payload is not a whole stream.
        let cut = zstd_of(&first).len() + 10;
        let (v, _, _) = run(spec(Coding::Zstd), zstd, &coded[..cut], 64);
        assert_eq!(v, Some(ErrorKind::Encoding));
    }

    #[test]
    fn wrong_missing_or_unknown_coding_is_an_encoding_error() {
        let body = text();
        let coded = gzip(&body);
        let cases = [
            (SeenCoding::Identity, &body[..]),
            (SeenCoding::Known(Coding::Br), &coded[..]),
            (SeenCoding::Other, &coded[..]),
        ];
        for (seen, bytes) in cases {
            let (v, _, _) = run(spec(Coding::Gzip), seen, bytes, 500);
            assert_eq!(v, Some(ErrorKind::Encoding), "{seen:?}");
        }
        // An empty body with no coding is nothing to compress; a named wrong one is not.
        assert_eq!(
            run(spec(Coding::Gzip), SeenCoding::Identity, b"", 1).0,
            None
        );
        assert_eq!(
            run(spec(Coding::Gzip), SeenCoding::Known(Coding::Br), b"", 1).0,
            Some(ErrorKind::Encoding)
        );
    }

    #[test]
    fn truncated_or_corrupt_streams_are_encoding_errors() {
        let body = text();
        for (coding, coded) in [(Coding::Gzip, gzip(&body)), (Coding::Zstd, zstd_of(&body))] {
            let half = &coded[..coded.len() / 2];
            let (v, _, _) = run(spec(coding), SeenCoding::Known(coding), half, 100);
            assert_eq!(v, Some(ErrorKind::Encoding), "{coding:?} truncated");
            let garbage = vec![0xAB; 300];
            let (v, _, _) = run(spec(coding), SeenCoding::Known(coding), &garbage, 100);
            assert_eq!(v, Some(ErrorKind::Encoding), "{coding:?} garbage");
        }
        let (v, _, _) = run(
            spec(Coding::Br),
            SeenCoding::Known(Coding::Br),
            &[0xFF; 64],
            8,
        );
        assert_eq!(v, Some(ErrorKind::Encoding), "br garbage");
    }

    #[test]
    fn size_and_hash_validate_the_decoded_body() {
        let body = text();
        let digest: [u8; 32] = Sha256::digest(&body).into();
        let good = BodySpec {
            coding: Some(Coding::Gzip),
            expect_size: Some(body.len() as u64),
            expect_sha256: Some(digest),
        };
        let seen = SeenCoding::Known(Coding::Gzip);
        assert_eq!(run(good, seen, &gzip(&body), 333).0, None);
        let bad_size = BodySpec {
            expect_size: Some(body.len() as u64 + 1),
            ..good
        };
        assert_eq!(
            run(bad_size, seen, &gzip(&body), 333).0,
            Some(ErrorKind::Validation)
        );
        let mut other = digest;
        other[0] ^= 1;
        let bad_hash = BodySpec {
            expect_sha256: Some(other),
            ..good
        };
        assert_eq!(
            run(bad_hash, seen, &gzip(&body), 333).0,
            Some(ErrorKind::Validation)
        );
        // Without a coding the plain body is what is checked.
        let plain = BodySpec {
            expect_size: Some(3),
            ..BodySpec::default()
        };
        assert_eq!(run(plain, SeenCoding::Identity, b"abc", 1).0, None);
        assert_eq!(
            run(plain, SeenCoding::Identity, b"abcd", 1).0,
            Some(ErrorKind::Validation)
        );
    }

    #[test]
    fn headers_and_hashes_parse() {
        assert_eq!(
            SeenCoding::from_header(b"gzip"),
            SeenCoding::Known(Coding::Gzip)
        );
        assert_eq!(
            SeenCoding::from_header(b" BR "),
            SeenCoding::Known(Coding::Br)
        );
        assert_eq!(SeenCoding::from_header(b"identity"), SeenCoding::Identity);
        assert_eq!(SeenCoding::from_header(b"gzip, br"), SeenCoding::Other);
        assert_eq!(SeenCoding::from_header(b"deflate"), SeenCoding::Other);
        assert_eq!(SeenCoding::from_header(b"\xff"), SeenCoding::Other);
        assert_eq!(Coding::parse("x-gzip"), Some(Coding::Gzip));
        assert_eq!(Coding::parse("lzma"), None);
        let hex = "00".repeat(31) + "ff";
        let mut want = [0u8; 32];
        want[31] = 0xff;
        assert_eq!(parse_sha256(&hex), Some(want));
        assert_eq!(parse_sha256("abc"), None);
        assert_eq!(parse_sha256(&"zz".repeat(32)), None);
    }
}
