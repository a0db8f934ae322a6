//! The study file: TOML as written by the user, parsed strictly (`deny_unknown_fields`)
//! so a typo is an error naming its line and key, never a silently ignored setting.
//!
//! This is the raw side, kept apart from the resolved plan: strings and options as typed. [`crate::plan`]
//! resolves it into steps; nothing here touches the network or the clock.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use crate::StudyError;

/// A whole study file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    /// Name of the study (stored with every run).
    pub name: String,
    /// What it reproduces, in a sentence.
    #[serde(default)]
    pub description: Option<String>,
    /// `sweep` (every point of the axes) or `search` (capacity search on the rate).
    #[serde(default)]
    pub mode: Mode,
    /// The servers loaded, in order.
    #[serde(rename = "target")]
    pub targets: Vec<TargetDef>,
    /// What the managed targets serve.
    #[serde(default)]
    pub fixture: Option<FixtureDef>,
    /// The request mixes; each is one more point on an implicit `workload` axis.
    #[serde(rename = "workload")]
    pub workloads: Vec<WorkloadDef>,
    /// The load model every workload uses unless it names its own.
    #[serde(default)]
    pub load: LoadDef,
    /// The swept axes.
    #[serde(default)]
    pub sweep: SweepDef,
    /// Step length, warm-up, cool-down, repeats and their order.
    #[serde(default)]
    pub steps: StepsDef,
    /// Service-level objectives a rate step is judged against.
    #[serde(default)]
    pub slo: SloDef,
    /// Options of search mode.
    #[serde(default)]
    pub search: SearchDef,
    /// Several injectors at once (agents on a private bus), one more sweep axis.
    #[serde(default)]
    pub injectors: Option<InjectorsDef>,
    /// Tunings of the targets (`[[variant]]`), run as the `variants` sweep axis.
    #[serde(default, rename = "variant")]
    pub variants: Vec<VariantDef>,
}

/// `[[variant]]`: one tuning of the targets (issue 23), named in `sweep.variants`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantDef {
    /// Name in `sweep.variants` and in results.
    pub name: String,
    /// Server knobs (`sendfile = false`, `backlog = 1024`, ...), each kind's own syntax.
    #[serde(default)]
    pub server: std::collections::BTreeMap<String, toml::Value>,
    /// Raw configuration text per kind (`raw.nginx = "..."`), verbatim.
    #[serde(default)]
    pub raw: std::collections::BTreeMap<String, String>,
    /// Sysctls for the target's namespace.
    #[serde(default)]
    pub sysctl: std::collections::BTreeMap<String, toml::Value>,
    /// Route switches in the target's namespace (`quickack = true`).
    #[serde(default)]
    pub route: std::collections::BTreeMap<String, toml::Value>,
    /// Only these targets (by name) run this variant; two tables may share a name when
    /// their targets differ, so "tuned" can mean each server's own tuning (the
    /// built-in server has no sendfile or defer-accept switch to tune).
    #[serde(default)]
    pub targets: Option<Vec<String>>,
}

