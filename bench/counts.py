#!/usr/bin/env python3
"""Why a server pays more per request under one client than another: counts, not times.

Run: python3 bench/engine.py --counts [--rounds 4] [--seconds 4]
(engine.py starts this file inside a network namespace of its own, `unshare -n`).

Timing figures on a shared machine drift by 10-20%; counts of events per request do not
drift with the machine's load nearly as much, so this case counts, per completed request,
paired with the peers in the same rounds (bench/common.py's alternating order):
  * on the server's side (lighttpd on core 0, `perf stat -p`): CPU (task-clock us), context
    switches, wake-ups it issued (`sched:sched_wakeup` in its context: on loopback the
    reply is delivered in the sender's context, so these are mostly the server waking a
    client that slept waiting for it), system calls and `epoll_wait` calls;
  * on the wire: TCP segments (loopback counts each once out and once in, so
    `TcpOutSegs` per request is both directions), pure ACKs and delayed ACKs, from nstat;
    the load runs in its own network namespace, so those counters are this load's alone
    (the host's are everyone's: other tests' loopback traffic made them meaningless);
  * the wake-ups of the client itself the server issued (`sched:sched_wakeup` filtered by
    the client's thread name): a client asleep in epoll when the reply lands costs the
    server one; the unfiltered count above also holds interrupts that happened to land
    while the server ran (other processes' timers on a shared machine);
  * on the server's core as a whole (`perf stat -a -C 0`): what `-p` misses because it
    is charged to no task or to another one: softirqs, reschedule and function-call IPIs
    (a client on core 1 waking the server sends one), context switches and wake-ups
    there (other processes on core 0 count too: noise on a shared machine);
  * on the client's side (`perf stat` around the client): context switches, wake-ups it
    issued and system calls.
`--baseline BIN` adds a second volley build as "volley-base" in the same rounds, so a
change to the send path or the event loop is judged by its before/after ratio; `--io
uring` runs both volley lines through io_uring.
Then volley/peer per-round ratios with bootstrap 95% CIs for the server's figures.
Nothing here is a test.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import bootstrap_median_ci, round_order  # noqa: E402
from engine import run_httperf, run_volley, run_wrk, start_lighttpd  # noqa: E402

EVENTS = ["task-clock", "context-switches", "sched:sched_wakeup", "raw_syscalls:sys_enter",
          "syscalls:sys_enter_epoll_wait"]
# The server's core as a whole: everything that ran there, task or interrupt.
# (No cycles: this guest has no PMU; the server's CPU is its task-clock.)
CORE_EVENTS = ["context-switches", "irq:softirq_entry", "irq_vectors:reschedule_entry",
               "irq_vectors:call_function_single_entry", "sched:sched_wakeup"]
NSTAT = ["TcpOutSegs", "TcpExtTCPPureAcks", "TcpExtDelayedACKs"]
# (record key, label, scale): per-request figures printed, in this order.
FIGURES = [
    ("srv task-clock", "server CPU us/req", 1e3),
    ("srv context-switches", "server context switches/req", 1),
    ("srv sched:sched_wakeup", "server wake-ups issued/req", 1),
    ("srv raw_syscalls:sys_enter", "server syscalls/req", 1),
    ("srv syscalls:sys_enter_epoll_wait", "server epoll_wait/req", 1),
    ("woke sched:sched_wakeup", "server woke the client/req", 1),
    ("core context-switches", "core 0 ctx switches/req", 1),
    ("core sched:sched_wakeup", "core 0 wake-ups/req", 1),
    ("core irq:softirq_entry", "core 0 softirqs/req", 1),
    ("core irq_vectors:reschedule_entry", "core 0 resched IPIs/req", 1),
    ("core irq_vectors:call_function_single_entry", "core 0 call-func IPIs/req", 1),
    ("net TcpOutSegs", "TCP segments/req", 1),
    ("net TcpExtTCPPureAcks", "pure ACKs/req", 1),
    ("net TcpExtDelayedACKs", "delayed ACKs/req", 1),
    ("cli context-switches", "client context switches/req", 1),
    ("cli sched:sched_wakeup", "client wake-ups issued/req", 1),
    ("cli raw_syscalls:sys_enter", "client syscalls/req", 1),
    ("gen_us_per_req", "client CPU us/req", 1),
]
RATIOS = ["srv task-clock", "srv context-switches", "srv sched:sched_wakeup",
          "woke sched:sched_wakeup", "gen_us_per_req",
          "core irq_vectors:reschedule_entry"]


def nstat():
    out = subprocess.run(["nstat", "-az"], capture_output=True, text=True, check=True).stdout
    d = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) >= 2 and p[0] in NSTAT:
            d[p[0]] = int(p[1])
    return d


def known_events():
    """The tracepoints and hardware events this perf can count (a guest may have no PMU)."""
    out = subprocess.run(["perf", "list", "--no-desc"], capture_output=True, text=True).stdout
    return {w for line in out.splitlines() for w in line.split() if w}


KNOWN_EVENTS = set()


def perf_counts(path):
    """`perf stat -x,` output: {event: count}."""
    d = {}
    with open(path) as f:
        for line in f:
            p = line.strip().split(",")
            if len(p) > 3 and p[0][:1].isdigit():
                d[p[2]] = float(p[0])
    return d


# The thread that waits for replies, by tool (a `perf --filter` glob on the woken comm).
CLIENT_COMM = {"volley": "volley-worker*", "volley-base": "volley-worker*",
               "httperf": "httperf", "wrk": "wrk"}


def counted(fn, server_pid, args, tmp, client_comm):
    """One client run fn(*args) with the server's, the wire's and the client's counts."""
    srv, cli = os.path.join(tmp, "server.stat"), os.path.join(tmp, "client.stat")
    woke = os.path.join(tmp, "woke.stat")
    watch_woke = subprocess.Popen(["perf", "stat", "-x,", "-o", woke, "-e", "sched:sched_wakeup",
                                   "--filter", f'comm ~ "{client_comm}"', "-p", str(server_pid)])
    common.CLIENT_WRAP[:] = ["perf", "stat", "-x,", "-o", cli, "-e", ",".join(EVENTS), "--"]
    core = os.path.join(tmp, "core.stat")
    watch = subprocess.Popen(["perf", "stat", "-x,", "-o", srv, "-e", ",".join(EVENTS),
                              "-p", str(server_pid)])
    # Events perf or the kernel does not know are left out, not fatal.
    core_events = [e for e in CORE_EVENTS if e in KNOWN_EVENTS]
    watch_core = subprocess.Popen(["perf", "stat", "-x,", "-o", core, "-a", "-C",
                                   common.SERVER_CORE, "-e", ",".join(core_events)])
    time.sleep(0.3)  # perf attached before the load starts
    before = nstat()
    try:
        rps, n, cpu, _ = fn(*args)
    finally:
        after = nstat()
        for w in (watch, watch_core, watch_woke):
            w.send_signal(2)
            w.wait()
        common.CLIENT_WRAP[:] = []
    n = max(n, 1)
    rec = {"req_per_s": rps, "requests": n, "gen_us_per_req": cpu * 1e6 / n}
    rec.update({f"srv {k}": v / n for k, v in perf_counts(srv).items()})
    rec.update({f"cli {k}": v / n for k, v in perf_counts(cli).items()})
    rec.update({f"core {k}": v / n for k, v in perf_counts(core).items()})
    rec.update({f"woke {k}": v / n for k, v in perf_counts(woke).items()})
    rec.update({f"net {k}": (after.get(k, 0) - before.get(k, 0)) / n for k in NSTAT})
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--baseline", metavar="BIN", help="another volley build, as 'volley-base'")
    ap.add_argument("--io", choices=("auto", "epoll", "uring", "poll"), default="auto",
                    help="the I/O path of the volley lines (default auto: volley's own choice)")
    a = ap.parse_args()
    for tool in ("perf", "nstat", "httperf", "wrk", "lighttpd"):
        if not shutil.which(tool):
            raise SystemExit(f"counts: {tool} is not on PATH")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    KNOWN_EVENTS.update(known_events())
    tmp = tempfile.mkdtemp(prefix="volley-counts-")
    docroot = os.path.join(tmp, "www")
    os.makedirs(docroot)
    with open(os.path.join(docroot, "a.html"), "wb") as f:
        f.write(b"<html><body>" + b"x" * 674 + b"</body></html>")  # 700 bytes, as engine.py
    light = start_lighttpd(tmp, docroot)
    try:
        url = f"http://127.0.0.1:{light.port}/a.html"
        args = (url, "127.0.0.1", light.port, "/a.html", a.seconds)
        # volley's own choice is the default: the flag only when asked, so a build older
        # than `--io` (wave 2's, as a baseline) runs too.
        vargs = ["-k", "-c", "64"] + (["--io", a.io] if a.io != "auto" else [])
        tools = [("volley", run_volley(vargs)), ("httperf", run_httperf(64)),
                 ("wrk", run_wrk(["-c64"]))]
        if a.baseline:
            tools.insert(1, ("volley-base", run_volley(vargs, a.baseline)))
        names = [n for n, _ in tools]
        res = {n: [None] * a.rounds for n in names}
        print(f"\n## counts per request, keep-alive, 64 connections, lighttpd (own network "
              f"namespace), volley on {a.io}, {a.rounds} paired rounds of {a.seconds}s")
        for k in range(a.rounds):
            for name in round_order(names, k):
                try:
                    res[name][k] = counted(dict(tools)[name], light.popen.pid, args, tmp,
                                           CLIENT_COMM[name])
                except Exception as e:  # a peer failing is reported, not fatal
                    print(f"  round {k}: {name}: failed: {str(e).strip().splitlines()[0]}")
                time.sleep(0.5)
            print(f"  round {k}: " + ", ".join(
                f"{n} {res[n][k]['req_per_s']:.0f} req/s" for n in names if res[n][k]))
        print(f"{'(medians over rounds)':<30}" + "".join(f"{n:>10}" for n in names))
        for key, label, scale in FIGURES:
            cells = []
            for n in names:
                xs = [r[key] for r in res[n] if r and key in r]
                cells.append(f"{statistics.median(xs) * scale:>10.3f}" if xs else f"{'-':>10}")
            print(f"{label:<30}" + "".join(cells))
        for peer in names[1:]:
            pairs = [(x, y) for x, y in zip(res["volley"], res[peer]) if x and y]
            for key in RATIOS:
                ratios = [x[key] / y[key] for x, y in pairs if y.get(key)]
                if ratios:
                    lo, hi = bootstrap_median_ci(ratios)
                    label = next(lb for k, lb, _ in FIGURES if k == key)
                    print(f"  volley/{peer} {label}: ratio median {statistics.median(ratios):.2f}"
                          f", 95% CI [{lo:.2f}, {hi:.2f}], {len(ratios)} rounds")
    finally:
        common.stop_all([light.popen])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
