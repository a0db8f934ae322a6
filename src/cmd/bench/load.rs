//! One load from `volley bench`'s flags: the flags as typed ([`LoadArgs`], each value
//! parsed by clap into its type: `bench/load/values.rs`), resolved once into a [`Load`]
//! (numbers checked against each other, files read, the request built: every mistake
//! here is a usage error, exit 2), aimed at a destination as a [`LoadSpec`]
//! ([`Load::at`]: the URL's host resolved, TLS configured), and one measured run of it
//! ([`run_once`]: the harness's `measure`, plus the wire report, the generator's
//! headroom and the notes `volley bench` adds).
//!
//! Place in the flow: below both `volley bench URL` (src/cmd/bench/mod.rs) and
//! `volley bench --target` (src/cmd/bench/target.rs), which resolve the flags once and
//! aim the load at the URL or at each target they start; it imports neither.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use volley_engine::{
    Arrival, HttpUrl, ListSourceFactory, Live, LoadConfig, LoadModel, Order, Request,
    RequestTemplate, RunOutcome, StatusRange, StopCondition,
};
use volley_harness::measure::LiveWindows;
use volley_harness::{measure, Measure, MeasureError, MeasuredRun};
use volley_metrics::{FirstRequest, Summary, WindowKey};
use volley_monitor::headroom::HeadroomWatch;

use super::save::{write_live, LiveTarget};
use super::wire::{self, ResolvedWire, WireArgs};
use crate::cmd::progress;
use crate::exit::usage;

mod check;
mod errors;
pub use errors::{describe_errors, server_trouble};
pub mod values;

use values::{Header, Where};

/// The `User-Agent` every request carries unless `-H` gives one, as ab and curl send
/// theirs: a server's log then says who made the load.
pub const USER_AGENT: &str = concat!("volley/", env!("CARGO_PKG_VERSION"));

/// The `Content-Type` of a `--body` unless `-T` or `-H` gives one: what curl's
/// `--data-binary` leaves unsaid, the generic type of RFC 9110 8.3.
const BODY_CONTENT_TYPE: &str = "application/octet-stream";

/// Open-loop arrival process.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalArg {
    /// Evenly spaced arrivals.
    Constant,
    /// Exponential gaps (a Poisson process), seeded.
    Poisson,
}

/// Order of the URLs of `--urls`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderArg {
    /// The first URL only.
    Same,
    /// Each in turn, `--block` requests each.
    Sequential,
    /// Uniformly at random (seeded).
    Random,
    /// At random by the list's weights (seeded).
    Weighted,
}

