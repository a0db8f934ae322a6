//! The path check of every bench load (docs/methodology.md, "Validation before
//! measurement"), one home for `bench URL` and `bench --target`: no request of its own
//! (a server's log then counts exactly the run's requests), but the cold request's
//! answer when `--first-request` sent one, else the run's own first answer to each
//! request (`volley_engine::FirstAnswers`), which ends the run at once when it refuses
//! the request. A managed target's start-up probe fetches the path with a plain GET, so
//! what it cannot see (the method, the headers, a file the server reads but will not
//! serve to this request) is caught here, not after a full load of errors.

use std::sync::Arc;

use volley_metrics::FirstRequest;

use super::LoadSpec;

impl LoadSpec {
    /// Arms the check on the next run's first answers (a fresh one per call: each
    /// target's run is checked on its own). Not for a replay: a log's own 404s are
    /// what it replays.
    pub fn check_first_answers(&mut self) {
        self.first_answers = Some(Arc::new(volley_engine::FirstAnswers::new(
            self.paths.len(),
            Arc::clone(&self.cfg.stop_flag),
        )));
    }

    /// The usage error of a cold request (`--first-request`) its server refused, `Ok`
    /// when it sent none or was answered.
    pub fn check_cold(&self, first: Option<&FirstRequest>) -> anyhow::Result<()> {
        match first.filter(|f| volley_engine::first::refuses(f.status)) {
            Some(f) => Err(self.refused(0, f.status, "the cold request of --first-request")),
            None => Ok(()),
        }
    }

    /// The usage error of a run stopped by its first answers, taking the check (later
    /// runs of this load are not checked again); `None` when it refused nothing.
    pub fn take_refusal(&mut self) -> Option<anyhow::Error> {
        let r = self.first_answers.take()?.refused()?;
        Some(self.refused(r.request_index, r.status, "its first answer in the run"))
    }

    /// The usage error of request `index` refused with `status` (`what`: which request
    /// said it): the path (or the method, or the headers) is wrong, and the run would
    /// only measure how fast the server says so.
    fn refused(&self, index: u32, status: u16, what: &str) -> anyhow::Error {
        let path = self.paths.get(index as usize).map_or("/", String::as_str);
        anyhow::Error::new(crate::exit::UsageError(format!(
            "{} {path} answered {status} ({what}): the server does not serve it to this request; the run stopped there and measured nothing (fix the path, the method or the headers)",
            self.method
        )))
    }
}
