#!/usr/bin/env python3
"""Side-by-side speed benchmark of volley over HTTP/3 against oha and against itself.

Run: python3 bench/h3.py [--seconds 5] [--rounds 6] [--json raw.json]
     [--volley-bin PATH] [--oha-bin PATH] [--baseline-bin PATH] [--paced RATE]
     [--no-builtin]

Issue 24's speed section, on loopback, with bench/common.py's method (the server on core
0, every client on core 1; paired rounds in alternating order, A B C C B A ...; per round
req/s, generator CPU us/request, the server's CPU share and CPU us/request; per-round
ratios with a bootstrap 95% CI; a saturation verdict):
  * Caddy (one core: GOMAXPROCS=1, pinned), HTTP/3, 16 connections x 10 streams:
    volley --h3 vs oha --http-version 3 (oha built with its `http3` feature) vs volley
    --h2 on the same Caddy (the goals: volley's h3 CPU per request at most half of
    oha's, its req/s at least oha's, within 2x of its own h2), and volley --h3 with
    VOLLEY_UDP_OFFLOAD=off (no GSO, no GRO: what they save the generator);
  * the built-in server (`volley serve --h3 --threads 1`, pinned) vs Caddy, both loaded
    by volley --h3: the server's req/s and CPU per request (goal: the built-in server's
    h3 req/s at least Caddy's on one core).
A 700-byte file; TLS 1.3 with a throw-away certificate (the clients skip verification:
volley --insecure, oha --insecure). The generator's CPU is what GNU time says for the
whole client process.

Where volley's h3 CPU goes (perf record -g of the client on core 1, main's release build
e361ecc, 16 x 10, 4-5 s, 2026-11-28, load average 10-14 from other builds): against
`volley serve --h3` (~48,000 req/s) 4 us of CPU a request, quinn-proto's packet and
stream work and volley's h3 worker the largest parts, AES-GCM ~5%, QPACK ~3%, malloc/free
~6%, the kernel 23%; 0.25 system calls a request (the server's replies arrive GSO-batched:
one recvmmsg, one sendmsg per ~10 requests). Against Caddy (~5,200 req/s on its share of
the loaded core) 10-13 us a request and the kernel 46%: every reply is its own datagram
on its own connection's socket, so each costs a recvmmsg of one datagram (GRO has nothing
to coalesce across sockets), and the poll before sleeping (`busy_wait`: epoll_wait with a
zero timeout and sched_yield) fills the gaps between Caddy's replies (epoll_wait 16%,
sched_yield 8%, recvmmsg 10%, sendmsg 7%, context switches 18%). The cut this pointed to,
one UDP socket per worker demultiplexed by connection ID (one quinn Endpoint), is in
(2026-11-28): one readiness event and one recvmmsg take the replies of every connection
that has one, and one sendmmsg what they send next. Against Caddy it batches little
while the client is faster than the server: system calls counted by strace -c over
20,000 requests (16 x 10): recvmmsg 15,579 calls for 20,140 messages, sendmmsg 13,952
for 14,810, epoll_wait 24,577 (the per-connection build: recvmmsg 16,012, sendmsg 14,434,
epoll_wait 24,983). Replies come one at a time and each still wakes the worker; they
pile up (several a read) only when the client falls behind. A/B against the
per-connection build (6 paired rounds of 5 s and 4 s, load average 2-4 from other runs):
generator CPU per request 0.98x [0.86, 1.08] on Caddy, 1.03x [0.96, 1.10] on the
built-in server: no change the noise lets one see.
Against oha (2026-11-29, oha 1.16.0 built `--features http3 --locked` into /opt/oha;
release build of f52c4fc; `python3 bench/h3.py --rounds 6 --seconds 5`, load 1.2-1.8):
volley --h3 13,374 req/s at 36.5 us of client CPU a request, Caddy at 100% of its core;
oha --http-version 3 1,824 req/s at 32.0 us, Caddy at 12%; volley / oha req/s 8.01x
[6.87, 8.97], client CPU per request 1.14x [0.87, 1.17] (the goal, <= 0.5, not met;
volley's figure includes its poll through a saturated Caddy's gaps, oha's does not
saturate it: not the same work), Caddy's CPU per request 0.88x [0.79, 1.03]. volley h3 /
h2 client CPU per request 0.84x [0.77, 0.87]; GSO/GRO on / off 1.01x [0.98, 1.03];
built-in server / Caddy req/s 15.9x [14.6, 17.9].
At oha's rate (`--paced 1800 --no-builtin`, same day, 6 rounds): volley --h3 as an open
loop at 1,800 req/s cost 553 us of client CPU a request, a whole core: the HTTP/2 and
HTTP/3 workers had no arrival timer and polled the last millisecond before every
arrival. With the timerfd HTTP/1.1 already had (4 rounds, release build of the fix):
147 us a request (3.8x less); closed loops in the same rounds: volley 38.5, oha 39.7.
What is left at that rate is the poll before sleeping (replies in flight all the time)
and the 100 us busy wait before each arrival. Caddy pays 311 us a request for the paced
arrivals against 72-99 for the closed loops' bursts (one request's packets at a time).
Both paced (`--paced 1800` now paces oha as well, `-q 1800 --latency-correction`, in a
section of its own; 2026-11-29, release build of 9b52165, 4 rounds, load 0.2): volley
--h3 156.1 us of client CPU a request, oha 157.3: **1.02x [0.93, 1.04]**, both sending
1,799 req/s; Caddy paid 1.15x [1.06, 1.35] per request under volley's pacing. About 100
us of volley's 156 is the busy wait before each arrival: a timerfd wake-up on this VM
is late by p50 44-56 us, p99 155-500 us (a C timerfd+epoll loop, with or without
`PR_SET_TIMERSLACK`), so the wait is what keeps the pacer on time here.
Again on main's release build of fafbe05 (2026-11-30, `--rounds 4 --seconds 4
--no-builtin`, load 0.0 at the start): volley --h3 14,946 req/s at 37.4 us of client CPU
a request, oha 1,354 at 38.4; volley / oha req/s 11.9x [6.6, 13.3], client CPU per
request 0.955 [0.846, 1.199] (goal <= 0.5: not met); volley h3 / h2 client CPU per
request 0.855 [0.771, 0.868].
Nothing here is a test: it prints figures for the issue notes,
and on a machine shared with other work they say so only through their spread.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402  (bench/common.py: pinning, /proc, pairing, bootstrap)
import engine as E  # noqa: E402  (bench/engine.py: the peers' command lines)

OHA = "/opt/oha/bin/oha"


def make_cert(d):
    key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key, cert


def start_caddy(tmp, docroot):
    """Caddy on one core over h1, h2 and h3 (TCP and UDP on one port number)."""
    port = C.free_port()
    d = os.path.join(tmp, "caddy")
    os.makedirs(d)
    key, cert = make_cert(d)
    conf = os.path.join(d, "Caddyfile")
    with open(conf, "w") as f:
        f.write(f"""{{
  admin off
  auto_https off
  default_sni 127.0.0.1
  ocsp_stapling off
  storage file_system {d}/data
  servers {{
    protocols h1 h2 h3
  }}
}}
https://127.0.0.1:{port} {{
  bind 127.0.0.1
  tls {cert} {key}
  root * {docroot}
  file_server
}}
""")
    env = dict(os.environ, GOMAXPROCS="1", HOME=d, XDG_CONFIG_HOME=f"{d}/config",
               XDG_DATA_HOME=f"{d}/data")
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CORE, "caddy", "run", "--adapter",
                          "caddyfile", "--config", conf], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    C.wait_port(port)
    return C.Server(p, port)


def start_builtin(volley, tmp, docroot):
    """`volley serve --h3` on one core, one event-loop thread."""
    port = C.free_port()
    certs = os.path.join(tmp, "builtin-certs")
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CORE, volley, "serve", "--root", docroot,
                          "--listen", f"127.0.0.1:{port}", "--threads", "1",
                          "--tls-self-signed", certs, "--h3"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    C.wait_port(port)
    return C.Server(p, port)


def wait_h3(volley, url, tries=50):
    """The UDP listener opens beside the TCP one: wait until one h3 request answers."""
    for _ in range(tries):
        r = subprocess.run([volley, "bench", url, "--h3", "--insecure", "-n", "1", "-q"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return
        time.sleep(0.2)
    raise SystemExit(f"no HTTP/3 answer from {url}")


def run_oha_h3(conns, streams, qps=None):
    """oha over HTTP/3 (`-p` is its streams per connection); its 2xx/3xx answers. With
    `qps`, oha paces its requests at that rate (`-q`, with its coordinated-omission
    correction), the same work as volley's open loop at that rate."""
    def f(url, host, port, path, secs):
        paced = ["-q", f"{qps:g}", "--latency-correction"] if qps else []
        out, cpu, rss = C.timed([OHA, "-z", f"{secs}s", "--no-tui", "--output-format", "json",
                                 "--insecure", "--http-version", "3", "-c", str(conns),
                                 "-p", str(streams)] + paced + [url], secs * 3 + 30)
        j = json.loads(out[out.find("{"):])
        ok = sum(n for code, n in j.get("statusCodeDistribution", {}).items()
                 if 200 <= int(code) < 400)
        return ok / j["summary"]["total"], ok, cpu, rss
    return f