/// The load flags of `volley bench`, as typed (flattened into bench's `Args`). Every
/// value is parsed by clap into its type (`values.rs`): a bad one is one line, exit 2.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Target URL, http://host[:port]/path (optional when --urls gives full URLs; with
    /// --target, a /path or a URL whose path is loaded).
    #[arg(value_parser = values::where_)]
    pub url: Option<Where>,
    /// Number of requests to perform (ab's -n). Default: 1 (-c may not exceed it, as in
    /// ab), or 10 s of load with --rate.
    #[arg(short = 'n', long = "requests", value_name = "N", value_parser = values::count, allow_hyphen_values = true)]
    pub requests: Option<u64>,
    /// Duration of the run, e.g. 10s, 500ms, 2m (wrk's -d). The first limit reached ends the run.
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = values::positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Connections: concurrency in a closed loop, initial pool in an open loop.
    #[arg(short = 'c', long = "connections", value_name = "N", default_value = "1", value_parser = values::count, allow_hyphen_values = true)]
    pub connections: u64,
    /// Worker threads (a closed loop uses at most one per connection).
    #[arg(short = 't', long = "threads", value_name = "N", default_value = "1", value_parser = values::count, allow_hyphen_values = true)]
    pub threads: u64,
    /// Reuse connections (HTTP keep-alive), like ab -k.
    #[arg(short = 'k', long = "keepalive")]
    pub keepalive: bool,
    /// Open loop: send R requests per second on a fixed schedule (wrk2/httperf).
    #[arg(long, value_name = "R", value_parser = values::rate, allow_hyphen_values = true)]
    pub rate: Option<f64>,
    /// Open-loop arrival process (needs --rate) [default: constant].
    #[arg(long, value_enum)]
    pub arrival: Option<ArrivalArg>,
    /// Open loop: most connections open at once (default max(c, 256)).
    #[arg(long = "max-connections", value_name = "N", value_parser = values::count, allow_hyphen_values = true)]
    pub max_connections: Option<u64>,
    /// Seed of the Poisson schedule and of random/weighted URL order [default: 1].
    #[arg(long, value_parser = values::whole, allow_hyphen_values = true)]
    pub seed: Option<u64>,
    /// HTTP method (default GET, or POST when a body is given).
    #[arg(short = 'm', long = "method")]
    pub method: Option<String>,
    /// Extra header 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_parser = values::header)]
    pub headers: Vec<Header>,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long = "body-file")]
    pub body_file: Option<PathBuf>,
    /// Content-Type of the body (default application/octet-stream, unless -H gives one).
    #[arg(short = 'T', long = "content-type", value_name = "TYPE")]
    pub content_type: Option<String>,
    /// File of URLs or paths, one per line, each optionally followed by a weight.
    #[arg(long)]
    pub urls: Option<PathBuf>,
    /// Order of the URLs (default: weighted when the list has weights, sequential when
    /// it has several URLs, else same).
    #[arg(long, value_enum)]
    pub order: Option<OrderArg>,
    /// Sequential order: consecutive requests to each URL.
    #[arg(long, value_name = "N", default_value = "1", value_parser = values::count, allow_hyphen_values = true)]
    pub block: u64,
    /// Per-request timeout; a request past it is a censored timeout.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = values::positive_duration, allow_hyphen_values = true)]
    pub timeout: Duration,
    /// Write JSON (docs/bench-json.md) to FILE, or to stdout with '-' or no value
    /// (the text report is then not printed).
    #[arg(long, num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<String>,
    /// Write one CSV row per run to FILE, or to stdout with '-' (the text report is
    /// then not printed).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write one CSV row per second of every run to FILE, or to stdout with '-' (the
    /// text report is then not printed).
    #[arg(long = "csv-seconds")]
    pub csv_seconds: Option<PathBuf>,
    /// Repeat the run K times and report the median with a bootstrap 95% CI.
    #[arg(long, value_name = "K", default_value = "1", value_parser = values::count, allow_hyphen_values = true)]
    pub repeat: u64,
    /// Pause between repeated runs.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = values::duration, allow_hyphen_values = true)]
    pub cooldown: Duration,
    /// Run this long on the same connections before measuring, e.g. 2s (like ab and
    /// wrk, none by default; studies warm up by default). Requests intended before it
    /// are excluded from every figure; -d is the measured period after it, and -n
    /// counts measured requests only (the warm-up's come on top).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = values::duration, allow_hyphen_values = true)]
    pub warmup: Duration,
    /// Print no text report (files given with --json/--csv are still written).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// TLS, HTTP/2, compression and first-request flags: src/cmd/bench/wire.rs.
    #[command(flatten)]
    pub wire: WireArgs,
}

impl LoadArgs {
    /// Whether an output asked for goes to stdout ('-'), where the text report would
    /// mix with it.
    pub fn stdout_taken(&self) -> bool {
        let dash = |p: &Option<PathBuf>| p.as_deref() == Some(Path::new("-"));
        self.json.as_deref() == Some("-") || dash(&self.csv) || dash(&self.csv_seconds)
    }

    /// The URL given, when a whole one was (not a path).
    pub fn url(&self) -> Option<&HttpUrl> {
        self.url.as_ref().and_then(Where::url)
    }
}

/// The load's flags resolved once, before its destination is known: numbers checked
/// against each other, body read, headers complete. [`Load::at`] aims it at a URL (or
/// list of them) as a [`LoadSpec`]; `bench --target` aims the same `Load` at each
/// target it starts.
#[derive(Debug, Clone)]
pub struct Load {
    numbers: Numbers,
    /// Runs per destination (`--repeat`).
    pub repeat: usize,
    /// Pause between runs (`--cooldown`).
    pub cooldown: Duration,
    method: String,
    /// Extra headers, `User-Agent`, `Content-Type` and `Accept-Encoding` included.
    headers: Vec<Header>,
    body: Option<Vec<u8>>,
    order: Option<OrderArg>,
    block: u64,
    keep_alive: bool,
    wire: WireArgs,
}

