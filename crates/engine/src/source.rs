//! Request sources: serialise requests once, then hand them out in a chosen order.
//!
//! [`RequestTemplate`] turns method, path, Host, user headers and a body into the exact
//! bytes of a [`Request`]; [`ListSourceFactory`] serves a list of them per
//! [`Order`]. Handing out an `Arc<Request>` costs one reference-count increment, so the
//! hot path never copies or allocates request bytes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::{Request, RequestSource, SourceFactory};

/// A request source that cannot be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SourceError {
    /// The list of requests was empty.
    #[error("no requests to send")]
    Empty,
    /// A header name or value, method or path contains CR, LF or (names) a space or colon,
    /// which would corrupt the request framing.
    #[error("invalid character in {0}")]
    InvalidToken(&'static str),
    /// `Sequential { block: 0 }`.
    #[error("sequential block size must be at least 1")]
    ZeroBlock,
    /// Weights do not match the requests one-to-one, or are not finite non-negative
    /// numbers with a positive sum.
    #[error("weights must be one non-negative number per request, with a positive sum")]
    BadWeights,
}

/// How to build one request. Serialised once by [`RequestTemplate::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTemplate {
    /// Method, e.g. `GET`.
    pub method: String,
    /// Request target (path and query), e.g. `/index.html?x=1`.
    pub path: String,
    /// Value of the Host header (host, with `:port` when not the default).
    pub host: String,
    /// Extra headers in order (`-H`). A user `Host` header replaces the default one.
    pub headers: Vec<(String, String)>,
    /// Body; when present, Content-Length is set from its length.
    pub body: Option<Vec<u8>>,
    /// When false, `Connection: close` is sent (the engine also closes the socket itself).
    pub keep_alive: bool,
}

impl RequestTemplate {
    /// A keep-alive request with no extra headers and no body.
    pub fn new(method: &str, path: &str, host: &str) -> Self {
        RequestTemplate {
            method: method.to_string(),
            path: path.to_string(),
            host: host.to_string(),
            headers: Vec::new(),
            body: None,
            keep_alive: true,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: Vec<u8>) -> Self {
        self.body = Some(body);
        self
    }

    /// Sets keep-alive (false adds `Connection: close`).
    pub fn keep_alive(mut self, keep_alive: bool) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Serialises the request; `index` is its position in its source.
    pub fn build(&self, index: u32) -> Result<Request, SourceError> {
        check_token(&self.method, "method", true)?;
        check_value(&self.path, "path")?;
        if self.path.contains(' ') {
            return Err(SourceError::InvalidToken("path"));
        }
        check_value(&self.host, "host")?;
        for (name, value) in &self.headers {
            check_token(name, "header name", true)?;
            check_value(value, "header value")?;
        }
        let has = |n: &str| {
            self.headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(n))
        };
        let mut out = Vec::with_capacity(128 + self.body.as_ref().map_or(0, Vec::len));
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        if !has("host") {
            push_header(&mut out, "Host", &self.host);
        }
        for (name, value) in &self.headers {
            push_header(&mut out, name, value);
        }
        if let Some(body) = &self.body {
            if !has("content-length") {
                push_header(&mut out, "Content-Length", &body.len().to_string());
            }
        }
        if !self.keep_alive && !has("connection") {
            push_header(&mut out, "Connection", "close");
        }
        out.extend_from_slice(b"\r\n");
        if let Some(body) = &self.body {
            out.extend_from_slice(body);
        }
        Ok(Request {
            method: self.method.clone(),
            path: self.path.clone(),
            bytes: out,
            index,
            lane: None,
        })
    }
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn check_token(s: &str, what: &'static str, nonempty: bool) -> Result<(), SourceError> {
    let bad = |b: u8| b <= b' ' || b == b':' || b == 0x7f;
    if (nonempty && s.is_empty()) || s.bytes().any(bad) {
        return Err(SourceError::InvalidToken(what));
    }
    Ok(())
}

fn check_value(s: &str, what: &'static str) -> Result<(), SourceError> {
    if s.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(SourceError::InvalidToken(what));
    }
    Ok(())
}

