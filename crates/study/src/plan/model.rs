//! The plan's data: what a resolved study is made of (targets, instances, workloads,
//! cells, the ordered steps, timing, what to serve). Built by [`super::resolve`], read by
//! the estimate, the plan print and the runner.

use std::time::Duration;

use volley_engine::{Arrival, Order};
use volley_harness::DocrootSource;
use volley_targets::TargetKind;

use crate::spec::Mode;

/// A target as the study names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Name in results.
    pub name: String,
    /// Which server.
    pub kind: TargetKind,
    /// Workers.
    pub workers: u32,
    /// Server-side keep-alive.
    pub keepalive: bool,
    /// External: URL.
    pub url: Option<String>,
    /// External: pid to monitor.
    pub pid: Option<u32>,
    /// Serves DAV accounts to `caldav` workloads (`dav = true`, or a CalDAV server).
    pub dav: bool,
    /// Memory cap in bytes (cgroup memory.max).
    pub memory_max: Option<u64>,
    /// Started again for the next step after it died (managed targets only).
    pub restart: crate::spec::Restart,
}

/// One started copy of a target: the target with one CPU quota and core count. Every
/// instance runs for the whole study so interleaved steps need no restart.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Index into [`Plan::targets`].
    pub target: usize,
    /// CPU quota, share of one CPU.
    pub cpu_quota: Option<f64>,
    /// Cores pinned (CPUs 0..cores).
    pub cores: Option<u32>,
    /// Index into [`Plan::variants`]; `None`: no `variants` axis.
    pub variant: Option<usize>,
}

/// A tuning of the targets (`[[variant]]`), resolved and checked against every kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Name in results.
    pub name: String,
    /// Server knobs and raw text.
    pub tuning: volley_targets::config::Tuning,
    /// Sysctls for the target's namespace (a lab per instance of this variant).
    pub sysctls: Vec<volley_netlab::tune::Sysctl>,
    /// Route switches in that namespace.
    pub route: volley_netlab::tune::RouteSettings,
    /// The targets (indices into [`Plan::targets`]) that run it; `None`: every managed
    /// target. Two variants may share a name when their targets differ.
    pub targets: Option<Vec<usize>>,
}

/// The load model of one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Open loop (rate steps) or closed loop.
    pub open: bool,
    /// Closed: connections; open: initial pool.
    pub concurrency: u32,
    /// Open: the rate when not swept.
    pub rate: Option<f64>,
    /// Open: arrival process.
    pub arrival: Arrival,
    /// Generator threads.
    pub threads: u32,
    /// Open: connection cap.
    pub max_connections: u32,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Client keep-alive when not swept.
    pub keepalive: bool,
    /// Schedule seed.
    pub seed: u64,
    /// TLS, HTTP version and compression.
    pub wire: WireDef,
}

/// Compressed bodies asked of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `br` (Brotli).
    Br,
    /// `gzip`.
    Gzip,
}

impl Encoding {
    /// The `Accept-Encoding` / `Content-Encoding` token.
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Br => "br",
            Encoding::Gzip => "gzip",
        }
    }
}

/// How the bytes travel: the study file's `tls`, `http2`, `streams`, `compressed` and
/// `insecure` keys, resolved. Mapped to the engine's `Wire` per step and to the managed
/// targets' TLS / HTTP/2 / compression settings at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireDef {
    /// HTTPS.
    pub tls: bool,
    /// HTTP/2 with this many streams per connection; `None`: HTTP/1.1.
    pub h2_streams: Option<u32>,
    /// Streams per connection of a swept h2 or h3 (`load.streams`, default 1).
    pub streams: u32,
    /// Accept-Encoding sent; the engine then decodes every HTTP/1.1 response with it
    /// (an answer in another coding is an `encoding` error) and counts wire beside
    /// decoded bytes. The targets' start-up probe also checks the encoding is applied.
    pub compressed: Option<Encoding>,
    /// Accept any certificate.
    pub insecure: bool,
}

/// An HTTP version of the `protocol` axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// HTTP/1.1.
    H1,
    /// HTTP/2 (over TLS by ALPN, or h2c without).
    H2,
    /// HTTP/3 over QUIC (TLS only).
    H3,
}

