//! The plan as printed before a run (`volley study run --dry-run` and the run's header).

use std::fmt::Write;
use std::time::Duration;

use super::{Cell, Plan, Workload, GUESS_RPS_PER_CONNECTION, MIN_RATE_STEP};
use crate::spec::Mode;

impl Plan {
    /// The plan as printed before a run: targets, workloads, the steps in order (the
    /// first 30) and the estimated total time.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let mode = match self.mode {
            Mode::Sweep => "sweep",
            Mode::Search => "search",
        };
        let _ = writeln!(out, "study {}: {mode}, axis {}", self.name, self.axis);
        let names: Vec<String> = (0..self.instances.len())
            .map(|i| self.instance_label(i))
            .collect();
        let _ = writeln!(out, "targets: {}", names.join(", "));
        for (wi, w) in self.workloads.iter().enumerate() {
            let _ = writeln!(out, "{}", self.swept_wire(wi, workload_line(w)));
            if let (Some(o), Some(window)) = (&w.office, self.timing.duration) {
                if let Some(note) = poll_note(o, window) {
                    let _ = writeln!(out, "  {note}");
                }
            }
        }
        self.describe_timing(&mut out);
        if let Some(note) = self.short_capped_note() {
            let _ = writeln!(out, "{note}");
        }
        let searched = self.searched_cells();
        self.describe_searches(&mut out, &searched);
        if self.mode == Mode::Sweep && (searched.is_empty() || !self.steps.is_empty()) {
            self.describe_steps(&mut out);
        }
        let est = self.estimate().as_secs();
        let how = match self.search_steps_range() {
            Some((lo, hi)) => format!(
                " (search: {} steps per search assumed, {lo}-{hi} by its settings: start, resolution, repeats, maximum and step budget)",
                self.search_steps_estimate()
            ),
            None => self.rate_note(),
        };
        let _ = writeln!(
            out,
            "estimated total: {}{how}{}",
            fmt_duration(Duration::from_secs(est)),
            self.untimed_note()
        );
        out
    }

    /// How much of the estimate is the targets' DAV accounts and office days' set-up and
    /// lead-in, and on what guess; empty without either.
    fn untimed_note(&self) -> String {
        let start = self.target_start_total();
        let ms = |k| super::estimate::start_per_account(k).as_millis();
        let start_note = match start.is_zero() {
            true => String::new(),
            false => format!(
                "; of it, starting the targets' DAV accounts {} (guessed per account: {} ms on the built-in server, {} on Radicale and Xandikos, {} on the plain WebDAV servers)",
                fmt_duration(start),
                ms(volley_targets::TargetKind::Builtin),
                ms(volley_targets::TargetKind::Radicale),
                ms(volley_targets::TargetKind::Nginx),
            ),
        };
        let untimed = self.office_untimed_total();
        if untimed.is_zero() {
            return start_note;
        }
        // Requests per person for a server of `kind`, the most over the office workloads.
        let per_person = |kind| {
            self.workloads
                .iter()
                .filter_map(|w| w.office.as_ref())
                .map(|o| {
                    let (set_up, lead_in) = super::estimate::untimed_requests(o, kind);
                    (set_up + lead_in).round()
                })
                .fold(0.0, f64::max)
        };
        let seeded = match self.targets.iter().any(|t| super::seeded_items(t.kind) > 0) {
            true => format!(
                " ({} on Radicale, whose calendars volley seeds: set-up reads each back)",
                per_person(volley_targets::TargetKind::Radicale)
            ),
            false => String::new(),
        };
        format!(
            "{start_note}; of it, office days' set-up and lead-in {} (guessed: about {} requests per person{seeded} at {:.0} req/s on Radicale and Xandikos, {:.0} on the others; a users search sets each calendar up once)",
            fmt_duration(untimed),
            per_person(volley_targets::TargetKind::Builtin),
            super::estimate::untimed_rps(volley_targets::TargetKind::Radicale),
            super::estimate::untimed_rps(volley_targets::TargetKind::Builtin),
        )
    }

    /// The step length, warm-up, cool-down, repeats and rule every step shares, and where
    /// the injectors run.
    fn describe_timing(&self, out: &mut String) {
        let t = &self.timing;
        if t.rate_duration != t.duration {
            if let Some(d) = t.rate_duration {
                let _ = writeln!(
                    out,
                    "rate steps: {d:?} measured (scaled length raised to the {MIN_RATE_STEP:?} floor so each step has the 3 whole one-second windows the sustainability rule judges)"
                );
            }
        }
        let _ = writeln!(
            out,
            "each step: {}{}warm-up {:?}, cool-down {:?}; {} repeat(s), up to {} re-measure(s) of a step noise spoiled; SLO p99 {:?}, errors <= {:.1}%",
            t.duration.map(|d| format!("{d:?} measured, ")).unwrap_or_default(),
            t.requests.map(|n| format!("{n} requests, ")).unwrap_or_default(),
            t.warmup,
            t.cooldown,
            self.repeats,
            self.retries,
            self.rule.p99_slo,
            self.rule.allowed_error_share * 100.0
        );
        if let Some(l) = self.injectors.as_ref().and_then(|i| i.placement_line()) {
            let _ = writeln!(out, "{l}");
        }
    }

    /// How every line names a cell: its instance and workload, then (`rate`: the step's
    /// offered rate) its protocol and rate when set; not the users of an office cell.
    pub(crate) fn cell_name(&self, c: &Cell, rate: Option<f64>) -> String {
        let mut name = format!(
            "{} {}",
            self.instance_label(c.instance),
            self.workloads[c.workload].name
        );
        if c.users.is_none() {
            if let Some(p) = c.protocol {
                name += &format!(" {}", p.name());
            }
            if let Some(r) = rate {
                name += &format!(" rate={r:.0}");
            }
        }
        name
    }

    /// One cell as a step line: target, workload and its load point.
    fn cell_line(&self, c: &Cell) -> String {
        if let Some(u) = c.users {
            return format!("{} users={u}", self.cell_name(c, None));
        }
        format!(
            "{} c={} ka={}{}",
            self.cell_name(c, c.rate),
            c.concurrency,
            if c.keepalive { "on" } else { "off" },
            c.injectors
                .map(|k| format!(" injectors={k}"))
                .unwrap_or_default()
        )
    }

    /// The capacity searches (req/s) and the users searches (office days), each with the
    /// cells it searches.
    fn describe_searches(&self, out: &mut String, searched: &[usize]) {
        let (users, rates): (Vec<usize>, Vec<usize>) =
            searched.iter().partition(|&&ci| self.searches_users(ci));
        if let (Some(s), false) = (&self.search, rates.is_empty()) {
            let _ = writeln!(
                out,
                "{} capacity search(es) from {:.0} req/s (x2 until a step fails, then bisect to {:.0}%, {} run(s) per decision near the edge, at most {} steps each{}):",
                rates.len(),
                s.start_rate,
                s.opts.resolution_share * 100.0,
                s.opts.repeats,
                s.opts.max_steps,
                passes_text(s)
            );
            for &ci in &rates {
                let _ = writeln!(out, "  {}", self.cell_line(&self.cells[ci]));
            }
        }
        // One heading per distinct search range (a workload may have its own).
        let mut ranges: Vec<(&super::SearchPlan, Vec<usize>)> = Vec::new();
        for &ci in &users {
            let Some(s) = self.search_of(ci) else {
                continue;
            };
            match ranges.iter_mut().find(|(r, _)| *r == s) {
                Some((_, cis)) => cis.push(ci),
                None => ranges.push((s, vec![ci])),
            }
        }
        for (s, cis) in ranges {
            let _ = writeln!(
                out,
                "{} users search(es){} from {:.0} users (x2 until a day is not carried, then bisect to {:.0}%, {} day(s) per decision near the edge, at most {:.0} users and {} days each{}):",
                cis.len(),
                if self.steps.is_empty() { "" } else { " after the sweep" },
                s.start_rate,
                s.opts.resolution_share * 100.0,
                s.opts.repeats,
                s.opts.max_rate_rps,
                s.opts.max_steps,
                passes_text(s)
            );
            for ci in cis {
                let c = &self.cells[ci];
                let _ = writeln!(
                    out,
                    "  {} {}",
                    self.instance_label(c.instance),
                    self.workloads[c.workload].name
                );
            }
        }
    }

    /// The sweep's steps in order, the first 30.
    fn describe_steps(&self, out: &mut String) {
        let _ = writeln!(out, "{} steps, in this order:", self.steps.len());
        for s in self.steps.iter().take(30) {
            let _ = writeln!(
                out,
                "  {:>4}. {}{}",
                s.order + 1,
                self.cell_line(&self.cells[s.cell]),
                if self.repeats > 1 {
                    format!(" (repeat {})", s.repeat + 1)
                } else {
                    String::new()
                }
            );
        }
        if self.steps.len() > 30 {
            let _ = writeln!(out, "  ... {} more", self.steps.len() - 30);
        }
    }
}

