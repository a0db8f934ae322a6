//! What travels on the bus, and on which subject.
//!
//! Place in the flow: shared by [`crate::agent`] and [`crate::coordinator`]. Every
//! message carries the protocol version [`PROTO`]; a peer of another version is a typed
//! error, never a misread. Subjects start with `volley.v1`:
//!
//! | subject | from | what |
//! |---|---|---|
//! | `volley.v1.hello.<name>` | agent | [`Hello`], each second until assigned (the lobby) |
//! | `volley.v1.agent.<name>.probe` | coordinator | [`ProbeRequest`] -> [`ProbeReply`] |
//! | `volley.v1.agent.<name>.assign` | coordinator | [`SignedAssignment`] -> [`Ready`] |
//! | `volley.v1.agent.<name>.stale` | coordinator | [`Stale`]: stop, you are out of the run |
//! | `volley.v1.run.<run>.agent.<name>.sec` | agent | [`SecondRecord`] -> [`Ack`], one per second |
//! | `volley.v1.run.<run>.agent.<name>.hb` | agent | [`Heartbeat`], each second |
//! | `volley.v1.run.<run>.agent.<name>.part` | agent | [`SharePart`] -> [`Ack`], a large share's pieces, before its final record |
//! | `volley.v1.run.<run>.agent.<name>.final` | agent | [`FinalRecord`] -> [`Ack`], once |
//! | `volley.v1.run.<run>.stop` | coordinator | [`Stop`] |
//!
//! Encoding is MessagePack (`rmp-serde`, fields by name): the per-second records carry
//! HDR histograms as V2 bytes, which JSON would inflate three- to fourfold as arrays of
//! numbers or base64, and, unlike `postcard`, named fields let a newer peer add one
//! without breaking an older reader.
//!
//! Every subject names its sender's own token where it can (`hello.<name>`, the
//! streams' `agent.<name>`), so the bus's permissions ([`crate::auth`]) can give each
//! agent its own subjects and nobody else's.

use crate::share::Share;
use crate::AgentsError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use std::collections::BTreeMap;

/// Bus protocol version, in every message and in every subject's `v1`.
pub const PROTO: u32 = 1;

const ROOT: &str = "volley.v1";

/// True when `s` can be one subject token: non-empty, printable ASCII, none of NATS's
/// separators or wildcards (`.`, `*`, `>`), no whitespace.
pub fn valid_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'.' | b'*' | b'>'))
}

/// Checks a run id or agent name before it goes into a subject.
pub fn check_token(kind: &str, s: &str) -> Result<(), AgentsError> {
    if valid_token(s) {
        Ok(())
    } else {
        Err(AgentsError::Name(format!(
            "{kind} {s:?} cannot be a bus subject token (1-64 printable characters, no '.', '*', '>')"
        )))
    }
}

/// The subjects one run and its agents use.
pub mod subject {
    use super::ROOT;

    /// Where one idle agent announces itself.
    pub fn hello(agent: &str) -> String {
        format!("{ROOT}.hello.{agent}")
    }

    /// Every agent's hello (the coordinator's lobby).
    pub fn lobby() -> String {
        format!("{ROOT}.hello.*")
    }

    /// The agent name of a subject from [`lobby`].
    pub fn parse_hello(subject: &str) -> Option<&str> {
        let name = subject.strip_prefix(ROOT)?.strip_prefix(".hello.")?;
        (!name.contains('.')).then_some(name)
    }

    /// Clock probes for one agent.
    pub fn probe(agent: &str) -> String {
        format!("{ROOT}.agent.{agent}.probe")
    }

    /// Assignments for one agent.
    pub fn assign(agent: &str) -> String {
        format!("{ROOT}.agent.{agent}.assign")
    }

    /// Where the coordinator tells one agent that it is out of a run (declared lost,
    /// or not part of it): the agent stops its load and exits non-zero.
    pub fn stale(agent: &str) -> String {
        format!("{ROOT}.agent.{agent}.stale")
    }

