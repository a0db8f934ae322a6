//! One load from `volley bench`'s flags: the flags as typed ([`LoadArgs`]), their
//! resolution into a [`LoadSpec`] (URL parsed, host resolved, files read, numbers
//! checked: every mistake here is a usage error, exit 2), and one measured run of it
//! ([`run_once`]: the harness's `measure`, plus the wire report, the generator's
//! headroom and the notes `volley bench` adds).
//!
//! Place in the flow: below both `volley bench URL` (src/cmd/bench.rs) and
//! `volley bench --target` (src/cmd/bench_target.rs), which each compose it with what
//! they add (repeats, managed targets); it imports neither.

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use volley_engine::{
    Arrival, ErrorKind, ListSourceFactory, Live, LoadConfig, LoadModel, Order, Request,
    RequestTemplate, StatusRange, StopCondition,
};
use volley_harness::{measure, Measure, MeasureError, MeasuredRun};
use volley_metrics::{FirstRequest, Summary};
use volley_monitor::headroom::HeadroomWatch;
use volley_units::parse_duration;

use super::bench_wire::{self, ResolvedWire, WireArgs};
use super::progress;
use crate::exit::usage;

/// The load flags of `volley bench`, as typed (flattened into bench's `Args`). Numbers are kept as strings so that a bad value
/// ("-5", "0", "ten") gets one clear line from [`resolve`] rather than clap's usage block.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct LoadArgs {
    /// Target URL, http://host[:port]/path (optional when --urls gives full URLs).
    pub url: Option<String>,
    /// Number of requests to perform (ab's -n). Default: 1, or 10 s of load with --rate.
    #[arg(short = 'n', long = "requests", allow_hyphen_values = true)]
    pub requests: Option<String>,
    /// Duration of the run, e.g. 10s, 500ms, 2m (wrk's -d). The first limit reached ends the run.
    #[arg(short = 'd', long = "duration", allow_hyphen_values = true)]
    pub duration: Option<String>,
    /// Connections: concurrency in a closed loop, initial pool in an open loop.
    #[arg(short = 'c', long = "connections", allow_hyphen_values = true)]
    pub connections: Option<String>,
    /// Worker threads (default 1; a closed loop uses at most one per connection).
    #[arg(short = 't', long = "threads", allow_hyphen_values = true)]
    pub threads: Option<String>,
    /// Reuse connections (HTTP keep-alive), like ab -k.
    #[arg(short = 'k', long = "keepalive")]
    pub keepalive: bool,
    /// Open loop: send R requests per second on a fixed schedule (wrk2/httperf).
    #[arg(long, allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// Open-loop arrival process: constant or poisson.
    #[arg(long)]
    pub arrival: Option<String>,
    /// Open loop: most connections open at once (default max(c, 256)).
    #[arg(long = "max-connections", allow_hyphen_values = true)]
    pub max_connections: Option<String>,
    /// Seed of the Poisson schedule and of random/weighted URL order (default 1).
    #[arg(long, allow_hyphen_values = true)]
    pub seed: Option<String>,
    /// HTTP method (default GET, or POST when a body is given).
    #[arg(short = 'm', long = "method")]
    pub method: Option<String>,
    /// Extra header 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long = "body-file")]
    pub body_file: Option<PathBuf>,
    /// File of URLs or paths, one per line, each optionally followed by a weight.
    #[arg(long)]
    pub urls: Option<PathBuf>,
    /// Order of the URLs: same, sequential, random, weighted.
    #[arg(long)]
    pub order: Option<String>,
    /// Sequential order: consecutive requests to each URL (default 1).
    #[arg(long, allow_hyphen_values = true)]
    pub block: Option<String>,
    /// Per-request timeout (default 30s); a request past it is a censored timeout.
    #[arg(long, allow_hyphen_values = true)]
    pub timeout: Option<String>,
    /// Write JSON (docs/bench-json.md) to FILE, or to stdout with '-' or no value
    /// (the text report is then not printed).
    #[arg(long, num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<String>,
    /// Write one CSV row per run to FILE.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write one CSV row per second of every run to FILE.
    #[arg(long = "csv-seconds")]
    pub csv_seconds: Option<PathBuf>,
    /// Repeat the run K times and report the median with a bootstrap 95% CI.
    #[arg(long, allow_hyphen_values = true)]
    pub repeat: Option<String>,
    /// Pause between repeated runs (default 2s).
    #[arg(long, allow_hyphen_values = true)]
    pub cooldown: Option<String>,
    /// Run this long on the same connections before measuring, e.g. 2s (default 0s,
    /// like ab and wrk; studies warm up by default). Requests intended before it are
    /// excluded from every figure; -d is the measured period after it. Not with -n.
    #[arg(long, allow_hyphen_values = true)]
    pub warmup: Option<String>,
    /// Print no text report (files given with --json/--csv are still written).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// TLS, HTTP/2, compression and first-request flags: src/cmd/bench_wire.rs.
    #[command(flatten)]
    pub wire: WireArgs,
}

