//! Who is writing a study or run, so a later open can tell a live writer from a dead one.
//!
//! A run left 'running' is either being recorded right now by another process (a report
//! opened while a study runs) or was abandoned by a killed one. We record the writer's
//! pid and its start time (field 22 of `/proc/<pid>/stat`, in clock ticks since boot):
//! the pair identifies a process even after its pid is reused. Without `/proc` (not
//! Linux) nothing can be proven alive, so every 'running' row counts as abandoned.

/// The identity of a writing process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub pid: u32,
    pub start: Option<String>,
}

impl Owner {
    /// This process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Owner {
            pid,
            start: stat(pid).map(|s| s.start),
        }
    }

    /// True when the recorded process still runs (and is not a zombie).
    pub fn is_alive(pid: u32, start: Option<&str>) -> bool {
        match (stat(pid), start) {
            (Some(s), Some(start)) => !s.dead && s.start == start,
            // Written where /proc was missing: cannot be proven alive.
            (Some(_), None) | (None, _) => false,
        }
    }
}

struct Stat {
    start: String,
    dead: bool,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); starttime is field 22.
    let state = *fields.first()?;
    let start = fields.get(22 - 3)?.to_string();
    Some(Stat {
        start,
        dead: state == "Z" || state == "X",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = Owner::current();
        assert!(me.start.is_some(), "tests run on Linux with /proc");
        assert!(Owner::is_alive(me.pid, me.start.as_deref()));
        assert!(!Owner::is_alive(me.pid, Some("1")));
        assert!(!Owner::is_alive(me.pid, None));
    }

    #[test]
    fn a_reaped_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = stat(pid).map(|s| s.start);
        child.wait().unwrap();
        assert!(!Owner::is_alive(pid, start.as_deref()));
    }
}
