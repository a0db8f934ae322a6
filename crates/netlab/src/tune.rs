//! Kernel settings inside a lab namespace, never on the host (issue 23): sysctls written
//! and read back in the target's network namespace, and per-route switches (`quickack`)
//! on its link.
//!
//! Which sysctls are per network namespace is the kernel's fact, and volley asks the
//! kernel rather than keep a list: a key is written inside the namespace (`ip netns
//! exec`), read back there, and the host's value read before and
//! after. A global key is refused, and the host never changes:
//! - keys outside `net.` are not network-namespace state at all (`vm.`, `kernel.`,
//!   `fs.` are one value for the whole machine), so they are refused unwritten;
//! - a global `net.` key is absent from a new namespace (`net.core.netdev_max_backlog`,
//!   `net.ipv4.tcp_mem`) or read-only there (`net.core.rmem_max` on 6.x kernels): the
//!   read or the write fails inside the namespace and the host is not reached;
//! - should a write inside the namespace still move the host's value, the host's value
//!   is written back at once and the key refused as global.

use std::process::Command;

use serde::Serialize;

use crate::exec::command_in;

/// One sysctl asked of a namespace: `net.core.somaxconn = 1024`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sysctl {
    /// Dotted key.
    pub key: String,
    /// Value as `sysctl -w` takes it (several numbers separated by spaces for vectors).
    pub value: String,
}

/// A sysctl as applied: what the namespace holds now, and the host's (unchanged) value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppliedSysctl {
    /// Dotted key.
    pub key: String,
    /// The namespace's value, read back after the write.
    pub value: String,
    /// The host's value, the same before and after.
    pub host: String,
}

/// What a target's namespace holds, as read back: stored with every run made in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NsRecord {
    /// The namespace.
    pub ns: String,
    /// The sysctls as read back there, with the host's unchanged values.
    pub sysctls: Vec<AppliedSysctl>,
    /// The routes through its link, as read back.
    pub routes: Vec<String>,
    /// The generator's own settings there (`tcp_tw_reuse`, see
    /// [`crate::lab::injector_sysctls`]), as read back, unless a variant set the key.
    pub generator_sysctls: Vec<AppliedSysctl>,
}

/// Why a namespace setting was refused; each message is one line naming the key.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Not `KEY=VALUE`, or a key that is not a sysctl name.
    #[error("--sysctl takes KEY=VALUE with a dotted key like net.core.somaxconn=1024, got '{0}'")]
    Syntax(String),
    /// A key outside `net.`: one value for the whole machine.
    #[error("sysctl {key} is global (not per network namespace): volley sets only net.* keys, inside the target's namespace")]
    NotNetwork {
        /// The key.
        key: String,
    },
    /// Absent from a network namespace: global, or unknown to this kernel.
    #[error("sysctl {key} does not exist inside a network namespace: it is global (host-wide) or unknown to this kernel ({host})")]
    Absent {
        /// The key.
        key: String,
        /// Whether the host has it.
        host: &'static str,
    },
    /// Read-only inside a namespace: a global value shown there.
    #[error("sysctl {key} is global: it is read-only inside a network namespace")]
    ReadOnly {
        /// The key.
        key: String,
    },
    /// The kernel refused the value.
    #[error("sysctl {key}: the kernel refused '{value}': {why}")]
    Refused {
        /// The key.
        key: String,
        /// The value written.
        value: String,
        /// What `sysctl` said.
        why: String,
    },
    /// Written, but the namespace reads back something else.
    #[error("sysctl {key}: wrote '{value}' but the namespace reads back '{got}'")]
    DidNotTake {
        /// The key.
        key: String,
        /// The value written.
        value: String,
        /// The value read back.
        got: String,
    },
    /// Writing inside the namespace changed the host's value (restored at once).
    #[error("sysctl {key} is global: writing it inside the namespace changed the host's value (put back to '{host}')")]
    Global {
        /// The key.
        key: String,
        /// The host's value, written back.
        host: String,
    },
    /// The host's value could not be read (needed to prove it did not change).
    #[error("sysctl {key}: cannot read the host's value: {source}")]
    HostUnreadable {
        /// The key.
        key: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A route switch the kernel did not take.
    #[error("route {what} in {ns}: {why}")]
    Route {
        /// The switch.
        what: String,
        /// The namespace.
        ns: String,
        /// What `ip` said, or what was read back.
        why: String,
    },
    /// `ip` could not be run.
    #[error("cannot run ip: {0}")]
    Spawn(#[source] std::io::Error),
}

impl std::str::FromStr for Sysctl {
    type Err = TuneError;
    fn from_str(s: &str) -> Result<Sysctl, TuneError> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| TuneError::Syntax(s.to_string()))?;
        Sysctl::new(k, v).ok_or_else(|| TuneError::Syntax(s.to_string()))
    }
}