/// `[injectors]`: how many injectors load the target at once, and how they start.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectorsDef {
    /// Injector counts: one value or a list (a sweep axis).
    pub count: CountAxis,
    /// `"together"` (the default) or `"stagger"`.
    #[serde(default)]
    pub start: Option<String>,
    /// With `start = "stagger"` (or alone): injector `i` starts `i * stagger` after T0;
    /// whole seconds.
    #[serde(default)]
    pub stagger: Option<String>,
    /// `"local"` (processes on this host), `"netns"` (each injector in a network
    /// namespace of its own, the managed targets in another, on a bridge; links shaped
    /// by `links`), `"ssh"` (on `hosts`, started over SSH) or `"kubernetes"` (the pods
    /// of the Job `volley agents manifest` writes; volley waits for them on `bus_url`).
    #[serde(default)]
    pub placement: Option<String>,
    /// With `placement = "ssh"`: `[user@]host[:port]` entries, or `"local"` for a process
    /// on this host; injector `i` (from 0) runs on `hosts[i % len]`.
    #[serde(default)]
    pub hosts: Option<Vec<String>>,
    /// With `placement = "ssh"`: OpenSSH options (`-o`), e.g. `"IdentityFile=~/.ssh/lab"`;
    /// `volley study run --ssh-option` adds more.
    #[serde(default)]
    pub ssh_options: Option<Vec<String>>,
    /// With `placement = "ssh"`: the directory of the binary on the hosts (default
    /// `.cache/volley/bin` in the login's home).
    #[serde(default)]
    pub remote_dir: Option<String>,
    /// The bus the agents dial, `nats://ADDR[:PORT]`: needed when agents run on other
    /// hosts, whose loopback is not ours.
    #[serde(default)]
    pub bus_url: Option<String>,
    /// `"private"` (volley starts nats-server listening on `bus_url`'s address; the
    /// default with ssh) or `"existing"` (a server already there; the default with
    /// kubernetes).
    #[serde(default)]
    pub bus: Option<String>,
    /// `"on"` (the default: TLS on every bus connection, per-study credentials, NATS
    /// permissions, signed assignments) or `"off"` (a bus in the clear, for a network
    /// where everyone is trusted; the step's notes say so).
    #[serde(default)]
    pub bus_security: Option<String>,
    /// With `bus = "existing"` and the security on: the coordinator's credentials file
    /// (JSON: user, password, CA, the study's assignment key), as `volley agents
    /// manifest` writes it.
    #[serde(default)]
    pub bus_credentials: Option<String>,
    /// With `bus = "existing"` and the security on: the credentials file of each agent
    /// volley starts (local, netns or ssh); `{name}` in it is the agent's name
    /// (`inj1`...), for a server with a user per agent.
    #[serde(default)]
    pub agent_credentials: Option<String>,
    /// How long to wait for every agent to join (default 30s; 5m with kubernetes,
    /// where pods are scheduled and images pulled first).
    #[serde(default)]
    pub ready_timeout: Option<String>,
    /// With `placement = "netns"`: the links of consecutive groups of injectors, in
    /// order (injectors past the last group are unshaped).
    #[serde(default)]
    pub links: Option<Vec<LinkDef>>,
    /// `"split"` (the default: the step's requests, rate and connections are the sum
    /// over the injectors) or `"each"` (every injector gets the step's figures, as in
    /// seed 003's power test where each sent 5000 requests).
    #[serde(default)]
    pub share: Option<String>,
    /// Start with at least this many when not all are ready within the bound.
    #[serde(default)]
    pub min_agents: Option<u32>,
}

/// `[[injectors.links]]`: one group of injectors on the same kind of link.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDef {
    /// How many consecutive injectors have this link.
    pub injectors: u32,
    /// Bandwidth each way: `"10mbit"`, `"100mbit"`, `"1gbit"`, `"512kbit"`.
    #[serde(default)]
    pub rate: Option<String>,
    /// Added round trip, e.g. `"68ms"` (through Toxiproxy: the kernel here has no netem).
    #[serde(default)]
    pub delay: Option<String>,
}

/// One count or a list of counts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum CountAxis {
    /// One value.
    One(u32),
    /// A list.
    Many(Vec<u32>),
}

impl Default for CountAxis {
    fn default() -> Self {
        CountAxis::One(1)
    }
}

impl CountAxis {
    /// The values in order.
    pub fn values(&self) -> Vec<u32> {
        match self {
            CountAxis::One(n) => vec![*n],
            CountAxis::Many(v) => v.clone(),
        }
    }
}

/// A caldav workload's users: counts to sweep, or the word `"search"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum UsersAxis {
    /// One count or a list of counts.
    Counts(CountAxis),
    /// A word; only `"search"` has a meaning (checked when the plan is resolved, so
    /// the error can name the workload).
    Word(String),
}

/// Sweep every point, or search for the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Run every point of the sweep axes.
    #[default]
    Sweep,
    /// Double the rate until a step fails, then bisect (volley_analysis::knee::Search).
    Search,
}

