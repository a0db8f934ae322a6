//! How fast the codec alone is, and whether its hot path allocates: submits GET
//! requests and feeds nginx-shaped responses (HEADERS with Huffman-coded fields, one
//! DATA frame) in batches of 100 streams, with no socket involved.
//!
//! `cargo run --release -p volley-h2 --example codec_speed [responses]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use volley_h2::frame::{self, flag, kind};
use volley_h2::hpack::encode_field;
use volley_h2::{EncodedHead, Event, H2Conn, RequestHead, Settings};

/// Counts allocations so the steady state can be checked for per-frame ones.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const BATCH: u32 = 100;
const BODY: usize = 1234;

/// The server's bytes answering streams `first, first+2, ...` (BATCH of them).
fn responses(first: u32) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in [
        (":status", "200"),
        ("server", "nginx/1.22.1"),
        ("date", "Tue, 03 Jun 2025 10:00:00 GMT"),
        ("content-type", "text/plain"),
        ("content-length", "1234"),
        ("last-modified", "Tue, 03 Jun 2025 09:00:00 GMT"),
        ("etag", "\"683ec1a0-4d2\""),
        ("accept-ranges", "bytes"),
    ] {
        encode_field(n.as_bytes(), v.as_bytes(), &mut block);
    }
    let mut out = Vec::new();
    for i in 0..BATCH {
        let id = first + 2 * i;
        frame::write_header(&mut out, block.len(), kind::HEADERS, flag::END_HEADERS, id);
        out.extend_from_slice(&block);
        frame::write_header(&mut out, BODY, kind::DATA, flag::END_STREAM, id);
        out.extend(std::iter::repeat_n(b'x', BODY));
    }
    out
}

fn run(total: u32, capture: bool, pre_encoded: bool) {
    let mut conn = H2Conn::new(Settings {
        capture_headers: capture,
        ..Settings::default()
    });
    let mut preface = Vec::new();
    frame::write_settings(
        &mut preface,
        &[(frame::setting::MAX_CONCURRENT_STREAMS, BATCH)],
    );
    conn.feed(&preface).expect("preface");
    let head = RequestHead {
        method: "GET",
        scheme: "http",
        authority: "127.0.0.1:8080",
        path: "/small.txt",
        headers: &[("user-agent", "volley"), ("accept", "*/*")],
    };
    let encoded = EncodedHead::new(&head).expect("encode");
    // Pre-render the server's bytes so only the codec is timed.
    let batches: Vec<Vec<u8>> = (0..total / BATCH)
        .map(|b| responses(1 + 2 * BATCH * b))
        .collect();
    let mut body_bytes = 0usize;
    let mut done = 0u32;
    let mut allocs_after_warmup = 0;
    let start = Instant::now();
    for (b, bytes) in batches.iter().enumerate() {
        if b == 1 {
            allocs_after_warmup = ALLOCS.load(Ordering::Relaxed);
        }
        for _ in 0..BATCH {
            if pre_encoded {
                conn.submit_encoded(&encoded, b"").expect("submit");
            } else {
                conn.submit(&head, b"").expect("submit");
            }
        }
        let n = conn.pending_output().len();
        conn.consume_output(n);
        // Feed in 16 KiB reads, as a socket would deliver them.
        for chunk in bytes.chunks(16 * 1024) {
            conn.feed(chunk).expect("feed");
        }
        while let Some(ev) = conn.poll_event() {
            if let Event::Data {
                len, end_stream, ..
            } = ev
            {
                body_bytes += len;
                done += end_stream as u32;
            }
        }
        while conn.pop_captured_headers().is_some() {}
    }
    let secs = start.elapsed().as_secs_f64();
    let steady = ALLOCS.load(Ordering::Relaxed) - allocs_after_warmup;
    assert_eq!(body_bytes, done as usize * BODY);
    println!(
        "capture_headers={capture:<5} pre_encoded={pre_encoded:<5} responses={done} time={:.1} ms  {:.0} responses/s  {:.0} ns/response  {:.2} GB/s of body  allocations after warm-up: {steady} ({:.2}/response)",
        secs * 1e3,
        done as f64 / secs,
        secs * 1e9 / done as f64,
        body_bytes as f64 / secs / 1e9,
        steady as f64 / (done - BATCH) as f64,
    );
}

fn main() {
    let total: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let total = (total / BATCH).max(2) * BATCH;
    run(total, false, false);
    run(total, false, true);
    run(total, true, false);
}
