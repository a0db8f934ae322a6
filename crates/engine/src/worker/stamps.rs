//! The instants of one request, kept the same way by every worker, and the sample
//! they become.
//!
//! Place in the flow: `worker (http1 | h2 | h3) -> **stamps** -> Sample -> Sink`.

use crate::sample::stamp_dispatched;
use crate::{ErrorKind, Sample};

/// The instants of one request that become its [`Sample`], kept the same way by both
/// workers (per connection in HTTP/1.1, per stream in HTTP/2).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Stamps {
    /// When the schedule said to send it (the send instant in a closed loop).
    pub intended_ns: u64,
    /// When the worker handled the arrival (open loop), even if it then waited.
    pub dispatched_ns: u64,
    pub sent_ns: u64,
    pub first_byte_ns: u64,
    /// Connect time charged to this request (0 on a reused connection).
    pub connect_ns: u64,
    /// The TLS handshake part of `connect_ns`.
    pub tls_handshake_ns: u64,
}

impl Stamps {
    /// Sent at `at`, or failed at `at` before it could be: in a closed loop there is
    /// no schedule, so a request is intended when it is sent.
    pub fn sent_at(&mut self, at: u64, open_loop: bool) {
        self.sent_ns = at;
        if !open_loop {
            self.intended_ns = at;
        }
    }

    /// The sample of these instants, done at `done_ns`; the caller adds the bytes
    /// and the request index.
    pub fn sample(
        &self,
        open_loop: bool,
        done_ns: u64,
        status: u16,
        error: Option<ErrorKind>,
    ) -> Sample {
        Sample {
            intended_ns: self.intended_ns,
            dispatched_ns: stamp_dispatched(
                open_loop,
                self.intended_ns,
                self.dispatched_ns,
                self.sent_ns,
            ),
            sent_ns: self.sent_ns,
            first_byte_ns: self.first_byte_ns,
            done_ns,
            connect_ns: self.connect_ns,
            tls_handshake_ns: self.tls_handshake_ns,
            status,
            wire_bytes: 0,
            body_bytes: 0,
            wire_body_bytes: 0,
            error,
            request_index: 0,
        }
    }
}
