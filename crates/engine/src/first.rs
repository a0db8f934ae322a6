//! The run's own first answers as the path check (docs/methodology.md, "Validation
//! before measurement"): `volley bench` (a URL or each managed target) sends no request
//! of its own before the run (an extra request would change the counts a server's log
//! is compared with); instead the first answer to each request of the run's source is looked at as it
//! comes back, and an answer saying the request is wrong ends the run at once, so a
//! path the server does not have is one line, never a run of fast errors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::{ErrorKind, Sample};

/// The first answer the run got to one request of its source, when it refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The request's index in the source (which URL of a mix).
    pub request_index: u32,
    /// The status it answered.
    pub status: u16,
}

/// Whether a status, as a request's first answer, says the request itself is wrong: a
/// 4xx, except 408 (Request Timeout) and 429 (Too Many Requests), which answer the
/// load, not the request. A 5xx is the server's trouble, which a run measures.
pub fn refuses(status: u16) -> bool {
    (400..500).contains(&status) && status != 408 && status != 429
}

/// Watches the first answer to each request of a run's source (shared by every
/// worker's sink); the first of them that [`refuses`] its request sets the run's stop
/// flag. Only answers count: a sample with no status (connect error, reset, timeout)
/// leaves its request unchecked until one comes.
#[derive(Debug)]
pub struct FirstAnswers {
    seen: Box<[AtomicBool]>,
    refused: OnceLock<Refusal>,
    stop: Arc<AtomicBool>,
}

impl FirstAnswers {
    /// A check of a source of `requests` requests that ends the run through `stop` (the
    /// run's `LoadConfig::stop_flag`).
    pub fn new(requests: usize, stop: Arc<AtomicBool>) -> FirstAnswers {
        FirstAnswers {
            seen: (0..requests).map(|_| AtomicBool::new(false)).collect(),
            refused: OnceLock::new(),
            stop,
        }
    }

    /// Looks at `s` if it is the first answer to its request. After that first answer
    /// a request costs one relaxed load per sample.
    #[inline]
    pub fn see(&self, s: &Sample) {
        let answered = s.status != 0 && matches!(s.error, None | Some(ErrorKind::Status));
        let Some(seen) = self.seen.get(s.request_index as usize) else {
            return;
        };
        if !answered || seen.load(Ordering::Relaxed) || seen.swap(true, Ordering::Relaxed) {
            return;
        }
        if s.error == Some(ErrorKind::Status) && refuses(s.status) {
            let _ = self.refused.set(Refusal {
                request_index: s.request_index,
                status: s.status,
            });
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// The first refusal seen, if any.
    pub fn refused(&self) -> Option<Refusal> {
        self.refused.get().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(index: u32, status: u16, error: Option<ErrorKind>) -> Sample {
        Sample {
            intended_ns: 0,
            dispatched_ns: 0,
            sent_ns: 0,
            first_byte_ns: 0,
            done_ns: 1,
            connect_ns: 0,
            tls_handshake_ns: 0,
            status,
            wire_bytes: 0,
            body_bytes: 0,
            wire_body_bytes: 0,
            error,
            request_index: index,
        }
    }

    #[test]
    fn which_first_answers_refuse_the_request() {
        let cases = [
            (404, true),
            (400, true),
            (401, true),
            (403, true),
            (405, true),
            (408, false),
            (429, false),
            (499, true),
            (500, false),
            (503, false),
            (302, false),
            (200, false),
        ];
        for (status, want) in cases {
            assert_eq!(refuses(status), want, "{status}");
        }
    }

    #[test]
    fn only_the_first_answer_of_each_request_decides() {
        let stop = Arc::new(AtomicBool::new(false));
        let f = FirstAnswers::new(2, Arc::clone(&stop));
        // No answer yet (a reset), then request 0 answers 200: checked and fine.
        f.see(&answer(0, 0, Some(ErrorKind::Reset)));
        f.see(&answer(0, 200, None));
        // A later 404 of request 0 is the run's data, not the check.
        f.see(&answer(0, 404, Some(ErrorKind::Status)));
        assert!(!stop.load(Ordering::Relaxed));
        assert_eq!(f.refused(), None);
        // A 503 first is the server's trouble: measured.
        f.see(&answer(1, 503, Some(ErrorKind::Status)));
        assert!(!stop.load(Ordering::Relaxed));
        // An index outside the source is ignored, not a panic.
        f.see(&answer(7, 404, Some(ErrorKind::Status)));
        assert!(!stop.load(Ordering::Relaxed));
    }

    #[test]
    fn a_first_404_stops_the_run_and_names_its_request() {
        let stop = Arc::new(AtomicBool::new(false));
        let f = FirstAnswers::new(3, Arc::clone(&stop));
        f.see(&answer(2, 404, Some(ErrorKind::Status)));
        f.see(&answer(1, 410, Some(ErrorKind::Status)));
        assert!(stop.load(Ordering::Relaxed));
        assert_eq!(
            f.refused(),
            Some(Refusal {
                request_index: 2,
                status: 404
            })
        );
    }
}