/// One load, resolved: no flag strings left.
pub struct LoadSpec {
    /// The engine's configuration (its `stop_flag` ends the load early).
    pub cfg: LoadConfig,
    /// The URL the summary names.
    pub url: String,
    /// The method the summary names.
    pub method: String,
    /// Run before measuring, on the same connections (the engine runs warm-up + -d).
    pub warmup: Duration,
    /// TLS, HTTP version, body checks, first request.
    pub wire: ResolvedWire,
    /// The URL's host, for TLS failure messages.
    pub host: String,
    /// What a pre-flight TLS handshake agreed to (set by [`LoadSpec::prepare`]).
    negotiated: Option<bench_wire::Negotiated>,
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
        self.negotiated = bench_wire::pre_flight(self.cfg.addr, &self.wire);
        Ok(first)
    }
}

/// Numbers of the flags, checked.
struct Numbers {
    stop: StopCondition,
    connections: usize,
    max_connections: usize,
    threads: usize,
    seed: u64,
    timeout: Duration,
    model: LoadModel,
    warmup: Duration,
}

/// Where to send requests: a parsed `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// `https://`.
    tls: bool,
    host: String,
    port: u16,
    /// Path and query, always starting with '/'.
    path: String,
}

impl Endpoint {
    /// The Host header value: host, plus the port when it is not the scheme's default.
    fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

impl Endpoint {
    /// 443 for https://, 80 for http://.
    fn default_port(&self) -> u16 {
        if self.tls {
            443
        } else {
            80
        }
    }

    fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }
}

/// Parses `http[s]://host[:port][/path]`. Errors are one-line usage messages.
fn parse_url(s: &str) -> Result<Endpoint, String> {
    let lower = s.to_ascii_lowercase();
    let (tls, rest) = if lower.starts_with("https://") {
        (true, &s[8..])
    } else if lower.starts_with("http://") {
        (false, &s[7..])
    } else {
        return Err(format!(
            "invalid URL '{s}': expected http[s]://host[:port]/path"
        ));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err(format!("invalid URL '{s}': user info is not supported"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some(close) = v6.find(']') else {
            return Err(format!("invalid URL '{s}': unclosed '[' in host"));
        };
        (&v6[..close], v6[close + 1..].strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.contains(|c: char| c.is_whitespace()) {
        return Err(format!("invalid URL '{s}': missing or bad host"));
    }
    let port = match port {
        None if tls => 443,
        None => 80,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("invalid URL '{s}': bad port '{p}'")),
        },
    };
    let tail = tail.split('#').next().unwrap_or("");
    let path = if tail.is_empty() {
        "/".to_string()
    } else if tail.starts_with('?') {
        format!("/{tail}")
    } else {
        tail.to_string()
    };
    if path.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(format!("invalid URL '{s}': whitespace in path"));
    }
    Ok(Endpoint {
        tls,
        host: host.to_string(),
        port,
        path,
    })
}

/// A whole number >= `min`, for flag `name`.
fn parse_count(name: &str, s: &str, min: u64) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(v) if v >= min as i128 && v <= u64::MAX as i128 => Ok(v as u64),
        Ok(_) => Err(format!("{name} must be at least {min}, got {s}")),
        Err(_) => Err(format!("{name} must be a whole number, got '{s}'")),
    }
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