impl Protocol {
    /// Its name in study files, plans, tables and the store (`h1`, `h2`, `h3`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// From its name in a study file.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "h1" => Some(Protocol::H1),
            "h2" => Some(Protocol::H2),
            "h3" => Some(Protocol::H3),
            _ => None,
        }
    }
}

/// A request mix, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Name.
    pub name: String,
    /// Method.
    pub method: String,
    /// Paths.
    pub paths: Vec<String>,
    /// Order of paths.
    pub order: Order,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Option<Vec<u8>>,
    /// Load model.
    pub load: Load,
    /// Cold vs warm TTFB: every step starts its target afresh and times the first request
    /// on its own.
    pub cold_start: bool,
    /// Requests per step for this workload (scaled), replacing the study's
    /// `Timing::requests`.
    pub requests: Option<u64>,
    /// Expected throughput of one step, requests per second (the workload's
    /// `expected_rate`, else the study's `[steps] expected_rate`): the duration estimate
    /// of request-count steps.
    pub expected_rate: Option<f64>,
    /// A `caldav` workload: the office its steps play instead of requests for `paths`.
    pub office: Option<OfficeLoad>,
    /// A `replay` workload: the log its steps replay (at speed rate / its mean rate).
    pub replay: Option<ReplayLoad>,
    /// Only these targets (by index into [`Plan::targets`]) run it; `None`: every one.
    pub targets: Option<Vec<usize>>,
}

impl Workload {
    /// Whether its steps run at a rate (an open loop, or any step of a capacity
    /// search), and so measure [`Timing::rate_duration`]; an office day never does.
    pub fn rated(&self, mode: Mode) -> bool {
        self.office.is_none() && (mode == Mode::Search || self.load.open)
    }

    /// A `caldav` workload whose users are searched, not swept.
    pub fn searches_users(&self) -> bool {
        self.office.as_ref().is_some_and(|o| o.search)
    }

    /// The protocol its load speaks, as steps and searches store it ("h1", "h2"): a
    /// report sets protocols side by side as it does targets and variants.
    pub fn protocol(&self) -> &'static str {
        match self.load.wire.h2_streams {
            Some(_) => "h2",
            None => "h1",
        }
    }
}

/// A `replay` workload resolved: an access log and its mean rate (speed 1).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayLoad {
    /// The log (read from the directory volley runs in).
    pub log: std::path::PathBuf,
    /// Its requests per second at speed 1 (its gaps over the span of its instants).
    pub mean_rate: f64,
    /// Its requests.
    pub requests: u64,
    /// Each replayed client from its own loopback address (127.0.0.2 on), as
    /// `volley bench --replay --client-addresses`.
    pub client_addresses: bool,
}

/// A `caldav` workload resolved: an office of calendar clients (volley-office), one
/// more sweep axis (`users`). Its steps last `Timing::duration`.
#[derive(Debug, Clone, PartialEq)]
pub struct OfficeLoad {
    /// Users per step: the sweep axis (empty when `search`).
    pub users: Vec<u32>,
    /// The users are searched (`users = "search"`, or any caldav workload in search
    /// mode): [`Plan::users_search`] says how.
    pub search: bool,
    /// The profile mix (`profiles = ["thunderbird:3", "davx5:1"]`), parsed once.
    pub mix: volley_office::Mix,
    /// Decisions per person per working day.
    pub decisions: u32,
    /// How many times faster than real time the day runs: 1 (the default) is real
    /// time, so the users carried are people.
    pub compress: f64,
    /// A cold day (`day_start = "cold"`): every device's first sync inside the
    /// measured window; false: warm, the first syncs before it.
    pub cold_start: bool,
    /// This workload's own users search (its `start_users`/`max_users` over
    /// `[search]`); `None`: [`Plan::users_search`].
    pub own_search: Option<SearchPlan>,
}