/// One workload as the plan prints it: an office day, a log replay, or requests with
/// their wire (loop, threads, TLS, HTTP version, compression, cold start).
fn workload_line(w: &Workload) -> String {
    if let Some(o) = &w.office {
        let users: Vec<String> = match o.search {
            true => vec!["searched".to_string()],
            false => o.users.iter().map(u32::to_string).collect(),
        };
        return format!(
            "workload {}: caldav office, users {}, profiles {}, {} decisions/person/day, day {}, {} (timeout {:?})",
            w.name,
            users.join(" "),
            if o.mix == volley_office::Mix::default() {
                "all alike".to_string()
            } else {
                o.mix.to_string()
            },
            o.decisions,
            volley_analysis::words::pace(o.compress),
            match o.cold_start {
                true => "cold: every device's first sync in the window",
                false => "warm: first syncs and one poll interval before the window, reported apart",
            },
            w.load.timeout,
        );
    }
    if let Some(r) = &w.replay {
        return format!(
            "workload {}: replay of {} ({} requests, mean {:.1} req/s = speed 1: a step at R req/s plays it at R / {:.1}, looped; each client on its own connection{}; timeout {:?})",
            w.name,
            r.log.display(),
            r.requests,
            r.mean_rate,
            r.mean_rate,
            match r.client_addresses {
                true => ", from its own loopback address (127.0.0.2 on, in order of appearance)",
                false => "",
            },
            w.load.timeout,
        );
    }
    let wire = &w.load.wire;
    format!(
        "workload {}: {} {} ({} loop, {} thread(s), timeout {:?}, {}{}{}{})",
        w.name,
        w.method,
        w.paths.join(" "),
        if w.load.open { "open" } else { "closed" },
        w.load.threads,
        w.load.timeout,
        if wire.tls { "HTTPS " } else { "" },
        match wire.h2_streams {
            Some(n) => format!("HTTP/2 x{n} streams"),
            None => "HTTP/1.1".to_string(),
        },
        wire.compressed
            .map(|e| format!(
                ", Accept-Encoding {} (bodies decoded and checked)",
                e.token()
            ))
            .unwrap_or_default(),
        if w.cold_start {
            ", cold start: target restarted per step, first request timed alone"
        } else {
            ""
        }
    )
}