/// Turns the load flags into a [`LoadSpec`]. Every error here is the user's to fix:
/// exit 2.
pub fn resolve(a: LoadArgs) -> anyhow::Result<LoadSpec> {
    let entries = endpoints(&a)?;
    let first = entries[0].0.clone();
    let wire = u!(bench_wire::resolve(&a.wire, first.tls, &first.host));
    let addr = match (first.host.as_str(), first.port).to_socket_addrs() {
        Ok(mut addrs) => match addrs.next() {
            Some(a) => a,
            None => usage!("cannot resolve host '{}': no address", first.host),
        },
        Err(e) => usage!("cannot resolve host '{}': {e}", first.host),
    };
    let n = numbers(&a)?;
    let (source, method) = requests(&a, &entries, &wire, n.seed)?;
    let url = a.url.clone().unwrap_or_else(|| {
        format!(
            "{}://{}{}",
            first.scheme(),
            first.host_header(),
            if entries.len() > 1 {
                "/*"
            } else {
                first.path.as_str()
            }
        )
    });
    Ok(LoadSpec {
        cfg: LoadConfig {
            addr,
            threads: n.threads,
            connections: n.connections,
            max_connections: n.max_connections,
            keep_alive: a.keepalive,
            model: n.model,
            stop: n.stop,
            timeout: n.timeout,
            connect_timeout: n.timeout.min(Duration::from_secs(10)),
            accept_status: StatusRange::default(),
            source: Arc::new(source),
            stop_flag: Arc::new(AtomicBool::new(false)),
        },
        url,
        method,
        warmup: n.warmup,
        wire,
        host: first.host.clone(),
        negotiated: None,
    })
}

/// Where requests go: the URL argument and/or the `--urls` list (paths there are
/// relative to it), all on one scheme, host and port. Never empty.
fn endpoints(a: &LoadArgs) -> anyhow::Result<Vec<(Endpoint, Option<f64>)>> {
    let base = match &a.url {
        Some(u) => Some(u!(parse_url(u))),
        None => None,
    };
    let mut entries: Vec<(Endpoint, Option<f64>)> = Vec::new();
    if let Some(path) = &a.urls {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => usage!("cannot read URL list {}: {e}", path.display()),
        };
        let list = u!(parse_url_list(&text).map_err(|e| format!("{}: {e}", path.display())));
        for (item, w) in list {
            let t = if item.starts_with('/') {
                match (&base, entries.first()) {
                    (Some(b), _) | (None, Some((b, _))) => Endpoint {
                        path: item,
                        ..b.clone()
                    },
                    (None, None) => usage!(
                        "{}: '{item}' is a path but no URL gives its host (pass a URL or start the list with one)",
                        path.display()
                    ),
                }
            } else {
                u!(parse_url(&item))
            };
            entries.push((t, w));
        }
    } else if let Some(b) = &base {
        entries.push((b.clone(), None));
    }
    let Some((first, _)) = entries.first().cloned() else {
        usage!("no URL given: volley bench http://host:port/path (or --urls FILE)");
    };
    if let Some(other) = entries
        .iter()
        .find(|(t, _)| (t.tls, &t.host, t.port) != (first.tls, &first.host, first.port))
    {
        usage!(
            "all URLs must share one scheme, host and port: {}://{}:{} and {}://{}:{}",
            first.scheme(),
            first.host,
            first.port,
            other.0.scheme(),
            other.0.host,
            other.0.port
        );
    }
    Ok(entries)
}

/// The numeric flags, checked against each other, and the stop condition they make.
fn numbers(a: &LoadArgs) -> anyhow::Result<Numbers> {
    let requests = match &a.requests {
        Some(s) => Some(u!(parse_count("-n", s, 1))),
        None => None,
    };
    let duration = match &a.duration {
        Some(s) => {
            let d = u!(parse_duration(s));
            if d.is_zero() {
                usage!("-d must be longer than zero, got {s}");
            }
            Some(d)
        }
        None => None,
    };
    let connections = u!(parse_count(
        "-c",
        a.connections.as_deref().unwrap_or("1"),
        1
    )) as usize;
    let threads = u!(parse_count("-t", a.threads.as_deref().unwrap_or("1"), 1)) as usize;
    let seed = u!(parse_count("--seed", a.seed.as_deref().unwrap_or("1"), 0));
    let timeout = u!(parse_duration(a.timeout.as_deref().unwrap_or("30s")));
    if timeout.is_zero() {
        usage!("--timeout must be longer than zero");
    }
    // Checked here so a bad value is refused before anything runs; bench.rs and
    // bench_target.rs read them again for their own loops.
    u!(repeat_count(a));
    u!(cooldown(a));
    let rate = match &a.rate {
        Some(s) => match s.trim().parse::<f64>() {
            Ok(r) if r.is_finite() && r > 0.0 => Some(r),
            _ => usage!("--rate must be a positive number of requests per second, got '{s}'"),
        },
        None => None,
    };
    let arrival = match a.arrival.as_deref() {
        None | Some("constant") => Arrival::Constant,
        Some("poisson") => Arrival::Poisson,
        Some(other) => usage!("--arrival must be constant or poisson, got '{other}'"),
    };
    if a.arrival.is_some() && rate.is_none() {
        usage!("--arrival needs --rate (it shapes an open-loop schedule)");
    }
    let max_connections = match &a.max_connections {
        Some(s) => {
            let m = u!(parse_count("--max-connections", s, 1)) as usize;
            if m < connections {
                usage!("--max-connections ({m}) must be at least -c ({connections})");
            }
            m
        }
        None if rate.is_some() => connections.max(256),
        None => connections,
    };
    let warmup = u!(parse_duration(a.warmup.as_deref().unwrap_or("0s")));
    if !warmup.is_zero() {
        // The engine's request limit counts every request it starts, warm-up ones too,
        // so "-n N measured requests" cannot be promised: a warm-up is a time.
        if requests.is_some() {
            usage!("--warmup cannot be combined with -n (the request limit would count warm-up requests): measure a duration with -d");
        }
        if duration.is_none() && rate.is_none() {
            usage!("--warmup needs a measured duration: add -d (e.g. -d 10s)");
        }
    }
    let mut stop = StopCondition {
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
            arrival,
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
        timeout,
        model,
        warmup,
    })
}

