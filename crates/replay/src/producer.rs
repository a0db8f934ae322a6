//! The log read into planned requests, one at a time ([`Producer`]): the loop of the
//! replay's reader thread, or of the workers' idle slices when there is no CPU for that
//! thread ([`crate::source`]).

use crate::fidelity::{path_group, Logged};
use crate::schedule::Planner;
use crate::source::{Item, Outcome, ReplaySpec};
use crate::{LogError, LogReader};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use volley_engine::RequestTemplate;

/// Path groups interned by the reader, so each request's [`Logged`] shares its
/// group's name rather than carrying a copy; bounded (a log of many first segments
/// gets a fresh name per request past the bound, as before).
#[derive(Default)]
struct Groups(HashMap<String, Arc<str>>);

impl Groups {
    const MAX: usize = 4 * crate::fidelity::MAX_GROUPS;

    fn of(&mut self, target: &str) -> Arc<str> {
        let name = path_group(target);
        if let Some(g) = self.0.get(&name) {
            return Arc::clone(g);
        }
        let g: Arc<str> = name.as_str().into();
        if self.0.len() < Self::MAX {
            self.0.insert(name, Arc::clone(&g));
        }
        g
    }
}

/// One pass over the log.
struct Pass {
    reader: LogReader,
    planner: Planner,
    /// The instant of the pass's last planned request so far.
    last_ns: u64,
}

/// The log (again and again with `repeat`) read into planned requests, one at a time:
/// the loop of the reader thread, or of a worker's idle slices ([`Handover::read_some`]).
pub(crate) struct Producer {
    spec: ReplaySpec,
    /// One template for the run: host and headers are the target's, the same for
    /// every request, so only the method and target change per request.
    template: RequestTemplate,
    groups: Groups,
    /// Where the current pass starts on the run's clock.
    offset_ns: u64,
    pass: Option<Pass>,
    pub(crate) ended: bool,
    /// Requests built that the engine refused, not yet added to the outcome.
    unbuildable: u64,
    outcome: Arc<Mutex<Outcome>>,
}

impl Producer {
    pub(crate) fn new(spec: ReplaySpec, outcome: Arc<Mutex<Outcome>>) -> Producer {
        let template = RequestTemplate {
            method: String::new(),
            path: String::new(),
            host: spec.shape.host.clone(),
            headers: spec.shape.headers.clone(),
            body: None,
            keep_alive: spec.shape.keep_alive,
        };
        Producer {
            spec,
            template,
            groups: Groups::default(),
            offset_ns: 0,
            pass: None,
            ended: false,
            unbuildable: 0,
            outcome,
        }
    }

    /// The next planned request and the index of its client; `None` once the log (the
    /// last pass of it) has ended. After an error, `None` too.
    pub(crate) fn next(&mut self) -> Result<Option<(usize, Item)>, LogError> {
        let result = self.advance();
        if !matches!(result, Ok(Some(_))) {
            self.stop();
        }
        result
    }

    fn advance(&mut self) -> Result<Option<(usize, Item)>, LogError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            if self.pass.is_none() {
                self.pass = Some(Pass {
                    reader: LogReader::open(&self.spec.path, self.spec.read.clone())?,
                    planner: Planner::new(self.spec.plan.clone()),
                    last_ns: self.offset_ns,
                });
            }
            let Some(pass) = self.pass.as_mut() else {
                return Ok(None);
            };
            let Some(r) = pass.reader.next() else {
                let planned = pass.planner.counts().planned;
                let last_ns = pass.last_ns;
                self.pass = None;
                if !self.spec.repeat || planned == 0 {
                    return Ok(None);
                }
                // The next pass starts one mean gap after this one's last request.
                let span = last_ns.saturating_sub(self.offset_ns);
                self.offset_ns = last_ns + span / planned.max(1);
                continue;
            };
            let Some(p) = pass.planner.plan(r?) else {
                continue;
            };
            let at_ns = self.offset_ns + p.intended_us * 1_000;
            pass.last_ns = at_ns;
            self.template.method = p.method;
            self.template.path = p.target;
            let Ok(mut req) = self.template.build(0) else {
                self.unbuildable += 1;
                continue;
            };
            req.lane = Some(p.client as u32);
            let logged = Logged {
                status: p.logged_status,
                bytes: p.logged_bytes,
                request_time_us: p.logged_request_time_us,
                group: self.groups.of(&req.path),
            };
            let item = Item {
                req: Arc::new(req),
                at_ns,
                logged,
            };
            return Ok(Some((p.client, item)));
        }
    }

    /// Adds what this producer counted to the run's outcome.
    fn settle(&mut self) {
        let n = std::mem::take(&mut self.unbuildable);
        if n > 0 {
            self.outcome
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .unbuildable += n;
        }
    }

    /// Records a failure of the reading in the run's outcome (the thread's and the
    /// workers' slices alike).
    pub(crate) fn fail(&self, e: &LogError) {
        self.outcome
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .error = Some(e.to_string());
    }

    /// Ends the reading: the log's end, a failure, or the run ended before the log.
    pub(crate) fn stop(&mut self) {
        self.ended = true;
        self.pass = None;
        self.settle();
    }
}
