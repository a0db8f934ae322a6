//! Generator headroom: how close the load generator itself is to running out of file
//! descriptors or ephemeral ports (docs/methodology.md, "the generator checks itself":
//! fd/port/TIME_WAIT headroom).
//!
//! Why it matters: a connection-per-request load at 20k connections/s leaves every
//! closed client socket in TIME_WAIT for 60 s, and all of them share one (source IP,
//! target IP, target port) triple, so at most `ip_local_port_range` of them can exist at
//! once. Past that, `connect()` fails with EADDRNOTAVAIL and the "server's" error rate is
//! really the generator's. Likewise a pool larger than RLIMIT_NOFILE fails with EMFILE.
//! A run that came close (over 80% of either) says so beside its figures.
//!
//! The parsers are pure (sample `/proc` text in, numbers out) and table-tested; the
//! [`HeadroomWatch`] thread takes a full sample before the run and at the end, and
//! counts this process's fds once a second in between, keeping the maxima.
//!
//! The sockets are counted by a filtered netlink dump ([`crate::sockdiag`]), which copies
//! out only those towards the target; `/proc/net/tcp` is the fallback where netlink is
//! refused. Why the sockets are counted only before and after: reading `/proc/net/tcp` costs
//! kernel time in proportion to every socket on the machine (a few ms with tens of
//! thousands), and it runs on the generator's core when volley is pinned to one.
//! Sampled once a second, it made the event loop late: an open loop at 50k req/s
//! against lighttpd had scheduler-lag p99 of 6-10 ms with the per-second scan and 0.04-0.4
//! ms without it (same binary otherwise). Ports and TIME_WAIT only grow during a run
//! shorter than TIME_WAIT's 60 s, so the end-of-run count is their maximum there; fds
//! (the pool) are cheap to count and are followed each second.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

/// A share above which a resource is reported as low (80%: room for a burst, and a
/// warning before the failures start rather than after).
pub const LOW_SHARE: f64 = 0.8;

/// Why a headroom sample could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum HeadroomError {
    /// A `/proc` file could not be read (not Linux, or /proc not mounted).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// `/proc/sys/net/ipv4/ip_local_port_range` did not hold two port numbers.
    #[error("cannot parse the ephemeral port range {0:?}")]
    PortRange(String),
    /// getrlimit(RLIMIT_NOFILE) failed.
    #[error("getrlimit(RLIMIT_NOFILE) failed: {0}")]
    Rlimit(std::io::Error),
    /// The watch thread could not be created.
    #[error("cannot start the headroom thread: {0}")]
    Thread(std::io::Error),
}

/// Sockets towards one target address, from `/proc/net/tcp` and `/proc/net/tcp6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetSockets {
    /// Entries whose remote address and port are the target's, in any state (each holds
    /// one local port of the range for that target).
    pub in_use: u64,
    /// Of those, the ones in TIME_WAIT (state 06): closed, but still holding their port.
    pub time_wait: u64,
}

/// Parses `ip_local_port_range` ("32768\t60999\n") into the number of ports it offers.
pub fn parse_port_range(text: &str) -> Option<u64> {
    let mut it = text.split_whitespace().map(|s| s.parse::<u16>());
    match (it.next(), it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi)), None) if lo <= hi => Some(u64::from(hi - lo) + 1),
        _ => None,
    }
}

