#!/usr/bin/env python3
"""Who held the CPU while volley's pacer waited for it?

Run: python3 bench/stall_who.py [--runs 2] [--duration 6] [--rates 1000,5000]
                                [--threshold-ms 0.1] [--json FILE]

bench/stall.py finds that the seconds where volley's scheduler lag exceeds the stall
probe's longest stall are seconds where the pacer was runnable and not run (its own wait
for a CPU covers the excess), which a SCHED_FIFO sleeper cannot see. This script names
who ran instead. It starts the built-in server pinned to SERVER_CORE (as stall.py does),
then runs open-loop `volley bench --rate R` (unpinned, as a user runs it) under
`perf sched record -a`, quiet and beside one busy neighbour process, keep-alive and a new
connection per request, interleaved run by run. From the scheduler's events it takes every
wake-up of a volley worker thread (the pacer runs in them) that waited longer than the
threshold for a CPU, and splits that wait among the tasks that ran on the CPU meanwhile:
the server, the neighbour, volley's own other threads (another worker, the monitor, the
probe, the main thread), kernel threads, and `idle` (no task ran on the CPU while the
worker waited: a wake-up the host delivered late, or a vCPU the host held).
The share on volley's own threads is what volley can move off its pacing path; the rest
is the machine's or the server's.

Tracing is perf's, only while a run lasts; nothing on the host is changed. Traffic goes to
loopback only. The last, partial second is not special here: every wake-up counts.
Nothing here is a test: timing never decides one.
"""
import argparse
import bisect
import collections
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import SERVER_CORE, VOLLEY, dump_json, stop_all, wait_port  # noqa: E402
from stall import run_beside, start_server  # noqa: E402

EVENT = re.compile(r"^\s*(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+sched:(\w+):\s+(.*)$")
RUNTIME = re.compile(r"comm=(.*) pid=(\d+) runtime=(\d+)")
SWITCH = re.compile(r"prev_comm=(.*) prev_pid=(\d+) .* ==> next_comm=(.*) next_pid=(\d+)")
WAKING = re.compile(r"comm=(.*) pid=(\d+) prio=-?\d+ target_cpu=(\d+)")
KERNEL = ("kworker", "ksoftirqd", "rcu_", "migration", "kdamond", "jbd2", "kcompactd")


def slices(script):
    """From `perf script -F pid,tid,cpu,time,event,trace` of sched events: per CPU, the
    sorted run slices (start, end, task, tid, pid), seconds; and every wait of a task for
    a CPU (cpu, start, wait, task, tid, pid): from its wake-up to its slice's start.

    Why not `perf sched timehist`: on this guest the kernel logs no sched_switch out of
    CPU 1's idle task (CPU 0's it does), so timehist runs every slice on CPU 1 from the
    previous switch and gives the idle time to whoever ran next. A slice is taken here
    from its switch-out back by the task's own accounted runtime (sched_stat_runtime),
    so the CPU's idle time stays idle."""
    per_cpu = collections.defaultdict(list)
    waits = []
    pid_of, runtime_ns, woke, last_switch = {}, collections.Counter(), {}, {}
    for line in script.splitlines():
        m = EVENT.match(line)
        if not m:
            continue
        pid, tid, cpu, t, event, args = int(m[1]), int(m[2]), int(m[3]), float(m[4]), m[5], m[6]
        pid_of[tid] = pid
        if event == "sched_stat_runtime":
            r = RUNTIME.match(args)
            if r:
                runtime_ns[int(r[2])] += int(r[3])
        elif event in ("sched_waking", "sched_wakeup"):
            w = WAKING.match(args)
            if w:
                woke.setdefault(int(w[2]), t)
        elif event == "sched_switch":
            sw = SWITCH.match(args)
            if not sw:
                continue
            prev, ptid = sw[1], int(sw[2])
            if ptid != 0:
                ran = runtime_ns.pop(ptid, 0) / 1e9
                # Never before the CPU's previous switch (the accounted runtime can
                # reach back a little further).
                start = max(t - ran, last_switch.get(cpu, t - ran))
                per_cpu[cpu].append((start, t, prev, ptid, pid_of.get(ptid, ptid)))
                w = woke.pop(ptid, None)
                if w is not None and w < start:
                    waits.append((cpu, start, start - w, prev, ptid, pid_of.get(ptid, ptid)))
            last_switch[cpu] = t
    for v in per_cpu.values():
        v.sort()
    return per_cpu, waits


def holder(task, pid, volley_pid, server_pid, hog_pid):
    if pid == server_pid:
        return "server"
    if hog_pid is not None and pid == hog_pid:
        return "neighbour"
    if pid == volley_pid:
        return "another volley worker" if task.startswith("volley-worker") else f"volley's {task}"
    if task.startswith(KERNEL):
        return "kernel threads"
    return f"other: {task}"