/// One target.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDef {
    /// Name in results (e.g. `nginx`, `nginx-25pct`); unique in the study.
    pub name: String,
    /// builtin, nginx, apache-event, apache-prefork, lighttpd, caddy or external.
    pub kind: Spanned<String>,
    /// Worker processes or threads (default 1).
    #[serde(default)]
    pub workers: Option<u32>,
    /// Server-side keep-alive (default on).
    #[serde(default)]
    pub keepalive: Option<bool>,
    /// CPU quota as a share of one CPU, e.g. 0.25 (cgroup cpu.max / cfs_quota_us).
    #[serde(default)]
    pub cpu_quota: Option<f64>,
    /// Pin to this many cores (CPUs 0..cores).
    #[serde(default)]
    pub cores: Option<u32>,
    /// Memory cap, e.g. `"8M"` (cgroup memory.max; seed 000's box had 8 MB).
    #[serde(default)]
    pub memory_max: Option<String>,
    /// External targets: base URL `http://127.0.0.1:PORT`.
    #[serde(default)]
    pub url: Option<String>,
    /// External targets: a pid to monitor (never signalled).
    #[serde(default)]
    pub pid: Option<u32>,
    /// Serve calendars to `caldav` workloads: the built-in server in multi-user mode,
    /// nginx / Apache / lighttpd with a plain WebDAV tree (Radicale and Xandikos always
    /// do). Accounts `user1`.. are made for the most users a workload asks of it.
    #[serde(default)]
    pub dav: Option<bool>,
    /// What to do when this managed target dies: `"never"` (the default: its remaining
    /// steps are skipped and the study ends incomplete) or `"next-step"` (start it again
    /// for the next step, so a search goes on past one crash).
    #[serde(default)]
    pub restart: Restart,
}

/// A managed target's restart policy (`restart = "next-step"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// A dead target stays dead: its remaining steps are skipped.
    #[default]
    Never,
    /// A dead target is started again before the next step that needs it; the death
    /// stays recorded with the step during which it happened.
    NextStep,
}

/// The fixture served by managed targets.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureDef {
    /// uniserve, sizes or groupware (ignored when `docroot` is given).
    #[serde(default)]
    pub kind: Option<FixtureKind>,
    /// groupware: users.
    #[serde(default)]
    pub users: Option<u32>,
    /// groupware: items per user.
    #[serde(default)]
    pub items: Option<u32>,
    /// Seed of the generated files.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Serve this directory instead of a generated fixture.
    #[serde(default)]
    pub docroot: Option<PathBuf>,
}

/// Generated fixture sets (volley-fixtures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FixtureKind {
    /// index1..5.html with 1..5 images (seed 003).
    Uniserve,
    /// 700 B .. 145 KB files (seed 000).
    Sizes,
    /// The example site `volley log example` logs (a replay's pages).
    Site,
    /// iCalendar collections (seed 000).
    Groupware,
}

