//! Pure parsers for the `/proc` files the sampler reads.
//!
//! Every function takes the file's text and returns plain numbers, so each one is
//! unit-tested on captured text without a live system. Malformed or truncated input gives
//! `None` (or skips the bad line), never a panic: a process can exit between `open` and
//! `read`, leaving an empty file.

use serde::Serialize;

/// The fields of `/proc/PID/stat` the monitor uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcStat {
    /// Parent pid (field 4), used to walk the process tree.
    pub ppid: u32,
    /// User-mode CPU time in clock ticks (field 14).
    pub utime_ticks: u64,
    /// Kernel-mode CPU time in clock ticks (field 15).
    pub stime_ticks: u64,
    /// User time of waited-for children, in ticks (field 16): keeps the CPU time of
    /// workers that exited between two samples (prefork recycling) in the total.
    pub cutime_ticks: u64,
    /// System time of waited-for children, in ticks (field 17).
    pub cstime_ticks: u64,
    /// Number of threads (field 20).
    pub threads: u64,
    /// Resident set size in pages (field 24).
    pub rss_pages: u64,
}

/// Parses `/proc/PID/stat`. The command name (field 2) is in parentheses and may itself
/// contain spaces and `)`, so fields are counted from the *last* `)`.
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let close = text.rfind(')')?;
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    let field = |n: usize| -> Option<u64> { rest.get(n - 3)?.parse().ok() };
    Some(ProcStat {
        ppid: u32::try_from(field(4)?).ok()?,
        utime_ticks: field(14)?,
        stime_ticks: field(15)?,
        cutime_ticks: field(16)?,
        cstime_ticks: field(17)?,
        threads: field(20)?,
        rss_pages: field(24)?,
    })
}

/// Context-switch counters from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtxSwitches {
    /// `voluntary_ctxt_switches`: the process blocked (I/O, a lock, epoll_wait).
    pub voluntary: u64,
    /// `nonvoluntary_ctxt_switches`: the scheduler took the CPU away (contention, quota).
    pub involuntary: u64,
}

/// Parses the context-switch lines of `/proc/PID/status`; missing lines count as 0.
pub fn parse_status_ctxt(text: &str) -> CtxSwitches {
    let mut out = CtxSwitches::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        match (it.next(), it.next().and_then(|v| v.parse().ok())) {
            (Some("voluntary_ctxt_switches:"), Some(v)) => out.voluntary = v,
            (Some("nonvoluntary_ctxt_switches:"), Some(v)) => out.involuntary = v,
            _ => {}
        }
    }
    out
}

/// Cumulative system-wide counters from `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SysStat {
    /// Aggregate `cpu` line: user + nice ticks.
    pub user_ticks: u64,
    /// system + irq + softirq ticks.
    pub system_ticks: u64,
    /// idle ticks.
    pub idle_ticks: u64,
    /// iowait ticks.
    pub iowait_ticks: u64,
    /// Sum of every field of the `cpu` line (the denominator of the percentages).
    pub total_ticks: u64,
    /// Total interrupts since boot (first number of `intr`).
    pub interrupts: u64,
    /// Context switches since boot (`ctxt`).
    pub context_switches: u64,
    /// Runnable tasks now (`procs_running`, vmstat's `r`).
    pub procs_running: u64,
    /// Tasks blocked on I/O now (`procs_blocked`, vmstat's `b`).
    pub procs_blocked: u64,
}

