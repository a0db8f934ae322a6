#!/usr/bin/env python3
"""Side-by-side speed benchmark of volley over HTTPS and HTTP/2 against its peers.

Run: python3 bench/tls.py [--seconds 5] [--rounds 8] [--json raw.json] [--skip-install]

Issue 6's speed bar, on loopback, with bench/common.py's method (nginx on core 0, every
client on core 1; paired rounds in alternating order; per round req/s, generator CPU
us/request, nginx's CPU share, CPU us/request and syscalls/request; volley/peer
per-round ratios with a bootstrap 95% CI; a saturation verdict):
  * HTTP/2 keep-alive over TLS, 16 connections x 10 streams: volley --h2 vs h2load;
  * HTTPS HTTP/1.1 keep-alive, 64 connections: volley -k vs wrk;
  * a new connection (and so a TLS handshake) per request, 16 at once, no session
    resumption on either side: volley --tls-resume off vs ab (ab makes a fresh OpenSSL
    session per connection and offers no session to resume, so both pay full
    handshakes; ab cannot resume, so there is no resumed ab figure); volley
    --tls-resume on is printed beside for the resumption gain;
  * handshakes one at a time, with and without resumption: volley -c 1 --tls-resume
    off/on vs `openssl s_time -new` / `-reuse` (s_time opens one connection at a time,
    fetches the page once on it and closes it; its rate is connections/s over our wall
    clock, as its own "real seconds" are whole seconds).
Why not h2load for handshakes: h2load has no one-request-per-connection mode. `-n N -c
C` shares the N requests among C clients that each keep one connection for all of
theirs, and `-r/--rate` only paces when those connections are opened; `-n C -c C` run
again and again would measure process start-up as much as handshakes. So the handshake
comparisons are against ab and openssl s_time, which close the connection per request.
nginx serves a 700-byte file over TLS 1.2/1.3 (ECDSA P-256 certificate made with
openssl, `listen ... ssl http2`, shared session cache and tickets on). The clients do
not verify the certificate (volley --insecure; wrk, ab, h2load and s_time never verify).
Nothing here is a test: it prints figures for the issue notes.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402  (bench/common.py: pinning, /proc, pairing, bootstrap)
import engine as E  # noqa: E402  (bench/engine.py: the peers' command lines)


def start_nginx_tls(tmp, docroot):
    port = C.free_port()
    d = os.path.join(tmp, "nginx")
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1;
error_log {d}/logs/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 16384; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  http2_max_concurrent_streams 128;
  client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc;
  uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;
  server {{
    listen 127.0.0.1:{port} ssl http2;
    root {docroot};
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:volley:10m;
    ssl_session_tickets on;
  }}
}}
""")
    p = subprocess.Popen(["taskset", "-c", C.SERVER_CORE, "nginx", "-p", d, "-c", conf,
                          "-g", "daemon off;"])
    C.wait_port(port)
    time.sleep(0.2)  # the worker is forked after the port opens; Server reads the tree
    return C.Server(p, port)


def run_h2load_h2(conns, streams):
    def f(url, host, port, path, secs):
        out, cpu, rss = C.timed(["h2load", "-t1", f"-c{conns}", f"-m{streams}", "-D", str(secs),
                                 url], secs * 3 + 30)
        return (C.num(r"finished in [\d.]+m?s, ([\d.]+) req/s", out),
                C.num(r"requests: \d+ total, \d+ started, (\d+) done", out), cpu, rss)
    return f


