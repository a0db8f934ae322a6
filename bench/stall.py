#!/usr/bin/env python3
"""Is volley's lateness the machine's? Scheduler lag against the stall probe, per second.

Run: python3 bench/stall.py [--runs 10] [--duration 10] [--rates 10,100,1000,...]
                            [--capacity N] [--baseline BIN] [--pin] [--managed]
                            [--json FILE]

Starts the built-in server (`volley serve`, pinned to core SERVER_CORE), measures its
capacity with a short closed loop unless --capacity is given, then runs open-loop
`volley bench --rate R` at rates from 10 req/s to 80% of that capacity, with keep-alive
and with a new connection per request, N runs each, quiet and with one busy neighbour.
volley runs as a user runs it, unpinned: the kernel places its threads (--pin pins it
to CLIENT_CORE, as earlier versions of this script did). The neighbour is what a user's
machine has: one busy process, unpinned, in a session of its own (so, with autogroup
scheduling, a scheduling group of its own), bounded in time and stopped after the run.
Configurations are interleaved run by run, so drift of the machine spreads over all of
them; with --baseline BIN, each run of a configuration is paired with one of BIN (e.g.
main's release build) right after it (order alternating), printed as a second line.

Each run's JSON has, per second, volley's worst scheduler lag (`sched_lag_max_ms`,
dispatched - intended) and the longest stall the probe beside the load saw in that
second (`probe_stall_bound_ms`, the upper bound of the stall: from when the held sleeper
last ran to when it woke; `probe_max_stall_ms`, its oversleep, is the lower bound). The goal (issue 28; docs/methodology.md, "The generator
checks itself"): in every second, worst lag <= longest stall + 0.1 ms, i.e. whatever
made volley late held the sleeper too. Printed per cell (build x neighbour x connection
x rate): the share of seconds meeting it, whether the cell meets the goal (every
second), the median and worst excess of lag over stall, the probe's own longest stall
(the machine's figure beside volley's) and the seconds' labels.
Beside them, whose each late second is by its label: `mach` seconds labelled
machine-stalled (the probe saw the stall, or a neighbour held the pacer's CPU: `nbr` of
them by the neighbour rule alone, docs/methodology.md "A neighbour on the pacer's CPU")
and `gen` seconds labelled generator-bound. The server started here is one volley did
not start, so its CPU counts as others' (a wait behind it reads as a neighbour's); with
--managed, volley starts the built-in server itself (`bench --target builtin`, its
threads volley's own), so a wait behind it stays the generator's.
Measured 2026-11-28 (`--runs 2 --duration 5 --rates 100,1000,5000 --capacity 20000`,
release 9694eb6, load 0.1-0.9, nothing else running; the probe SCHED_FIFO in every run,
its longest stall still 5-15 ms in every cell: the host stalled the guest): the goal
held in 5 of 12 cells (every 100 req/s cell, and keep-alive at 1000 beside the
neighbour); the rest met it in 40-80% of their seconds, and in every cell all the
seconds that missed had the pacer's own wait for a CPU covering the excess: the pacer
was runnable behind other tasks, which a SCHED_FIFO sleeper cannot see. Labels: 6
seconds generator-bound (quiet cells, 1000-5000 req/s), 35 machine-stalled, the rest
server-bound.
Tried 2026-11-29 and not kept: sleepers that also wake each other across CPUs (a futex
doorbell rung every other timer wake-up, counted as a stall from ring to run), to see
the wake-up delivery to an idle CPU that `bench/stall_who.py` found behind most of the
pacer's waits. `--runs 2 --duration 5 --rates 100,1000,5000 --capacity 20000 --baseline
<main>`: seconds meeting the goal 60% with the doorbells against 69% without, the
probe's median longest stall per second no higher (1.49 against 1.70 ms), and volley's
CPU 265 against 124 ms a second (a cross-CPU wake-up costs ~35 us in this guest).

The last, partial second of a run is left out. Nothing here is a test: timing never
decides one.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from common import CLIENT_CORE, SERVER_CORE, VOLLEY, dump_json, free_port, stop_all, wait_port  # noqa: E402

SLACK_MS = 0.1


def capacity(url):
    """Closed-loop req/s of the server: 16 kept-alive connections for 3 s."""
    out = subprocess.run(["taskset", "-c", CLIENT_CORE, VOLLEY, "bench", url, "-c", "16", "-k",
                          "-d", "3s", "--json"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return json.loads(out)["runs"][0]["throughput"]["requests_per_s"]


def neighbour(seconds):
    """One busy process, unpinned, in a session of its own, bounded in time."""
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def start_server(prefix):
    """The built-in server pinned to SERVER_CORE, serving one 1.5 KB page from a new
    scratch directory named `prefix...`; returns (directory, process, port). The caller
    waits for the port, stops the process and removes the directory."""
    root = tempfile.mkdtemp(prefix=prefix)
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("x" * 1500)
    port = free_port()
    srv = subprocess.Popen(["taskset", "-c", SERVER_CORE, VOLLEY, "serve", "--root", root,
                            "--listen", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL)
    return root, srv, port


def run_beside(cmd, busy, seconds, timeout):
    """Runs cmd (output captured), beside one busy neighbour when `busy`; returns the
    finished process and the neighbour's pid (None when quiet)."""
    hog = neighbour(seconds + 5) if busy else None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout), (hog.pid if hog else None)
    finally:
        if hog:
            stop_all([hog])