impl Sysctl {
    /// A sysctl from a key and a value; `None` when the key is not a sysctl name (no
    /// `..`, no path outside `/proc/sys`) or the value is empty.
    pub fn new(key: &str, value: &str) -> Option<Sysctl> {
        let key = key.trim().replace('/', ".");
        let value = normalise(value);
        let ok = !key.is_empty()
            && !value.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            && key.split('.').all(|p| !p.is_empty());
        ok.then_some(Sysctl { key, value })
    }

    fn proc_path(&self) -> String {
        format!("/proc/sys/{}", self.key.replace('.', "/"))
    }
}

/// Sysctl values as compared: runs of whitespace (vectors are tab-separated when read)
/// become one space.
fn normalise(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the namespace answered to a read or write of a `/proc/sys` file.
#[derive(Debug)]
enum ProcAnswer {
    /// The value read (empty for a write).
    Value(String),
    /// The command failed: the last line of its stderr (the kernel's refusal).
    Refused(String),
}

/// Reads (`value` None) or writes a `/proc/sys` file from inside `ns`: `cat`, or
/// `tee` with the value on stdin (no shell, so no quoting; `sysctl -w` is not used because
/// procps exits 0 after the kernel refuses a write). `Err` only when the command could
/// not run at all.
fn proc_in(ns: &str, path: &str, value: Option<&str>) -> Result<ProcAnswer, TuneError> {
    use std::io::Write;
    use std::process::Stdio;
    let mut cmd = command_in(ns, if value.is_some() { "tee" } else { "cat" });
    cmd.arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(TuneError::Spawn)?;
    if let (Some(v), Some(mut stdin)) = (value, child.stdin.take()) {
        // One write: the kernel parses a sysctl from the first write(2).
        let _ = stdin.write_all(format!("{v}\n").as_bytes());
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().map_err(TuneError::Spawn)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    Ok(if out.status.success() {
        ProcAnswer::Value(text(&out.stdout))
    } else {
        ProcAnswer::Refused(
            text(&out.stderr)
                .lines()
                .last()
                .unwrap_or("failed")
                .to_string(),
        )
    })
}

fn host_value(s: &Sysctl) -> Result<String, TuneError> {
    std::fs::read_to_string(s.proc_path())
        .map(|v| normalise(&v))
        .map_err(|source| TuneError::HostUnreadable {
            key: s.key.clone(),
            source,
        })
}

/// Writes each sysctl inside `ns` and proves it took there and not on the host (see the
/// module's rules). Stops at the first refusal; values already written stay in the
/// namespace, which goes with the lab.
pub fn apply_sysctls(ns: &str, sysctls: &[Sysctl]) -> Result<Vec<AppliedSysctl>, TuneError> {
    let mut applied = Vec::new();
    for s in sysctls {
        if !s.key.starts_with("net.") {
            return Err(TuneError::NotNetwork { key: s.key.clone() });
        }
        let host_before = match host_value(s) {
            Ok(v) => v,
            Err(_) if !std::path::Path::new(&s.proc_path()).exists() => {
                return Err(TuneError::Absent {
                    key: s.key.clone(),
                    host: "nor on the host",
                })
            }
            Err(e) => return Err(e),
        };
        let path = s.proc_path();
        if let ProcAnswer::Refused(_) = proc_in(ns, &path, None)? {
            return Err(TuneError::Absent {
                key: s.key.clone(),
                host: "the host has it",
            });
        }
        if let ProcAnswer::Refused(why) = proc_in(ns, &path, Some(&s.value))? {
            let lower = why.to_ascii_lowercase();
            return Err(if lower.contains("permission denied") {
                TuneError::ReadOnly { key: s.key.clone() }
            } else {
                TuneError::Refused {
                    key: s.key.clone(),
                    value: s.value.clone(),
                    why,
                }
            });
        }
        let host_after = host_value(s)?;
        if host_after != host_before {
            // Put the host back before anything else; best effort is all there is.
            let _ = std::fs::write(s.proc_path(), &host_before);
            return Err(TuneError::Global {
                key: s.key.clone(),
                host: host_before,
            });
        }
        // What the namespace reads back: the value, or why it could not be read (never
        // a match).
        let (got, read) = match proc_in(ns, &path, None)? {
            ProcAnswer::Value(v) => (normalise(&v), true),
            ProcAnswer::Refused(why) => (why, false),
        };
        if !read || got != s.value {
            return Err(TuneError::DidNotTake {
                key: s.key.clone(),
                value: s.value.clone(),
                got,
            });
        }
        applied.push(AppliedSysctl {
            key: s.key.clone(),
            value: got,
            host: host_before,
        });
    }
    Ok(applied)
}

/// Per-route switches applied inside a namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RouteSettings {
    /// `quickack 1` on the link's route: ACK at once instead of delaying (Linux's
    /// per-route answer to FreeBSD's `net.inet.tcp.delayed_ack=0`).
    pub quickack: Option<bool>,
}

/// Sets `route`'s switches on every route through `dev` inside `ns` and returns those
/// routes as read back (`ip route show dev DEV`), each checked to carry the switch.
/// For `lo` these are the `local` routes of the local table (127.0.0.0/8 and any
/// address a tuning lab put on `lo`): traffic between two addresses of one namespace
/// takes those, and a route's `quickack` holds for the sockets routed by it, both ends
/// of a loopback connection.
pub fn apply_routes(ns: &str, dev: &str, route: RouteSettings) -> Result<Vec<String>, TuneError> {
    let Some(on) = route.quickack else {
        return Ok(Vec::new());
    };
    let flag = u8::from(on).to_string();
    let fail = |why: String| TuneError::Route {
        what: format!("quickack {flag}"),
        ns: ns.to_string(),
        why,
    };
    let ip = |args: &[&str]| -> Result<String, TuneError> {
        let out = Command::new("ip")
            .args(["-n", ns])
            .args(args)
            .output()
            .map_err(TuneError::Spawn)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(fail(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ))
        }
    };
    let table: &[&str] = if dev == "lo" {
        &["table", "local"]
    } else {
        &[]
    };
    let show = || -> Result<Vec<String>, TuneError> {
        let mut args = vec!["route", "show"];
        args.extend(table);
        args.extend(["dev", dev]);
        Ok(ip(&args)?
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty() && (table.is_empty() || l.starts_with("local ")))
            .collect())
    };
    let routes = show()?;
    if routes.is_empty() {
        return Err(fail(format!("no route through {dev}")));
    }
    for r in &routes {
        // A route line is its own selector: prefix, proto, scope, src... as shown.
        let mut args = vec!["route", "change"];
        let without: Vec<&str> = strip_quickack(r);
        args.extend(without.iter().copied());
        args.extend(table);
        args.extend(["dev", dev, "quickack", &flag]);
        ip(&args)?;
    }
    let after = show()?;
    let want = format!("quickack {flag}");
    if on && !after.iter().all(|r| r.contains(&want)) {
        return Err(fail(format!("read back without it: {}", after.join("; "))));
    }
    Ok(after)
}

