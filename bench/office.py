#!/usr/bin/env python3
"""The office workload's own cost: generator CPU per request of `volley bench --caldav`
against the CPU per request of a plain GET of a calendar item of the same size (700 B),
at the same request rate, against the same built-in server, in paired rounds.

Why this comparison: the office client parses every multistatus, compares items and
keeps a mirror per device, which a plain GET load does not; if that cost came near
the server's own, a capacity search would measure the generator. The target is a ratio
of at most 1.5 (docs/methodology.md, "The office").

How: one `volley serve --users` (USERS accounts office1..N) pinned to the server core.
A first office day measures the office's request rate R. Then each round runs, in
alternating order (bench/common.py's round_order), one office day (`--caldav USERS`,
SECONDS long; its JSON gives the day's requests and the process CPU during the day,
set-up and audit excluded) and one open-loop GET load at rate R for SECONDS (keep-alive,
Basic credentials, the summary's generator CPU over the measured run). Both clients
are pinned to the client core. Printed: per-round us/request of each, and the median
of the per-round ratios office/GET with its bootstrap 95% CI.

Usage: bench/office.py [--users 20] [--seconds 20] [--rounds 5] [--skip-build] [--json FILE]
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    CLIENT_CORE, ROOT, SERVER_CORE, VOLLEY, bootstrap_median_ci, free_port, round_order,
    stop_all, wait_port,
)

PASSWORD = "office"


def passwd_lines(n):
    lines = []
    for i in range(1, n + 1):
        r = subprocess.run([VOLLEY, "passwd", f"office{i}", "--cost", "4"], input=PASSWORD + "\n",
                           capture_output=True, text=True, check=True)
        lines.append(r.stdout.strip())
    return "\n".join(lines) + "\n"


def office_day(url, users, seconds):
    """(requests, cpu_s, report) of one office day."""
    cmd = ["taskset", "-c", CLIENT_CORE, VOLLEY, "bench", "--json", "-", "--caldav", str(users),
           "--caldav-password", PASSWORD, "--compress", "480", "--duration", f"{seconds}s",
           "--seed", "7", url]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 120)
    if not r.stdout.strip():
        raise SystemExit(f"office day failed: {r.stderr.strip()}")
    rep = json.loads(r.stdout)
    if rep["violations_total"]:
        raise SystemExit(f"office day had violations: {rep['violations']}")
    return rep["requests"], rep["generator_cpu_s"], rep


def plain_get(url, rate, seconds):
    """(requests, cpu_s) of an open-loop GET load at `rate`."""
    token = base64.b64encode(f"office1:{PASSWORD}".encode()).decode()
    cmd = ["taskset", "-c", CLIENT_CORE, VOLLEY, "bench", url, "-t", "1", "-k", "-c", "4",
           "--rate", f"{rate:.1f}", "-d", f"{seconds}s", "-H", f"Authorization: Basic {token}",
           "--json", "-"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 60)
    s = json.loads(r.stdout)
    s = s["runs"][0] if "runs" in s else s
    n = s["requests"]["ok"]
    cpu = s["generator"]["cpu_cores_used"] * s["duration_s"]
    return n, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not a.skip_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="volley-bench-office-")
    procs = []
    try:
        root = os.path.join(tmp, "root")
        os.makedirs(os.path.join(root, "office1"))
        users = os.path.join(tmp, "users")
        with open(users, "w") as f:
            f.write(passwd_lines(a.users))
        # The GET's item: 700 bytes, like the office's events.
        with open(os.path.join(root, "office1", "item700.ics"), "w") as f:
            f.write(("X" * 698) + "\r\n")
        port = free_port()
        procs.append(subprocess.Popen(["taskset", "-c", SERVER_CORE, VOLLEY, "serve", "--root", root,
                                       "--users", users, "--listen", f"127.0.0.1:{port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_port(port)
        url = f"http://127.0.0.1:{port}/"
        n, _, _ = office_day(url, a.users, a.seconds)
        rate = n / a.seconds
        print(f"office: {a.users} users, {a.seconds} s days, {rate:.0f} requests/s; GET at the same rate")
        raw, ratios = [], []
        for k in range(a.rounds):
            row = {}
            for name in round_order(["office", "get"], k):
                if name == "office":
                    n, cpu, _ = office_day(url, a.users, a.seconds)
                else:
                    n, cpu = plain_get(url + "office1/item700.ics", rate, a.seconds)
                row[name] = cpu * 1e6 / max(n, 1)
                row[name + "_requests"] = n
            ratio = row["office"] / row["get"]
            ratios.append(ratio)
            raw.append(row)
            print(f"round {k + 1}: office {row['office']:.1f} us/req ({row['office_requests']} req), "
                  f"GET {row['get']:.1f} us/req ({row['get_requests']} req), ratio {ratio:.2f}")
        lo, hi = bootstrap_median_ci(ratios)
        med = sorted(ratios)[len(ratios) // 2]
        print(f"\ngenerator CPU per request, office / plain GET: median {med:.2f} "
              f"(95% CI {lo:.2f}-{hi:.2f}) over {len(ratios)} rounds; target <= 1.5")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"users": a.users, "seconds": a.seconds, "rate": rate, "rounds": raw,
                           "median_ratio": med, "ci": [lo, hi]}, f, indent=1)
    finally:
        stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