/// One load, aimed: no flag left to interpret.
pub struct LoadSpec {
    /// The engine's configuration (its `stop_flag` ends the load early).
    pub cfg: LoadConfig,
    /// The URL the summary names.
    pub url: String,
    /// The method the summary names.
    pub method: String,
    /// TLS, HTTP version, body checks, first request.
    pub wire: ResolvedWire,
    /// The URL's host, for TLS failure messages.
    pub host: String,
    /// What a pre-flight TLS handshake agreed to (set by [`LoadSpec::prepare`]).
    negotiated: Option<wire::Negotiated>,
    /// Each request's path and query, by its index in the source (what a refusal
    /// names).
    pub paths: Vec<String>,
    /// The path check on the run's own first answers (`volley_engine::first`), for
    /// the runs that arm it (`load/check.rs`: `bench URL`'s first run, each
    /// `--target` run).
    pub first_answers: Option<Arc<volley_engine::FirstAnswers>>,
}

impl LoadSpec {
    /// What comes before the measured runs, in this order: the cold request when
    /// `--first-request` asks for it (before any other connection of this load), then a
    /// pre-flight TLS handshake for the wire report.
    pub fn prepare(&mut self) -> anyhow::Result<Option<FirstRequest>> {
        let first = if self.wire.first_request {
            let cold = volley_harness::cold_request(&self.cfg, &self.wire.wire)
                .context("cannot send the first request")?;
            Some(cold.first_request())
        } else {
            None
        };
        self.negotiated = wire::pre_flight(self.cfg.addr, &self.wire);
        Ok(first)
    }
}

/// Numbers of the flags, checked.
#[derive(Debug, Clone)]
struct Numbers {
    stop: StopCondition,
    connections: usize,
    max_connections: usize,
    threads: usize,
    seed: u64,
    timeout: Duration,
    model: LoadModel,
}

/// Lines of a `--urls` file: `URL-or-path [weight]`; blank lines and `#` comments skipped.
fn parse_url_list(text: &str) -> Result<Vec<(String, Option<f64>)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let url = parts.next().unwrap_or_default().to_string();
        let weight = match parts.next() {
            None => None,
            Some(w) => match w.parse::<f64>() {
                Ok(w) if w.is_finite() && w >= 0.0 => Some(w),
                _ => return Err(format!("line {}: bad weight '{w}'", i + 1)),
            },
        };
        if parts.next().is_some() {
            return Err(format!(
                "line {}: expected 'URL [weight]', got '{line}'",
                i + 1
            ));
        }
        out.push((url, weight));
    }
    if out.is_empty() {
        return Err("no URLs in the file".into());
    }
    Ok(out)
}

/// `Ok(v)` or a usage error (exit 2) with the message.
macro_rules! u {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(msg) => usage!("{msg}"),
        }
    };
}

/// `volley bench URL`: the flags resolved and aimed at the URL (and `--urls`).
pub fn resolve(a: &LoadArgs) -> anyhow::Result<LoadSpec> {
    let entries = endpoints(a)?;
    Load::resolve(a)?.at(&entries, None)
}

impl Load {
    /// Resolves the load's flags. Every error here is the user's to fix: exit 2.
    pub fn resolve(a: &LoadArgs) -> anyhow::Result<Load> {
        let numbers = numbers(a)?;
        let body = match (&a.body, &a.body_file) {
            (Some(b), _) => Some(b.clone().into_bytes()),
            (None, Some(p)) => match std::fs::read(p) {
                Ok(b) => Some(b),
                Err(e) => usage!("cannot read body file {}: {e}", p.display()),
            },
            (None, None) => None,
        };
        let method = match &a.method {
            Some(m) => m.clone(),
            None if body.is_some() => "POST".into(),
            None => "GET".into(),
        };
        let headers = headers(a, body.is_some())?;
        Ok(Load {
            numbers,
            repeat: a.repeat as usize,
            cooldown: a.cooldown,
            method,
            headers,
            body,
            order: a.order,
            block: a.block,
            keep_alive: a.keepalive,
            wire: a.wire.clone(),
        })
    }

