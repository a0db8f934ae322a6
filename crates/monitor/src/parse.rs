//! Pure parsers for the `/proc` files the sampler reads.
//!
//! Every function takes the file's text and returns plain numbers, so each one is
//! unit-tested on captured text without a live system. Malformed or truncated input gives
//! `None` (or skips the bad line), never a panic: a process can exit between `open` and
//! `read`, leaving an empty file.

use serde::{Deserialize, Serialize};

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
    /// irq + softirq ticks (inside `system_ticks`): interrupt work charged to no task,
    /// on a load machine mostly the load's own packets (loopback runs the receive path
    /// in softirq).
    pub irq_ticks: u64,
    /// idle ticks.
    pub idle_ticks: u64,
    /// iowait ticks.
    pub iowait_ticks: u64,
    /// steal ticks: time the host ran something else while this guest wanted a CPU.
    pub steal_ticks: u64,
    /// CPUs listed (`cpuN` lines).
    pub cpus: u32,
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
                out.irq_ticks = at(5) + at(6);
                out.idle_ticks = at(3);
                out.iowait_ticks = at(4);
                out.steal_ticks = at(7);
                out.total_ticks = nums.iter().take(8).sum();
            }
            k if k.len() > 3 && k.starts_with("cpu") => out.cpus += 1,
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

/// TCP sockets by state, counted from `/proc/net/tcp` and `/proc/net/tcp6`, or, when
/// there are too many sockets for that to be cheap, only TIME_WAIT and the rest from
/// `/proc/net/sockstat` (`per_state` false; see [`PER_STATE_LIMIT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TcpStates {
    /// The per-state fields were counted. False when the machine held more than
    /// [`PER_STATE_LIMIT`] TCP sockets: then only `time_wait` and `in_use` are filled.
    pub per_state: bool,
    /// Sockets not in TIME_WAIT, any other state (`/proc/net/sockstat` "inuse", IPv4
    /// and IPv6), filled whichever way the sample was taken.
    pub in_use: u32,
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

/// Above this many TCP sockets on the machine, the monitor does not list them by state.
///
/// Why: `/proc/net/tcp` is formatted by the kernel line by line for every socket, in the
/// reader's time. A connection-per-request load leaves every closed socket in TIME_WAIT
/// for 60 s: measured here, 23k sockets cost 46 ms of kernel time per read, and at 2,000
/// connections/s (120k sockets) the once-a-second read took a large share of a core in
/// volley's own process and made its event loop late (scheduler-lag p99 of 2-7 ms in
/// seed 001's sweep). `/proc/net/sockstat` gives the TIME_WAIT and in-use totals in O(1).
pub const PER_STATE_LIMIT: u32 = 4096;

/// `(in use, TIME_WAIT)` from `/proc/net/sockstat`'s `TCP:` line (`inuse` and `tw`), or
/// the `inuse` of `/proc/net/sockstat6`'s `TCP6:` line with TIME_WAIT 0 (the kernel
/// counts TIME_WAIT of both families in `sockstat`).
pub fn parse_sockstat_tcp(text: &str) -> Option<(u32, u32)> {
    let line = text
        .lines()
        .find(|l| l.starts_with("TCP:") || l.starts_with("TCP6:"))?;
    let mut it = line.split_whitespace().skip(1);
    let (mut in_use, mut tw) = (None, 0);
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        match k {
            "inuse" => in_use = v.parse().ok(),
            "tw" => tw = v.parse().ok()?,
            _ => {}
        }
    }
    Some((in_use?, tw))
}