/// One request mix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDef {
    /// Name in results (e.g. `L1`).
    pub name: String,
    /// `"http"` (the default: requests for `paths`), `"caldav"`: an office of calendar
    /// clients (volley-office) syncing against the target's DAV accounts, or `"replay"`:
    /// the access log `log` replayed, each step at speed rate / the log's mean rate.
    #[serde(default)]
    pub kind: Option<String>,
    /// replay: the access log (plain or gzip, Combined, Common or JSON lines), from the
    /// directory volley runs in.
    #[serde(default)]
    pub log: Option<String>,
    /// replay: each replayed client connects from its own loopback address (127.0.0.2,
    /// .3, ... in order of appearance), so the server's own log tells the log's clients
    /// apart (`volley bench --replay --client-addresses`). Needs targets on this host's
    /// IPv4 loopback.
    #[serde(default)]
    pub client_addresses: Option<bool>,
    /// Request paths (`/index1.html`), sent to the target's address (http workloads).
    #[serde(default)]
    pub paths: Vec<String>,
    /// caldav: virtual users, one value or a list (a sweep axis), or `"search"`: the
    /// most users carried, searched like a rate (`[search]` start_users, max_users).
    #[serde(default)]
    pub users: Option<UsersAxis>,
    /// caldav: client profiles, each `name` or `name:weight` (thunderbird, davx5,
    /// evolution, apple); default every profile with weight 1.
    #[serde(default)]
    pub profiles: Option<Vec<String>>,
    /// caldav: decisions per person per working day (default 250).
    #[serde(default)]
    pub decisions: Option<u32>,
    /// caldav: how many times faster than real time the working day runs.
    #[serde(default)]
    pub compress: Option<f64>,
    /// caldav: "warm" (the default: every device's first sync and one poll interval
    /// run before the measured window) or "cold" (the first syncs inside it).
    #[serde(default)]
    pub day_start: Option<String>,
    /// caldav, users searched: this workload's first count, instead of `[search]
    /// start_users` (a server set up at a few people a second searches from fewer).
    #[serde(default)]
    pub start_users: Option<u32>,
    /// caldav, users searched: this workload's most users, instead of `[search]
    /// max_users`.
    #[serde(default)]
    pub max_users: Option<u32>,
    /// Only these targets (by name) run this workload.
    #[serde(default)]
    pub targets: Option<Vec<String>>,
    /// same, sequential, random or weighted (default: same for one path, sequential for more).
    #[serde(default)]
    pub order: Option<OrderKind>,
    /// Weights for `weighted`, one per path.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// Sequential order: consecutive requests per path (default 1).
    #[serde(default)]
    pub block: Option<u64>,
    /// HTTP method (default GET).
    #[serde(default)]
    pub method: Option<String>,
    /// Request body.
    #[serde(default)]
    pub body: Option<String>,
    /// Extra headers `Name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Seed of random / weighted order.
    #[serde(default)]
    pub seed: Option<u64>,
    /// This workload's own load model (replaces the study's `[load]`).
    #[serde(default)]
    pub load: Option<LoadDef>,
    /// This workload's own rate / concurrency / keepalive axes (replace the study's).
    #[serde(default)]
    pub sweep: Option<SweepDef>,
    /// Requests per step for this workload (replaces `[steps] requests`): seed 003's L2
    /// is 5 x 1000 GETs while L1 and L3 are 1000.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Cold vs warm TTFB (seed 002): every step of this workload starts its target
    /// afresh, times the first request for the first path on its own, then measures the
    /// warm ones as usual.
    #[serde(default)]
    pub cold_start: Option<bool>,
    /// Expected throughput of one step of this workload, requests per second (all
    /// connections together); replaces `[steps] expected_rate`. Only the duration
    /// estimate and the ETA use it.
    #[serde(default)]
    pub expected_rate: Option<Spanned<f64>>,
}

/// Request order within a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderKind {
    /// Always the first path.
    Same,
    /// Each path `block` times, cycling.
    Sequential,
    /// Uniformly at random.
    Random,
    /// In proportion to `weights`.
    Weighted,
}

/// The load model.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadDef {
    /// closed (ab/wrk) or open (httperf/wrk2); open when a rate is given.
    #[serde(default)]
    pub model: Option<ModelKind>,
    /// Closed loop: connections. Open loop: connections opened up front.
    #[serde(default)]
    pub concurrency: Option<u32>,
    /// Open loop: requests per second (unless swept).
    #[serde(default)]
    pub rate: Option<f64>,
    /// constant or poisson (default constant).
    #[serde(default)]
    pub arrival: Option<ArrivalKind>,
    /// Generator threads (default 1).
    #[serde(default)]
    pub threads: Option<u32>,
    /// Open loop: most connections at once (default 256).
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// Per-request timeout, e.g. `10s` (default 10s).
    #[serde(default)]
    pub timeout: Option<Spanned<String>>,
    /// Client keep-alive (default on), unless swept.
    #[serde(default)]
    pub keepalive: Option<bool>,
    /// Seed of the Poisson schedule.
    #[serde(default)]
    pub seed: Option<u64>,
    /// HTTPS: managed targets serve TLS with a throw-away CA the load trusts; external
    /// targets need an `https://` URL (or `insecure`).
    #[serde(default)]
    pub tls: Option<bool>,
    /// HTTP/2 (by ALPN over TLS; prior-knowledge h2c for a plain external target).
    #[serde(default)]
    pub http2: Option<bool>,
    /// HTTP/2 streams per connection (default 1, so `concurrency` keeps its meaning).
    #[serde(default)]
    pub streams: Option<u32>,
    /// Ask for compressed bodies: `br` or `gzip` (sent as Accept-Encoding; managed
    /// targets are configured to compress, Brotli at 11 and gzip at 6).
    #[serde(default)]
    pub compressed: Option<String>,
    /// Accept any server certificate (external self-signed targets).
    #[serde(default)]
    pub insecure: Option<bool>,
}

