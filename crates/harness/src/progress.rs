//! The live progress tick: the engine's counters handed to the caller about four times
//! a second while a load runs, and once more (`None`) when it ends so the caller can
//! clear its line. The harness never draws: `volley bench` and a study step (through
//! the binary's callback) format and write the line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use volley_engine::{Live, LiveSnapshot};

/// Time between ticks.
const TICK: Duration = Duration::from_millis(250);

/// Calls `draw(Some(snapshot), elapsed)` every [`TICK`] until `done`, then
/// `draw(None, elapsed)` once. Wakes every 50 ms to see `done`, so a run's end is not
/// held up by a quarter of a second.
pub fn tick(live: &Live, done: &AtomicBool, mut draw: impl FnMut(Option<LiveSnapshot>, Duration)) {
    let start = Instant::now();
    while !done.load(Ordering::Relaxed) {
        draw(Some(live.snapshot()), start.elapsed());
        for _ in 0..5 {
            if done.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(TICK / 5);
        }
    }
    draw(None, start.elapsed());
}
