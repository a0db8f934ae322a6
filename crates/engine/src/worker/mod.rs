//! The workers: one thread each, one mio event loop over its share of the connections.
//!
//! Place in the flow: `run -> **worker** -> transport (TCP, TLS) -> target`. `run`
//! splits the load into [`WorkerShare`]s; each worker turns its share into requests on
//! the wire and one [`crate::Sample`] per request into its own [`crate::Sink`].
//! [`shared`] holds what both protocols do the same way (claiming requests, releasing
//! arrivals, connection accounting, the event loop itself), [`streams`] what the two
//! stream workers do alike (late streams, a stream's sample); [`http1`] keeps one request
//! per connection at a time, [`h2`] many streams per connection, [`h3`] many streams per
//! QUIC connection (over UDP, through quinn-proto). Both are generic over
//! the [`crate::conn::Transport`], so plain TCP and TLS each get their own
//! monomorphised loop.

mod h2;
mod h3;
mod http1;
mod pollset;
mod shared;
mod split;
mod stamps;
mod streams;
mod uring;

use h2::H2Worker;
use h3::H3Worker;
use http1::Worker;
use shared::WorkerCore;
pub(crate) use shared::{duration_ns, Shared, WorkerShare, WorkerStats};
pub use shared::{H2Stats, HandshakeTimes};
pub(crate) use uring::Ring;
pub use uring::REFUSE_ENV as REFUSE_IO_URING_ENV;

use crate::conn::Tcp;
use crate::quic::{QuicConnector, Udp};
use crate::tls::{TlsConnector, TlsTransport};
use crate::{HttpVersion, RequestSource, Sink};
use uring::UringTcp;

/// What a worker's connections run over: plain TCP on epoll, plain TCP through an
/// io_uring ([`crate::IoPath::Uring`]), or TLS.
pub(crate) enum Link {
    Tcp,
    Uring(std::sync::Arc<Ring>),
    Tls(TlsConnector),
}

/// One worker's whole run, whichever worker it is: its sink and counters.
pub(crate) type Job<'a, S> = Box<dyn FnOnce() -> (S, WorkerStats, H2Stats) + Send + 'a>;

/// Builds the worker for `http` over TCP, or over TLS when given a connector, and
/// returns its run as a job for its thread. The choice is made once per worker, so
/// each loop is monomorphised for its protocol and transport.
pub(crate) fn job<'a, S: Sink + 'a>(
    shared: &'a Shared<'a>,
    sink: S,
    source: Box<dyn RequestSource>,
    share: WorkerShare,
    http: HttpVersion,
    link: Link,
) -> std::io::Result<Job<'a, S>> {
    let tls = match link {
        Link::Tls(c) => Some(c),
        Link::Tcp => None,
        Link::Uring(ring) => {
            // `run` makes rings for plain-TCP HTTP/1.1 only.
            let core = WorkerCore::<S, UringTcp>::new(shared, sink, source, share, ring.clone())?;
            let w = Worker::new(core.with_ring(ring));
            return Ok(Box::new(move || with_h2(w.run())));
        }
    };
    Ok(match (http, tls) {
        (HttpVersion::Http1, None) => {
            let w = Worker::new(WorkerCore::<S, Tcp>::new(shared, sink, source, share, ())?);
            Box::new(move || with_h2(w.run()))
        }
        (HttpVersion::Http1, Some(c)) => {
            let w = Worker::new(WorkerCore::<S, TlsTransport>::new(
                shared, sink, source, share, c,
            )?);
            Box::new(move || with_h2(w.run()))
        }
        (HttpVersion::H2 { streams }, None) => {
            let core = WorkerCore::<S, Tcp>::new(shared, sink, source, share, ())?;
            let w = H2Worker::new(core, streams);
            Box::new(move || w.run())
        }
        (HttpVersion::H2 { streams }, Some(c)) => {
            let core = WorkerCore::<S, TlsTransport>::new(shared, sink, source, share, c)?;
            let w = H2Worker::new(core, streams);
            Box::new(move || w.run())
        }
        (HttpVersion::H3 { streams }, Some(c)) => {
            let connector = QuicConnector::new(c)?;
            let core = WorkerCore::<S, Udp>::new(shared, sink, source, share, connector)?;
            let w = H3Worker::new(core, streams);
            Box::new(move || w.run())
        }
        // `run_with` refuses HTTP/3 without TLS before any worker is built.
        (HttpVersion::H3 { .. }, None) => {
            return Err(std::io::Error::other("HTTP/3 needs TLS"));
        }
    })
}

/// An HTTP/1.1 worker's result with (empty) HTTP/2 counters.
fn with_h2<S>((sink, stats): (S, WorkerStats)) -> (S, WorkerStats, H2Stats) {
    (sink, stats, H2Stats::default())
}