    /// The load aimed at `entries` (one scheme, host and port; paths and weights):
    /// the host resolved, TLS configured (trusting `ca` when given and the flags name
    /// no CA of their own: a managed target's throw-away CA), the requests built.
    pub fn at(
        &self,
        entries: &[(HttpUrl, Option<f64>)],
        ca: Option<&Path>,
    ) -> anyhow::Result<LoadSpec> {
        let first = &entries[0].0;
        let host = first.host();
        let mut wire_args = self.wire.clone();
        if ca.is_some() && !wire_args.insecure && wire_args.cacert.is_none() {
            wire_args.cacert = ca.map(Path::to_path_buf);
        }
        let wire = u!(wire::resolve(&wire_args, first.tls(), &host));
        let addr = match first.socket_addr() {
            Ok(a) => a,
            Err(e) => match e.source {
                Some(ref io) => usage!("{e}: {io}"),
                None => usage!("{e}: no address"),
            },
        };
        let source = self.requests(entries, &wire)?;
        let url = if entries.len() > 1 {
            format!("{}://{}/*", first.scheme(), first.host_header())
        } else {
            first.to_string()
        };
        let n = &self.numbers;
        Ok(LoadSpec {
            cfg: LoadConfig {
                addr,
                source_ip: volley_engine::SourceIp::Kernel,
                threads: n.threads,
                connections: n.connections,
                max_connections: n.max_connections,
                keep_alive: self.keep_alive,
                model: n.model,
                stop: n.stop,
                timeout: n.timeout,
                connect_timeout: n.timeout.min(Duration::from_secs(10)),
                accept_status: StatusRange::default(),
                source: Arc::new(source),
                stop_flag: Arc::new(AtomicBool::new(false)),
            },
            url,
            method: self.method.clone(),
            wire,
            host,
            negotiated: None,
            paths: entries.iter().map(|(u, _)| u.path_and_query()).collect(),
            first_answers: None,
        })
    }

    /// The prebuilt requests (method, headers, body, order over the endpoints).
    fn requests(
        &self,
        entries: &[(HttpUrl, Option<f64>)],
        wire: &ResolvedWire,
    ) -> anyhow::Result<ListSourceFactory> {
        let mut headers = self.headers.clone();
        if let Some(coding) = wire.accept_encoding() {
            if has(&headers, "accept-encoding") {
                usage!(
                    "--compressed sets Accept-Encoding itself: drop the -H 'Accept-Encoding: ...'"
                );
            }
            headers.push(Header {
                name: "Accept-Encoding".into(),
                value: coding.into(),
            });
        }
        let order = self.order(entries)?;
        let host = entries[0].0.host_header();
        let mut built: Vec<Request> = Vec::with_capacity(entries.len());
        for (i, (t, _)) in entries.iter().enumerate() {
            let mut tpl = RequestTemplate::new(&self.method, &t.path_and_query(), &host)
                .keep_alive(self.keep_alive);
            for h in &headers {
                tpl = tpl.header(&h.name, &h.value);
            }
            if let Some(b) = &self.body {
                tpl = tpl.body(b.clone());
            }
            match tpl.build(i as u32) {
                Ok(r) => built.push(r),
                Err(e) => usage!("bad request: {e}"),
            }
        }
        match ListSourceFactory::new(built, order) {
            Ok(s) => Ok(s),
            Err(e) => usage!("bad request list: {e}"),
        }
    }

