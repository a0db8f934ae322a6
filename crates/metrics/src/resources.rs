//! The generator's own resource readings: process CPU time and system CPU pressure.
//!
//! Read once per second by worker 0's recorder (see `Recorder::with_resources`), so a
//! second's label can say whether the generator, not the server, was the limit.

/// CPU time (user + system) this process has used so far, in nanoseconds, from
/// `getrusage(RUSAGE_SELF)`. `None` if the call fails.
pub fn process_cpu_ns() -> Option<u64> {
    // SAFETY: getrusage writes into the zeroed struct we own; no other memory is touched.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return None;
    }
    let tv_ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    Some(tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime))
}

/// The CPU the calling thread is running on; `None` when the kernel does not say.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// The CPU time the generator needed so far, in nanoseconds: [`process_cpu_ns`] less
/// the time its workers spent polling for a reply before sleeping
/// ([`volley_engine::busy_wait_ns`]: waiting for the server with the CPU busy, which
/// would otherwise make a closed loop against a fast server look generator-bound).
pub fn generator_cpu_ns() -> Option<u64> {
    let waited = volley_engine::busy_wait_ns();
    Some(process_cpu_ns()?.saturating_sub(waited))
}

/// Cumulative microseconds during which at least one task waited for a CPU
/// (`some total=` in `/proc/pressure/cpu`, Linux PSI). `None` where PSI is absent.
pub fn cpu_pressure_some_us() -> Option<u64> {
    use std::io::Read;
    // A stack buffer: the file is two short lines, and this runs on a worker thread.
    let mut buf = [0u8; 256];
    let mut f = std::fs::File::open("/proc/pressure/cpu").ok()?;
    let n = f.read(&mut buf).ok()?;
    parse_psi_some_total(&buf[..n])
}

/// The calling thread's cumulative run time and run delay, nanoseconds
/// (`/proc/thread-self/schedstat`: time on a CPU, then time runnable but waiting for
/// one). Read on worker 0's thread, the delay is the pacer's own wait behind other
/// tasks: what a stall probe running `SCHED_FIFO` never sees; the run time is its own
/// use of the CPU, which it cannot have waited behind. `None` where schedstats are
/// absent.
pub fn thread_schedstat_ns() -> Option<(u64, u64)> {
    use std::io::Read;
    let mut buf = [0u8; 96];
    let mut f = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
    let n = f.read(&mut buf).ok()?;
    parse_schedstat(&buf[..n])
}

/// The first two fields of a `schedstat` line (`run_ns wait_ns slices`).
pub fn parse_schedstat(text: &[u8]) -> Option<(u64, u64)> {
    let mut f = std::str::from_utf8(text).ok()?.split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// Extracts `total=` from the `some` line of a PSI file.
pub fn parse_psi_some_total(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    total.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_some_total_is_parsed() {
        let text = b"some avg10=1.50 avg60=0.20 avg300=0.05 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=99\n";
        assert_eq!(parse_psi_some_total(text), Some(123456));
        assert_eq!(parse_psi_some_total(b"full avg10=0 total=3\n"), None);
        assert_eq!(parse_psi_some_total(b"some avg10=x total=abc\n"), None);
    }

    #[test]
    fn run_time_and_delay_are_the_first_two_schedstat_fields() {
        assert_eq!(parse_schedstat(b"1234 5678 9\n"), Some((1234, 5678)));
        assert_eq!(parse_schedstat(b"1234\n"), None);
        assert_eq!(parse_schedstat(b"a b c\n"), None);
    }

    #[test]
    fn process_cpu_grows_with_work() {
        let a = process_cpu_ns().unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = process_cpu_ns().unwrap();
        assert!(b >= a);
    }
}