def run_volley_with_env(extra, volley, env):
    """volley with `env` set for its run, e.g. UDP GSO and GRO off
    (`VOLLEY_UDP_OFFLOAD=off`, read by the engine)."""
    inner = E.run_volley(extra, volley)

    def f(*args):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return inner(*args)
        finally:
            for k, v in saved.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v
    return f


def main():
    global OHA
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5, help="length of each run (default 5)")
    ap.add_argument("--rounds", type=int, default=6, help="paired rounds (default 6)")
    ap.add_argument("--json", metavar="FILE", help="write every raw per-round figure to FILE")
    ap.add_argument("--volley-bin", default=C.VOLLEY, help="the volley binary (a release build)")
    ap.add_argument("--oha-bin", default=OHA, help="oha built with its http3 feature")
    ap.add_argument("--baseline-bin", help="an earlier volley build to compare --h3 against")
    ap.add_argument("--paced", type=float, metavar="RATE",
                    help="also volley --h3 and oha paced at RATE req/s (oha's closed-loop "
                         "rate: the same work, where a closed loop saturating Caddy polls "
                         "its gaps)")
    ap.add_argument("--no-builtin", action="store_true",
                    help="skip the built-in server vs Caddy section")
    a = ap.parse_args()
    if a.seconds < 1 or a.rounds < 1:
        raise SystemExit("--seconds and --rounds must be at least 1")
    OHA = a.oha_bin
    volley = a.volley_bin
    tmp = tempfile.mkdtemp(prefix="volley-bench-h3-")
    os.chmod(tmp, 0o755)
    docroot = os.path.join(tmp, "www")
    os.makedirs(docroot)
    with open(os.path.join(docroot, "a.html"), "wb") as f:
        f.write(b"x" * 700)
    procs, raw = [], []
    meta = {"seconds": a.seconds, "rounds": a.rounds, "volley": volley, "oha": OHA,
            "baseline": a.baseline_bin,
            "server_core": C.SERVER_CORE, "client_core": C.CLIENT_CORE,
            "load_average": os.getloadavg()}
    try:
        caddy = start_caddy(tmp, docroot)
        procs.append(caddy.popen)
        url = f"https://127.0.0.1:{caddy.port}/a.html"
        wait_h3(volley, url)
        print(f"# volley HTTP/3 benchmark, {a.rounds} paired rounds of {a.seconds}s, server "
              f"on core {C.SERVER_CORE}, clients on core {C.CLIENT_CORE}; load average "
              f"{os.getloadavg()[0]:.1f} at the start")
        args = (url, "127.0.0.1", caddy.port, "/a.html", a.seconds)
        h3 = ["--insecure", "--h3", "-c", "16", "--streams", "10"]
        oha = [("oha-h3", run_oha_h3(16, 10))] if os.access(OHA, os.X_OK) else []
        if not oha:
            print(f"# no oha at {OHA} (cargo install oha --features http3): left out")
        C.compare("HTTP/3 vs HTTP/3 vs HTTP/2, 16 connections x 10 streams, Caddy on one core", [
            ("volley", E.run_volley(h3, volley)),
        ] + oha + [
            ("volley-h2", E.run_volley(["--insecure", "--h2", "-c", "16", "--streams", "10"],
                                       volley)),
            ("volley-no-gso", run_volley_with_env(h3, volley, {"VOLLEY_UDP_OFFLOAD": "off"})),
        ] + ([("volley-base", E.run_volley(h3, a.baseline_bin))] if a.baseline_bin else []),
            args, caddy, a.rounds, None, raw)
        if a.paced:
            # The like-for-like client cost: both tools paced at one rate (a closed loop
            # saturating Caddy polls through its gaps; oha's closed loop does not reach
            # that rate), so each request is the same work for both.
            C.compare(f"open loops at {a.paced:g} req/s, 16 connections x 10 streams", [
                ("volley-paced", E.run_volley(h3 + ["--rate", f"{a.paced:g}"], volley)),
            ] + ([("oha-paced", run_oha_h3(16, 10, qps=a.paced))] if oha else []),
                args, caddy, a.rounds, None, raw, base="volley-paced")
        if a.no_builtin:
            return
        builtin = start_builtin(volley, tmp, docroot)
        procs.append(builtin.popen)
        burl = f"https://127.0.0.1:{builtin.port}/a.html"
        wait_h3(volley, burl)
        # Two servers, one client: alternate the servers round by round.
        res = {"builtin": [], "caddy": []}
        print("\n## the built-in server vs Caddy over HTTP/3, both on one core, volley --h3")
        for k in range(a.rounds):
            order = ["builtin", "caddy"] if k % 2 == 0 else ["caddy", "builtin"]
            for name in order:
                srv, u = (builtin, burl) if name == "builtin" else (caddy, url)
                rec = C.measure(E.run_volley(h3, volley), srv,
                                (u, "127.0.0.1", srv.port, "/a.html", a.seconds))
                res[name].append(rec)
                raw.append(dict(rec, section="builtin-vs-caddy", round=k, tool=name))
                time.sleep(1)
            print(f"  round {k}: builtin {res['builtin'][-1]['req_per_s']:.0f} req/s, "
                  f"caddy {res['caddy'][-1]['req_per_s']:.0f} req/s")
        C.paired_report("builtin", "caddy", res["builtin"], res["caddy"])
        print(f"\n# load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        C.stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)
        C.dump_json(a.json, meta, raw)


if __name__ == "__main__":
    sys.exit(main())
