//! Parse speed of the log reader: `cargo run --release -p volley-replay --example
//! parse_speed -- FILE` reads FILE (any supported log) to the end and prints one JSON
//! line with the lines, records and seconds taken; with `--write N FILE` it first writes
//! N Combined lines in volley's own layout (one client in 50, 20 requests a
//! millisecond, a few out of order) to compare against `wc -l FILE`.

use std::io::Write;
use std::time::Instant;
use volley_replay::{LogReader, ReaderOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = match args.as_slice() {
        [w, n, file] if w == "--write" => {
            write(file, n.parse().expect("N lines"));
            file.clone()
        }
        [file] => file.clone(),
        _ => {
            eprintln!("usage: parse_speed [--write N] FILE");
            std::process::exit(2);
        }
    };
    let start = Instant::now();
    let mut reader = LogReader::open(path.as_ref(), ReaderOptions::default()).expect("open");
    let mut records = 0u64;
    for r in reader.by_ref() {
        r.expect("read");
        records += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"lines\":{},\"records\":{records},\"seconds\":{secs:.3},\"lines_per_s\":{:.0}}}",
        reader.lines(),
        reader.lines() as f64 / secs
    );
}

fn write(file: &str, n: u64) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(file).expect("create"));
    let t0 = 1_700_000_000_000_000u64;
    for i in 0..n {
        // Every 100th line is written 2 ms late, as a worker's buffer would.
        let t = t0 + i * 50 - if i % 100 == 0 { 2_000 } else { 0 };
        let (s, us) = (t / 1_000_000, t % 1_000_000);
        let (hh, mm, ss) = ((s / 3600) % 24, (s / 60) % 60, s % 60);
        writeln!(
            out,
            "10.0.{}.{} - - [14/Nov/2023:{hh:02}:{mm:02}:{ss:02}.{us:06} +0000] \"GET /static/file{}.html?v={} HTTP/1.1\" {} {} \"-\" \"Mozilla/5.0 (X11; Linux x86_64) volley-bench\"",
            i % 7,
            i % 50,
            i % 97,
            i % 13,
            if i % 10 == 0 { 404 } else { 200 },
            1_000 + i % 5_000
        )
        .expect("write");
    }
}