    /// One agent's stream of one kind (`sec`, `hb`, `final`) in one run.
    pub fn stream(run: &str, agent: &str, kind: &str) -> String {
        format!("{ROOT}.run.{run}.agent.{agent}.{kind}")
    }

    /// Every agent's streams of one run (the coordinator's subscription).
    pub fn all_streams(run: &str) -> String {
        format!("{ROOT}.run.{run}.agent.*.*")
    }

    /// The run's stop broadcast.
    pub fn stop(run: &str) -> String {
        format!("{ROOT}.run.{run}.stop")
    }

    /// The agent name and stream kind of a subject from [`all_streams`].
    pub fn parse_stream<'a>(run: &str, subject: &'a str) -> Option<(&'a str, &'a str)> {
        let rest = subject.strip_prefix(ROOT)?.strip_prefix(".run.")?;
        let rest = rest.strip_prefix(run)?.strip_prefix(".agent.")?;
        let (agent, kind) = rest.split_once('.')?;
        (!kind.contains('.')).then_some((agent, kind))
    }
}

/// A bus message: its name for errors, and its version.
pub trait Message: Serialize + DeserializeOwned {
    /// Name used in errors.
    const WHAT: &'static str;
    /// The version it was sent with.
    fn proto(&self) -> u32;
    /// Who sent it, for version errors.
    fn peer(&self) -> &str {
        "peer"
    }
}

/// Encodes a message.
pub fn encode<M: Message>(m: &M) -> Result<Vec<u8>, AgentsError> {
    rmp_serde::to_vec_named(m).map_err(|source| AgentsError::Encode {
        what: M::WHAT,
        source,
    })
}

/// Decodes a message and checks its version.
pub fn decode<M: Message>(bytes: &[u8]) -> Result<M, AgentsError> {
    let m: M = rmp_serde::from_slice(bytes).map_err(|source| AgentsError::Decode {
        what: M::WHAT,
        source,
    })?;
    if m.proto() != PROTO {
        return Err(AgentsError::Version {
            peer: m.peer().to_string(),
            theirs: m.proto(),
            ours: PROTO,
        });
    }
    Ok(m)
}

macro_rules! message {
    ($t:ty, $what:literal) => {
        impl Message for $t {
            const WHAT: &'static str = $what;
            fn proto(&self) -> u32 {
                self.proto
            }
        }
    };
    ($t:ty, $what:literal, $peer:ident) => {
        impl Message for $t {
            const WHAT: &'static str = $what;
            fn proto(&self) -> u32 {
                self.proto
            }
            fn peer(&self) -> &str {
                &self.$peer
            }
        }
    };
}

/// An idle agent announcing itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol version.
    pub proto: u32,
    /// Its name, unique on the bus.
    pub name: String,
    /// A random token of this agent process, echoed inside its signed assignment: an
    /// assignment recorded earlier (for another agent process) does not carry it.
    #[serde(default)]
    pub nonce: String,
}
message!(Hello, "hello", name);

/// A clock probe; the coordinator keeps its own send and receive stamps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRequest {
    /// Protocol version.
    pub proto: u32,
    /// Probe number, echoed.
    pub seq: u32,
}
message!(ProbeRequest, "probe request");

/// The agent's stamps for one probe (wall clock, ns since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReply {
    /// Protocol version.
    pub proto: u32,
    /// The request's number.
    pub seq: u32,
    /// When the request arrived.
    pub t1: i64,
    /// When this reply left.
    pub t2: i64,
}
message!(ProbeReply, "probe reply");

/// An agent's part of one run and when to start it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// Protocol version.
    pub proto: u32,
    /// The run's id (a subject token).
    pub run: String,
    /// Its share of the load.
    pub share: Share,
    /// The run's start instant T0 on the coordinator's wall clock (ns since the epoch).
    pub t0_ns: i64,
    /// This agent's clock minus the coordinator's, as measured.
    pub offset_ns: i64,
    /// Its own start after T0 (staggered starts), milliseconds.
    pub delay_ms: u64,
    /// What to load (`None`: the caller's load function knows; the tests' synthetic
    /// loads).
    #[serde(default)]
    pub load: Option<crate::load::LoadSpec>,
    /// The agent it is for.
    #[serde(default)]
    pub agent: String,
    /// The nonce of that agent's hello (see [`Hello::nonce`]).
    #[serde(default)]
    pub nonce: String,
}
message!(Assignment, "assignment");

