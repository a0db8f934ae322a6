#!/usr/bin/env python3
"""Access-log parse speed: volley's log reader against `wc -l` of the same file.

Run: python3 bench/replay.py [--rounds 6] [--lines 2000000] [--keep FILE]

Builds crates/replay/examples/parse_speed.rs (release), writes a Combined log in
volley's own layout (microsecond stamps, 1% of lines 2 ms out of order), then reads it
in paired rounds of alternating order, pinned to one core: the reader to the end (every
line parsed, put in order, handed on as a record) and `wc -l` (the floor: reading the
bytes and counting newlines). Reports lines per second of CPU time (user + system, what
other processes on a shared core do not inflate) and of wall time, each a median with a
bootstrap 95% CI, and the reader's peak RSS (its reorder window's lines). The issue's
bar is 1 million Combined lines per second on one core. Nothing here is a test.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import CLIENT_CORE, ROOT, bootstrap_median_ci, round_order  # noqa: E402


def run(cmd):
    """(wall s, cpu s, peak RSS KB) of one child run to the end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    subprocess.run(["taskset", "-c", CLIENT_CORE] + cmd, check=True,
                   stdout=subprocess.DEVNULL, timeout=1800)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--keep", default=None, help="write the log here and keep it")
    a = ap.parse_args()
    if a.rounds < 1 or a.lines < 1:
        print("replay.py: --rounds and --lines must be at least 1", file=sys.stderr)
        sys.exit(2)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "volley-replay",
                    "--example", "parse_speed"], cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "parse_speed")
    path = a.keep or os.path.join(tempfile.mkdtemp(prefix="volley-replay-"), "access.log")
    subprocess.run([exe, "--write", str(a.lines), path], check=True,
                   stdout=subprocess.DEVNULL)
    tools = {"volley": [exe, path], "wc -l": ["wc", "-l", path]}
    rows = {name: [] for name in tools}
    for k in range(a.rounds):
        for name in round_order(list(tools), k):
            rows[name].append(run(tools[name]))
    print(f"{a.lines:,} Combined lines, {os.path.getsize(path) / 1e6:.0f} MB, "
          f"{a.rounds} rounds, core {CLIENT_CORE}")
    for name, rs in rows.items():
        for label, i in (("cpu", 1), ("wall", 0)):
            rates = [a.lines / r[i] for r in rs if r[i] > 0]
            lo, hi = bootstrap_median_ci(rates)
            med = statistics.median(rates)
            print(f"  {name:7} {label:4} {med / 1e6:7.2f} M lines/s  "
                  f"(95% CI {lo / 1e6:.2f}..{hi / 1e6:.2f})")
    print(f"  peak RSS of the runs: {max(r[2] for r in rows['volley']) / 1024:.0f} MB")
    if not a.keep:
        os.remove(path)


if __name__ == "__main__":
    main()
