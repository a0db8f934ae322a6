//! Seeded short runs of the HTTP/2 and HTTP/3 fuzz targets (`fuzz/fuzz_targets/`): the same
//! harness functions libFuzzer drives (`volley_h2::fuzzing`, `volley_h3::fuzzing`,
//! `volley_server::fuzzing`),
//! fed the committed corpus, every committed regression input, and a few thousand
//! inputs mutated from the corpus by a seeded generator. A panic in a harness (a crash,
//! or one of its assertions) fails the test; the long runs are `cargo +nightly fuzz run`
//! (see fuzz/README.md).

#[path = "../../../fuzz/short_run.rs"]
mod short_run;
use short_run::{long_run, short_run};

#[test]
fn hpack_decoder_short_run() {
    short_run("hpack_decoder", 1, volley_h2::fuzzing::hpack_decoder);
}

#[test]
fn h2_client_feed_short_run() {
    short_run("h2_client_feed", 2, volley_h2::fuzzing::h2_client_feed);
}

#[test]
fn h2_server_frames_short_run() {
    short_run(
        "h2_server_frames",
        3,
        volley_server::fuzzing::h2_server_frames,
    );
}

#[test]
fn qpack_h3_decoder_short_run() {
    short_run("qpack_h3_decoder", 4, volley_h3::fuzzing::qpack_h3_decoder);
}

#[test]
fn h3_client_streams_short_run() {
    short_run(
        "h3_client_streams",
        5,
        volley_h3::fuzzing::h3_client_streams,
    );
}

#[test]
fn h3_server_streams_short_run() {
    short_run("h3_server_streams", 6, volley_h3::server::fuzz_streams);
}

/// `VOLLEY_FUZZ_RUNS=N`: N more seeded mutations for each HTTP/3 target (QPACK, the
/// client's and the server's stream framing), where libFuzzer is not at hand; nothing
/// without it. A panic fails the test like a crash.
#[test]
fn h3_long_runs_when_asked() {
    type Harness = fn(&[u8]);
    let targets: [(&str, u64, Harness); 3] = [
        ("qpack_h3_decoder", 40, volley_h3::fuzzing::qpack_h3_decoder),
        (
            "h3_client_streams",
            50,
            volley_h3::fuzzing::h3_client_streams,
        ),
        ("h3_server_streams", 60, volley_h3::server::fuzz_streams),
    ];
    for (target, seed, harness) in targets {
        let started = std::time::Instant::now();
        let runs = long_run(target, seed, harness);
        if runs > 0 {
            eprintln!(
                "{target}: {runs} runs, no crash, {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
}