impl Assignment {
    /// The warm-up its load begins with (zero without a load): the agent starts that
    /// long before T0 plus its delay, so that its measured seconds begin there.
    pub fn warmup(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.load.as_ref().map_or(0, |l| l.warmup_ms))
    }
}

/// An [`Assignment`] as it travels: its MessagePack bytes and their HMAC-SHA256 under
/// the study's assignment key (empty on a bus whose security is off). The agent checks
/// the MAC over the very bytes it received, so no re-encoding can disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignedAssignment {
    /// Protocol version.
    pub proto: u32,
    /// The encoded [`Assignment`].
    pub body: ByteBuf,
    /// Its HMAC (see [`crate::auth`]).
    pub mac: ByteBuf,
}
message!(SignedAssignment, "signed assignment");

/// The agent's answer to its assignment: its deadline is armed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    /// Protocol version.
    pub proto: u32,
    /// Its name.
    pub name: String,
    /// How far past its start instant the assignment arrived, ms (0: on time).
    pub late_ms: u64,
    /// Set when the agent refuses the assignment (its target is outside the agent's
    /// allow-list): why, in its words. Nothing was armed.
    #[serde(default)]
    pub refused: Option<String>,
}
message!(Ready, "ready", name);

/// Counters of one window (a second, or a whole share).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Requests whose intended send time fell in the window, whatever their outcome.
    pub requests: u64,
    /// Of those, accepted responses.
    pub ok: u64,
    /// Of those, failures.
    pub errors: u64,
    /// Failures by kind (the engine's `ErrorKind` names).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Response bytes read from the wire.
    pub wire_bytes: u64,
}

impl Counters {
    /// `self += o`.
    pub fn add(&mut self, o: &Counters) {
        self.requests += o.requests;
        self.ok += o.ok;
        self.errors += o.errors;
        for (k, v) in &o.errors_by_kind {
            *self.errors_by_kind.entry(k.clone()).or_default() += v;
        }
        self.wire_bytes += o.wire_bytes;
    }
}

/// Histogram name of the latency phases are judged on (the recorder's `response_time`,
/// from the intended send time).
pub const RESPONSE_TIME: &str = "response_time";

/// One agent's second: keyed by whole seconds since T0 of the *intended* send time, so
/// every agent's second `s` covers the same instant of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondRecord {
    /// Protocol version.
    pub proto: u32,
    /// Who sent it.
    pub agent: String,
    /// Seconds since T0.
    pub second: u64,
    /// Histograms by metric name (`response_time`, `service_time`, ...), HdrHistogram
    /// V2 bytes (compressed or not; no bytes = empty), microseconds.
    pub hists: BTreeMap<String, ByteBuf>,
    /// The second's counters.
    pub counters: Counters,
    /// The agent's self-check: its generator, not the server, bounded this second.
    pub generator_bound: bool,
    /// The second's full counters (status classes, body bytes, connections, cap hits):
    /// with `resources`, what the coordinator needs to rebuild the merged recorder's
    /// seconds, which the agent does not send again in its final record. `None` from
    /// an agent that sends its seconds in the final record.
    #[serde(default)]
    pub counts: Option<volley_metrics::Counts>,
    /// The agent's generator CPU and CPU pressure in this second, when read.
    #[serde(default)]
    pub resources: Option<volley_metrics::SecondResources>,
}
message!(SecondRecord, "second record", agent);

/// Proof of life, each second while assigned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Protocol version.
    pub proto: u32,
    /// Who sent it.
    pub agent: String,
    /// Heartbeat number.
    pub seq: u64,
    /// Second records sent so far.
    pub records_sent: u64,
}
message!(Heartbeat, "heartbeat", agent);