    /// `--order` over the endpoints (weighted by default when the list has weights,
    /// sequential when it has several URLs).
    fn order(&self, entries: &[(HttpUrl, Option<f64>)]) -> anyhow::Result<Order> {
        let weighted = entries.iter().any(|(_, w)| w.is_some());
        let seed = self.numbers.seed;
        let block = self.block;
        let weights = || Order::Weighted {
            weights: entries.iter().map(|(_, w)| w.unwrap_or(1.0)).collect(),
            seed,
        };
        Ok(match self.order {
            None if weighted => weights(),
            None if entries.len() > 1 => Order::Sequential { block },
            None | Some(OrderArg::Same) => Order::Same,
            Some(OrderArg::Sequential) => Order::Sequential { block },
            Some(OrderArg::Random) => Order::Random { seed },
            Some(OrderArg::Weighted) => {
                if !weighted {
                    usage!(
                        "--order weighted needs a weight column in --urls (URL WEIGHT per line)"
                    );
                }
                weights()
            }
        })
    }
}

/// Whether `headers` has a field `name` (case-insensitive).
fn has(headers: &[Header], name: &str) -> bool {
    headers.iter().any(|h| h.name.eq_ignore_ascii_case(name))
}

/// `-H` headers plus the defaults they do not override: `User-Agent`, and with a body
/// its `Content-Type` (`-T`, else application/octet-stream).
fn headers(a: &LoadArgs, with_body: bool) -> anyhow::Result<Vec<Header>> {
    let mut headers = a.headers.clone();
    if a.content_type.is_some() && !with_body {
        usage!("-T/--content-type describes a body: add --body or --body-file");
    }
    if let Some(t) = &a.content_type {
        if has(&headers, "content-type") {
            usage!(
                "-T/--content-type and -H 'Content-Type: ...' both set the body's type: keep one"
            );
        }
        headers.push(Header {
            name: "Content-Type".into(),
            value: t.clone(),
        });
    } else if with_body && !has(&headers, "content-type") {
        headers.push(Header {
            name: "Content-Type".into(),
            value: BODY_CONTENT_TYPE.into(),
        });
    }
    if !has(&headers, "user-agent") {
        headers.push(Header {
            name: "User-Agent".into(),
            value: USER_AGENT.into(),
        });
    }
    Ok(headers)
}

/// Where requests go: the URL argument and/or the `--urls` list (paths there are
/// relative to it), all on one scheme, host and port. Never empty.
fn endpoints(a: &LoadArgs) -> anyhow::Result<Vec<(HttpUrl, Option<f64>)>> {
    if let Some(Where::Path(p)) = &a.url {
        usage!("'{p}' is a path: give the whole URL (http://host:port{p}), or --target KIND to start a server that picks host and port");
    }
    let base = a.url().cloned();
    let mut entries: Vec<(HttpUrl, Option<f64>)> = Vec::new();
    if let Some(path) = &a.urls {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => usage!("cannot read URL list {}: {e}", path.display()),
        };
        let list = u!(parse_url_list(&text).map_err(|e| format!("{}: {e}", path.display())));
        for (item, w) in list {
            let t = if item.starts_with('/') {
                match (&base, entries.first()) {
                    (Some(b), _) | (None, Some((b, _))) => b.with_path(&item),
                    (None, None) => usage!(
                        "{}: '{item}' is a path but no URL gives its host (pass a URL or start the list with one)",
                        path.display()
                    ),
                }
            } else {
                u!(HttpUrl::parse(&item))
            };
            entries.push((t, w));
        }
    } else if let Some(b) = &base {
        entries.push((b.clone(), None));
    }
    let Some((first, _)) = entries.first().cloned() else {
        usage!("no URL given: volley bench http://host:port/path (or --urls FILE)");
    };
    let origin = |u: &HttpUrl| (u.tls(), u.host(), u.port());
    if let Some((other, _)) = entries.iter().find(|(t, _)| origin(t) != origin(&first)) {
        usage!(
            "all URLs must share one scheme, host and port: {}://{} and {}://{}",
            first.scheme(),
            first.host_header(),
            other.scheme(),
            other.host_header(),
        );
    }
    Ok(entries)
}

