#!/usr/bin/env python3
"""Does the namespace volley makes for a tuned target cost anything? (issue 23)

Run (root; a release build): python3 bench/netns.py [--rounds 8] [--duration 5]
                                                    [--kinds builtin,nginx] [--json FILE]

A variant with kernel settings runs its target in a network namespace volley makes and
the load in another, joined by veths and a bridge (docs/methodology.md, "Server
knobs"); the default runs on the host's loopback. For "tuned vs default" to measure the
tuning and not the path, the namespace must add nothing measurable. Per server kind,
this runs the same `volley bench --target KIND` load twice per round: on the host
loopback, and in the lab, asked by `--sysctl net.core.somaxconn=4096` (Linux's own
default inside a new namespace, so the setting changes nothing but the place). Loads:
16 kept-alive connections, and 16 connections with a new connection per request (the
handshakes cross the veths too). The target is pinned to core SERVER_CORE (volley pins
itself to the other). The two runs of a round alternate their order; the answer is the
median of the per-round ratios lab / host of req/s, with a bootstrap 95% interval
(bench/common.py says why paired rounds): 1.00 inside the interval means no cost the
machine's noise lets us see. Nothing here is a test: timing never decides one.

Measured 27 Nov 2026, release build, 6 rounds of 5 s, on this 2-core VM while other
builds kept it busy (load 10-16): lab / loopback req/s, builtin keep-alive 0.92 [0.75,
1.09], new connections 0.90 [0.59, 1.06]; nginx keep-alive 0.72 [0.63, 1.01], new
connections 0.71 [0.63, 1.15]. Every interval holds 1, but the medians lean below it
and the intervals are wide: on such a machine the lab's cost cannot be ruled out, which
is why a study puts the default in a lab too whenever a variant needs one.
28 Nov 2026, debug build, 4 rounds of 3 s, load 4.2-6.1 (each line now prints the load
before and after it): builtin keep-alive 1.12 [0.69, 1.65], new connections 0.74 [0.34,
2.08]; nginx keep-alive 5.45 [0.18, 65.4], new connections 3.21 [0.07, 9.92] (single
rounds from 0.07 to 65: runs stalled by other work). Noise, not a figure of the lab.
28 Nov 2026, release build, 8 rounds of 5 s, seven builds at the lowest CPU share
beside it (load 6-24), the same command and the same minutes: with the load in a
namespace of its own behind veths and a bridge (ad437fc) the lab cost a fifth of the
throughput, every interval below 1: builtin keep-alive 0.80 [0.78, 0.81], new
connections 0.74 [0.72, 0.82]; nginx keep-alive 0.90 [0.89, 0.93], new connections
0.73 [0.71, 0.73]. With the load inside the target's namespace over its lo (ff8cea5,
Lab::create_tuning): builtin keep-alive 0.99 [0.83, 1.02], new connections 1.00 [0.98,
1.03]; nginx keep-alive 0.99 [0.94, 1.01], new connections 0.99 [0.97, 1.08]: no
difference beyond noise.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import SERVER_CORE, VOLLEY, bootstrap_median_ci, dump_json, round_order  # noqa: E402

PLACES = ("host", "netns")


def run(kind, place, keepalive, duration):
    """One `volley bench --target KIND` run: its req/s and p99 (ms), from its JSON."""
    cmd = [VOLLEY, "bench", "--target", kind, "--target-cpus", SERVER_CORE,
           "-c", "16", "-d", f"{duration}s", "--json", "-", "-q"]
    if keepalive:
        cmd.append("-k")
    if place == "netns":
        cmd += ["--sysctl", "net.core.somaxconn=4096"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    v = json.loads(r.stdout[r.stdout.find("{"):])
    run0 = v["runs"][0]
    return {
        "req_per_s": run0["throughput"]["requests_per_s"],
        "p99_ms": run0["latency"]["response_time"]["p99_ms"],
        "errors": run0["requests"]["failed"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--kinds", default="builtin,nginx")
    ap.add_argument("--json", help="write every run here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/netns.py needs root (volley makes network namespaces)")
    raw = []
    print(f"{VOLLEY}; {a.rounds} rounds of {a.duration} s per place; target on core {SERVER_CORE}")
    for kind in a.kinds.split(","):
        for keepalive in (True, False):
            name = f"{kind} {'keep-alive' if keepalive else 'new connection per request'}"
            rows = []
            load_before = os.getloadavg()[0]
            for k in range(a.rounds):
                got = {}
                for place in round_order(PLACES, k):
                    got[place] = run(kind, place, keepalive, a.duration)
                    raw.append({"kind": kind, "keepalive": keepalive, "round": k,
                                "place": place, "load_average": os.getloadavg()[0],
                                **got[place]})
                rows.append(got)
            ratios = [r["netns"]["req_per_s"] / r["host"]["req_per_s"] for r in rows
                      if r["host"]["req_per_s"]]
            lo, hi = bootstrap_median_ci(ratios)
            med = {p: statistics.median(r[p]["req_per_s"] for r in rows) for p in PLACES}
            p99 = {p: statistics.median(r[p]["p99_ms"] for r in rows) for p in PLACES}
            errors = sum(r[p]["errors"] for r in rows for p in PLACES)
            verdict = ("no difference beyond noise" if lo <= 1.0 <= hi
                       else "the namespace changes throughput")
            # The machine's load beside the figure: a wide interval on a busy machine
            # says "noise", not "no cost", and the reader needs the load to tell which.
            load = f"load {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
            print(f"{name}: netns/host req/s {statistics.median(ratios):.3f} "
                  f"[{lo:.3f}, {hi:.3f}] ({verdict}); medians host {med['host']:.0f}, "
                  f"netns {med['netns']:.0f} req/s; p99 host {p99['host']:.2f}, "
                  f"netns {p99['netns']:.2f} ms; {errors} errors; {load}; per round "
                  + " ".join(f"{x:.2f}" for x in ratios))
    if a.json:
        dump_json(a.json, {"rounds": a.rounds, "duration_s": a.duration}, raw)


if __name__ == "__main__":
    main()