impl Plan {
    /// A warning when request-count steps on a CPU-capped instance are expected to
    /// measure less than the cap needs to hold (ten of its periods): each would be
    /// labelled too-short, with no figure. Only a warning, since the rate is an estimate
    /// (measured, stated or guessed); timed steps that short are refused outright
    /// (`timing::check_capped`).
    fn short_capped_note(&self) -> Option<String> {
        let book = super::RateBook::default();
        let capped: Vec<&Cell> = self
            .cells
            .iter()
            .filter(|c| self.instances[c.instance].cpu_quota.is_some())
            .collect();
        let need = |c: &Cell| {
            let q = self.instances[c.instance].cpu_quota.unwrap_or(1.0);
            volley_targets::CpuQuota::of_one_cpu(q).span_to_hold()
        };
        let short: Vec<&&Cell> = capped
            .iter()
            .filter(|c| self.measured_estimate(c, &book) < need(c))
            .collect();
        let first = short.first()?;
        let (rate, source) = self.request_rate(first, &book);
        let at = match source {
            super::RateSource::Stated => format!("the stated expected_rate of {rate:.0} req/s"),
            _ => format!("the guessed {GUESS_RPS_PER_CONNECTION:.0} req/s per connection"),
        };
        Some(format!(
            "warning: {} of {} capped cells are expected to measure under the {:.1} s a CPU cap needs to hold (e.g. {}: {:.0} ms at {at}); such a step is a burst at full speed, labelled too-short, with no figure: give the steps more requests or a duration (or state [steps] expected_rate if the servers are slower)",
            short.len(),
            capped.len(),
            need(first).as_secs_f64(),
            self.cell_line(first),
            self.measured_estimate(first, &book).as_secs_f64() * 1e3,
        ))
    }