/// One point: an instance, a workload and the values of the load axes.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Index into [`Plan::instances`].
    pub instance: usize,
    /// Index into [`Plan::workloads`].
    pub workload: usize,
    /// Offered rate (open loop); `None` in closed loops and in search mode.
    pub rate: Option<f64>,
    /// Connections.
    pub concurrency: u32,
    /// Client keep-alive.
    pub keepalive: bool,
    /// The HTTP version swept (`sweep.protocol`); `None`: the workload's own.
    pub protocol: Option<Protocol>,
    /// Injectors (agents) that share the step's load; `None`: volley loads in-process.
    pub injectors: Option<u32>,
    /// Virtual users of a `caldav` workload's office; `None` for http workloads.
    pub users: Option<u32>,
}

/// A cell apart from its rate: what a rate sweep repeats at each rate, compared and
/// grouped by the end table and the effects of variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Point {
    /// Index into [`Plan::instances`].
    pub instance: usize,
    /// Index into [`Plan::workloads`].
    pub workload: usize,
    /// Connections.
    pub concurrency: u32,
    /// Client keep-alive.
    pub keepalive: bool,
    /// Injectors that share the step's load.
    pub injectors: Option<u32>,
    /// Virtual users of an office.
    pub users: Option<u32>,
    /// The HTTP version swept.
    pub protocol: Option<Protocol>,
}

impl Cell {
    /// The cell's [`Point`].
    pub fn point(&self) -> Point {
        Point {
            instance: self.instance,
            workload: self.workload,
            concurrency: self.concurrency,
            keepalive: self.keepalive,
            injectors: self.injectors,
            users: self.users,
            protocol: self.protocol,
        }
    }
}

/// How a study's injectors run (`[injectors]`).
#[derive(Debug, Clone, PartialEq)]
pub struct InjectorsPlan {
    /// Injector `i` starts `i * stagger` after T0 (zero: together).
    pub stagger: Duration,
    /// Every injector gets the step's figures (`share = "each"`) instead of a segment.
    pub each: bool,
    /// Start with at least this many (default: all).
    pub min_agents: Option<u32>,
    /// `placement = "netns"`: the link of injector `i` is `links[i]` (as many as the
    /// largest count); `None`: local processes on this host's loopback.
    pub netns_links: Option<Vec<volley_netlab::lab::LinkSpec>>,
    /// `placement = "ssh"`: the hosts and how to reach them.
    pub ssh: Option<SshPlacement>,
    /// `placement = "kubernetes"`: the agents are the pods of the Job; volley starts
    /// none and waits for them on the bus.
    pub kubernetes: bool,
    /// The bus; `None`: a private nats-server on loopback (or on the lab's address).
    pub bus: Option<BusPlan>,
    /// How long the coordinator waits for the agents to join.
    pub ready_timeout: Duration,
    /// The bus's security: TLS, per-study credentials, permissions and signed
    /// assignments (the default), or off (`bus_security = "off"`).
    pub secure_bus: bool,
    /// `bus = "existing"`, secured: the coordinator's credentials file.
    pub bus_credentials: Option<std::path::PathBuf>,
    /// `bus = "existing"`, secured: the agents' credentials file, `{name}` standing for
    /// each agent's name.
    pub agent_credentials: Option<String>,
}

/// `placement = "ssh"`: where each injector runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SshPlacement {
    /// The `hosts` entries in order; `None` is `"local"` (a process on this host).
    /// Injector `i` (from 0) runs on `hosts[i % hosts.len()]`.
    pub hosts: Vec<Option<volley_agents::ssh::Host>>,
    /// OpenSSH options, `ssh_options` then `--ssh-option`s.
    pub options: Vec<String>,
    /// The binary's directory on the hosts (`None`: `volley_agents::ssh::REMOTE_DIR`).
    pub remote_dir: Option<String>,
}

impl SshPlacement {
    /// The distinct remote hosts, in the order first named.
    pub fn remote_hosts(&self) -> Vec<volley_agents::ssh::Host> {
        let mut out: Vec<volley_agents::ssh::Host> = Vec::new();
        for h in self.hosts.iter().flatten() {
            if !out.contains(h) {
                out.push(h.clone());
            }
        }
        out
    }