/// The order in which a list of requests is sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Order {
    /// Always the first request.
    Same,
    /// `block` copies of request 0, then `block` of request 1, ..., cycling. The order is
    /// global across workers (one shared ticket counter), so it holds for any thread
    /// count.
    Sequential {
        /// Consecutive copies of each request.
        block: u64,
    },
    /// Uniformly at random; worker `i` draws from a generator seeded with `seed + i`.
    Random {
        /// Base seed.
        seed: u64,
    },
    /// At random in proportion to `weights` (one per request); seeded like `Random`.
    Weighted {
        /// Relative weight of each request.
        weights: Vec<f64>,
        /// Base seed.
        seed: u64,
    },
}

/// Serves a fixed list of requests in an [`Order`]; implements [`SourceFactory`].
#[derive(Debug)]
pub struct ListSourceFactory {
    requests: Arc<[Arc<Request>]>,
    order: Order,
    /// Cumulative weights (Weighted only).
    cumulative: Arc<[f64]>,
    /// Global position for `Sequential`, shared by all workers.
    ticket: Arc<AtomicU64>,
}

impl ListSourceFactory {
    /// Checks the list and order. Request `index` fields are set to list positions.
    pub fn new(requests: Vec<Request>, order: Order) -> Result<Self, SourceError> {
        if requests.is_empty() {
            return Err(SourceError::Empty);
        }
        let mut cumulative = Vec::new();
        match &order {
            Order::Sequential { block: 0 } => return Err(SourceError::ZeroBlock),
            Order::Weighted { weights, .. } => {
                if weights.len() != requests.len()
                    || weights.iter().any(|w| !w.is_finite() || *w < 0.0)
                {
                    return Err(SourceError::BadWeights);
                }
                let mut sum = 0.0;
                for w in weights {
                    sum += w;
                    cumulative.push(sum);
                }
                if sum <= 0.0 || !sum.is_finite() {
                    return Err(SourceError::BadWeights);
                }
            }
            _ => {}
        }
        let requests = requests
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                r.index = i as u32;
                Arc::new(r)
            })
            .collect();
        Ok(ListSourceFactory {
            requests,
            order,
            cumulative: cumulative.into(),
            ticket: Arc::new(AtomicU64::new(0)),
        })
    }
}

impl SourceFactory for ListSourceFactory {
    fn make(&self, worker: usize, _workers: usize) -> Box<dyn RequestSource> {
        let seed = match &self.order {
            Order::Random { seed } | Order::Weighted { seed, .. } => {
                seed.wrapping_add(worker as u64)
            }
            _ => 0,
        };
        Box::new(ListSource {
            requests: Arc::clone(&self.requests),
            order: self.order.clone(),
            cumulative: Arc::clone(&self.cumulative),
            ticket: Arc::clone(&self.ticket),
            rng: ChaCha8Rng::seed_from_u64(seed),
        })
    }
}

/// One worker's view of a [`ListSourceFactory`].
struct ListSource {
    requests: Arc<[Arc<Request>]>,
    order: Order,
    cumulative: Arc<[f64]>,
    ticket: Arc<AtomicU64>,
    rng: ChaCha8Rng,
}

