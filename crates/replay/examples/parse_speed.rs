//! Parse speed of the log reader: `cargo run --release -p volley-replay --example
//! parse_speed -- FILE` reads FILE (any supported log) to the end and prints one JSON
//! line with the lines, records and seconds taken; with `--plan` each record also goes
//! through the replay planner (its client table included), as `bench --replay` reads a
//! log. With `--write N FILE` it first writes N lines (20 requests a millisecond, or
//! one every `--gap-us G`; 350 clients, or `--clients K` distinct addresses in turn; a
//! few lines out of order) to compare against `wc -l FILE` or to replay, in
//! `--layout L`: `volley` (Combined with microsecond stamps, as volley's server writes
//! it; the default), `combined` and `common` (nginx's and Apache's defaults: whole
//! seconds) or `json` (nginx variable names, `$msec`); `--gzip` compresses it as it
//! is written (FILE is then gzip, which the reader takes as it is).

use std::io::Write;
use std::time::Instant;
use volley_replay::schedule::{Planner, ReplayOptions};
use volley_replay::{LogReader, ReaderOptions};

/// What to do, from the command line.
struct Opts {
    write: Option<u64>,
    layout: Layout,
    gzip: bool,
    gap_us: u64,
    clients: Option<u64>,
    plan: bool,
    file: String,
}

fn opts() -> Opts {
    let usage = || -> ! {
        eprintln!(
            "usage: parse_speed [--write N [--gap-us G] [--clients K] [--layout volley|combined|common|json] [--gzip]] [--plan] FILE"
        );
        std::process::exit(2);
    };
    let mut o = Opts {
        write: None,
        layout: Layout::Volley,
        gzip: false,
        gap_us: 50,
        clients: None,
        plan: false,
        file: String::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = || -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage())
        };
        match a.as_str() {
            "--write" => o.write = Some(num()),
            "--gap-us" => o.gap_us = num().max(1),
            "--clients" => o.clients = Some(num().max(1)),
            "--plan" => o.plan = true,
            "--gzip" => o.gzip = true,
            "--layout" => {
                o.layout = match args.next().as_deref() {
                    Some("volley") => Layout::Volley,
                    Some("combined") => Layout::Combined,
                    Some("common") => Layout::Common,
                    Some("json") => Layout::Json,
                    _ => usage(),
                }
            }
            _ if o.file.is_empty() && !a.starts_with("--") => o.file = a,
            _ => usage(),
        }
    }
    if o.file.is_empty() {
        usage();
    }
    o
}

fn main() {
    let o = opts();
    if let Some(n) = o.write {
        write(&o, n);
    }
    let start = Instant::now();
    let mut reader = LogReader::open(o.file.as_ref(), ReaderOptions::default()).expect("open");
    let mut planner = o.plan.then(|| Planner::new(ReplayOptions::default()));
    let (mut records, mut planned) = (0u64, 0u64);
    for r in reader.by_ref() {
        let r = r.expect("read");
        records += 1;
        if let Some(p) = planner.as_mut() {
            planned += u64::from(p.plan(r).is_some());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let dropped = planner.as_ref().map_or(0, |p| p.counts().clients_dropped);
    println!(
        "{{\"lines\":{},\"records\":{records},\"planned\":{planned},\"clients_dropped\":{dropped},\"seconds\":{secs:.3},\"lines_per_s\":{:.0}}}",
        reader.lines(),
        reader.lines() as f64 / secs
    );
}

/// The written log's layout.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Volley,
    Combined,
    Common,
    Json,
}

fn write(o: &Opts, n: u64) {
    let file = std::io::BufWriter::new(std::fs::File::create(&o.file).expect("create"));
    let mut out: Box<dyn Write> = if o.gzip {
        Box::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::default(),
        ))
    } else {
        Box::new(file)
    };
    let t0 = 1_700_000_000_000_000u64;
    for i in 0..n {
        // Every 100th line is written 2 ms late, as a worker's buffer would.
        let t = t0 + i * o.gap_us - if i % 100 == 0 { 2_000 } else { 0 };
        let (s, us) = (t / 1_000_000, t % 1_000_000);
        let (hh, mm, ss) = ((s / 3600) % 24, (s / 60) % 60, s % 60);
        let client = match o.clients {
            None => format!("10.0.{}.{}", i % 7, i % 50),
            Some(k) => {
                let c = i % k;
                format!("10.{}.{}.{}", (c >> 16) & 255, (c >> 8) & 255, c & 255)
            }
        };
        let target = format!("/static/file{}.html?v={}", i % 97, i % 13);
        let status = if i % 10 == 0 { 404 } else { 200 };
        let bytes = 1_000 + i % 5_000;
        let ua = "Mozilla/5.0 (X11; Linux x86_64) volley-bench";
        let day = "14/Nov/2023";
        match o.layout {
            Layout::Volley => writeln!(
                out,
                "{client} - - [{day}:{hh:02}:{mm:02}:{ss:02}.{us:06} +0000] \"GET {target} HTTP/1.1\" {status} {bytes} \"-\" \"{ua}\""
            ),
            Layout::Combined => writeln!(
                out,
                "{client} - - [{day}:{hh:02}:{mm:02}:{ss:02} +0000] \"GET {target} HTTP/1.1\" {status} {bytes} \"-\" \"{ua}\""
            ),
            Layout::Common => writeln!(
                out,
                "{client} - - [{day}:{hh:02}:{mm:02}:{ss:02} +0000] \"GET {target} HTTP/1.1\" {status} {bytes}"
            ),
            Layout::Json => writeln!(
                out,
                "{{\"remote_addr\":\"{client}\",\"msec\":\"{s}.{:03}\",\"request\":\"GET {target} HTTP/1.1\",\"status\":{status},\"body_bytes_sent\":{bytes},\"request_time\":0.002,\"http_user_agent\":\"{ua}\"}}",
                us / 1_000
            ),
        }
        .expect("write");
    }
    out.flush().expect("write");
}