/// Parses `/proc/stat`. Returns `None` when the aggregate `cpu` line is missing.
pub fn parse_sys_stat(text: &str) -> Option<SysStat> {
    let mut out = SysStat::default();
    let mut saw_cpu = false;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let key = it.next().unwrap_or("");
        let nums: Vec<u64> = it.filter_map(|v| v.parse().ok()).collect();
        let at = |i: usize| nums.get(i).copied().unwrap_or(0);
        match key {
            "cpu" => {
                saw_cpu = true;
                // user nice system idle iowait irq softirq steal guest guest_nice;
                // guest time is already inside user, so it is left out of the total.
                out.user_ticks = at(0) + at(1);
                out.system_ticks = at(2) + at(5) + at(6);
                out.idle_ticks = at(3);
                out.iowait_ticks = at(4);
                out.total_ticks = nums.iter().take(8).sum();
            }
            "intr" => out.interrupts = at(0),
            "ctxt" => out.context_switches = at(0),
            "procs_running" => out.procs_running = at(0),
            "procs_blocked" => out.procs_blocked = at(0),
            _ => {}
        }
    }
    saw_cpu.then_some(out)
}

/// Cumulative counters of one interface from `/proc/net/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetDev {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
}

/// Parses `/proc/net/dev` and returns the counters of `iface`, if present.
pub fn parse_net_dev(text: &str, iface: &str) -> Option<NetDev> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != iface {
            return None;
        }
        let n: Vec<u64> = rest
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if n.len() < 10 {
            return None;
        }
        Some(NetDev {
            rx_bytes: n[0],
            rx_packets: n[1],
            tx_bytes: n[8],
            tx_packets: n[9],
        })
    })
}

/// TCP sockets by state, counted from `/proc/net/tcp` and `/proc/net/tcp6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TcpStates {
    /// ESTABLISHED (01).
    pub established: u32,
    /// SYN_SENT (02).
    pub syn_sent: u32,
    /// SYN_RECV (03) and NEW_SYN_RECV (0C).
    pub syn_recv: u32,
    /// FIN_WAIT1 (04).
    pub fin_wait1: u32,
    /// FIN_WAIT2 (05).
    pub fin_wait2: u32,
    /// TIME_WAIT (06): the port-exhaustion risk of connection-per-request loads.
    pub time_wait: u32,
    /// CLOSE (07).
    pub close: u32,
    /// CLOSE_WAIT (08): the peer closed and the local side has not yet.
    pub close_wait: u32,
    /// LAST_ACK (09).
    pub last_ack: u32,
    /// LISTEN (0A).
    pub listen: u32,
    /// CLOSING (0B).
    pub closing: u32,
}

impl TcpStates {
    /// Adds the sockets listed in one `/proc/net/tcp` or `/proc/net/tcp6` text.
    pub fn add_proc_net_tcp(&mut self, text: &str) {
        // Skip the header; the state is the 4th column, in hex.
        for line in text.lines().skip(1) {
            let Some(st) = line.split_whitespace().nth(3) else {
                continue;
            };
            match u8::from_str_radix(st, 16) {
                Ok(0x01) => self.established += 1,
                Ok(0x02) => self.syn_sent += 1,
                Ok(0x03) | Ok(0x0C) => self.syn_recv += 1,
                Ok(0x04) => self.fin_wait1 += 1,
                Ok(0x05) => self.fin_wait2 += 1,
                Ok(0x06) => self.time_wait += 1,
                Ok(0x07) => self.close += 1,
                Ok(0x08) => self.close_wait += 1,
                Ok(0x09) => self.last_ack += 1,
                Ok(0x0A) => self.listen += 1,
                Ok(0x0B) => self.closing += 1,
                _ => {}
            }
        }
    }
}

/// `MemTotal` from `/proc/meminfo`, in bytes.
pub fn parse_mem_total_bytes(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kib * 1024)
    })
}