/// Decodes a `/proc/net/tcp{,6}` address column (`0100007F:1F90`). The kernel prints
/// the address as 32-bit words in host byte order (`%08X` of each word), and the port in
/// host order: so each word's native-endian bytes are the address bytes in network
/// order, on any machine.
fn parse_proc_addr(col: &str) -> Option<SocketAddr> {
    let (addr, port) = col.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = [0u8; 16];
    let words = addr.len() / 8;
    if addr.len() % 8 != 0 || !(words == 1 || words == 4) {
        return None;
    }
    for i in 0..words {
        let w = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
        bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
    }
    let ip = if words == 1 {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(bytes))
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether `remote` is `target`, counting an IPv4 target reached through a dual-stack
/// IPv6 socket (`::ffff:a.b.c.d`) as the same address.
fn same_addr(remote: SocketAddr, target: SocketAddr) -> bool {
    if remote.port() != target.port() {
        return false;
    }
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    canon(remote.ip()) == canon(target.ip())
}

/// Counts the sockets of one `/proc/net/tcp` or `/proc/net/tcp6` text whose remote end
/// is `target`. Lines that do not parse (the header, a truncated last line) are skipped.
pub fn count_target_sockets(text: &str, target: SocketAddr) -> TargetSockets {
    let mut out = TargetSockets::default();
    for line in text.lines() {
        // sl, local_address, rem_address, st, ...
        let mut cols = line.split_whitespace().skip(2);
        let (Some(rem), Some(st)) = (cols.next(), cols.next()) else {
            continue;
        };
        let Some(remote) = parse_proc_addr(rem) else {
            continue;
        };
        if same_addr(remote, target) {
            out.in_use += 1;
            if st == "06" {
                out.time_wait += 1;
            }
        }
    }
    out
}

/// Counts the entries of a `/proc/self/fd` listing: every open descriptor of this
/// process (the listing's own directory fd included, as it is one more in use).
fn count_fds() -> Result<u64, HeadroomError> {
    let dir = std::fs::read_dir("/proc/self/fd").map_err(|source| HeadroomError::Read {
        path: "/proc/self/fd",
        source,
    })?;
    Ok(dir.count() as u64)
}

/// The soft RLIMIT_NOFILE (the limit `open`/`socket` actually hit); RLIM_INFINITY is
/// reported as `u64::MAX`.
fn fd_limit() -> Result<u64, HeadroomError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own and pass by pointer.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc != 0 {
        return Err(HeadroomError::Rlimit(std::io::Error::last_os_error()));
    }
    Ok(if lim.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        lim.rlim_cur
    })
}

fn read(path: &'static str) -> Result<String, HeadroomError> {
    std::fs::read_to_string(path).map_err(|source| HeadroomError::Read { path, source })
}

/// One reading of the generator's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadroomSample {
    /// Open file descriptors of this process.
    pub fd_used: u64,
    /// Soft RLIMIT_NOFILE.
    pub fd_limit: u64,
    /// Ports in the ephemeral range.
    pub port_range: u64,
    /// Sockets towards the target (see [`TargetSockets`]).
    pub sockets: TargetSockets,
}

