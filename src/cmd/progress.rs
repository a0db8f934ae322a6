//! Progress bars on stderr, the one place indicatif is used. `volley bench` shows one
//! bar per load (elapsed of the total time or requests, current req/s, errors, ETA); a
//! study shows an overall bar (steps done of planned, the study's learning ETA) with the
//! current step's bar below it, and prints each finished step's line above them.
//!
//! The libraries only hand over numbers (the harness's `progress::tick` for a load, the
//! study's `RunOptions::progress` callback): the text is made here, by pure functions
//! that the tests check without a terminal. Bars are drawn only when stderr is a
//! terminal and `--quiet` was not given; otherwise nothing is drawn and lines printed
//! "above" the bars are plain stderr lines.

use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use volley_analysis::words::number;
use volley_engine::{Live, LiveSnapshot, StopCondition};
use volley_study::runner::StepTick;

/// Bars are worth drawing: stderr is a terminal and the user did not ask for quiet.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// Positions are kept in thousandths, so one bar shape serves time and request counts.
const SCALE: f64 = 1000.0;

fn style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix} [{bar:24}] {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// Requests per second over the last window, from two snapshots of the done counter.
#[derive(Debug, Default, Clone, Copy)]
pub struct RateMeter {
    last: Option<(u64, Duration)>,
    rate: f64,
}

impl RateMeter {
    /// Feeds one tick; returns the current rate. Waits for a window of at least one
    /// second before moving, so the figure does not jump with each quarter second.
    pub fn update(&mut self, done: u64, elapsed: Duration) -> f64 {
        match self.last {
            None => self.last = Some((done, elapsed)),
            Some((d0, t0)) => {
                let dt = elapsed.saturating_sub(t0).as_secs_f64();
                if dt >= 1.0 {
                    self.rate = done.saturating_sub(d0) as f64 / dt;
                    self.last = Some((done, elapsed));
                } else if self.rate == 0.0 && dt > 0.0 && elapsed.as_secs_f64() < 1.0 {
                    // The first second: show something rather than 0.
                    self.rate = done.saturating_sub(d0) as f64 / dt;
                }
            }
        }
        self.rate
    }
}

/// How far a load is (0..=1) and its ETA, from its stop condition (the first limit
/// reached ends it, so the larger fraction wins); `None` when neither is known.
pub fn fraction_and_eta(
    stop: &StopCondition,
    done: u64,
    elapsed: Duration,
    rate: f64,
) -> Option<(f64, Duration)> {
    let by_time = stop.duration.map(|d| {
        let f = elapsed.as_secs_f64() / d.as_secs_f64().max(1e-9);
        (f, d.saturating_sub(elapsed))
    });
    let by_count = stop.requests.map(|n| {
        let f = done as f64 / n.max(1) as f64;
        let left = n.saturating_sub(done) as f64;
        let eta = if rate > 0.0 {
            Duration::from_secs_f64((left / rate).min(1e7))
        } else {
            Duration::MAX
        };
        (f, eta)
    });
    let pick = match (by_time, by_count) {
        (Some(t), Some(c)) => Some(if c.0 > t.0 { c } else { t }),
        (t, c) => t.or(c),
    };
    pick.map(|(f, eta)| (f.clamp(0.0, 1.0), eta))
}

/// "1.5 s", "12 s", "3m05s", "?" for an unknown (or absurd) time.
pub fn short(d: Duration) -> String {
    if d == Duration::MAX || d.as_secs() > 100 * 3600 {
        return "?".to_string();
    }
    let s = d.as_secs();
    if s < 10 && d.subsec_millis() >= 100 {
        format!("{:.1} s", d.as_secs_f64())
    } else if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// The figures after a load's bar: "4.2 s of 10 s  ETA 6 s  1,234 req/s  0 errors  8 open".
pub fn load_message(
    stop: &StopCondition,
    s: &LiveSnapshot,
    elapsed: Duration,
    rate: f64,
) -> String {
    let of = match (stop.duration, stop.requests) {
        (Some(d), _) => format!("{:.1} s of {}", elapsed.as_secs_f64(), short(d)),
        (None, Some(n)) => format!("{} of {} requests", number(s.done as f64), number(n as f64)),
        (None, None) => format!("{:.1} s", elapsed.as_secs_f64()),
    };
    let eta = fraction_and_eta(stop, s.done, elapsed, rate)
        .map(|(_, eta)| format!("  ETA {}", short(eta)))
        .unwrap_or_default();
    format!(
        "{of}{eta}  {} req/s  {} error{}  {} open",
        number(rate),
        number(s.errors as f64),
        if s.errors == 1 { "" } else { "s" },
        s.open_connections
    )
}

/// One load's bar, fed by the harness's tick until `done`; cleared at the end.
pub fn bench(live: &Live, done: &AtomicBool, stop: StopCondition) {
    let bar = ProgressBar::with_draw_target(Some(SCALE as u64), ProgressDrawTarget::stderr());
    bar.set_style(style());
    bar.set_prefix("load");
    let mut meter = RateMeter::default();
    volley_harness::progress::tick(live, done, |snap, elapsed| match snap {
        Some(s) => {
            let rate = meter.update(s.done, elapsed);
            if let Some((f, _)) = fraction_and_eta(&stop, s.done, elapsed, rate) {
                bar.set_position((f * SCALE) as u64);
            }
            bar.set_message(load_message(&stop, &s, elapsed, rate));
        }
        None => bar.finish_and_clear(),
    });
}

/// How far an office day is (0..=1) and its bar's text: set-up counts users, the day
/// its wall time and actions, then the audit and the last late actions.
pub fn office_message(
    s: &volley_office::ProgressSnapshot,
    day: Duration,
    elapsed_in_day: Duration,
) -> (f64, String) {
    use volley_office::Phase;
    let share = s.done as f64 / s.total.max(1) as f64;
    let count = format!("{} of {}", number(s.done as f64), number(s.total as f64));
    match s.phase {
        Phase::Starting => (0.0, "probing the server".to_string()),
        Phase::SetUp => (share, format!("set-up: {count} users' calendars")),
        Phase::LeadIn => (
            share,
            format!("before the day: first syncs and one poll interval, {count} actions"),
        ),
        Phase::Day if elapsed_in_day < day => (
            elapsed_in_day.as_secs_f64() / day.as_secs_f64().max(1e-9),
            format!(
                "day: {} of {}  ETA {}  {count} actions",
                short(elapsed_in_day),
                short(day),
                short(day.saturating_sub(elapsed_in_day)),
            ),
        ),
        Phase::Day => (1.0, format!("day over: audit, {count} actions")),
        Phase::Done => (1.0, "done".to_string()),
    }
}

/// An office day's bar, fed from its counters four times a second until `done`;
/// cleared at the end.
pub fn office(progress: &volley_office::Progress, day: Duration, done: &AtomicBool) {
    use std::sync::atomic::Ordering;
    let bar = ProgressBar::with_draw_target(Some(SCALE as u64), ProgressDrawTarget::stderr());
    bar.set_style(style());
    bar.set_prefix("office");
    let mut day_start: Option<std::time::Instant> = None;
    while !done.load(Ordering::Relaxed) {
        let s = progress.snapshot();
        if s.phase == volley_office::Phase::Day && day_start.is_none() {
            day_start = Some(std::time::Instant::now());
        }
        let elapsed = day_start.map(|t| t.elapsed()).unwrap_or_default();
        let (f, msg) = office_message(&s, day, elapsed);
        bar.set_position((f.clamp(0.0, 1.0) * SCALE) as u64);
        bar.set_message(msg);
        std::thread::sleep(Duration::from_millis(250));
    }
    bar.finish_and_clear();
}

/// A study's two bars: the whole study, and the step running now.
pub struct StudyBars {
    multi: MultiProgress,
    overall: ProgressBar,
    step: ProgressBar,
    meter: std::sync::Mutex<RateMeter>,
}

impl StudyBars {
    /// The bars, drawn on stderr when `draw` (else hidden: `println` then writes plain
    /// lines).
    pub fn new(draw: bool) -> StudyBars {
        let target = if draw {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let multi = MultiProgress::with_draw_target(target);
        let overall = multi.add(ProgressBar::new(1));
        overall.set_style(style());
        overall.set_prefix("study");
        let step = multi.add(ProgressBar::new(SCALE as u64));
        step.set_style(style());
        step.set_prefix(" step");
        StudyBars {
            multi,
            overall,
            step,
            meter: std::sync::Mutex::new(RateMeter::default()),
        }
    }

    /// A line above the bars (a finished step, a note).
    pub fn println(&self, line: &str) {
        if self.multi.is_hidden() {
            eprintln!("{line}");
        } else {
            let _ = self.multi.println(line);
        }
    }

    /// One tick of the running step; `None` when it ends.
    pub fn tick(&self, t: Option<StepTick<'_>>) {
        let mut meter = self.meter.lock().unwrap_or_else(|p| p.into_inner());
        let Some(t) = t else {
            *meter = RateMeter::default();
            self.step.set_position(0);
            self.step.set_message("");
            return;
        };
        self.overall.set_length(t.progress.total.max(1) as u64);
        self.overall.set_position(t.progress.done as u64);
        self.overall.set_message(study_message(&t));
        let rate = meter.update(t.live.done, t.elapsed);
        if let Some((f, _)) = fraction_and_eta(&t.stop, t.live.done, t.elapsed, rate) {
            self.step.set_position((f * SCALE) as u64);
        }
        self.step.set_message(format!(
            "{}: {}",
            t.what,
            load_message(&t.stop, &t.live, t.elapsed, rate)
        ));
    }

    /// Removes the bars (the end table follows on stdout).
    pub fn finish(&self) {
        self.step.finish_and_clear();
        self.overall.finish_and_clear();
        let _ = self.multi.clear();
    }
}

/// The overall bar's text: "step 3 of 9  ETA 1m05s" (the study's own estimate, which
/// learns the req/s of finished steps, less the running step's elapsed time).
pub fn study_message(t: &StepTick<'_>) -> String {
    format!(
        "step {} of {}  ETA {}",
        t.progress.done + 1,
        t.progress.total,
        short(t.progress.eta.saturating_sub(t.elapsed))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_office_bar_counts_users_then_the_days_time_then_its_end() {
        use volley_office::{Phase, ProgressSnapshot};
        let at = |phase, done, total| ProgressSnapshot { phase, done, total };
        let day = Duration::from_secs(60);
        let (f, m) = office_message(&at(Phase::SetUp, 500, 2000), day, Duration::ZERO);
        assert_eq!(
            (f, m.as_str()),
            (0.25, "set-up: 500 of 2,000 users' calendars")
        );
        let (f, m) = office_message(&at(Phase::Day, 10, 400), day, Duration::from_secs(15));
        assert_eq!(f, 0.25);
        assert_eq!(m, "day: 15 s of 1m00s  ETA 45 s  10 of 400 actions");
        let (f, m) = office_message(&at(Phase::Day, 399, 400), day, Duration::from_secs(61));
        assert_eq!(
            (f, m.as_str()),
            (1.0, "day over: audit, 399 of 400 actions")
        );
    }

    fn stop(requests: Option<u64>, secs: Option<u64>) -> StopCondition {
        StopCondition {
            warmup: Duration::ZERO,
            requests,
            duration: secs.map(Duration::from_secs),
        }
    }

    #[test]
    fn a_timed_load_shows_its_share_of_the_time_and_what_is_left() {
        let s = LiveSnapshot {
            done: 5000,
            errors: 2,
            open_connections: 8,
            ..Default::default()
        };
        let e = Duration::from_millis(4200);
        let (f, eta) = fraction_and_eta(&stop(None, Some(10)), 5000, e, 1190.0).unwrap();
        assert!((f - 0.42).abs() < 1e-9);
        assert_eq!(eta, Duration::from_millis(5800));
        assert_eq!(
            load_message(&stop(None, Some(10)), &s, e, 1190.4),
            "4.2 s of 10 s  ETA 5.8 s  1,190 req/s  2 errors  8 open"
        );
    }

    #[test]
    fn a_counted_load_estimates_from_its_rate_and_the_first_limit_wins() {
        let s = LiveSnapshot {
            done: 250,
            ..Default::default()
        };
        let e = Duration::from_secs(1);
        let (f, eta) = fraction_and_eta(&stop(Some(1000), None), 250, e, 250.0).unwrap();
        assert_eq!((f, eta), (0.25, Duration::from_secs(3)));
        assert_eq!(
            load_message(&stop(Some(1000), None), &s, e, 250.0),
            "250 of 1,000 requests  ETA 3 s  250 req/s  0 errors  0 open"
        );
        // No rate yet: the ETA is unknown, not infinite.
        assert!(load_message(&stop(Some(1000), None), &s, e, 0.0).contains("ETA ?  0 req/s"));
        // -n and -d: whichever is further along ends the run.
        let (f, _) = fraction_and_eta(&stop(Some(1000), Some(2)), 900, e, 900.0).unwrap();
        assert_eq!(f, 0.9);
        assert_eq!(fraction_and_eta(&stop(None, None), 1, e, 1.0), None);
    }

    #[test]
    fn the_rate_is_measured_over_whole_seconds() {
        let mut m = RateMeter::default();
        assert_eq!(m.update(0, Duration::ZERO), 0.0);
        assert_eq!(m.update(100, Duration::from_millis(500)), 200.0);
        assert_eq!(m.update(300, Duration::from_millis(1000)), 300.0);
        // Less than a second after the last window: unchanged.
        assert_eq!(m.update(900, Duration::from_millis(1500)), 300.0);
        assert_eq!(m.update(1300, Duration::from_millis(2000)), 1000.0);
    }

    #[test]
    fn times_are_short() {
        assert_eq!(short(Duration::from_secs(12)), "12 s");
        assert_eq!(short(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(short(Duration::from_millis(12_500)), "12 s");
        assert_eq!(short(Duration::from_secs(185)), "3m05s");
        assert_eq!(short(Duration::from_secs(7300)), "2h01m");
        assert_eq!(short(Duration::MAX), "?");
    }
}