def run_s_time(mode):
    """openssl s_time -new (a full handshake per connection) or -reuse (session
    resumption), one connection at a time, fetching the page once per connection."""
    def f(url, host, port, path, secs):
        t0 = time.monotonic()
        out, cpu, rss = C.timed(["openssl", "s_time", "-connect", f"{host}:{port}", mode,
                                 "-time", str(secs), "-www", path], secs * 3 + 30)
        wall = time.monotonic() - t0
        n = C.num(r"(\d+) connections in [\d.]+ real seconds", out)
        if mode == "-reuse":
            # s_time prints one mark per connection: 'r' resumed, '*' full handshake.
            marks = out.split("starting", 1)[-1].split("connections in", 1)[0]
            resumed, full = marks.count("r"), marks.count("*")
            if resumed < 0.9 * max(resumed + full, 1):
                raise ValueError(f"s_time -reuse resumed only {resumed} of {resumed + full} "
                                 f"connections: not a resumption figure")
        return n / wall, n, cpu, rss
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5, help="length of each run (default 5)")
    ap.add_argument("--rounds", type=int, default=8, help="paired rounds (default 8)")
    ap.add_argument("--shuffle", type=int, metavar="SEED",
                    help="seeded shuffle of the tool order per round instead of alternating")
    ap.add_argument("--json", metavar="FILE", help="write every raw per-round figure to FILE")
    ap.add_argument("--skip-install", action="store_true")
    ap.add_argument("--skip-build", action="store_true", help="use the volley binary as built")
    a = ap.parse_args()
    if a.seconds < 1 or a.rounds < 1:
        raise SystemExit("--seconds and --rounds must be at least 1")
    if not a.skip_install:
        subprocess.run([os.path.join(C.ROOT, "scripts", "install-deps.sh")], check=True)
    if not a.skip_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=C.ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="volley-bench-tls-")
    # nginx's worker runs as an unprivileged user: mkdtemp's 0700 would make every
    # answer a 403 (which the peers would count as requests done).
    os.chmod(tmp, 0o755)
    docroot = os.path.join(tmp, "www")
    os.makedirs(docroot)
    with open(os.path.join(docroot, "a.html"), "wb") as f:
        f.write(b"<html><body>" + b"x" * (700 - 26) + b"</body></html>\n"[:14])
    procs = []
    raw = []
    meta = {"seconds": a.seconds, "rounds": a.rounds, "shuffle": a.shuffle,
            "server_core": C.SERVER_CORE, "client_core": C.CLIENT_CORE}
    try:
        ngx = start_nginx_tls(tmp, docroot)
        procs.append(ngx.popen)
        url = f"https://127.0.0.1:{ngx.port}/a.html"
        args = (url, "127.0.0.1", ngx.port, "/a.html", a.seconds)
        order = f"seeded shuffle {a.shuffle}" if a.shuffle is not None else "alternating order"
        print(f"# volley TLS benchmark, {a.rounds} paired rounds ({order}) of {a.seconds}s, "
              f"nginx on core {C.SERVER_CORE}, clients on core {C.CLIENT_CORE}")
        common = (args, ngx, a.rounds, a.shuffle, raw)
        C.compare("HTTP/2 keep-alive over TLS, 16 connections x 10 streams, nginx", [
            ("volley", E.run_volley(["--insecure", "--h2", "-k", "-c", "16", "--streams", "10"])),
            ("h2load", run_h2load_h2(16, 10)),
        ], *common)
        C.compare("HTTPS HTTP/1.1 keep-alive, 64 connections, nginx", [
            ("volley", E.run_volley(["--insecure", "-k", "-c", "64"])),
            ("wrk", E.run_wrk(["-c64"])),
        ], *common)
        C.compare("HTTPS new connection per request (full handshake each), 16 at once, nginx", [
            ("volley", E.run_volley(["--insecure", "-c", "16", "--tls-resume", "off"])),
            ("ab", E.run_ab([], 16)),
            ("volley-resume", E.run_volley(["--insecure", "-c", "16", "--tls-resume", "on"])),
        ], *common)
        C.compare("HTTPS handshakes one at a time, full (no resumption), nginx", [
            ("volley", E.run_volley(["--insecure", "-c", "1", "--tls-resume", "off"])),
            ("s_time-new", run_s_time("-new")),
        ], *common)
        C.compare("HTTPS handshakes one at a time, session resumption, nginx", [
            ("volley", E.run_volley(["--insecure", "-c", "1", "--tls-resume", "on"])),
            ("s_time-reuse", run_s_time("-reuse")),
        ], *common)
    finally:
        C.stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)
        C.dump_json(a.json, meta, raw)


if __name__ == "__main__":
    sys.exit(main())