/// `TcpExt` `ListenOverflows` (SYNs dropped at a full accept queue, all listeners
/// summed) of the network namespace of process `pid` (`/proc/<pid>/net/netstat`: a
/// target in a lab's namespace is read there), or of this thread's with `None`.
/// `None` when the file cannot be read (the process is gone).
pub fn listen_overflows(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/net/netstat"),
        None => "/proc/thread-self/net/netstat".to_string(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    crate::parse::tcp_ext_counter(&text, "ListenOverflows")
}

/// Reads this process's fds and limit, the port range and the TCP sockets towards
/// `target`: by the kernel's filtered netlink dump ([`crate::sockdiag`], cheap however
/// many sockets the machine holds), else from `/proc/net/tcp{,6}`, where a missing
/// `/proc/net/tcp6` (IPv6 disabled) counts as no IPv6 sockets. With `target` `None`
/// (a load over QUIC: one UDP socket per worker, no TCP socket and no TIME_WAIT)
/// the TCP table is not walked at all and the socket counts are zero.
pub fn sample(target: Option<SocketAddr>) -> Result<HeadroomSample, HeadroomError> {
    let range_text = read("/proc/sys/net/ipv4/ip_local_port_range")?;
    let port_range = parse_port_range(&range_text)
        .ok_or_else(|| HeadroomError::PortRange(range_text.trim().to_owned()))?;
    let sockets = match target {
        None => TargetSockets::default(),
        Some(target) => match crate::sockdiag::count_target_sockets(target) {
            Ok(s) => s,
            Err(_) => {
                let v4 = count_target_sockets(&read("/proc/net/tcp")?, target);
                let v6 = std::fs::read_to_string("/proc/net/tcp6")
                    .map(|t| count_target_sockets(&t, target))
                    .unwrap_or_default();
                TargetSockets {
                    in_use: v4.in_use + v6.in_use,
                    time_wait: v4.time_wait + v6.time_wait,
                }
            }
        },
    };
    Ok(HeadroomSample {
        fd_used: count_fds()?,
        fd_limit: fd_limit()?,
        port_range,
        sockets,
    })
}

/// The most of each resource seen over a run, against its limit. Serialised as the
/// `headroom` object of `volley bench --json` (docs/bench-json.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct HeadroomReport {
    /// Most file descriptors this process had open at once.
    pub fd_used_max: u64,
    /// Soft RLIMIT_NOFILE (`u64::MAX` when unlimited).
    pub fd_limit: u64,
    /// Most sockets towards the target at once, any state.
    pub ports_in_use_max: u64,
    /// Ports in `ip_local_port_range` (hi - lo + 1): how many sockets one source address
    /// can have towards one target address and port.
    pub port_range: u64,
    /// Most of those sockets in TIME_WAIT at once.
    pub time_wait_max: u64,
    /// Full samples taken (before the run and at its end; the per-second fd counts
    /// are not included).
    pub samples: u32,
    /// Connects that failed at once because no local port was free (EADDRNOTAVAIL),
    /// as the engine counted them (the caller fills this in): the generator's machine's
    /// shortage, never the server's failure.
    pub connects_without_port: u64,
}

impl HeadroomReport {
    /// Folds one sample in (maxima; the limits as last read).
    pub fn add(&mut self, s: &HeadroomSample) {
        self.fd_used_max = self.fd_used_max.max(s.fd_used);
        self.fd_limit = s.fd_limit;
        self.ports_in_use_max = self.ports_in_use_max.max(s.sockets.in_use);
        self.port_range = s.port_range;
        self.time_wait_max = self.time_wait_max.max(s.sockets.time_wait);
        self.samples += 1;
    }

    /// "GENERATOR HEADROOM LOW: ..." when fds or ports passed [`LOW_SHARE`] of their
    /// limit, naming each and its share; `None` otherwise.
    pub fn warning(&self) -> Option<String> {
        let share = |used: u64, limit: u64| used as f64 / limit.max(1) as f64;
        let mut parts = Vec::new();
        let fd = share(self.fd_used_max, self.fd_limit);
        if fd > LOW_SHARE {
            parts.push(format!(
                "{} of {} file descriptors open ({:.0}%; raise ulimit -n)",
                self.fd_used_max,
                self.fd_limit,
                fd * 100.0
            ));
        }
        let ports = share(self.ports_in_use_max, self.port_range);
        if ports > LOW_SHARE {
            parts.push(format!(
                "{} of {} ephemeral ports in use towards the target, {} in TIME_WAIT ({:.0}%; \
                 connects may fail with EADDRNOTAVAIL: use keep-alive, fewer connections/s, \
                 or widen net.ipv4.ip_local_port_range)",
                self.ports_in_use_max,
                self.port_range,
                self.time_wait_max,
                ports * 100.0
            ));
        }
        (!parts.is_empty()).then(|| format!("GENERATOR HEADROOM LOW: {}", parts.join("; ")))
    }
}

/// A thread following the generator's fds once a second until [`HeadroomWatch::finish`],
/// between two full samples (start and end).
pub struct HeadroomWatch {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<HeadroomReport>>,
    target: Option<SocketAddr>,
}

