//! `volley-h2`: a sans-IO HTTP/2 client codec (RFC 9113) with HPACK (RFC 7541).
//!
//! Place in the data flow: beside the HTTP/1.1 framing in `volley-engine`, as the
//! protocol layer the engine's per-thread mio loop drives for `h2c` targets. The
//! engine owns sockets and clocks; this crate owns bytes and protocol state only, so
//! it has no dependency on the engine and no runtime (the `h2` crate needs tokio).
//!
//! The driving loop:
//!
//! ```
//! use volley_h2::{Event, H2Conn, RequestHead, Settings};
//!
//! let mut conn = H2Conn::new(Settings::default());
//! let head = RequestHead { method: "GET", scheme: "http", authority: "localhost",
//!                          path: "/", headers: &[("accept", "*/*")] };
//! let stream = conn.submit(&head, b"").unwrap();
//! // socket.write(conn.pending_output()) -> n; then:
//! let n = conn.pending_output().len();
//! conn.consume_output(n);
//! // socket.read(&mut buf) -> bytes; then conn.feed(bytes)?, and:
//! while let Some(ev) = conn.poll_event() {
//!     if let Event::Headers { stream: s, status, .. } = ev { assert_eq!(s, stream); let _ = status; }
//! }
//! ```
//!
//! Hot-path costs: whole frames are parsed straight from the caller's read buffer
//! (only a frame split across reads is copied, into one reused buffer); DATA payloads
//! are counted, not copied, and response heads decode only `:status`, unless
//! [`Settings::capture_content`] asks for the payloads and content fields (for body
//! decoding and checks) or [`Settings::capture_headers`] for all fields; requests are HPACK-encoded
//! straight into the single output buffer. Every buffer is bounded: frames by our
//! SETTINGS_MAX_FRAME_SIZE, header blocks by SETTINGS_MAX_HEADER_LIST_SIZE, output by
//! [`Settings::max_pending_output_bytes`].
#![deny(missing_docs)]

mod conn;
#[cfg(test)]
mod conn_flow_tests;
#[cfg(test)]
mod conn_tests;
mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod hpack;

pub use conn::{
    ContentHead, EncodedHead, Event, H2Conn, HeaderField, RequestHead, Settings, StreamId,
};
pub use error::{ConnError, ErrorCode, SubmitError};
