//! Server knobs: tunables that mean the same on every managed kind (issue 23), each
//! rendered in that server's own syntax by its generator, and the per-kind raw escape
//! hatch.
//!
//! A knob left `None` keeps what volley generates without it (each kind's own default,
//! which differs: Apache defers accept on Linux, nginx does not), so a study's
//! "default" variant is the configuration every run had before knobs existed. A knob a
//! kind cannot express is refused by [`check`] before anything starts, naming the kind
//! and the knob: a run must measure the configuration it names, never one with a
//! setting silently dropped.

use crate::TargetKind;
use std::fmt;
use std::str::FromStr;

/// One server knob, by the name study files and `--set` use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    /// Send file bodies with `sendfile(2)` (zero copy) or through user-space buffers.
    Sendfile,
    /// `TCP_DEFER_ACCEPT`: the kernel hands over a connection once its first data
    /// arrives, so accept and the first read are one wake-up (FreeBSD's accept filter).
    DeferAccept,
    /// The `listen(2)` backlog the server asks for (the kernel caps it at
    /// `net.core.somaxconn` of the server's namespace).
    Backlog,
    /// Worker processes (threads for Caddy and the built-in server); Apache prefork's
    /// resident process count.
    Workers,
    /// Requests served on one kept-alive connection before the server closes it.
    KeepaliveRequests,
    /// `TCP_NODELAY` on accepted connections (Nagle's algorithm off).
    TcpNodelay,
    /// One access-log line per request, written into the private directory.
    AccessLog,
}

impl Knob {
    /// Every knob, in the order they are listed and printed.
    pub const ALL: [Knob; 7] = [
        Knob::Sendfile,
        Knob::DeferAccept,
        Knob::Backlog,
        Knob::Workers,
        Knob::KeepaliveRequests,
        Knob::TcpNodelay,
        Knob::AccessLog,
    ];

    /// The name in study files and `--set`.
    pub fn name(self) -> &'static str {
        match self {
            Knob::Sendfile => "sendfile",
            Knob::DeferAccept => "defer_accept",
            Knob::Backlog => "backlog",
            Knob::Workers => "workers",
            Knob::KeepaliveRequests => "keepalive_requests",
            Knob::TcpNodelay => "tcp_nodelay",
            Knob::AccessLog => "access_log",
        }
    }

    /// True for on/off knobs, false for counts.
    pub fn is_switch(self) -> bool {
        matches!(
            self,
            Knob::Sendfile | Knob::DeferAccept | Knob::TcpNodelay | Knob::AccessLog
        )
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Knob {
    type Err = KnobError;
    fn from_str(s: &str) -> Result<Knob, KnobError> {
        Knob::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| KnobError::Unknown { key: s.to_string() })
    }
}

/// A knob's value: a switch or a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum KnobValue {
    /// On or off.
    Switch(bool),
    /// A whole number of at least 1.
    Count(u32),
}

impl fmt::Display for KnobValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobValue::Switch(b) => write!(f, "{b}"),
            KnobValue::Count(n) => write!(f, "{n}"),
        }
    }
}

/// Why a knob was refused. Each message is one line naming the knob (and the kind).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnobError {
    /// Not a knob volley knows.
    #[error("unknown server knob '{key}' (known: {})", Knob::ALL.map(Knob::name).join(", "))]
    Unknown {
        /// The key as given.
        key: String,
    },
    /// A value of the wrong shape for the knob.
    #[error("server knob {knob}: '{value}' is not {}", if knob.is_switch() { "true or false" } else { "a whole number of at least 1" })]
    BadValue {
        /// Which knob.
        knob: Knob,
        /// The value as given.
        value: String,
    },
    /// `--set` without `=`.
    #[error("--set takes KNOB=VALUE (e.g. backlog=1024 or raw.nginx='...'), got '{0}'")]
    NoEquals(String),
    /// The kind has no way to say this knob (or this value of it).
    #[error("{kind} cannot express server knob {knob}: {why}")]
    Unsupported {
        /// Which server.
        kind: TargetKind,
        /// The knob (with its value when only one value is refused).
        knob: String,
        /// Why not, and what to use instead when there is something.
        why: &'static str,
    },
}