def one_run(binary, url, rate, keepalive, duration, busy, pin, managed=None):
    where = ["--target", "builtin", "--docroot", managed] if managed else [url]
    cmd = ([binary, "bench"] + where + ["--rate", str(rate), "-d", f"{duration}s", "--json"]
           + (["-k"] if keepalive else []))
    if pin:
        cmd = ["taskset", "-c", CLIENT_CORE] + cmd
    r, _ = run_beside(cmd, busy, duration, timeout=duration + 60)
    if r.returncode != 0:
        raise SystemExit(f"volley failed at {rate}/s: {r.stderr.strip()}")
    run = json.loads(r.stdout)["runs"][0]
    rows = []
    for s in run["seconds"][:duration]:  # the partial last second left out
        if not s["scheduled"]:
            continue
        lag, low = s["sched_lag_max_ms"], s.get("probe_max_stall_ms")
        if low is None:
            continue
        # The stall's upper bound (builds before it existed give only the lower one).
        stall = s.get("probe_stall_bound_ms") or low
        wait = s.get("pacer_wait_ms")
        # Machine-stalled by the neighbour rule alone: the probe's stall does not
        # cover the lateness the label judged (the scheduler-lag p99 when over the
        # limit, else the dispatch shortfall's k / R).
        if s["sched_lag_p99_ms"] > max(1.0, 10.0 / rate):
            late = s["sched_lag_p99_ms"]
        else:
            late = max(0, s["scheduled"] - s["dispatched"]) / rate * 1e3
        by_probe = late <= stall + SLACK_MS
        rows.append({"lag_ms": lag, "stall_ms": stall, "stall_low_ms": low, "late_ms": late,
                     "pacer_wait_ms": wait, "others_on_pacer_ms": s.get("others_on_pacer_ms"),
                     # volley's own CPU in the second (all threads): what the neighbour
                     # rule must find others' share on the pacer's CPU above.
                     "volley_cpu_ms": (s.get("cpu_cores_used") or 0) * 1e3,
                     "target_on_pacer_ms": s.get("target_on_pacer_ms"),
                     "neighbour": s["label"] == "machine-stalled" and not by_probe,
                     "label": s["label"], "ok": lag <= stall + SLACK_MS,
                     "ok_low": lag <= low + SLACK_MS,
                     # A miss the pacer's own wait for a CPU (other tasks on its core,
                     # which the SCHED_FIFO probe never waits for) accounts for.
                     "wait_explains": wait is not None and lag <= stall + wait + SLACK_MS})
    return rows, run["generator"].get("probe") or {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--rates", default=None, help="comma-separated req/s (default: 10 to 80%% of capacity)")
    ap.add_argument("--capacity", type=float, default=None, help="skip measuring it")
    ap.add_argument("--json", default=None, help="write every second's figures here")
    ap.add_argument("--baseline", default=None, help="a second volley binary, paired run by run")
    ap.add_argument("--pin", action="store_true", help="pin volley to CLIENT_CORE (default: unpinned)")
    ap.add_argument("--managed", action="store_true",
                    help="volley starts the built-in server itself (bench --target builtin)")
    a = ap.parse_args()
    if a.runs < 1 or a.duration < 2:
        print("stall.py: --runs must be >= 1 and --duration >= 2", file=sys.stderr)
        sys.exit(2)
    root, srv, port = start_server("volley-stall-")
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/index.html"
        cap = a.capacity or capacity(url)
        if a.rates:
            rates = [float(x) for x in a.rates.split(",")]
        else:
            top = 0.8 * cap
            rates = sorted({10.0, 100.0, round(top / 4), round(top / 2), round(top)})
            rates = [r for r in rates if r <= top]
        print(f"## scheduler lag vs the stall probe: built-in server capacity {cap:.0f} req/s "
              f"(closed loop, 16 kept-alive connections), rates {rates}, {a.runs} run(s) of "
              f"{a.duration} s; goal per second: worst lag <= longest stall + {SLACK_MS} ms")
        builds = [("volley", VOLLEY)] + ([("baseline", a.baseline)] if a.baseline else [])
        configs = [(r, ka, busy) for busy in (False, True) for ka in (True, False) for r in rates]
        got = {(b, c): [] for b, _ in builds for c in configs}
        probes = []
        for k in range(a.runs):
            order = configs if k % 2 == 0 else list(reversed(configs))
            for i, c in enumerate(order):
                pair = builds if (k + i) % 2 == 0 else list(reversed(builds))
                for name, binary in pair:
                    rows, probe = one_run(binary, url, c[0], c[1], a.duration, c[2], a.pin,
                                          root if a.managed else None)
                    got[(name, c)].extend(rows)
                    probes.append(probe)
        fifo = sum(1 for p in probes if p.get("fifo"))
        print(f"probe ran SCHED_FIFO in {fifo} of {len(probes)} runs; volley "
              f"{'pinned to core ' + CLIENT_CORE if a.pin else 'unpinned'}, neighbour unpinned")
        print("met: share of seconds whose worst lag <= the probe's longest stall (upper bound) + "
              f"{SLACK_MS} ms; low: the same against the stall's lower bound (the oversleep); "
              "waited: of the seconds that missed, the share where the pacer's own wait for a "
              "CPU (runnable behind other tasks, from schedstat) covers the excess")
        print(f"{'build':<8} {'neighbour':<9} {'conn':<10} {'rate':>7} {'seconds':>7} {'met':>6} "
              f"{'low':>6} {'waited':>6} {'goal':>4}  {'excess p50/max ms':>18}  {'probe max ms':>12}  labels")
        for c in configs:
            for name, _ in builds:
                rows = got[(name, c)]
                if not rows:
                    continue
                met = sum(r["ok"] for r in rows) / len(rows)
                low = sum(r.get("ok_low", r["ok"]) for r in rows) / len(rows)
                missed = [r for r in rows if not r["ok"]]
                waited = (f"{sum(r.get('wait_explains', False) for r in missed) / len(missed):>6.0%}"
                          if missed else f"{'-':>6}")
                excess = [r["lag_ms"] - r["stall_ms"] for r in rows]
                labels = {}
                for r in rows:
                    labels[r["label"]] = labels.get(r["label"], 0) + 1
                whose = (f"{labels.get('machine-stalled', 0)}"
                         f"({sum(r.get('neighbour', False) for r in rows)})"
                         f"/{labels.get('generator-bound', 0)}")
                print(f"{name:<8} {'busy' if c[2] else 'quiet':<9} "
                      f"{'keep-alive' if c[1] else 'per-req':<10} "
                      f"{c[0]:>7.0f} {len(rows):>7} {met:>6.1%} {low:>6.1%} {waited} {'yes' if met == 1 else 'no':>4}  "
                      f"{whose:>13}  "
                      f"{statistics.median(excess):>8.3f}/{max(excess):<8.3f}  "
                      f"{max(r['stall_ms'] for r in rows):>12.3f}  "
                      + ", ".join(f"{n} {l}" for l, n in sorted(labels.items())))
        dump_json(a.json, {"capacity": cap, "rates": rates, "runs": a.runs,
                           "duration_s": a.duration, "pinned": a.pin, "managed": a.managed,
                           "builds": {n: b for n, b in builds}},
                  [{"build": n, "rate": c[0], "keepalive": c[1], "busy": c[2],
                    "seconds": got[(n, c)]} for n, _ in builds for c in configs])
    finally:
        stop_all([srv])
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
