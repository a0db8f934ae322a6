#!/usr/bin/env python3
"""Side-by-side speed benchmark of volley's load engine against its peers.

Run: python3 bench/engine.py [--seconds 10] [--rounds 3]

What it does (issue 2's speed bar), all on loopback:
  * installs the peers from Debian's packages (scripts/install-deps.sh: wrk,
    apache2-utils, httperf, nghttp2-client, nginx, lighttpd) and builds volley --release;
  * serves a 700-byte file with lighttpd and nginx pinned to core 0 (taskset), and pins
    every client to core 1, so the generator is the bottleneck against lighttpd;
  * runs the clients interleaved (A B C ... A B C ...) for --rounds rounds, because this
    machine is noisy: one absolute figure means little, ratios in one run do;
  * prints req/s and generator CPU microseconds per request (user+sys from GNU time
    divided by completed requests) per tool, the median over rounds, and volley's ratio
    to each peer;
  * keep-alive, 64 connections vs lighttpd: volley, wrk, h2load --h1, httperf, ab -k;
  * a new connection per request, 16 at once vs nginx: volley, ab, wrk (Connection: close);
  * open loop at 80% of volley's keep-alive figure, after a 2 s warm-up (--warmup 2s:
    the pool grows and caches fill before measuring; methodology.md "warm up before
    measuring"): achieved rate and send-lag p99;
  * --open-loop-only: measure volley's keep-alive figure once, then only the open-loop
    step, with and without the warm-up (interleaved over --rounds), to show the start-up
    transient the warm-up removes;
  * memory: volley's max RSS after 50k and after 5M keep-alive requests.
Nothing here is a test: it prints figures for the issue notes.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOLLEY = os.path.join(ROOT, "target", "release", "volley")
SERVER_CORE = "0"
CLIENT_CORE = "1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on port {port} did not start")


def start_lighttpd(tmp, docroot):
    port = free_port()
    conf = os.path.join(tmp, "lighttpd.conf")
    with open(conf, "w") as f:
        f.write(f"""server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {port}
server.max-keep-alive-requests = 1000000
server.max-keep-alive-idle = 60
server.max-fds = 16384
server.errorlog = "{tmp}/lighttpd.err"
mimetype.assign = (".html" => "text/html")
""")
    p = subprocess.Popen(["taskset", "-c", SERVER_CORE, "lighttpd", "-D", "-f", conf])
    wait_port(port)
    return p, port


def start_nginx(tmp, docroot):
    port = free_port()
    d = os.path.join(tmp, "nginx")
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1;
error_log {d}/logs/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 16384; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc;
  uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;
  server {{ listen 127.0.0.1:{port}; root {docroot}; }}
}}
""")
    p = subprocess.Popen(["taskset", "-c", SERVER_CORE, "nginx", "-p", d, "-c", conf,
                          "-g", "daemon off;"])
    wait_port(port)
    return p, port


def timed(cmd, timeout):
    """Runs cmd pinned to the client core under GNU time; returns (stdout, cpu_s, maxrss_kb)."""
    tf = tempfile.NamedTemporaryFile(delete=False)
    tf.close()
    full = ["/usr/bin/time", "-o", tf.name, "-f", "%U %S %M", "taskset", "-c", CLIENT_CORE] + cmd
    r = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
    with open(tf.name) as f:
        last = f.read().strip().splitlines()[-1].split()
    os.unlink(tf.name)
    u, s, m = float(last[0]), float(last[1]), int(last[2])
    return r.stdout + r.stderr, u + s, m


def num(pattern, text):
    m = re.search(pattern, text)
    if not m:
        raise ValueError(f"no match for {pattern!r} in output:\n{text[-2000:]}")
    return float(m.group(1))


def volley_json(text):
    start = text.find("{")
    if start < 0:
        raise ValueError(f"volley printed no JSON: {text.strip()[-300:]!r}")
    return json.loads(text[start:])


# Each tool: a function (url, host, port, path, seconds) -> (req_per_s, requests, cpu_s, rss_kb)
def run_volley(extra):
    def f(url, host, port, path, secs):
        out, cpu, rss = timed([VOLLEY, "bench", url, "-t", "1", "-d", f"{secs}s", "--json", "-",
                               "--quiet"] + extra, secs * 3 + 30)
        r = volley_json(out)["runs"][0]
        # Successful responses only, as wrk/ab/h2load count completed requests.
        return r["throughput"]["ok_per_s"], r["requests"]["ok"], cpu, rss
    return f