/// closed or open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Each connection sends when its previous reply arrived.
    Closed,
    /// Requests on a precomputed schedule.
    Open,
}

/// constant or poisson.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalKind {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps.
    Poisson,
}

/// Swept axes; each given axis multiplies the number of points.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepDef {
    /// Offered rates: a list or `{ from, to, step }` (open loop).
    #[serde(default)]
    pub rate: Option<RateAxis>,
    /// Closed-loop concurrencies.
    #[serde(default)]
    pub concurrency: Option<Vec<u32>>,
    /// CPU quotas, shares of one CPU (the target is started once per value).
    #[serde(default)]
    pub cpu_quota: Option<Vec<f64>>,
    /// Core counts the target is pinned to (started once per value).
    #[serde(default)]
    pub cores: Option<Vec<u32>>,
    /// Client keep-alive on and/or off.
    #[serde(default)]
    pub keepalive: Option<Vec<bool>>,
    /// HTTP versions, each a series of its own on the same targets: `"h1"`, `"h2"`,
    /// `"h3"` (h2 and h3 over TLS, with `load.streams` streams per connection).
    #[serde(default)]
    pub protocol: Option<Vec<String>>,
    /// Only these targets (by name).
    #[serde(default)]
    pub target: Option<Vec<String>>,
    /// Tunings by `[[variant]]` name (`"default"`: volley's generated configuration),
    /// or `"each"`: the default, each knob of every variant alone and every variant
    /// whole. Each target is started once per variant, and the variants of one target
    /// are interleaved at every point (A B A B), never run as one block then the other.
    #[serde(default)]
    pub variants: Option<VariantsAxis>,
}

/// `sweep.variants`: a list of names, or one word (`"each"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum VariantsAxis {
    /// Names: `"default"`, a `[[variant]]`'s, or one knob of it (`"tuned:somaxconn"`).
    List(Vec<String>),
    /// `"each"` (any other word is refused when the plan is resolved).
    Word(String),
}

/// A list of rates or an arithmetic range.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum RateAxis {
    /// Explicit rates.
    List(Vec<f64>),
    /// `from`, `from + step`, ... up to and including `to`.
    Range {
        /// First rate.
        from: f64,
        /// Last rate (inclusive).
        to: f64,
        /// Increment.
        step: f64,
    },
}

/// Step timing and repetition.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepsDef {
    /// Measured length of a step, e.g. `30s`.
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// Or a request count per step (ab's -n); the first limit reached ends the step.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Load before measuring, discarded (default 1s).
    #[serde(default)]
    pub warmup: Option<Spanned<String>>,
    /// Rest after each step (default 1s).
    #[serde(default)]
    pub cooldown: Option<Spanned<String>>,
    /// Runs of every point (default 1).
    #[serde(default)]
    pub repeats: Option<u32>,
    /// interleaved (A B A B, default), random (shuffled within each round) or sequential.
    #[serde(default)]
    pub order: Option<RepeatOrder>,
    /// Seed of the `random` order.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Times a step spoiled by noise (generator-bound, machine-stalled, or run while
    /// the machine was busy) is measured again, later in the study (default 2).
    #[serde(default)]
    pub retries: Option<u32>,
    /// Expected throughput of one request-count step, requests per second (all
    /// connections together, e.g. 40 for Brotli 11 under a CPU cap). Only the duration
    /// estimate and the ETA use it: without it a request-count step is guessed at 2000
    /// req/s per connection, far too fast for slow requests.
    #[serde(default)]
    pub expected_rate: Option<Spanned<f64>>,
}

/// How repeats are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RepeatOrder {
    /// Round r runs every point once, in file order: A B A B.
    #[default]
    Interleaved,
    /// Like interleaved, each round shuffled with a seed.
    Random,
    /// All repeats of a point back to back: A A B B.
    Sequential,
}

