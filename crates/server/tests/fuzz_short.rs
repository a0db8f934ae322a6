//! Seeded short runs of the HTTP/2 and HTTP/3 fuzz targets (`fuzz/fuzz_targets/`): the same
//! harness functions libFuzzer drives (`volley_h2::fuzzing`, `volley_h3::fuzzing`,
//! `volley_server::fuzzing`),
//! fed the committed corpus, every committed regression input, and a few thousand
//! inputs mutated from the corpus by a seeded generator. A panic in a harness (a crash,
//! or one of its assertions) fails the test; the long runs are `cargo +nightly fuzz run`
//! (see fuzz/README.md).

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mutated inputs per target: a few seconds in a debug build.
const MUTATIONS: usize = 20_000;
/// Longest mutated input, bytes.
const MAX_LEN: usize = 4_096;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Every file of `fuzz/corpus/<target>` and `fuzz/regressions/<target>`.
fn inputs(target: &str) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(target)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        for p in paths {
            v.push(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
        }
    }
    v
}

/// One random edit of `base`, with `other` for splices: libFuzzer's common moves
/// (flip, overwrite, insert, erase, duplicate, splice), so inputs stay near valid
/// frame sequences and reach past the first check.
fn mutate(rng: &mut ChaCha8Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = if v.is_empty() {
            0
        } else {
            rng.random_range(0..v.len())
        };
        match rng.random_range(0..6) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.random_range(0..8),
            1 if !v.is_empty() => v[at] = rng.random(),
            2 => {
                let n = rng.random_range(1..=16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                v.splice(at..at, bytes);
            }
            3 if !v.is_empty() => {
                let end = (at + rng.random_range(1..=32)).min(v.len());
                v.drain(at..end);
            }
            4 if !v.is_empty() => {
                let end = (at + rng.random_range(1..=64)).min(v.len());
                let copy = v[at..end].to_vec();
                v.splice(at..at, copy);
            }
            _ if !other.is_empty() => {
                let from = rng.random_range(0..other.len());
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
            _ => {}
        }
    }
    v.truncate(MAX_LEN);
    v
}

fn short_run(target: &str, seed: u64, harness: fn(&[u8])) {
    let corpus = inputs(target);
    assert!(
        !corpus.is_empty(),
        "no corpus for {target} in {}",
        fuzz_dir().display()
    );
    for input in &corpus {
        harness(input);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..MUTATIONS {
        let base = &corpus[rng.random_range(0..corpus.len())];
        let other = &corpus[rng.random_range(0..corpus.len())];
        harness(&mutate(&mut rng, base, other));
    }
}

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