    /// Where injector `i` (from 0) runs: `None` on this host.
    pub fn host_of(&self, i: usize) -> Option<&volley_agents::ssh::Host> {
        self.hosts[i % self.hosts.len()].as_ref()
    }
}

/// The bus of a study's injectors when it is not a private one on loopback.
#[derive(Debug, Clone, PartialEq)]
pub enum BusPlan {
    /// volley starts nats-server listening on this address (port 0: a free one) and
    /// the agents dial it there.
    Private(std::net::SocketAddr),
    /// A server already running at this `nats://` URL.
    Existing(String),
}

/// One step to run: a cell's `repeat`-th run at position `order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedStep {
    /// Position in the schedule.
    pub order: usize,
    /// Index into [`Plan::cells`].
    pub cell: usize,
    /// 0-based repeat.
    pub repeat: u32,
}

/// Shortest measured length `--scale` may give an open-loop (rate) step: the
/// sustainability rule judges whole one-second windows and its in-flight trend test needs
/// at least 3 of them, so a shorter rate step could only ever be judged `too_few_windows`.
pub const MIN_RATE_STEP: Duration = Duration::from_secs(3);

/// Default of `[steps] retries`: a spoiled step gets two more chances.
pub const DEFAULT_RETRIES: u32 = 2;

/// Step timing (already scaled).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Measured length of closed-loop steps.
    pub duration: Option<Duration>,
    /// Measured length of open-loop (rate) steps: `duration` scaled, but never below
    /// [`MIN_RATE_STEP`] unless the file itself asks for less.
    pub rate_duration: Option<Duration>,
    /// Or requests per step.
    pub requests: Option<u64>,
    /// Discarded load before measuring.
    pub warmup: Duration,
    /// Rest after each step.
    pub cooldown: Duration,
}

impl Timing {
    /// How long a step measures: `rate_duration` for a step at a rate, `duration` for
    /// the others (closed loops, office days); `None` when steps are counted instead.
    pub fn measured(&self, rated: bool) -> Option<Duration> {
        match rated {
            true => self.rate_duration,
            false => self.duration,
        }
    }
}

/// Search settings: of the rate searches (search mode), or of the users searches
/// (`volley_analysis::knee` over whole numbers of users).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPlan {
    /// First rate, or first count of users.
    pub start_rate: f64,
    /// Options of the state machine.
    pub opts: volley_analysis::knee::SearchOpts,
    /// Whole searches per cell, interleaved ([`MAX_PASSES`] at most).
    pub passes: u32,
}

/// The most whole searches per cell a study may ask for: each is a full search.
pub const MAX_PASSES: u32 = 20;

/// What managed targets are started to serve (from the workloads' wire keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Serve {
    /// HTTPS with a throw-away CA the load trusts.
    pub tls: bool,
    /// Offer HTTP/2 by ALPN (only over TLS: h2c is for external targets).
    pub http2: bool,
    /// Offer HTTP/3 (QUIC on the same port number, UDP) where the kind has it.
    pub http3: bool,
    /// Compress with Brotli (quality 11, as seed 002).
    pub brotli: bool,
    /// Compress with gzip (level 6).
    pub gzip: bool,
}

/// A resolved study.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Study name.
    pub name: String,
    /// Sweep or search.
    pub mode: Mode,
    /// Targets (filtered by the `target` axis).
    pub targets: Vec<Target>,
    /// Instances (target x quota x cores).
    pub instances: Vec<Instance>,
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Points, in schedule order within a round.
    pub cells: Vec<Cell>,
    /// Sweep mode: every step in order. Search mode: empty (steps are decided live).
    pub steps: Vec<PlannedStep>,
    /// Repeats per cell.
    pub repeats: u32,
    /// Re-measures of a step noise spoiled (`[steps] retries`, `--retries`): a sweep
    /// runs them later in its schedule, a search at once.
    pub retries: u32,
    /// Timing.
    pub timing: Timing,
    /// Judging rule for rate steps.
    pub rule: volley_analysis::sustain::Rule,
    /// What to serve.
    pub docroot: DocrootSource,
    /// Several injectors, when the study has an `[injectors]` table.
    pub injectors: Option<InjectorsPlan>,
    /// Search settings (search mode).
    pub search: Option<SearchPlan>,
    /// Users-search settings, when a caldav workload searches its users.
    pub users_search: Option<SearchPlan>,
    /// What managed targets serve.
    pub serve: Serve,
    /// The `variants` axis (`[[variant]]` tunings); empty without one.
    pub variants: Vec<Variant>,
    /// The axis with more than one value that best describes the study (`rate`,
    /// `concurrency`, `cpu_quota`, `cores`, `keepalive`, `workload`, `target` or `none`).
    pub axis: &'static str,
}