/// The knobs asked of a target; `None` keeps volley's generated default.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Knobs {
    /// See [`Knob::Sendfile`].
    pub sendfile: Option<bool>,
    /// See [`Knob::DeferAccept`].
    pub defer_accept: Option<bool>,
    /// See [`Knob::Backlog`].
    pub backlog: Option<u32>,
    /// See [`Knob::Workers`]: applied to [`super::ServerSettings::workers`].
    pub workers: Option<u32>,
    /// See [`Knob::KeepaliveRequests`].
    pub keepalive_requests: Option<u32>,
    /// See [`Knob::TcpNodelay`].
    pub tcp_nodelay: Option<bool>,
    /// See [`Knob::AccessLog`]: applied to [`super::ServerSettings::access_log`].
    pub access_log: Option<bool>,
}

/// Parses a switch as study files and flags write it.
fn parse_switch(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Some(true),
        "false" | "off" | "no" | "0" => Some(false),
        _ => None,
    }
}

impl Knobs {
    /// Sets `knob` from its text (`--set knob=value`, or a study value printed as text).
    pub fn set_text(&mut self, knob: Knob, value: &str) -> Result<(), KnobError> {
        let bad = || KnobError::BadValue {
            knob,
            value: value.to_string(),
        };
        let v = if knob.is_switch() {
            KnobValue::Switch(parse_switch(value).ok_or_else(bad)?)
        } else {
            match value.trim().parse::<u32>() {
                Ok(n) if n >= 1 => KnobValue::Count(n),
                _ => return Err(bad()),
            }
        };
        self.set(knob, v)
    }

    /// Sets `knob` to `value`; a value of the wrong shape is refused.
    pub fn set(&mut self, knob: Knob, value: KnobValue) -> Result<(), KnobError> {
        let bad = || KnobError::BadValue {
            knob,
            value: value.to_string(),
        };
        match (knob, value) {
            (Knob::Sendfile, KnobValue::Switch(b)) => self.sendfile = Some(b),
            (Knob::DeferAccept, KnobValue::Switch(b)) => self.defer_accept = Some(b),
            (Knob::TcpNodelay, KnobValue::Switch(b)) => self.tcp_nodelay = Some(b),
            (Knob::AccessLog, KnobValue::Switch(b)) => self.access_log = Some(b),
            (Knob::Backlog, KnobValue::Count(n)) if n >= 1 => self.backlog = Some(n),
            (Knob::Workers, KnobValue::Count(n)) if n >= 1 => self.workers = Some(n),
            (Knob::KeepaliveRequests, KnobValue::Count(n)) if n >= 1 => {
                self.keepalive_requests = Some(n)
            }
            _ => return Err(bad()),
        }
        Ok(())
    }

    /// The value asked for `knob`, if any.
    pub fn get(&self, knob: Knob) -> Option<KnobValue> {
        let sw = |b: Option<bool>| b.map(KnobValue::Switch);
        let n = |c: Option<u32>| c.map(KnobValue::Count);
        match knob {
            Knob::Sendfile => sw(self.sendfile),
            Knob::DeferAccept => sw(self.defer_accept),
            Knob::Backlog => n(self.backlog),
            Knob::Workers => n(self.workers),
            Knob::KeepaliveRequests => n(self.keepalive_requests),
            Knob::TcpNodelay => sw(self.tcp_nodelay),
            Knob::AccessLog => sw(self.access_log),
        }
    }

    /// The knobs that are set, in [`Knob::ALL`] order.
    pub fn set_knobs(&self) -> Vec<(Knob, KnobValue)> {
        Knob::ALL
            .into_iter()
            .filter_map(|k| self.get(k).map(|v| (k, v)))
            .collect()
    }

    /// True when no knob is set.
    pub fn is_empty(&self) -> bool {
        self.set_knobs().is_empty()
    }

    /// Copies every knob `other` sets over this one's (a variant over the defaults,
    /// `--set` over a study's).
    pub fn overlay(&mut self, other: &Knobs) {
        for (k, v) in other.set_knobs() {
            // Values from another `Knobs` already have the right shape.
            let _ = self.set(k, v);
        }
    }
}