impl HeadroomWatch {
    /// Takes the first sample now (before the run), so an unreadable `/proc` is an error
    /// here rather than a silent empty report, then samples every `interval`. `target`
    /// is where the load's TCP connections go, `None` for a load with none (HTTP/3):
    /// see [`sample`].
    pub fn start(
        target: Option<SocketAddr>,
        interval: Duration,
    ) -> Result<HeadroomWatch, HeadroomError> {
        let mut report = HeadroomReport::default();
        report.add(&sample(target)?);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("volley-headroom".into())
            .spawn(move || {
                let (lock, cv) = &*stop2;
                let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                // The flag is checked before each wait: a stop that came before this
                // thread first took the lock must not wait out a whole interval.
                while !*stopped {
                    let (guard, _) = cv
                        .wait_timeout(stopped, interval)
                        .unwrap_or_else(|e| e.into_inner());
                    stopped = guard;
                    if *stopped {
                        break;
                    }
                    // Only the cheap fd count mid-run (see the module docs); a failed
                    // read (fd limit reached, say) skips one.
                    if let Ok(n) = count_fds() {
                        report.fd_used_max = report.fd_used_max.max(n);
                    }
                }
                report
            })
            .map_err(HeadroomError::Thread)?;
        Ok(HeadroomWatch {
            stop,
            handle: Some(handle),
            target,
        })
    }

    /// Stops the thread, takes a last sample (the end of the run, when TIME_WAIT is
    /// highest for short runs) and returns the maxima.
    pub fn finish(mut self) -> HeadroomReport {
        let mut report = self.stop_thread().unwrap_or_default();
        if let Ok(s) = sample(self.target) {
            report.add(&s);
        }
        report
    }

    fn stop_thread(&mut self) -> Option<HeadroomReport> {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        self.handle.take().and_then(|h| h.join().ok())
    }
}

