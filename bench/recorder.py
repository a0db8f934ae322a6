#!/usr/bin/env python3
"""The recorder's cost per sample by window key, as a ratio in one run.

Run: python3 bench/recorder.py [--rounds 12] [--samples 1000000] [--json FILE]

Builds and runs crates/metrics/examples/window_key_cost.rs (release) pinned to one core:
the same pre-made samples recorded into a recorder keyed by completion (the default:
`volley bench`, study steps) and one keyed by intended send time with a 10 s hold (the
injector agents), in paired rounds whose order alternates (common.round_order's rule).
Reports each key's median ns/sample and the median of the per-round ratios
intended/completion with a bootstrap 95% CI, by the process's CPU time (what other
processes on a shared core do not inflate) and by wall time. No network, no server. Nothing here is a
test: timing never decides one.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import CLIENT_CORE, ROOT, bootstrap_median_ci, dump_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--json", default=None, help="write the per-round figures here")
    a = ap.parse_args()
    if a.rounds < 1 or a.samples < 1:
        print("recorder.py: --rounds and --samples must be at least 1", file=sys.stderr)
        sys.exit(2)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "volley-metrics",
                    "--example", "window_key_cost"], cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "window_key_cost")
    out = subprocess.run(["taskset", "-c", CLIENT_CORE, exe, str(a.rounds), str(a.samples)],
                         capture_output=True, text=True, check=True, timeout=1800).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    ratios = [r["intended_ns"] / r["completion_ns"] for r in rows]
    lo, hi = bootstrap_median_ci(ratios)
    print(f"## recorder cost per sample, {a.samples} samples x {len(rows)} paired rounds "
          f"(core {CLIENT_CORE})")
    for key, label in (("completion", "completion key"), ("intended", "intended key")):
        cpu = statistics.median(r[f"{key}_ns"] for r in rows)
        wall = statistics.median(r[f"{key}_wall_ns"] for r in rows)
        print(f"  {label:<15} median {cpu:.1f} CPU ns/sample ({wall:.1f} wall)")
    print(f"  intended/completion CPU ratio median {statistics.median(ratios):.3f}, 95% CI "
          f"[{lo:.3f}, {hi:.3f}]; per round " + " ".join(f"{r:.2f}" for r in ratios))
    walls = [r["intended_wall_ns"] / r["completion_wall_ns"] for r in rows]
    wlo, whi = bootstrap_median_ci(walls)
    print(f"  intended/completion wall ratio median {statistics.median(walls):.3f}, 95% CI "
          f"[{wlo:.3f}, {whi:.3f}]")
    dump_json(a.json, {"samples": a.samples, "rounds": a.rounds}, rows)


if __name__ == "__main__":
    main()