/// `--repeat` (default 1).
pub fn repeat_count(a: &LoadArgs) -> Result<usize, String> {
    parse_count("--repeat", a.repeat.as_deref().unwrap_or("1"), 1).map(|k| k as usize)
}

/// `--cooldown` (default 2s).
pub fn cooldown(a: &LoadArgs) -> Result<Duration, String> {
    parse_duration(a.cooldown.as_deref().unwrap_or("2s")).map_err(|e| e.to_string())
}

/// The prebuilt requests (method, headers, body, order over the endpoints) and the
/// method the summary names.
fn requests(
    a: &LoadArgs,
    entries: &[(Endpoint, Option<f64>)],
    wire: &ResolvedWire,
    seed: u64,
) -> anyhow::Result<(ListSourceFactory, String)> {
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
    let mut headers = Vec::new();
    for h in &a.headers {
        match h.split_once(':') {
            Some((n, v)) if !n.trim().is_empty() => {
                headers.push((n.trim().to_string(), v.trim().to_string()))
            }
            _ => usage!("-H expects 'Name: value', got '{h}'"),
        }
    }
    if let Some(coding) = wire.accept_encoding() {
        if headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("accept-encoding"))
        {
            usage!("--compressed sets Accept-Encoding itself: drop the -H 'Accept-Encoding: ...'");
        }
        headers.push(("Accept-Encoding".into(), coding.into()));
    }
    let order = order(a, entries, seed)?;
    let host = entries[0].0.host_header();
    let mut built: Vec<Request> = Vec::with_capacity(entries.len());
    for (i, (t, _)) in entries.iter().enumerate() {
        let mut tpl = RequestTemplate::new(&method, &t.path, &host).keep_alive(a.keepalive);
        for (n, v) in &headers {
            tpl = tpl.header(n, v);
        }
        if let Some(b) = &body {
            tpl = tpl.body(b.clone());
        }
        match tpl.build(i as u32) {
            Ok(r) => built.push(r),
            Err(e) => usage!("bad request: {e}"),
        }
    }
    match ListSourceFactory::new(built, order) {
        Ok(s) => Ok((s, method)),
        Err(e) => usage!("bad request list: {e}"),
    }
}

/// `--order` over the endpoints (weighted by default when the list has weights,
/// sequential when it has several URLs).
fn order(a: &LoadArgs, entries: &[(Endpoint, Option<f64>)], seed: u64) -> anyhow::Result<Order> {
    let weighted = entries.iter().any(|(_, w)| w.is_some());
    let block = u!(parse_count("--block", a.block.as_deref().unwrap_or("1"), 1));
    let weights = || Order::Weighted {
        weights: entries.iter().map(|(_, w)| w.unwrap_or(1.0)).collect(),
        seed,
    };
    Ok(match a.order.as_deref() {
        None if weighted => weights(),
        None if entries.len() > 1 => Order::Sequential { block },
        None | Some("same") => Order::Same,
        Some("sequential") => Order::Sequential { block },
        Some("random") => Order::Random { seed },
        Some("weighted") => {
            if !weighted {
                usage!("--order weighted needs a weight column in --urls (URL WEIGHT per line)");
            }
            weights()
        }
        Some(other) => {
            usage!("--order must be same, sequential, random or weighted, got '{other}'")
        }
    })
}