/// Why an agent's load ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ending {
    /// The share was done.
    Done,
    /// The coordinator said stop.
    Stopped,
    /// The load function failed (see [`FinalRecord::error`]).
    Failed,
    /// The bus was away longer than the agent's bound: the load was stopped, and this
    /// final record (with the seconds buffered before it) went out when the bus came
    /// back.
    BusLost,
}

/// An agent's last word for a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalRecord {
    /// Protocol version.
    pub proto: u32,
    /// Who sent it.
    pub agent: String,
    /// Second records sent (the coordinator checks it received as many).
    pub records_sent: u64,
    /// The last second it sent a record for.
    pub last_second: Option<u64>,
    /// Counters over the whole share.
    pub totals: Counters,
    /// How the load ended.
    pub ending: Ending,
    /// The load function's error, when it failed.
    pub error: Option<String>,
    /// Its whole share as bytes, when the load kept one and it fits one message.
    #[serde(default)]
    pub share: Option<Box<crate::load::ShareRecord>>,
    /// How many [`SharePart`]s carried the share instead (0: none): a long run's share
    /// outgrows the bus's largest message (NATS's default is 1 MB, about 15 minutes of
    /// seconds), so it travels in pieces sent, each acknowledged, before this record.
    #[serde(default)]
    pub share_parts: u32,
}
message!(FinalRecord, "final record", agent);

/// Bytes of an encoded share per [`SharePart`]: well under NATS's default largest
/// message (1 MB), leaving room for the envelope.
pub const SHARE_PART_BYTES: usize = 256 * 1024;

/// Most pieces one share may come in (1 GB): more is a malformed or hostile peer.
pub const MAX_SHARE_PARTS: u32 = 4096;

/// One piece of an agent's encoded [`crate::load::ShareRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharePart {
    /// Protocol version.
    pub proto: u32,
    /// Who sent it.
    pub agent: String,
    /// Its place, from 0.
    pub index: u32,
    /// How many pieces the share comes in.
    pub total: u32,
    /// Its bytes of the encoded share.
    pub bytes: ByteBuf,
}
message!(SharePart, "share part", agent);

/// The share encoded and cut into pieces of at most [`SHARE_PART_BYTES`] (none when it
/// fits into the final record itself).
pub fn share_parts(
    agent: &str,
    share: &crate::load::ShareRecord,
) -> Result<Vec<SharePart>, AgentsError> {
    let bytes = rmp_serde::to_vec_named(share).map_err(|source| AgentsError::Encode {
        what: "share",
        source,
    })?;
    if bytes.len() <= SHARE_PART_BYTES {
        return Ok(Vec::new());
    }
    let total = bytes.len().div_ceil(SHARE_PART_BYTES) as u32;
    Ok(bytes
        .chunks(SHARE_PART_BYTES)
        .enumerate()
        .map(|(i, c)| SharePart {
            proto: PROTO,
            agent: agent.to_string(),
            index: i as u32,
            total,
            bytes: ByteBuf::from(c.to_vec()),
        })
        .collect())
}

/// The share put back together from its pieces, in order.
pub fn share_from_parts(
    agent: &str,
    parts: &BTreeMap<u32, ByteBuf>,
    total: u32,
) -> Result<crate::load::ShareRecord, AgentsError> {
    // Every piece was checked to lie below `total` as it arrived: as many as `total`
    // means each one of them.
    if parts.len() as u32 != total {
        return Err(AgentsError::Implausible {
            agent: agent.to_string(),
            detail: format!("its share came in {} of {total} pieces", parts.len()),
        });
    }
    let bytes: Vec<u8> = parts.values().flat_map(|b| b.iter().copied()).collect();
    rmp_serde::from_slice(&bytes).map_err(|source| AgentsError::Decode {
        what: "share",
        source,
    })
}

/// The coordinator's receipt for a [`SecondRecord`] or [`FinalRecord`]: the agent
/// keeps a record in its outbox until one comes (records are requests, not plain
/// publishes, so that a record sent into a bus that is briefly away is sent again
/// rather than lost; see docs/methodology.md, "When the bus is away").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    /// Protocol version.
    pub proto: u32,
    /// False when the coordinator refused it (the agent had been declared lost): the
    /// agent drops it all the same, and a [`Stale`] follows.
    pub kept: bool,
}
message!(Ack, "ack");