impl Plan {
    /// The DAV accounts target `t` is started with: the most users any `caldav`
    /// workload that runs on it asks for; `None` when it serves no DAV.
    pub fn dav_users(&self, t: usize) -> Option<u32> {
        if !self.targets[t].dav {
            return None;
        }
        let most = self
            .workloads
            .iter()
            .filter(|w| w.targets.as_ref().is_none_or(|ts| ts.contains(&t)))
            .filter_map(|w| w.office.as_ref())
            .flat_map(|o| {
                let searched = self.users_search_of(o).map(|s| s.opts.max_rate_rps as u32);
                o.users.iter().copied().chain(searched)
            })
            .max();
        // A CalDAV server always gets its accounts (one when no office runs on it).
        Some(most.unwrap_or(1))
    }

    /// The search cell `ci` is in, if it is searched: its office's users search, or
    /// the rate search of search mode.
    pub fn search_of(&self, ci: usize) -> Option<&SearchPlan> {
        let w = &self.workloads[self.cells[ci].workload];
        match &w.office {
            Some(o) => self.users_search_of(o),
            None => self.search.as_ref(),
        }
    }

    /// How `office`'s users are searched: its own settings, else the study's; `None`
    /// when they are swept.
    pub fn users_search_of<'a>(&'a self, office: &'a OfficeLoad) -> Option<&'a SearchPlan> {
        if !office.search {
            return None;
        }
        office.own_search.as_ref().or(self.users_search.as_ref())
    }

    /// Cell `ci` as a step at `rate` plays it, and the rate the step offers: a users
    /// search's step plays `rate` users (a whole number) and offers no rate; every
    /// other step is its cell at `rate`.
    pub fn cell_at(&self, ci: usize, rate: Option<f64>) -> (Cell, Option<f64>) {
        let mut cell = self.cells[ci].clone();
        match rate {
            Some(users) if self.searches_users(ci) => {
                let users = users.round().max(1.0) as u32;
                cell.users = Some(users);
                cell.concurrency = users;
                (cell, None)
            }
            _ => (cell, rate),
        }
    }

    /// Whether cell `ci` searches users rather than a rate.
    pub fn searches_users(&self, ci: usize) -> bool {
        self.workloads[self.cells[ci].workload].searches_users()
    }

    /// The cells searched, in cell order (after every swept cell: resolve puts them
    /// last).
    pub fn searched_cells(&self) -> Vec<usize> {
        (0..self.cells.len())
            .filter(|&ci| self.search_of(ci).is_some())
            .collect()
    }

    /// The protocol a cell's steps speak, as steps and searches store it: the swept
    /// one (`sweep.protocol`), else its workload's.
    pub fn protocol_of(&self, cell: &Cell) -> &'static str {
        cell.protocol
            .map_or_else(|| self.workloads[cell.workload].protocol(), Protocol::name)
    }

    /// Display name of an instance: the target name, plus its cap when the study varies it.
    pub fn instance_label(&self, i: usize) -> String {
        let inst = &self.instances[i];
        let mut s = self.targets[inst.target].name.clone();
        if let Some(q) = inst.cpu_quota {
            s.push_str(&format!(" cpu={:.0}%", q * 100.0));
        }
        if let Some(c) = inst.cores {
            s.push_str(&format!(" cores={c}"));
        }
        if let Some(m) = self.targets[inst.target].memory_max {
            s.push_str(&format!(" mem={}M", m >> 20));
        }
        if let Some(v) = inst.variant {
            s.push_str(&format!(" variant={}", self.variants[v].name));
        }
        s
    }
}
