//! The seeded short run of a fuzz target, shared by the crates whose tests drive their
//! fuzz harnesses (`crates/server/tests/fuzz_short.rs`, `crates/office/tests/`): the
//! committed corpus (`corpus/<target>/`), every regression input
//! (`regressions/<target>/`) and seeded mutations of them. Included with `#[path]`,
//! since the fuzz directory is no crate of the workspace.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mutated inputs per target: a few seconds in a debug build.
pub const MUTATIONS: usize = 20_000;
/// Longest mutated input, bytes.
pub const MAX_LEN: usize = 4_096;

pub fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Every file of `fuzz/corpus/<target>` and `fuzz/regressions/<target>`.
pub fn inputs(target: &str) -> Vec<Vec<u8>> {
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
pub fn mutate(rng: &mut ChaCha8Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
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

pub fn short_run(target: &str, seed: u64, harness: fn(&[u8])) {
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

/// `VOLLEY_FUZZ_RUNS=N`: N seeded mutations of `target`'s corpus through `harness`, a
/// longer run where libFuzzer is not at hand (not coverage-guided, so it finds less
/// a run than libFuzzer would); nothing without it. Returns the runs made.
#[allow(dead_code)] // Not every crate that includes this file has a long run.
pub fn long_run(target: &str, seed: u64, harness: fn(&[u8])) -> usize {
    let Some(runs) = std::env::var("VOLLEY_FUZZ_RUNS")
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
    else {
        return 0;
    };
    let corpus = inputs(target);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..runs {
        let base = &corpus[rng.random_range(0..corpus.len())];
        let other = &corpus[rng.random_range(0..corpus.len())];
        harness(&mutate(&mut rng, base, other));
    }
    runs
}