/// The coordinator telling one agent it is out of a run: it was declared lost (three
/// heartbeats missed) and a lost agent is never taken back into a running measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stale {
    /// Protocol version.
    pub proto: u32,
    /// The run it is out of (an agent of another run ignores it).
    pub run: String,
    /// Why, for the agent's one error line.
    pub reason: String,
}
message!(Stale, "stale");

/// The coordinator ending a run early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stop {
    /// Protocol version.
    pub proto: u32,
    /// Why, for the agents' logs.
    pub reason: String,
}
message!(Stop, "stop");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_per_run_and_per_agent() {
        assert_eq!(
            subject::stream("r1", "a", "sec"),
            "volley.v1.run.r1.agent.a.sec"
        );
        assert_eq!(subject::probe("a"), "volley.v1.agent.a.probe");
        assert_eq!(subject::stop("r1"), "volley.v1.run.r1.stop");
        assert_eq!(subject::parse_hello(&subject::hello("inj2")), Some("inj2"));
        assert_eq!(subject::parse_hello("volley.v1.hello.a.b"), None);
        let s = subject::stream("r1", "inj-3", "hb");
        assert_eq!(subject::parse_stream("r1", &s), Some(("inj-3", "hb")));
        assert_eq!(subject::parse_stream("r2", &s), None);
        assert_eq!(subject::parse_stream("r1", "volley.v1.run.r1.stop"), None);
    }

    #[test]
    fn tokens_refuse_separators_and_wildcards() {
        for ok in ["a", "inj-3", "host_1:2"] {
            assert!(valid_token(ok), "{ok}");
        }
        for bad in ["", "a.b", "*", ">", "a b", "é"] {
            assert!(!valid_token(bad), "{bad}");
        }
        assert!(check_token("agent name", "a.b").is_err());
    }

    #[test]
    fn records_round_trip_with_bytes_kept_as_bytes() {
        let mut hists = BTreeMap::new();
        hists.insert(
            RESPONSE_TIME.to_string(),
            ByteBuf::from(vec![0u8, 1, 2, 255]),
        );
        let rec = SecondRecord {
            proto: PROTO,
            agent: "a".into(),
            second: 7,
            hists,
            counters: Counters {
                requests: 3,
                ok: 2,
                errors: 1,
                ..Counters::default()
            },
            generator_bound: true,
            counts: None,
            resources: None,
        };
        let bytes = encode(&rec).unwrap();
        // MessagePack `bin`: the histogram bytes appear as they are, not as numbers.
        assert!(bytes.windows(4).any(|w| w == [0u8, 1, 2, 255]));
        assert_eq!(decode::<SecondRecord>(&bytes).unwrap(), rec);
    }

    #[test]
    fn another_version_or_another_message_is_a_typed_error() {
        let hello = Hello {
            proto: PROTO + 1,
            name: "a".into(),
            nonce: String::new(),
        };
        let bytes = encode(&hello).unwrap();
        assert!(matches!(
            decode::<Hello>(&bytes),
            Err(AgentsError::Version {
                theirs: 2,
                ours: 1,
                ..
            })
        ));
        let stop = encode(&Stop {
            proto: PROTO,
            reason: "x".into(),
        })
        .unwrap();
        assert!(matches!(
            decode::<SecondRecord>(&stop),
            Err(AgentsError::Decode { .. })
        ));
    }

    #[test]
    fn counters_add_by_kind() {
        let mut a = Counters {
            requests: 2,
            errors: 1,
            ..Counters::default()
        };
        a.errors_by_kind.insert("timeout".into(), 1);
        let mut b = a.clone();
        b.errors_by_kind.insert("reset".into(), 4);
        a.add(&b);
        assert_eq!((a.requests, a.errors), (4, 2));
        assert_eq!(a.errors_by_kind["timeout"], 2);
        assert_eq!(a.errors_by_kind["reset"], 4);
    }
}