def attribute(per_cpu, waits, volley_pid, server_pid, hog_pid, threshold_s):
    """Splits each long wait of a volley worker among the tasks on its CPU meanwhile."""
    by = collections.Counter()
    n, total, worst = 0, 0.0, (0.0, {})
    for cpu, start, delay, task, tid, pid in waits:
        if pid != volley_pid or not task.startswith("volley-worker") or delay < threshold_s:
            continue
        lo, hi = start - delay, start
        run = per_cpu[cpu]
        i = max(0, bisect.bisect_left(run, (lo,)) - 1)
        mine = collections.Counter()
        covered = 0.0
        while i < len(run) and run[i][0] < hi:
            s, e, t2, tid2, pid2 = run[i]
            ov = min(e, hi) - max(s, lo)
            if ov > 0 and tid2 != tid:
                mine[holder(t2, pid2, volley_pid, server_pid, hog_pid)] += ov
                covered += ov
            i += 1
        if delay - covered > 1e-6:
            mine["idle"] += delay - covered
        by.update(mine)
        n += 1
        total += delay
        if delay > worst[0]:
            worst = (delay, dict(mine))
    return n, total, by, worst


def one_run(url, server_pid, rate, keepalive, duration, busy, threshold_s, work):
    data = os.path.join(work, "sched.data")
    cmd = (["perf", "sched", "record", "-a", "-o", data, "--", VOLLEY, "bench", url,
            "--rate", str(rate), "-d", f"{duration}s", "--json"] + (["-k"] if keepalive else []))
    r, hog_pid = run_beside(cmd, busy, duration, timeout=duration + 90)
    if r.returncode != 0:
        raise SystemExit(f"volley under perf failed at {rate}/s: {r.stderr.strip()[-300:]}")
    script = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,cpu,time,event,trace"],
                            capture_output=True, text=True, timeout=300).stdout
    os.unlink(data)
    per_cpu, waits = slices(script)
    pids = {pid for _, _, _, task, _, pid in waits if task.startswith("volley-worker")}
    if not pids:
        raise SystemExit("no volley worker thread seen in the trace")
    volley_pid = pids.pop()
    run = json.loads(r.stdout[r.stdout.index("{"):])["runs"][0]
    lag = max((s["sched_lag_max_ms"] for s in run["seconds"] if s["scheduled"]), default=0.0)
    n, total, by, worst = attribute(per_cpu, waits, volley_pid, server_pid, hog_pid,
                                    threshold_s)
    return {"rate": rate, "keepalive": keepalive, "busy": busy, "late_wakeups": n,
            "waited_ms": total * 1e3, "by_ms": {k: v * 1e3 for k, v in by.items()},
            "worst_ms": worst[0] * 1e3, "worst_by_ms": {k: v * 1e3 for k, v in worst[1].items()},
            "sched_lag_max_ms": lag}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=int, default=6, help="seconds per run")
    ap.add_argument("--rates", default="1000,5000", help="comma-separated req/s")
    ap.add_argument("--threshold-ms", type=float, default=0.1,
                    help="a worker's wait for a CPU counted from this long")
    ap.add_argument("--json", default=None, help="write every run's attribution here")
    a = ap.parse_args()
    if a.runs < 1 or a.duration < 2:
        print("stall_who.py: --runs must be >= 1 and --duration >= 2", file=sys.stderr)
        sys.exit(2)
    if shutil.which("perf") is None:
        print("stall_who.py: needs perf (Debian: linux-perf)", file=sys.stderr)
        sys.exit(2)
    work, srv, port = start_server("volley-stall-who-")
    rows = []
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/index.html"
        rates = [float(x) for x in a.rates.split(",")]
        configs = [(r, ka, busy) for busy in (False, True) for ka in (True, False) for r in rates]
        print(f"## who held the CPU while a volley worker waited > {a.threshold_ms} ms for one: "
              f"{a.runs} run(s) of {a.duration} s per cell, server on core {SERVER_CORE}, "
              f"volley unpinned")
        for _ in range(a.runs):
            for rate, ka, busy in configs:
                rows.append(one_run(url, srv.pid, rate, ka, a.duration, busy, a.threshold_ms / 1e3, work))
    finally:
        stop_all([srv])
        shutil.rmtree(work, ignore_errors=True)
    cells = collections.defaultdict(list)
    for r in rows:
        cells[(r["busy"], r["keepalive"], r["rate"])].append(r)
    for (busy, ka, rate), rs in sorted(cells.items()):
        by = collections.Counter()
        for r in rs:
            by.update(r["by_ms"])
        total = sum(r["waited_ms"] for r in rs)
        share = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in by.most_common() if total) or "-"
        worst = max(rs, key=lambda r: r["worst_ms"])
        wb = ", ".join(f"{k} {v:.2f}" for k, v in sorted(worst["worst_by_ms"].items(),
                                                           key=lambda kv: -kv[1]))
        print(f"{'busy ' if busy else 'quiet'} {'ka ' if ka else 'new'} {rate:>6.0f}/s: "
              f"{sum(r['late_wakeups'] for r in rs):>5} waits, {total:8.1f} ms in all: {share}; "
              f"longest {worst['worst_ms']:.2f} ms ({wb}); sched-lag max "
              f"{max(r['sched_lag_max_ms'] for r in rs):.2f} ms")
    if a.json:
        dump_json(a.json, {"runs": a.runs, "duration_s": a.duration,
                           "threshold_ms": a.threshold_ms}, rows)


if __name__ == "__main__":
    main()