/// The numeric flags, checked against each other, and the stop condition they make.
fn numbers(a: &LoadArgs) -> anyhow::Result<Numbers> {
    let connections = a.connections as usize;
    let threads = a.threads as usize;
    let seed = a.seed.unwrap_or(1);
    let (requests, duration, rate) = (a.requests, a.duration, a.rate);
    if a.arrival.is_some() && rate.is_none() {
        usage!("--arrival needs --rate (it shapes an open-loop schedule)");
    }
    // ab's rule: a closed loop cannot keep more requests outstanding than it sends.
    // Without it, `-c 64` and no -n nor -d sent one request and reported 64.
    if rate.is_none() && duration.is_none() && requests.unwrap_or(1) < a.connections {
        usage!(
            "-c {} is more than the {} request(s) to send: give -n (at least {}) or a duration -d",
            a.connections,
            requests.unwrap_or(1),
            a.connections
        );
    }
    let max_connections = match a.max_connections {
        Some(m) => {
            let m = m as usize;
            if m < connections {
                usage!("--max-connections ({m}) must be at least -c ({connections})");
            }
            m
        }
        None if rate.is_some() => connections.max(256),
        None => connections,
    };
    let warmup = a.warmup;
    if !warmup.is_zero() && duration.is_none() && rate.is_none() && requests.is_none() {
        usage!("--warmup needs something to measure after it: add -d (e.g. -d 10s) or -n");
    }
    let mut stop = StopCondition {
        // -n counts the measured requests: the engine gives no ticket to one intended
        // before the warm-up boundary.
        warmup,
        requests: requests.or(match (duration, rate) {
            (None, None) => Some(1),
            _ => None,
        }),
        duration: duration.or(match (requests, rate) {
            (None, Some(_)) => Some(Duration::from_secs(10)),
            _ => None,
        }),
    };
    // One engine run on the same connections: warm-up, then the measured -d.
    stop.duration = stop.duration.map(|d| d + warmup);
    let model = match rate {
        Some(rate) => LoadModel::Open {
            rate,
            arrival: match a.arrival {
                Some(ArrivalArg::Poisson) => Arrival::Poisson,
                Some(ArrivalArg::Constant) | None => Arrival::Constant,
            },
            seed,
        },
        None => LoadModel::Closed,
    };
    Ok(Numbers {
        stop,
        connections,
        max_connections,
        threads,
        seed,
        timeout: a.timeout,
        model,
    })
}

/// The runs `0..n` of a repeated load (`--repeat`, or every target's rounds): a
/// cool-down rest before each but the first, and no further run once `interrupted`
/// (the interrupted run keeps its figures). The one loop of `bench`, `bench --replay`
/// and `bench --target`.
pub fn repeats(
    n: usize,
    cooldown: Duration,
    interrupted: &AtomicBool,
) -> impl Iterator<Item = usize> + '_ {
    (0..n).take_while(move |&k| {
        if k > 0 {
            volley_harness::rest(cooldown, interrupted);
        }
        !interrupted.load(Ordering::Relaxed)
    })
}