/// A `--set` assignment: a knob, or raw text for one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// `knob=value`.
    Knob(Knob, KnobValue),
    /// `raw.KIND=text`: configuration lines for that kind, stored verbatim.
    Raw(TargetKind, String),
}

/// Parses one `--set KEY=VALUE`.
pub fn parse_assignment(s: &str) -> Result<Assignment, KnobError> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| KnobError::NoEquals(s.to_string()))?;
    let key = key.trim();
    if let Some(kind) = key.strip_prefix("raw.") {
        let kind: TargetKind = kind.parse().map_err(|_| KnobError::Unknown {
            key: key.to_string(),
        })?;
        return Ok(Assignment::Raw(kind, value.to_string()));
    }
    let knob: Knob = key.parse()?;
    let mut k = Knobs::default();
    k.set_text(knob, value)?;
    Ok(Assignment::Knob(
        knob,
        k.get(knob).unwrap_or(KnobValue::Count(1)),
    ))
}

/// Knobs and raw text together, as a variant or `--set` flags give them: the knobs
/// apply to every kind, each raw text to its own kind only.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tuning {
    /// The knobs.
    pub knobs: Knobs,
    /// Raw configuration text per kind (`raw.nginx = "..."`), at most one per kind.
    pub raw: Vec<(TargetKind, String)>,
}

impl Tuning {
    /// Takes one assignment (a later one for the same knob or kind replaces it).
    pub fn assign(&mut self, a: &Assignment) {
        match a {
            Assignment::Knob(k, v) => {
                // Parsed assignments carry values of the knob's own shape.
                let _ = self.knobs.set(*k, *v);
            }
            Assignment::Raw(kind, text) => {
                self.raw.retain(|(k, _)| k != kind);
                self.raw.push((*kind, text.clone()));
            }
        }
    }

    /// The raw text for `kind`, if any.
    pub fn raw_for(&self, kind: TargetKind) -> Option<&str> {
        self.raw
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, t)| t.as_str())
    }

    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.knobs.is_empty() && self.raw.is_empty()
    }

    /// Refuses what `kind` cannot express (see [`check`]).
    pub fn check(&self, kind: TargetKind) -> Result<(), KnobError> {
        check(kind, &self.knobs, self.raw_for(kind))
    }

    /// Puts this tuning into `kind`'s settings.
    pub fn apply(&self, kind: TargetKind, settings: &mut super::ServerSettings) {
        settings.apply_knobs(&self.knobs);
        if let Some(raw) = self.raw_for(kind) {
            settings.raw = Some(raw.to_string());
        }
    }
}

/// Refuses what `kind` cannot express: every knob set in `knobs`, and raw text for a
/// kind without a configuration file. Checked before anything is created.
pub fn check(kind: TargetKind, knobs: &Knobs, raw: Option<&str>) -> Result<(), KnobError> {
    for (knob, value) in knobs.set_knobs() {
        if let Some(why) = cannot(kind, knob, value) {
            let knob = match (knob, value) {
                // Only one value of these is refused: name it.
                (Knob::TcpNodelay, KnobValue::Switch(false)) => "tcp_nodelay = false".into(),
                _ => knob.name().to_string(),
            };
            return Err(KnobError::Unsupported { kind, knob, why });
        }
    }
    if raw.is_some() && !takes_raw(kind) {
        return Err(KnobError::Unsupported {
            kind,
            knob: format!("raw.{kind}"),
            why: "it has no configuration file for raw text to go into",
        });
    }
    Ok(())
}

/// The kinds whose generated configuration file has a place for raw text: nginx
/// (inside `http { }`), Apache and lighttpd (at the end, top level), Caddy (inside the
/// site block).
pub fn takes_raw(kind: TargetKind) -> bool {
    matches!(
        kind,
        TargetKind::Nginx
            | TargetKind::ApacheEvent
            | TargetKind::ApachePrefork
            | TargetKind::Lighttpd
            | TargetKind::Caddy
    )
}

