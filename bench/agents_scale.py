#!/usr/bin/env python3
"""How many agents one coordinator can merge in time (issue 14's scale question, and
issue 13's "with 12 local agents the coordinator's merge costs under 5% of a core").

Run: python3 bench/agents_scale.py [--counts 12,10,100,500] [--seconds 20] [--rounds 1]

For each agent count N, on a private nats-server on loopback:
  * `agents_scale sim` runs N simulated agents in one process: the real agent code (its
    own bus connection, outbox, heartbeats, acknowledged records) with a load that sends
    no HTTP and emits, each second, a record of seven deflated HDR histograms of 1000
    values (what a real agent's second carries);
  * `agents_scale coord` runs the real coordinator for N agents. Its CPU (utime+stime of
    its process, /proc/PID/stat) is read from its first live-merged second to the end of
    the run, final merge and phases included, as a share of one core;
  * merge delay: from the arrival of a second's last record to that second merged and
    handed out (the coordinator's own work); lag: from the end of the second to the same
    instant (adds the agents' send, the bus and the coordinator's queue). The simulated
    agents' and nats-server's CPU over the same window are printed too: on a small
    machine the agents' own histogram encoding, not the coordinator, is what runs out
    first.
Both processes share this machine's cores, as local agents would; nothing here is a
test. Figures go in ARCHITECTURE.md ("Scale of the bus").
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import CLK_TCK, free_port, proc_cpu_ticks, stop_all, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "examples", "agents_scale")


def one(n, seconds):
    port = free_port()
    nats = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [nats]
    try:
        wait_port(port)
        url = f"nats://127.0.0.1:{port}"
        sim = subprocess.Popen([BIN, "sim", url, str(n), str(seconds)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(sim)
        coord = subprocess.Popen([BIN, "coord", url, str(n), str(seconds)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(coord)
        line = coord.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"{n} agents: coordinator said {line!r}")
        others = {"sim": sim.pid, "nats": nats.pid}
        cpu0, t0 = proc_cpu_ticks(coord.pid), time.monotonic()
        o0 = {k: proc_cpu_ticks(p) for k, p in others.items()}
        line = coord.stdout.readline().strip()
        cpu1, t1 = proc_cpu_ticks(coord.pid), time.monotonic()
        o1 = {k: proc_cpu_ticks(p) for k, p in others.items()}
        coord.stdin.close()
        coord.wait(timeout=30)
        sim.wait(timeout=60)
        if not line:
            raise SystemExit(f"{n} agents: the coordinator failed")
        out = json.loads(line)
        out["cpu_core_share"] = (cpu1 - cpu0) / CLK_TCK / (t1 - t0)
        for k in others:
            out[f"{k}_core_share"] = (o1[k] - o0[k]) / CLK_TCK / (t1 - t0)
        out["window_s"] = t1 - t0
        return out
    finally:
        stop_all(procs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="12,10,100,500")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "volley-agents",
                    "--example", "agents_scale"], cwd=ROOT, check=True)
    rows = []
    for r in range(args.rounds):
        for n in [int(c) for c in args.counts.split(",")]:
            o = one(n, args.seconds)
            rows.append(o)
            d, lag = o["merge_delay_us"], o["lag_ms"]
            print(f"round {r + 1}, {n:4d} agents: coordinator {100 * o['cpu_core_share']:5.1f}% "
                  f"of a core over {o['window_s']:.1f} s; merge delay p50 {d['p50'] / 1000:.2f} ms "
                  f"p99 {d['p99'] / 1000:.2f} ms max {d['max'] / 1000:.2f} ms; lag after the "
                  f"second p50 {lag['p50']:.0f} ms max {lag['max']:.0f} ms; "
                  f"{o['merged_live']}/{o['seconds']} seconds merged live, {o['lost']} lost, "
                  f"{o['late_seconds']} late; simulated agents {100 * o['sim_core_share']:.0f}%, "
                  f"nats-server {100 * o['nats_core_share']:.0f}% of a core", flush=True)
    whole = [o for o in rows if o["lost"] == 0 and o["merged_live"] >= o["seconds"] - 1]
    merge_ok = [o["agents"] for o in whole if o["merge_delay_us"]["max"] < 1e6]
    lag_ok = [o["agents"] for o in whole if o["lag_ms"]["max"] < 1e3]
    print(f"\nlargest count whose merge delay stayed under 1 s: "
          f"{max(merge_ok) if merge_ok else 'none'}; whose every second was merged within 1 s "
          f"of its end: {max(lag_ok) if lag_ok else 'none'} (of {args.counts})")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