impl RequestSource for ListSource {
    fn next_request(&mut self) -> Option<Arc<Request>> {
        let n = self.requests.len();
        let i = match &self.order {
            Order::Same => 0,
            Order::Sequential { block } => {
                let t = self.ticket.fetch_add(1, Ordering::Relaxed);
                ((t / block) % n as u64) as usize
            }
            Order::Random { .. } => self.rng.random_range(0..n),
            Order::Weighted { .. } => {
                let total = self.cumulative[n - 1];
                let x = self.rng.random::<f64>() * total;
                // First index whose cumulative weight exceeds x (zero weights never win).
                self.cumulative.partition_point(|&c| c <= x).min(n - 1)
            }
        };
        Some(Arc::clone(&self.requests[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(n: usize) -> Vec<Request> {
        (0..n)
            .map(|i| {
                RequestTemplate::new("GET", &format!("/{i}"), "h")
                    .build(0)
                    .unwrap()
            })
            .collect()
    }

    fn draw(src: &mut dyn RequestSource, n: usize) -> Vec<u32> {
        (0..n).map(|_| src.next_request().unwrap().index).collect()
    }

    #[test]
    fn serialises_request() {
        let r = RequestTemplate::new("POST", "/submit?x=1", "example:8080")
            .header("X-Test", "a b")
            .body(b"hello".to_vec())
            .keep_alive(false)
            .build(3)
            .unwrap();
        assert_eq!(
            String::from_utf8(r.bytes).unwrap(),
            "POST /submit?x=1 HTTP/1.1\r\nHost: example:8080\r\nX-Test: a b\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\nhello"
        );
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.index),
            ("POST", "/submit?x=1", 3)
        );
    }

    #[test]
    fn user_host_replaces_default() {
        let r = RequestTemplate::new("GET", "/", "a")
            .header("host", "b")
            .build(0)
            .unwrap();
        assert_eq!(r.bytes, b"GET / HTTP/1.1\r\nhost: b\r\n\r\n");
    }

    #[test]
    fn rejects_header_injection() {
        let t = RequestTemplate::new("GET", "/", "h").header("X", "a\r\nEvil: 1");
        assert_eq!(t.build(0), Err(SourceError::InvalidToken("header value")));
        let t = RequestTemplate::new("GET", "/", "h").header("Bad Name", "v");
        assert_eq!(t.build(0), Err(SourceError::InvalidToken("header name")));
        assert!(RequestTemplate::new("", "/", "h").build(0).is_err());
        assert!(RequestTemplate::new("GET", "/a b", "h").build(0).is_err());
    }

    #[test]
    fn same_order() {
        let f = ListSourceFactory::new(list(3), Order::Same).unwrap();
        assert_eq!(draw(&mut *f.make(0, 1), 4), [0, 0, 0, 0]);
    }

    #[test]
    fn sequential_blocks_are_global_across_workers() {
        let f = ListSourceFactory::new(list(3), Order::Sequential { block: 2 }).unwrap();
        let mut a = f.make(0, 2);
        let mut b = f.make(1, 2);
        // Interleaved workers still see one global sequence 0,0,1,1,2,2,0,...
        let seq: Vec<u32> = (0..8)
            .map(|i| {
                if i % 2 == 0 { &mut a } else { &mut b }
                    .next_request()
                    .unwrap()
                    .index
            })
            .collect();
        assert_eq!(seq, [0, 0, 1, 1, 2, 2, 0, 0]);
    }

    #[test]
    fn random_is_seeded_per_worker_and_covers_all() {
        let f = ListSourceFactory::new(list(4), Order::Random { seed: 9 }).unwrap();
        let a = draw(&mut *f.make(0, 2), 200);
        let again = draw(&mut *f.make(0, 2), 200);
        let other = draw(&mut *f.make(1, 2), 200);
        assert_eq!(a, again);
        assert_ne!(a, other);
        for i in 0..4 {
            assert!(a.contains(&i), "index {i} never drawn");
        }
    }

    #[test]
    fn weighted_follows_weights() {
        let order = Order::Weighted {
            weights: vec![3.0, 0.0, 1.0],
            seed: 1,
        };
        let f = ListSourceFactory::new(list(3), order).unwrap();
        let d = draw(&mut *f.make(0, 1), 4000);
        let count = |i| d.iter().filter(|&&x| x == i).count();
        assert_eq!(count(1), 0, "zero weight is never drawn");
        // Expected 3000 vs 1000; binomial sd ~27, so +-200 is > 7 sd (fixed seed anyway).
        assert!((2800..=3200).contains(&count(0)), "{}", count(0));
        assert_eq!(count(0) + count(2), 4000);
    }

    #[test]
    fn rejects_bad_lists() {
        assert_eq!(
            ListSourceFactory::new(vec![], Order::Same).unwrap_err(),
            SourceError::Empty
        );
        let e = ListSourceFactory::new(list(2), Order::Sequential { block: 0 }).unwrap_err();
        assert_eq!(e, SourceError::ZeroBlock);
        for w in [
            vec![1.0],
            vec![0.0, 0.0],
            vec![1.0, f64::NAN],
            vec![-1.0, 2.0],
        ] {
            let e = ListSourceFactory::new(
                list(2),
                Order::Weighted {
                    weights: w,
                    seed: 0,
                },
            );
            assert_eq!(e.unwrap_err(), SourceError::BadWeights);
        }
    }
}