/// Pids listed one per line (a cgroup's `cgroup.procs`).
pub fn parse_pid_list(text: &str) -> Vec<u32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "8670 (my (odd) srv) R 8662 8662 5256 0 -1 4194304 99 0 0 0 \
        17 5 3 2 20 0 4 0 33529 3133440 381 18446744073709551615 1 2 3";

    #[test]
    fn proc_stat_counts_fields_after_the_last_paren() {
        let s = parse_proc_stat(STAT).unwrap();
        assert_eq!(s.ppid, 8662);
        assert_eq!((s.utime_ticks, s.stime_ticks), (17, 5));
        assert_eq!((s.cutime_ticks, s.cstime_ticks), (3, 2));
        assert_eq!(s.threads, 4);
        assert_eq!(s.rss_pages, 381);
    }

    #[test]
    fn proc_stat_rejects_truncated_text() {
        assert_eq!(parse_proc_stat(""), None);
        assert_eq!(parse_proc_stat("12 (x) R 1 2 3"), None);
    }

    #[test]
    fn status_context_switches() {
        let t = "Name:\tnginx\nThreads:\t1\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(
            parse_status_ctxt(t),
            CtxSwitches {
                voluntary: 120,
                involuntary: 7
            }
        );
        assert_eq!(parse_status_ctxt("garbage"), CtxSwitches::default());
    }

    #[test]
    fn sys_stat_aggregates() {
        let t = "cpu  6895 5 3064 56132 526 1 59 12 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n\
                 intr 199872 0 0 1\nctxt 391785\nbtime 1\nprocs_running 3\nprocs_blocked 1\n";
        let s = parse_sys_stat(t).unwrap();
        assert_eq!(s.user_ticks, 6900);
        assert_eq!(s.system_ticks, 3064 + 1 + 59);
        assert_eq!(s.idle_ticks, 56132);
        assert_eq!(s.iowait_ticks, 526);
        assert_eq!(s.total_ticks, 6895 + 5 + 3064 + 56132 + 526 + 1 + 59 + 12);
        assert_eq!(s.interrupts, 199872);
        assert_eq!(s.context_switches, 391785);
        assert_eq!((s.procs_running, s.procs_blocked), (3, 1));
        assert_eq!(parse_sys_stat("ctxt 1\n"), None);
    }

    #[test]
    fn net_dev_finds_the_interface() {
        let t = "Inter-|   Receive |  Transmit\n face |bytes packets ...\n\
                 \x20   lo:    3193      29    0    0    0     0          0         0     4000      31    0    0    0     0       0          0\n\
                 \x20 eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
        let lo = parse_net_dev(t, "lo").unwrap();
        assert_eq!(
            lo,
            NetDev {
                rx_bytes: 3193,
                rx_packets: 29,
                tx_bytes: 4000,
                tx_packets: 31
            }
        );
        assert_eq!(parse_net_dev(t, "eth0").unwrap().tx_packets, 10);
        assert_eq!(parse_net_dev(t, "wlan0"), None);
    }

    #[test]
    fn tcp_states_by_hex_code() {
        let t = "  sl  local_address rem_address   st tx_queue\n\
                 \x20  0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000\n\
                 \x20  1: 0100007F:1F90 0100007F:D2A4 01 00000000:00000000\n\
                 \x20  2: 0100007F:1F90 0100007F:D2A6 06 00000000:00000000\n\
                 \x20  3: 0100007F:1F90 0100007F:D2A8 06 00000000:00000000\n\
                 \x20  4: 0100007F:1F90 0100007F:D2AA 0C 00000000:00000000\n\
                 \x20  5: short\n";
        let mut s = TcpStates::default();
        s.add_proc_net_tcp(t);
        assert_eq!(s.listen, 1);
        assert_eq!(s.established, 1);
        assert_eq!(s.time_wait, 2);
        assert_eq!(s.syn_recv, 1);
        s.add_proc_net_tcp(t);
        assert_eq!(s.time_wait, 4);
    }

    #[test]
    fn meminfo_and_pid_lists() {
        assert_eq!(
            parse_mem_total_bytes("MemTotal:       4000 kB\nMemFree: 1 kB\n"),
            Some(4_096_000)
        );
        assert_eq!(parse_mem_total_bytes("MemFree: 1 kB\n"), None);
        assert_eq!(parse_pid_list("12\n 40\nx\n\n"), vec![12, 40]);
    }
}
