//! Moving the calling thread into a lab namespace and back. `setns(2)` changes only the
//! calling thread, and threads it starts afterwards inherit its namespace: a load run
//! from an entered thread (the engine's workers, the probe's connections) has all its
//! sockets in the lab, while the rest of volley stays where it was.

use std::fs::File;
use std::os::fd::AsRawFd;

use crate::NetlabError;

/// The calling thread inside a namespace; back in its own on drop.
#[derive(Debug)]
pub struct Entered {
    home: File,
}

fn setns(fd: &File, action: &'static str) -> Result<(), NetlabError> {
    // SAFETY: setns on an open namespace fd; it changes only the calling thread.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(NetlabError::Io {
            action,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

impl Entered {
    /// Moves the calling thread into network namespace `ns` (`/run/netns/NS`).
    pub fn enter(ns: &str) -> Result<Entered, NetlabError> {
        let io = |action| move |source| NetlabError::Io { action, source };
        let home = File::open("/proc/thread-self/ns/net").map_err(io("opening this namespace"))?;
        let there = File::open(format!("/run/netns/{ns}")).map_err(io("opening a namespace"))?;
        setns(&there, "entering a namespace")?;
        Ok(Entered { home })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let _ = setns(&self.home, "leaving a namespace");
    }
}