impl TcpStates {
    /// Adds the sockets listed in one `/proc/net/tcp` or `/proc/net/tcp6` text.
    pub fn add_proc_net_tcp(&mut self, text: &str) {
        // Skip the header; the state is the 4th column, in hex.
        for line in text.lines().skip(1) {
            let Some(st) = line.split_whitespace().nth(3) else {
                continue;
            };
            let state = u8::from_str_radix(st, 16);
            if matches!(state, Ok(s) if s != 0x06) {
                self.in_use += 1;
            }
            match state {
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
        self.per_state = true;
    }

    /// Counts TCP sockets the cheap way when there are many: `sockstat` and `sockstat6`
    /// totals first, and the per-state listing only at or below [`PER_STATE_LIMIT`].
    /// `read` returns a `/proc` file's text (injected, so this is tested without /proc).
    pub fn sample(read: impl Fn(&str) -> Option<String>) -> TcpStates {
        let v4 = read("/proc/net/sockstat").and_then(|t| parse_sockstat_tcp(&t));
        let v6 = read("/proc/net/sockstat6").and_then(|t| parse_sockstat_tcp(&t));
        if let Some((in4, tw)) = v4 {
            let in_use = in4 + v6.map_or(0, |(i, _)| i);
            if in_use.saturating_add(tw) > PER_STATE_LIMIT {
                return TcpStates {
                    per_state: false,
                    in_use,
                    time_wait: tw,
                    ..TcpStates::default()
                };
            }
        }
        let mut t = TcpStates::default();
        for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
            if let Some(text) = read(f) {
                t.add_proc_net_tcp(&text);
            }
        }
        t
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

/// On-CPU time in nanoseconds from `/proc/PID/task/TID/schedstat` (its first field).
/// Unlike `stat`'s clock ticks, which the kernel truncates to 10 ms per process, this is
/// exact, so a short burst spread over several workers does not read as zero.
pub fn parse_schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Time runnable but waiting for a CPU, in nanoseconds, from a `schedstat` line (its
/// second field, the run delay): other tasks held the CPUs the thread could use.
pub fn parse_schedstat_wait_ns(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Cumulative CPU time of a cgroup in nanoseconds: `usage_usec` from a v2 `cpu.stat`,
/// or the single number of a v1 `cpuacct.usage` (already in nanoseconds).
pub fn parse_cgroup_cpu_ns(text: &str) -> Option<u64> {
    if let Some(us) = text.lines().find_map(|l| l.strip_prefix("usage_usec ")) {
        return us.trim().parse::<u64>().ok().map(|us| us * 1000);
    }
    let t = text.trim();
    (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .then(|| t.parse().ok())
        .flatten()
}

/// Pids listed one per line (a cgroup's `cgroup.procs`).
pub fn parse_pid_list(text: &str) -> Vec<u32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// A `TcpExt` counter of `/proc/net/netstat` (a header line of names, then a line of
/// values), e.g. `ListenOverflows`: SYNs a listener dropped because its accept queue
/// was full. The counter is the network namespace's, all listeners in it summed.
pub fn tcp_ext_counter(netstat: &str, name: &str) -> Option<u64> {
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let at = names.split_whitespace().position(|n| n == name)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn tcp_ext_counters_by_name() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
                    TcpExt: 0 17 19\n\
                    IpExt: InNoRoutes\n\
                    IpExt: 4\n";
        assert_eq!(super::tcp_ext_counter(text, "ListenOverflows"), Some(17));
        assert_eq!(super::tcp_ext_counter(text, "ListenDrops"), Some(19));
        assert_eq!(super::tcp_ext_counter(text, "InNoRoutes"), None);
        assert_eq!(
            super::tcp_ext_counter("TcpExt: ListenOverflows\n", "ListenOverflows"),
            None
        );
        assert_eq!(super::tcp_ext_counter("", "ListenOverflows"), None);
    }

    use super::*;

    #[test]
    fn precise_cpu_counters() {
        assert_eq!(
            parse_schedstat_ns("217314063 193904884 301\n"),
            Some(217314063)
        );
        assert_eq!(parse_schedstat_ns(""), None);
        assert_eq!(
            parse_schedstat_wait_ns("217314063 193904884 301\n"),
            Some(193_904_884)
        );
        assert_eq!(parse_schedstat_wait_ns("217314063\n"), None);
        let v2 = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
        assert_eq!(parse_cgroup_cpu_ns(v2), Some(1_500_000));
        assert_eq!(parse_cgroup_cpu_ns("1205468691640\n"), Some(1205468691640));
        assert_eq!(parse_cgroup_cpu_ns("nr_periods 0\n"), None);
        assert_eq!(parse_cgroup_cpu_ns(""), None);
    }

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
        assert_eq!(s.irq_ticks, 1 + 59);
        assert_eq!(s.idle_ticks, 56132);
        assert_eq!(s.iowait_ticks, 526);
        assert_eq!(s.total_ticks, 6895 + 5 + 3064 + 56132 + 526 + 1 + 59 + 12);
        assert_eq!(s.interrupts, 199872);
        assert_eq!(s.context_switches, 391785);
        assert_eq!((s.procs_running, s.procs_blocked), (3, 1));
        assert_eq!((s.steal_ticks, s.cpus), (12, 1));
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
        // Listen, established, syn_recv: not TIME_WAIT, twice.
        assert_eq!(s.in_use, 6);
        assert!(s.per_state);
    }

    #[test]
    fn sockstat_lines_parse() {
        let v4 =
            "sockets: used 9\nTCP: inuse 2 orphan 0 tw 23206 alloc 2 mem 186\nUDP: inuse 0 mem 0\n";
        assert_eq!(parse_sockstat_tcp(v4), Some((2, 23206)));
        assert_eq!(
            parse_sockstat_tcp("TCP6: inuse 5\nUDP6: inuse 1\n"),
            Some((5, 0))
        );
        assert_eq!(parse_sockstat_tcp("UDP: inuse 0\n"), None);
        assert_eq!(parse_sockstat_tcp("TCP: orphan 0 tw 3\n"), None);
    }

    #[test]
    fn many_sockets_are_counted_from_sockstat_not_listed() {
        let listing = "  sl  local rem st\n   0: 0100007F:1F90 00000000:0000 0A x\n   1: 0100007F:1F90 0100007F:D2A6 06 x\n";
        let proc_files = |tw: u32| {
            move |f: &str| -> Option<String> {
                match f {
                    "/proc/net/sockstat" => {
                        Some(format!("TCP: inuse 3 orphan 0 tw {tw} alloc 3 mem 1\n"))
                    }
                    "/proc/net/sockstat6" => Some("TCP6: inuse 1\n".into()),
                    "/proc/net/tcp" => Some(listing.into()),
                    _ => None,
                }
            }
        };
        // Few sockets: listed by state.
        let few = TcpStates::sample(proc_files(10));
        assert!(few.per_state);
        assert_eq!((few.listen, few.time_wait, few.in_use), (1, 1, 1));
        // Over the limit: totals only, and the listing is not read.
        let many = TcpStates::sample(proc_files(PER_STATE_LIMIT));
        assert!(!many.per_state);
        assert_eq!(
            (many.in_use, many.time_wait, many.listen),
            (4, PER_STATE_LIMIT, 0)
        );
        // No sockstat (an old kernel): the listing as before.
        let none = TcpStates::sample(|f: &str| (f == "/proc/net/tcp").then(|| listing.to_string()));
        assert!(none.per_state);
        assert_eq!(none.time_wait, 1);
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
