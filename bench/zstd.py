#!/usr/bin/env python3
"""ruzstd (volley's zstd decoder since 5f81b4a) against libzstd (the one before), on
realistic bodies: how much slower is `--compressed zstd`'s decoding now?

Run: python3 bench/zstd.py [--rounds 10] [--ms 1000] [--piece 16384] [--skip-build]

Bodies: text volley's repository holds (its docs and sources, concatenated: prose and
code, as a web server's text bodies are), cut at 10 KB and 1 MB and compressed at level
3 by the `zstd` tool (Debian's `zstd` package), what a server configured for zstd sends
by default. Each side decodes a body again and again for --ms milliseconds, handed over
in --piece-byte pieces as socket reads hand it over, with a fresh decoder per body as a
response gets:
- ruzstd: `crates/engine/examples/zstd_decode.rs`, through the engine's own
  `BodyDecoder` (the path a response takes in a run);
- ruzstd-whole: the same example reading the whole body through ruzstd's own
  `StreamingDecoder` (no adapter), to tell ruzstd's speed from the adapter's cost;
- libzstd: `bench/zstd_libzstd.c`, the streaming loop the engine ran before (a DCtx
  per response, 16 KiB output steps), linked against the system's libzstd.so.1.
The three alternate in paired rounds (A B C, then C B A), so the machine's drift cancels in
each round's ratio; printed per body: each side's median time per decode and the
median of the per-round ratios ruzstd/libzstd with its bootstrap 95% CI. Times are each
process's CPU time per decode (the wall clock would count the time others held the CPU
on a shared machine); say the machine's load beside the figures. Nothing here is a test.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, bootstrap_median_ci, round_order  # noqa: E402

LIBZSTD = "/usr/lib/x86_64-linux-gnu/libzstd.so.1"


def corpus():
    """The repository's docs and Rust sources, in a fixed order."""
    parts = []
    for top in ("docs", "crates", "src"):
        for d, _, files in sorted(os.walk(os.path.join(ROOT, top))):
            for f in sorted(files):
                if f.endswith((".md", ".rs")):
                    with open(os.path.join(d, f), "rb") as fh:
                        parts.append(fh.read())
    return b"".join(parts)


def build(tmp, skip):
    ours = os.path.join(ROOT, "target", "release", "examples", "zstd_decode")
    if not skip:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "volley-engine",
                        "--example", "zstd_decode"], cwd=ROOT, check=True)
    theirs = os.path.join(tmp, "zstd_libzstd")
    subprocess.run(["gcc", "-O2", "-o", theirs, os.path.join(ROOT, "bench", "zstd_libzstd.c"),
                    LIBZSTD], check=True)
    return {"ruzstd": [ours], "libzstd": [theirs], "ruzstd-whole": [ours, "whole"]}


def run(cmd, coded, size, piece, ms):
    out = subprocess.run([cmd[0], coded, str(size), str(piece), str(ms)] + cmd[1:], check=True,
                         capture_output=True, text=True, timeout=ms / 1000 + 30).stdout
    done, ns = out.split()
    return float(ns)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ms", type=int, default=1000)
    ap.add_argument("--piece", type=int, default=16384)
    ap.add_argument("--skip-build", action="store_true")
    a = ap.parse_args()
    text = corpus()
    with tempfile.TemporaryDirectory() as tmp:
        tools = build(tmp, a.skip_build)
        bodies = []
        for name, n in (("10 KB", 10_000), ("1 MB", 1_000_000)):
            plain = os.path.join(tmp, f"{n}.txt")
            with open(plain, "wb") as fh:
                fh.write(text[:n])
            subprocess.run(["zstd", "-q", "-3", "-f", plain, "-o", plain + ".zst"], check=True)
            bodies.append((name, n, plain + ".zst", os.path.getsize(plain + ".zst")))
        with open("/proc/loadavg") as fh:
            print(f"load average before: {fh.read().split()[:3]}, {os.cpu_count()} CPUs")
        for name, n, coded, csize in bodies:
            times = {t: [] for t in tools}
            for k in range(a.rounds):
                for t in round_order(list(tools), k):
                    times[t].append(run(tools[t], coded, n, a.piece, a.ms))
            med = {t: statistics.median(v) for t, v in times.items()}
            print(f"{name} body ({csize} bytes coded, level 3), {a.rounds} paired rounds, "
                  "median CPU per decode: " + ", ".join(
                      f"{t} {med[t] / 1e3:.1f} us ({n / med[t]:.2f} GB/s)" for t in tools))
            for t in ("ruzstd", "ruzstd-whole"):
                ratios = [x / y for x, y in zip(times[t], times["libzstd"])]
                lo, hi = bootstrap_median_ci(ratios)
                print(f"  {t}/libzstd {statistics.median(ratios):.2f}x [{lo:.2f}, {hi:.2f}]")
        with open("/proc/loadavg") as fh:
            print(f"load average after: {fh.read().split()[:3]}")


if __name__ == "__main__":
    main()