/// One measured run of `spec`: the harness's `measure` with the generator's headroom
/// watched beside it, closed into a `Summary` with the wire report and bench's notes.
/// `interrupted` (Ctrl-C) only adds a note; the load stops by `spec.cfg.stop_flag`.
pub fn run_once(
    spec: &LoadSpec,
    interrupted: &AtomicBool,
    show_progress: bool,
    keep: Keep,
) -> anyhow::Result<Ran> {
    let live = Live::new();
    let done = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    let to_store = match &keep {
        Keep::Live(to) => Some(to),
        Keep::Nothing | Keep::Histograms => None,
    };
    let run = Measure {
        cfg: &spec.cfg,
        wire: &spec.wire.wire,
        live: &live,
        url: spec.url.clone(),
        method: spec.method.clone(),
        stream: to_store.map(|_| LiveWindows {
            tx,
            key: WindowKey::Completion,
            stream_only: true,
        }),
        first_answers: spec.first_answers.clone(),
    };
    // Generator headroom: sampled before the run, once a second on its own thread, and
    // at the end. Unreadable /proc (not Linux) leaves `headroom` null, never fails a run.
    // Over HTTP/3 there is no TCP socket to count: the socket table is not walked.
    let tcp_target = (!matches!(spec.wire.wire.http, volley_engine::HttpVersion::H3 { .. }))
        .then_some(spec.cfg.addr);
    let headroom = HeadroomWatch::start(tcp_target, Duration::from_secs(1)).ok();
    let (measured, written) = std::thread::scope(|scope| {
        if show_progress {
            scope.spawn(|| progress::bench(&live, &done, spec.cfg.stop));
        }
        let writer = to_store
            .map(|to| scope.spawn(move || write_live(rx, volley_engine::workers(&spec.cfg), to)));
        let r = measure(&run);
        drop(run);
        done.store(true, Ordering::Relaxed);
        (r, writer.map(|w| w.join()))
    });
    let headroom = headroom.map(HeadroomWatch::finish);
    let MeasuredRun {
        recorder,
        mut info,
        outcome,
        ..
    } = measured.map_err(|e| match e {
        MeasureError::Engine(e) => anyhow::Error::new(e).context("cannot run the load"),
        MeasureError::Merge(e) => {
            anyhow::Error::new(e).context("cannot merge the workers' results")
        }
    })?;
    run_notes(
        &mut info.notes,
        &outcome,
        interrupted.load(Ordering::Relaxed),
    );
    let wire_report =
        volley_harness::wire::report(&spec.wire.wire, &outcome, spec.negotiated.clone());
    let mut recorder = recorder;
    recorder.finish();
    if let Some(w) = written {
        let (digests, failed) = w.map_err(|_| anyhow::anyhow!("the seconds' writer panicked"))?;
        if let Some(e) = failed {
            return Err(e);
        }
        recorder.set_digests(digests);
    }
    let histograms = match keep {
        Keep::Nothing => Vec::new(),
        Keep::Histograms | Keep::Live(_) => volley_harness::stored::histograms(&recorder)
            .context("cannot serialise the run's histograms")?,
    };
    let mut summary = recorder.close(&info).context("cannot summarise the run")?;
    summary.wire = Some(wire_report);
    summary.headroom = headroom;
    if let Some(low) = headroom.and_then(|h| h.warning()) {
        summary.notes.push(low);
    }
    errors::no_free_port(&mut summary, outcome.connects_without_port);
    summary.notes.extend(
        server_trouble(&summary)
            .into_iter()
            .chain(summary.mostly_failed()),
    );
    Ok(Ran {
        summary,
        histograms,
    })
}

/// The notes a run's own events add to its summary: an interrupt, an io_uring the
/// kernel refused, requests re-sent after the server closed an idle connection.
fn run_notes<S>(notes: &mut Vec<String>, outcome: &RunOutcome<S>, interrupted: bool) {
    if interrupted {
        notes.push("interrupted (Ctrl-C): the summary covers what was measured until then; requests in flight were recorded as censored".into());
    }
    if let Some(e) = &outcome.io_refused {
        // Once per process, however many runs (targets, repeats) meet the same kernel.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| eprintln!("volley: io_uring refused by the kernel ({e}); using epoll"));
        notes.push(format!(
            "--io uring was refused by the kernel ({e}): this run used epoll"
        ));
    }
    if outcome.idle_close_retries > 0 {
        notes.push(format!(
            "{} request(s) were re-sent once because the server had closed an idle kept-alive connection",
            outcome.idle_close_retries
        ));
    }
}

/// What a measured run keeps for the store.
pub enum Keep {
    /// Nothing: the run is not saved.
    Nothing,
    /// Its histograms, every second's and the whole run's, for the caller to store.
    Histograms,
    /// Each second stored the moment it closes (`--save`: nothing held until the end,
    /// nothing lost if the process dies), the whole run's histograms for the caller.
    Live(LiveTarget),
}

impl Keep {
    /// [`Keep::Live`] into `saver`'s next step, or nothing without one.
    pub fn live(saver: Option<&super::save::Saver>) -> Keep {
        saver.map_or(Keep::Nothing, |s| Keep::Live(s.live()))
    }
}

/// One measured run: its summary, and its histograms as the store keeps them (empty
/// unless asked for: serialising them costs time a run not saved does not need).
pub struct Ran {
    /// The closed summary, with bench's notes.
    pub summary: Summary,
    /// Whole-run and per-second histograms (`volley_harness::stored`).
    pub histograms: Vec<volley_store::HistogramBlob>,
}

#[cfg(test)]
mod tests;