impl Drop for HeadroomWatch {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP4: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12082374 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 12082375 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:C351 0100007F:1F90 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   3: 0100007F:C352 0100007F:1F90 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   4: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 12082376 1 0000000000000000 20 4 30 10 -1
   5: 0100007F:C353 0100007F:1F91 01 00000000:00000000 00:00000000 00000000  1000        0 12082377 1 0000000000000000 20 4 30 10 -1
   6: 0100007F:C354 0200007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 12082378 1 0000000000000000 20 4 30 10 -1
   7: 0100007F:C355 0100";

    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:C360 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 20 4 30 10 -1
   1: 0000000000000000FFFF00000100007F:C361 0000000000000000FFFF00000100007F:1F90 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    // The sample text was printed by a little-endian kernel; on a big-endian one the
    // same socket would print differently, so the address tables only hold there.
    #[cfg(target_endian = "little")]
    #[test]
    fn proc_addresses_decode() {
        let cases = [
            ("0100007F:1F90", Some(addr("127.0.0.1:8080"))),
            ("00000000:0000", Some(addr("0.0.0.0:0"))),
            ("0101A8C0:0050", Some(addr("192.168.1.1:80"))),
            (
                "00000000000000000000000001000000:1F90",
                Some(addr("[::1]:8080")),
            ),
            (
                "0000000000000000FFFF00000100007F:0050",
                Some(addr("[::ffff:127.0.0.1]:80")),
            ),
            ("0100007F", None),
            ("0100007:1F90", None),
            ("0100007F:XYZ0", None),
            ("ZZ00007F:1F90", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_proc_addr(text), want, "{text:?}");
        }
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn sockets_towards_the_target_counted_by_remote_end() {
        let t = addr("127.0.0.1:8080");
        // Lines 1-3 (client sockets to :8080); not the listener (0), the server's own
        // accepted socket (4), another port (5), another address (6), the cut line (7).
        assert_eq!(
            count_target_sockets(TCP4, t),
            TargetSockets {
                in_use: 3,
                time_wait: 2
            }
        );
        // The IPv4-mapped TIME_WAIT entry of a dual-stack socket counts for 127.0.0.1.
        assert_eq!(
            count_target_sockets(TCP6, t),
            TargetSockets {
                in_use: 1,
                time_wait: 1
            }
        );
        assert_eq!(
            count_target_sockets(TCP6, addr("[::1]:8080")),
            TargetSockets {
                in_use: 1,
                time_wait: 0
            }
        );
        assert_eq!(
            count_target_sockets(TCP4, addr("127.0.0.1:9")),
            TargetSockets::default()
        );
        assert_eq!(count_target_sockets("", t), TargetSockets::default());
    }

    #[test]
    fn port_ranges_parse() {
        let cases = [
            ("32768\t60999\n", Some(28232)),
            ("1024 65535", Some(64512)),
            ("5000 5000", Some(1)),
            ("6000 5000", None),
            ("32768", None),
            ("1 2 3", None),
            ("a b", None),
            ("70000 80000", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_port_range(text), want, "{text:?}");
        }
    }

    fn s(fd_used: u64, in_use: u64, time_wait: u64) -> HeadroomSample {
        HeadroomSample {
            fd_used,
            fd_limit: 1024,
            port_range: 1000,
            sockets: TargetSockets { in_use, time_wait },
        }
    }

    #[test]
    fn report_keeps_maxima_and_warns_past_80_percent() {
        let mut r = HeadroomReport::default();
        r.add(&s(10, 5, 0));
        r.add(&s(70, 64, 3));
        r.add(&s(12, 20, 9));
        assert_eq!(
            r,
            HeadroomReport {
                fd_used_max: 70,
                fd_limit: 1024,
                ports_in_use_max: 64,
                port_range: 1000,
                time_wait_max: 9,
                samples: 3,
                connects_without_port: 0,
            }
        );
        assert_eq!(r.warning(), None);

        r.add(&s(900, 800, 790)); // 88% of fds, exactly 80% of ports: only fds warn
        let w = r.warning().unwrap();
        assert!(
            w.starts_with("GENERATOR HEADROOM LOW: 900 of 1024 file descriptors"),
            "{w}"
        );
        assert!(!w.contains("ephemeral"), "{w}");

        r.add(&s(10, 950, 940));
        let w = r.warning().unwrap();
        assert!(w.contains("950 of 1000 ephemeral ports"), "{w}");
        assert!(w.contains("940 in TIME_WAIT (95%"), "{w}");
    }

    #[test]
    fn unlimited_fds_never_warn() {
        let mut r = HeadroomReport::default();
        r.add(&HeadroomSample {
            fd_used: 1_000_000,
            fd_limit: u64::MAX,
            port_range: 28232,
            sockets: TargetSockets::default(),
        });
        assert_eq!(r.warning(), None);
    }

    #[test]
    fn live_sample_of_this_process_is_sane() {
        // A listener of our own and one connection to it: the client end must be counted.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = l.local_addr().unwrap();
        let _c = std::net::TcpStream::connect(target).unwrap();
        let w = HeadroomWatch::start(Some(target), Duration::from_secs(3600)).unwrap();
        let r = w.finish();
        assert!(r.fd_limit > 0 && r.fd_used_max >= 3, "{r:?}");
        assert!(r.port_range > 0, "{r:?}");
        assert!(r.ports_in_use_max >= 1, "{r:?}");
        assert_eq!(r.samples, 2, "{r:?}");
        // A load without TCP (HTTP/3) counts fds and the port range, no TCP socket.
        let w = HeadroomWatch::start(None, Duration::from_secs(3600)).unwrap();
        let r = w.finish();
        assert!(r.fd_limit > 0 && r.fd_used_max >= 3, "{r:?}");
        assert_eq!((r.ports_in_use_max, r.time_wait_max), (0, 0), "{r:?}");
    }
}