def run_wrk(extra):
    def f(url, host, port, path, secs):
        out, cpu, rss = timed(["wrk", "-t1", f"-d{secs}s"] + extra + [url], secs * 3 + 30)
        return num(r"Requests/sec:\s+([\d.]+)", out), num(r"(\d+) requests in", out), cpu, rss
    return f


def run_h2load(conns):
    def f(url, host, port, path, secs):
        out, cpu, rss = timed(["h2load", "--h1", "-t1", f"-c{conns}", "-D", str(secs), url],
                              secs * 3 + 30)
        return (num(r"finished in [\d.]+m?s, ([\d.]+) req/s", out),
                num(r"requests: \d+ total, \d+ started, (\d+) done", out), cpu, rss)
    return f


def run_httperf(conns):
    def f(url, host, port, path, secs):
        calls = 1_000_000
        out, cpu, rss = timed(["timeout", "-s", "INT", str(secs), "httperf", "--hog",
                               "--server", host, "--port", str(port), "--uri", path,
                               "--num-conns", str(conns), "--num-calls", str(calls),
                               "--rate", "10000"], secs * 3 + 30)
        return num(r"Request rate: ([\d.]+) req/s", out), num(r"requests (\d+) replies", out), cpu, rss
    return f


def run_ab(extra, conns):
    def f(url, host, port, path, secs):
        out, cpu, rss = timed(["ab", "-q", "-t", str(secs), "-n", "50000000", "-c", str(conns)]
                              + extra + [url], secs * 3 + 30)
        return num(r"Requests per second:\s+([\d.]+)", out), num(r"Complete requests:\s+(\d+)", out), cpu, rss
    return f


def compare(title, tools, url, host, port, path, secs, rounds):
    print(f"\n## {title}")
    res = {name: [] for name, _ in tools}
    for r in range(rounds):
        for name, fn in tools:
            try:
                rps, n, cpu, rss = fn(url, host, port, path, secs)
                res[name].append((rps, cpu * 1e6 / max(n, 1), rss))
            except Exception as e:  # a peer failing is reported, not fatal
                print(f"  {name}: failed: {str(e).splitlines()[0]}")
            time.sleep(1)
    print(f"{'tool':<10} {'req/s (median)':>15} {'rounds':>30} {'CPU us/req':>11} {'maxRSS KB':>10}")
    med = {}
    for name, rows in res.items():
        if not rows:
            continue
        m = statistics.median(x[0] for x in rows)
        c = statistics.median(x[1] for x in rows)
        med[name] = (m, c)
        rounds_s = " ".join(f"{x[0]:.0f}" for x in rows)
        print(f"{name:<10} {m:>15.0f} {rounds_s:>30} {c:>11.2f} {max(x[2] for x in rows):>10}")
    if "volley" in med:
        v = med["volley"]
        for name, (m, c) in med.items():
            if name != "volley":
                print(f"  volley/{name}: req/s ratio {v[0] / m:.3f}, CPU-per-request ratio {v[1] / c:.3f}")
    return med


