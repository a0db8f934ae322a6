//! SIGINT/SIGTERM as a flag, so `volley serve` can stop its workers cleanly (flush the
//! access log, join threads) instead of dying mid-write.

use std::sync::atomic::{AtomicBool, Ordering};

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    TERMINATE.store(true, Ordering::SeqCst);
}

/// Installs handlers for SIGINT and SIGTERM and returns the flag they set.
pub fn termination_flag() -> std::io::Result<&'static AtomicBool> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` is an `extern "C" fn(c_int)` that only performs an atomic
        // store, which is async-signal-safe; the sigaction struct is fully initialised.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(&TERMINATE)
}
