//! The pause between runs (bench's `--cooldown`, a study's cool-down and reruns), cut
//! short by a stop (Ctrl-C) so an interrupted invocation ends at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Waits `d`, waking every 20 ms to end early when `stop` is set.
pub fn rest(d: Duration, stop: &AtomicBool) {
    wait_until(Instant::now() + d, stop);
}

/// Waits until `at`, waking every 20 ms to end early when `stop` is set: true when `at`
/// was reached (a warm-up boundary the run lived to see), false when stopped first.
pub fn wait_until(at: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(20)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_ends_the_rest_at_once() {
        let t = Instant::now();
        rest(Duration::from_secs(60), &AtomicBool::new(true));
        assert!(t.elapsed() < Duration::from_secs(1));
        rest(Duration::ZERO, &AtomicBool::new(false));
    }
}