    /// A workload's line with its HTTP version replaced by the versions a
    /// `sweep.protocol` axis gives its cells: the workload's own wire says HTTP/1.1,
    /// which its steps do not use then.
    fn swept_wire(&self, workload: usize, line: String) -> String {
        let mut swept: Vec<&str> = Vec::new();
        for c in self.cells.iter().filter(|c| c.workload == workload) {
            if let Some(p) = c.protocol {
                if !swept.contains(&p.name()) {
                    swept.push(p.name());
                }
            }
        }
        if swept.is_empty() {
            return line;
        }
        let versions = format!("(HTTP version swept: {})", swept.join(", "));
        let own = self.workloads[workload].load.wire.h2_streams;
        let own = match own {
            Some(n) => format!("HTTP/2 x{n} streams"),
            None => "HTTP/1.1".to_string(),
        };
        line.replacen(&own, &versions, 1)
    }

    /// How request-count steps were estimated, for the plan print: the stated
    /// `expected_rate`s, or a warning that the fallback guess was used.
    fn rate_note(&self) -> String {
        let counted: Vec<&Workload> = self
            .workloads
            .iter()
            .filter(|w| !w.load.open && (w.requests.or(self.timing.requests)).is_some())
            .collect();
        if counted.is_empty() {
            return String::new();
        }
        let stated: Vec<String> = counted
            .iter()
            .filter_map(|w| Some(format!("{} {} req/s", w.name, w.expected_rate?)))
            .collect();
        if stated.len() == counted.len() {
            format!(
                " (request-count steps at the expected_rate: {})",
                stated.join(", ")
            )
        } else {
            format!(
                " (request-count steps guessed at {GUESS_RPS_PER_CONNECTION:.0} req/s per connection, a small file on loopback; state [steps] expected_rate when requests are slower)"
            )
        }
    }
}

/// Polls below which a day's answer is said to rest on few of them: a device polling
/// fewer than 3 times in the window adds at most one or two samples to the poll p99.
pub const FEW_POLLS: f64 = 3.0;

/// Polls each device makes in an office day's measured `window`, by the mix's slowest
/// profile at the day's pace: below 1 it is also the share of devices that poll at all.
pub fn polls_per_device(o: &super::OfficeLoad, window: Duration) -> f64 {
    window.as_secs_f64() * o.compress / o.mix.slowest_poll_s()
}

/// What a window too short for [`FEW_POLLS`] per device means, said in the plan: a
/// scaled window (`--scale 0.1`: 90 s of a 15 min poll interval) lets only a share of
/// the devices poll, so "carries N users" rests on that share's polls, not on N people
/// each polling; the note names the share and the window that gives every device
/// [`FEW_POLLS`] polls. `None` when the window already does.
pub fn poll_note(o: &super::OfficeLoad, window: Duration) -> Option<String> {
    let polls = polls_per_device(o, window);
    if polls >= FEW_POLLS {
        return None;
    }
    let enough = Duration::from_secs_f64((FEW_POLLS * o.mix.slowest_poll_s() / o.compress).ceil());
    let who = match polls < 1.0 {
        true => format!(
            "only about {:.0}% of the slowest-polling devices poll in it",
            polls * 100.0
        ),
        false => format!("the slowest-polling devices poll about {polls:.1} times in it"),
    };
    Some(format!(
        "a {} window at this pace: {who}, so the day's answer rests on those polls; {} gives every device {FEW_POLLS:.0}",
        fmt_duration(window),
        fmt_duration(enough),
    ))
}

/// `1h32m`, `4m05s`: the plan's and the ETA's format.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// ", 3 whole searches of each, interleaved" when a search runs more than once.
fn passes_text(s: &super::SearchPlan) -> String {
    if s.passes > 1 {
        format!(", {} whole searches of each, interleaved", s.passes)
    } else {
        String::new()
    }
}
