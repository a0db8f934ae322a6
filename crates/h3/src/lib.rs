//! `volley-h3`: sans-IO HTTP/3 framing (RFC 9114) and QPACK (RFC 9204), for the
//! engine's QUIC worker and the built-in server.
//!
//! Place in the data flow: beside `volley-h2`, as the protocol layer the engine's
//! per-thread mio loop drives for `--h3` runs. QUIC (packets, streams, TLS, loss
//! recovery) is `quinn-proto`'s, driven by the engine; this crate owns the bytes of
//! the HTTP/3 streams only, so it has no dependency on QUIC, sockets or clocks.
//!
//! Why written here: no maintained sans-IO HTTP/3 crate fits a mio loop today (read
//! 2026-11). `h3` (hyperium) is async and runtime-bound through its QUIC traits;
//! quiche's HTTP/3 layer is tied to quiche's own QUIC; the sans-IO crates on docs.rs
//! (`shiguredo_http3` canary releases, `h3wire` 0.1) are pre-release and hand DATA on
//! as owned buffers, where the engine's hot path counts body bytes without copying.
//! Our QPACK encoder uses the static table only (RFC 9204 lets an encoder do so); the
//! decoder keeps the dynamic table a side advertises, without blocked streams.
//!
//! The pieces:
//! - [`varint`]: QUIC variable-length integers.
//! - [`frame`]: frame layout and writers, and [`frame::FrameDecoder`], which cuts a
//!   stream into frames whatever the read sizes (DATA passed on in pieces, never
//!   buffered; unknown types skipped).
//! - [`qpack`]: the static table, a stateless encoder, and the decoder with its
//!   dynamic table, encoder-stream reader and decoder-stream instructions.
//! - [`stream`]: a request stream's response reader, the peer's unidirectional
//!   streams (control, QPACK, push, unknown; either side's, by [`stream::Role`]), and
//!   our control stream's preface.
//! - [`server`]: the server's side: a request stream's reader, a response head.
//!
//! ```
//! use volley_h3::stream::{write_request, LocalSettings, ResponseEvent, ResponseReader};
//!
//! let mut wire = Vec::new();
//! write_request(&mut wire, &[(b":method", b"GET"), (b":scheme", b"https"),
//!               (b":authority", b"localhost"), (b":path", b"/")], b"");
//! // quic.send_stream(id).write(&wire); finish(); later, its bytes arrive:
//! let local = LocalSettings::default();
//! let mut decoder = local.qpack_decoder();
//! let mut response = ResponseReader::new(&local, false);
//! let reply = [0x01, 0x03, 0x00, 0x00, 0xd9]; // HEADERS { :status 200 }
//! let stream_id = 0;
//! response.feed(&mut decoder, stream_id, &reply, |ev| {
//!     assert!(matches!(ev, ResponseEvent::Head { status: 200, .. }));
//! }).unwrap();
//! response.finish().unwrap(); // at FIN
//! ```
#![deny(missing_docs)]
// No unsafe code: what the fuzz targets look for is panics, overflows and unbounded
// growth, so they run without AddressSanitizer (fuzz/README.md).
#![forbid(unsafe_code)]

mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod qpack;
pub mod server;
pub mod stream;
pub mod varint;

pub use error::{ErrorCode, H3Error, QpackError};