/// SLOs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloDef {
    /// Every window's p99 must be within this, e.g. `100ms` (default 1s).
    #[serde(default)]
    pub p99: Option<Spanned<String>>,
    /// Largest allowed error share, 0..1 (default 0.01).
    #[serde(default)]
    pub error_share: Option<f64>,
}

/// Search-mode options.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchDef {
    /// First rate tried (default 100).
    #[serde(default)]
    pub start_rate: Option<f64>,
    /// Stop when the bracket is within this share of the rate (default 0.02).
    #[serde(default)]
    pub resolution: Option<f64>,
    /// Runs per decision near the edge (default 3).
    #[serde(default)]
    pub repeats: Option<u32>,
    /// Never offer more than this (default 100000).
    #[serde(default)]
    pub max_rate: Option<f64>,
    /// At most this many steps per search (default 40).
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// Whole searches per cell, run interleaved (default 1). One search's interval
    /// covers its own runs near the edge, not the spread from one search to the next,
    /// so comparing capacities takes two or more (docs/methodology.md, "Capacity
    /// search").
    #[serde(default)]
    pub passes: Option<u32>,
    /// Users search: the first count tried (default 10).
    #[serde(default)]
    pub start_users: Option<u32>,
    /// Users search: never more users than this (default 200); every DAV target gets
    /// this many accounts.
    #[serde(default)]
    pub max_users: Option<u32>,
}

/// Parses a study file. Errors name the line and the key.
pub fn parse(text: &str) -> Result<StudyFile, StudyError> {
    toml::from_str::<StudyFile>(text).map_err(|e| {
        let (line, key) = match e.span() {
            Some(span) => locate(text, span.start),
            None => (0, None),
        };
        StudyError::Syntax {
            line,
            key,
            message: e.message().trim().to_string(),
        }
    })
}

/// The 1-based line of byte `offset`, and the key written on that line (with its table),
/// e.g. `load.rate`; `None` when the line holds no `key =`.
pub fn locate(text: &str, offset: usize) -> (usize, Option<String>) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let table = before[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['))
        .or_else(|| {
            let t = line.trim();
            t.starts_with('[')
                .then(|| t.trim_matches(|c| c == '[' || c == ']').trim().to_string())
        });
    let key = match (table, key) {
        (Some(t), Some(k)) if !line.trim().starts_with('[') => Some(format!("{t}.{k}")),
        (_, k) => k,
    };
    (line_no, key)
}

/// A semantic error at a spanned value: line and key of the value.
pub(crate) fn at<T>(text: &str, v: &Spanned<T>, message: String) -> StudyError {
    let (line, key) = locate(text, v.span().start);
    StudyError::Syntax { line, key, message }
}

/// The one duration syntax (`30s`, `500ms`, `250us`, `2m`, `1h`, bare seconds), shared
/// with the command line: it lives in the harness.
pub use volley_units::parse_duration;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const GOOD: &str = r#"
name = "t"
[[target]]
name = "builtin"
kind = "builtin"
[[workload]]
name = "L1"
paths = ["/index1.html"]
[load]
concurrency = 4
"#;

    #[test]
    fn a_minimal_file_parses() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.targets[0].kind.get_ref(), "builtin");
        assert_eq!(s.load.concurrency, Some(4));
        assert_eq!(s.mode, Mode::Sweep);
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let bad = GOOD.replace("concurrency = 4", "concurrency = 4\nconcurency = 5");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("line 11"), "{e}");
        assert!(e.contains("concurency"), "{e}");
    }

    #[test]
    fn wrong_type_names_line_and_key() {
        let bad = GOOD.replace("concurrency = 4", "concurrency = \"four\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("line 10"), "{e}");
        assert!(e.contains("load.concurrency"), "{e}");
    }

    #[test]
    fn bad_enum_value_is_named() {
        let bad = GOOD.replace("[load]", "[steps]\norder = \"zigzag\"\n[load]");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("line 10") && e.contains("steps.order"), "{e}");
        assert!(e.contains("zigzag"), "{e}");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