/// Transport failures: the server refusing, resetting or closing on us.
const TRANSPORT: [ErrorKind; 4] = [
    ErrorKind::Connect,
    ErrorKind::Reset,
    ErrorKind::Closed,
    ErrorKind::Timeout,
];

/// A line describing failures, e.g. "1000 connect errors, 3 reset errors".
pub fn describe_errors(s: &Summary) -> String {
    let parts: Vec<String> = s
        .errors
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, n)| {
            format!(
                "{n} {} error{}",
                k.replace('_', "-"),
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect();
    if parts.is_empty() {
        "no requests completed".into()
    } else {
        parts.join(", ")
    }
}

/// What the server did when requests failed at the transport level (refused, reset,
/// closed, timed out) although others succeeded: either it went away (no success after
/// some second) or it dropped some connections along the way.
pub fn server_trouble(s: &Summary) -> Option<String> {
    let transport = |errors: &std::collections::BTreeMap<&'static str, u64>| {
        TRANSPORT
            .iter()
            .map(|k| errors.get(k.name()).copied().unwrap_or(0))
            .sum::<u64>()
    };
    let total = transport(&s.errors);
    if total == 0 || s.requests.ok == 0 {
        return None;
    }
    let last_ok = s.seconds.iter().rposition(|x| x.ok > 0)?;
    let after: u64 = s.seconds[last_ok + 1..]
        .iter()
        .map(|x| transport(&x.errors))
        .sum();
    Some(if after > 0 {
        format!(
            "the server stopped answering during second {}: no request succeeded after it ({})",
            last_ok + 1,
            describe_errors(s)
        )
    } else {
        format!(
            "the server refused, reset or dropped connections during the run: {total} transport error(s) ({})",
            describe_errors(s)
        )
    })
}

/// One measured run of `spec`: the harness's `measure` with the generator's headroom
/// watched beside it, closed into a `Summary` with the wire report and bench's notes.
/// `interrupted` (Ctrl-C) only adds a note; the load stops by `spec.cfg.stop_flag`.
pub fn run_once(
    spec: &LoadSpec,
    interrupted: &AtomicBool,
    show_progress: bool,
    keep_histograms: bool,
) -> anyhow::Result<Ran> {
    let live = Live::new();
    let done = AtomicBool::new(false);
    let run = Measure {
        cfg: &spec.cfg,
        wire: &spec.wire.wire,
        live: &live,
        warmup: spec.warmup,
        url: spec.url.clone(),
        method: spec.method.clone(),
        stream: None,
    };
    // Generator headroom: sampled before the run, once a second on its own thread, and
    // at the end. Unreadable /proc (not Linux) leaves `headroom` null, never fails a run.
    let headroom = HeadroomWatch::start(spec.cfg.addr, Duration::from_secs(1)).ok();
    let measured = std::thread::scope(|scope| {
        if show_progress {
            scope.spawn(|| progress::bench(&live, &done, spec.cfg.stop));
        }
        let r = measure(&run);
        done.store(true, Ordering::Relaxed);
        r
    });
    let headroom = headroom.map(HeadroomWatch::finish);
    let MeasuredRun {
        recorder,
        mut info,
        outcome,
    } = measured.map_err(|e| match e {
        MeasureError::Engine(e) => anyhow::Error::new(e).context("cannot run the load"),
        MeasureError::Merge(e) => {
            anyhow::Error::new(e).context("cannot merge the workers' results")
        }
    })?;
    if interrupted.load(Ordering::Relaxed) {
        info.notes.push("interrupted (Ctrl-C): the summary covers what was measured until then; requests in flight were recorded as censored".into());
    }
    if outcome.idle_close_retries > 0 {
        info.notes.push(format!(
            "{} request(s) were re-sent once because the server had closed an idle kept-alive connection",
            outcome.idle_close_retries
        ));
    }
    let wire_report = bench_wire::report(&spec.wire, &outcome, &spec.negotiated);
    let mut recorder = recorder;
    recorder.finish();
    let histograms = match keep_histograms {
        true => volley_harness::stored::histograms(&recorder)
            .context("cannot serialise the run's histograms")?,
        false => Vec::new(),
    };
    let mut summary = recorder.close(&info).context("cannot summarise the run")?;
    summary.wire = Some(wire_report);
    summary.headroom = headroom;
    if let Some(low) = headroom.and_then(|h| h.warning()) {
        summary.notes.push(low);
    }
    if let Some(line) = server_trouble(&summary) {
        summary.notes.push(line);
    }
    Ok(Ran {
        summary,
        histograms,
    })
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