/// A shown route's words without a `quickack N` pair (so it can be set again).
fn strip_quickack(route: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut words = route.split_whitespace();
    while let Some(w) = words.next() {
        if w == "quickack" {
            words.next();
            continue;
        }
        out.push(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sysctl_names_and_values_are_normalised() {
        let s: Sysctl = "net.core.somaxconn=1024".parse().unwrap();
        assert_eq!(s.key, "net.core.somaxconn");
        assert_eq!(s.proc_path(), "/proc/sys/net/core/somaxconn");
        let v: Sysctl = "net.ipv4.tcp_rmem = 4096\t131072  6291456".parse().unwrap();
        assert_eq!(v.value, "4096 131072 6291456");
        assert_eq!(
            "net/ipv4/tcp_syncookies=0".parse::<Sysctl>().unwrap().key,
            "net.ipv4.tcp_syncookies"
        );
        for bad in [
            "net.core.somaxconn",
            "=1",
            "net..x=1",
            "net.x=",
            "../etc=1",
            "a b=1",
        ] {
            assert!(bad.parse::<Sysctl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn route_lines_lose_their_old_quickack() {
        assert_eq!(
            strip_quickack("10.213.0.0/24 proto kernel scope link src 10.213.0.1 quickack 1"),
            [
                "10.213.0.0/24",
                "proto",
                "kernel",
                "scope",
                "link",
                "src",
                "10.213.0.1"
            ]
        );
    }

    #[test]
    fn keys_outside_net_are_refused_unwritten() {
        let s: Sysctl = "vm.swappiness=1".parse().unwrap();
        let e = apply_sysctls("no-such-ns", &[s]).unwrap_err().to_string();
        assert!(e.starts_with("sysctl vm.swappiness is global"), "{e}");
    }
}