def open_loop(lurl, rate, secs, warmup):
    """volley's open-loop step against lighttpd at `rate`; prints and returns
    (send error %, send-lag p99 us, verdict)."""
    out, cpu, rss = timed([VOLLEY, "bench", lurl, "-t", "1", "-k", "-c", "64", "--max-connections", "512",
                           "--rate", str(rate), "--warmup", warmup, "-d", f"{secs}s", "--json", "-",
                           "--quiet"], secs * 3 + 30)
    run = volley_json(out)["runs"][0]
    send = run["rates"]["achieved_send_per_s"]
    lag = run["latency"]["send_lag"]
    err = 100 * (send / rate - 1)
    verdict = run["generator"]["verdict"]["label"]
    w = run.get("warmup") or {}
    print(f"  warm-up {warmup:>4}: target {rate} req/s: achieved send {send:.0f} req/s "
          f"({err:+.2f}%), send lag p50 {lag['p50_ms'] * 1e3:.1f} us "
          f"p99 {lag['p99_ms'] * 1e3:.1f} us max {lag['max_ms'] * 1e3:.1f} us, "
          f"cap hits {run['connections_stats']['cap_hits']}, max open {run['connections_stats']['max_open']}, "
          f"CPU {cpu:.2f} s; verdict {verdict}"
          + (f"; warm-up excluded {w['requests']} requests, {w['connections_opened']} connections opened, "
             f"{w['cap_hits']} cap hits" if w else ""))
    return err, lag["p99_ms"] * 1e3, verdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-install", action="store_true")
    ap.add_argument("--skip-memory", action="store_true",
                    help="skip the 5M-request memory check (minutes of load)")
    ap.add_argument("--open-loop-only", action="store_true",
                    help="only the open-loop step, with and without --warmup 2s")
    ap.add_argument("--fraction", type=float, default=0.8,
                    help="open-loop rate as a share of volley's keep-alive figure (default 0.8)")
    ap.add_argument("--skip-build", action="store_true", help="use target/release/volley as built")
    a = ap.parse_args()
    if not a.skip_install:
        subprocess.run([os.path.join(ROOT, "scripts", "install-deps.sh")], check=True)
    if not a.skip_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="volley-bench-")
    # nginx's worker runs as an unprivileged user: mkdtemp's 0700 would turn every answer
    # into a 403 page, which the peers would happily count as completed requests.
    os.chmod(tmp, 0o755)
    docroot = os.path.join(tmp, "www")
    os.makedirs(docroot)
    with open(os.path.join(docroot, "a.html"), "wb") as f:
        f.write(b"<html><body>" + b"x" * 674 + b"</body></html>")  # 700 bytes
    procs = []
    try:
        lp, lport = start_lighttpd(tmp, docroot)
        procs.append(lp)
        np_, nport = start_nginx(tmp, docroot)
        procs.append(np_)
        lurl = f"http://127.0.0.1:{lport}/a.html"
        nurl = f"http://127.0.0.1:{nport}/a.html"
        # Validate before measuring: a fast wrong answer (403, 404) is not a result.
        import urllib.request
        for u in (lurl, nurl):
            with urllib.request.urlopen(u, timeout=5) as r:
                body = r.read()
                if r.status != 200 or len(body) != 700:
                    raise SystemExit(f"{u}: status {r.status}, {len(body)} bytes; expected 200 and 700")
        print(f"# volley engine benchmark, {a.seconds}s x {a.rounds} rounds, server core {SERVER_CORE}, client core {CLIENT_CORE}")
        if a.open_loop_only:
            rps, _, _, _ = run_volley(["-k", "-c", "64"])(lurl, "127.0.0.1", lport, "/a.html", a.seconds)
            rate = int(rps * a.fraction)
            print(f"\n## open loop (keep-alive) at {a.fraction:.0%} of volley's keep-alive figure ({rps:.0f} req/s): "
                  f"{rate} req/s, lighttpd, with and without warm-up")
            for _ in range(a.rounds):
                for warmup in ("2s", "0s"):
                    open_loop(lurl, rate, a.seconds, warmup)
                    time.sleep(1)
            return
        ka = compare("keep-alive, 64 connections, lighttpd", [
            ("volley", run_volley(["-k", "-c", "64"])),
            ("wrk", run_wrk(["-c64"])),
            ("h2load", run_h2load(64)),
            ("httperf", run_httperf(64)),
            ("ab", run_ab(["-k"], 64)),
        ], lurl, "127.0.0.1", lport, "/a.html", a.seconds, a.rounds)
        compare("new connection per request, 16 at once, nginx", [
            ("volley", run_volley(["-c", "16"])),
            ("ab", run_ab([], 16)),
            ("wrk", run_wrk(["-c16", "-H", "Connection: close"])),
        ], nurl, "127.0.0.1", nport, "/a.html", a.seconds, a.rounds)
        if "volley" in ka:
            rate = int(ka["volley"][0] * a.fraction)
            # Keep-alive, as the capacity it is 80% of (without -k every arrival would
            # open a connection: a different, far slower workload).
            print(f"\n## open loop (keep-alive) at 80% of volley's keep-alive figure: {rate} req/s, lighttpd")
            open_loop(lurl, rate, a.seconds, "2s")
        print("\n## memory: volley max RSS, keep-alive 64 connections, lighttpd")
        for n in () if a.skip_memory else (50_000, 5_000_000):
            out, cpu, rss = timed([VOLLEY, "bench", lurl, "-t", "1", "-k", "-c", "64", "-n", str(n),
                                   "--json", "-", "--quiet"], 600)
            print(f"  {n:>9} requests: max RSS {rss} KB")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