/// Why `kind` cannot express `knob = value`; `None` when it can.
fn cannot(kind: TargetKind, knob: Knob, value: KnobValue) -> Option<&'static str> {
    use Knob::*;
    use TargetKind as K;
    let nodelay_off = knob == TcpNodelay && value == KnobValue::Switch(false);
    match kind {
        K::Nginx => None,
        // httpd turns Nagle off on every connection (core's pre-connection hook) and has
        // no directive to keep it on.
        K::ApacheEvent | K::ApachePrefork if nodelay_off => {
            Some("httpd always sets TCP_NODELAY and has no directive to turn it off")
        }
        K::ApacheEvent | K::ApachePrefork => None,
        K::Lighttpd if knob == TcpNodelay => {
            Some("lighttpd has no directive for TCP_NODELAY")
        }
        K::Lighttpd => None,
        // Go's net package sets TCP_NODELAY on every TCP connection by default, so `true`
        // is what Caddy does; nothing in a Caddyfile turns it off.
        K::Caddy => match knob {
            Workers | AccessLog => None,
            TcpNodelay if !nodelay_off => None,
            TcpNodelay => Some("Go sets TCP_NODELAY on every connection and the Caddyfile has no setting to turn it off"),
            Backlog => Some("Go's listener takes its backlog from net.core.somaxconn; set that sysctl in the target's namespace instead"),
            Sendfile => Some("Go chooses sendfile itself and the Caddyfile has no switch for it"),
            DeferAccept => Some("the Caddyfile has no setting for TCP_DEFER_ACCEPT"),
            KeepaliveRequests => Some("the Caddyfile has no per-connection request limit"),
        },
        // volley's own server: `--threads`, `--access-log`, and TCP_NODELAY on every
        // accepted connection (crates/server worker).
        K::Builtin => match knob {
            Workers | AccessLog => None,
            TcpNodelay if !nodelay_off => None,
            TcpNodelay => Some("the built-in server always sets TCP_NODELAY"),
            Backlog => Some("the built-in server has no backlog setting"),
            Sendfile => Some("the built-in server has no sendfile switch (it uses sendfile for plain-HTTP file bodies)"),
            DeferAccept => Some("the built-in server has no TCP_DEFER_ACCEPT setting"),
            KeepaliveRequests => Some("the built-in server has no per-connection request limit"),
        },
        K::Radicale | K::Xandikos => {
            Some("volley runs the CalDAV servers as shipped, with no server knobs")
        }
        K::External => Some("volley does not start or configure an external target"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_parse_into_typed_values() {
        assert_eq!(
            parse_assignment("backlog=1024"),
            Ok(Assignment::Knob(Knob::Backlog, KnobValue::Count(1024)))
        );
        assert_eq!(
            parse_assignment("sendfile=off"),
            Ok(Assignment::Knob(Knob::Sendfile, KnobValue::Switch(false)))
        );
        assert_eq!(
            parse_assignment("raw.nginx=open_file_cache max=10;"),
            Ok(Assignment::Raw(
                TargetKind::Nginx,
                "open_file_cache max=10;".into()
            ))
        );
        let e = parse_assignment("backlgo=1").unwrap_err().to_string();
        assert!(e.starts_with("unknown server knob 'backlgo'"), "{e}");
        assert!(!e.contains('\n'));
        assert_eq!(
            parse_assignment("backlog=0").unwrap_err().to_string(),
            "server knob backlog: '0' is not a whole number of at least 1"
        );
        assert!(parse_assignment("defer_accept=maybe").is_err());
        assert!(matches!(
            parse_assignment("backlog"),
            Err(KnobError::NoEquals(_))
        ));
        assert!(parse_assignment("raw.nope=x").is_err());
    }

    #[test]
    fn a_count_cannot_go_into_a_switch() {
        let mut k = Knobs::default();
        assert!(k.set(Knob::Sendfile, KnobValue::Count(3)).is_err());
        assert!(k.set(Knob::Backlog, KnobValue::Switch(true)).is_err());
        assert!(k.set(Knob::Workers, KnobValue::Count(0)).is_err());
        assert!(k.is_empty());
    }

    #[test]
    fn overlay_keeps_what_the_top_does_not_set() {
        let mut base = Knobs {
            backlog: Some(16),
            sendfile: Some(true),
            ..Knobs::default()
        };
        base.overlay(&Knobs {
            sendfile: Some(false),
            ..Knobs::default()
        });
        assert_eq!(base.backlog, Some(16));
        assert_eq!(base.sendfile, Some(false));
    }

    fn all_on() -> Knobs {
        Knobs {
            sendfile: Some(false),
            defer_accept: Some(true),
            backlog: Some(1024),
            workers: Some(4),
            keepalive_requests: Some(100),
            tcp_nodelay: Some(true),
            access_log: Some(false),
        }
    }

    #[test]
    fn each_kind_refuses_what_it_cannot_say_naming_kind_and_knob() {
        assert_eq!(check(TargetKind::Nginx, &all_on(), Some("x;")), Ok(()));
        assert_eq!(check(TargetKind::ApachePrefork, &all_on(), None), Ok(()));
        let off = Knobs {
            tcp_nodelay: Some(false),
            ..Knobs::default()
        };
        let e = check(TargetKind::ApacheEvent, &off, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("apache-event cannot express server knob tcp_nodelay = false"),
            "{e}"
        );
        let e = check(TargetKind::Lighttpd, &all_on(), None).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("lighttpd cannot express server knob tcp_nodelay"));
        let e = check(TargetKind::Caddy, &all_on(), None).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("caddy cannot express server knob sendfile"));
        let caddy_ok = Knobs {
            workers: Some(2),
            access_log: Some(true),
            tcp_nodelay: Some(true),
            ..Knobs::default()
        };
        assert_eq!(check(TargetKind::Caddy, &caddy_ok, Some("x")), Ok(()));
        assert_eq!(check(TargetKind::Builtin, &caddy_ok, None), Ok(()));
        let e = check(TargetKind::Builtin, &Knobs::default(), Some("x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "builtin cannot express server knob raw.builtin: it has no configuration file for raw text to go into"
        );
        let backlog = Knobs {
            backlog: Some(16),
            ..Knobs::default()
        };
        for k in [
            TargetKind::Radicale,
            TargetKind::Xandikos,
            TargetKind::External,
        ] {
            assert!(check(k, &backlog, None).is_err(), "{k}");
        }
        for k in TargetKind::ALL {
            assert_eq!(check(k, &Knobs::default(), None), Ok(()), "{k}");
        }
    }

    /// docs/methodology.md's knob table ("Server knobs") says, per knob and kind, what
    /// the kind writes, "refused", or "`true` only": each cell agrees with [`cannot`].
    #[test]
    fn the_methodology_table_says_what_each_kind_refuses() {
        let doc = include_str!("../../../../docs/methodology.md");
        let columns: [&[TargetKind]; 5] = [
            &[TargetKind::Nginx],
            &[TargetKind::ApacheEvent, TargetKind::ApachePrefork],
            &[TargetKind::Lighttpd],
            &[TargetKind::Caddy],
            &[TargetKind::Builtin],
        ];
        let mut rows = 0;
        for line in doc.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            let Ok(knob) = cells[0].trim_matches('`').parse::<Knob>() else {
                continue;
            };
            rows += 1;
            assert_eq!(cells.len(), 6, "{line}");
            let values = match knob {
                Knob::Sendfile | Knob::DeferAccept | Knob::TcpNodelay | Knob::AccessLog => {
                    [KnobValue::Switch(true), KnobValue::Switch(false)]
                }
                _ => [KnobValue::Count(4), KnobValue::Count(1024)],
            };
            for (cell, kinds) in cells[1..].iter().zip(columns) {
                for &kind in kinds {
                    let refused: Vec<bool> =
                        values.map(|v| cannot(kind, knob, v).is_some()).to_vec();
                    let want = if *cell == "refused" {
                        vec![true, true]
                    } else if cell.starts_with("`true` only") {
                        vec![false, true]
                    } else {
                        vec![false, false]
                    };
                    assert_eq!(
                        refused,
                        want,
                        "{kind} {}: the table says {cell}",
                        knob.name()
                    );
                }
            }
        }
        assert_eq!(rows, Knob::ALL.len(), "one row per knob");
    }
}
