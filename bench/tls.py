#!/usr/bin/env python3
"""Side-by-side speed benchmark of volley over HTTPS and HTTP/2 against its peers.

Run: python3 bench/tls.py [--seconds 10] [--rounds 3] [--skip-install]

Issue 6's speed bar, on loopback, with bench/engine.py's pinning (nginx on core 0,
every client on core 1) and its helpers (GNU time for generator CPU, interleaved rounds:
A B C ... A B C ..., medians, ratios):
  * HTTP/2 keep-alive over TLS, 16 connections x 10 streams: volley --h2 vs h2load;
  * HTTPS HTTP/1.1 keep-alive, 64 connections: volley -k vs wrk;
  * a new connection (and so a TLS handshake) per request, 16 at once, no session
    resumption on either side: volley --tls-resume off vs ab (ab makes a fresh OpenSSL
    session per connection and offers no session to resume, so both pay full
    handshakes); volley --tls-resume on is printed beside for the resumption gain.
nginx serves a 700-byte file over TLS 1.2/1.3 (ECDSA P-256 certificate made with
openssl, `listen ... ssl http2`, shared session cache and tickets on). The clients do
not verify the certificate (volley --insecure; wrk, ab and h2load never verify).
Nothing here is a test: it prints figures for the issue notes.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine as E  # noqa: E402  (bench/engine.py: pinning, timing, compare)


def start_nginx_tls(tmp, docroot):
    port = E.free_port()
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
    p = subprocess.Popen(["taskset", "-c", E.SERVER_CORE, "nginx", "-p", d, "-c", conf,
                          "-g", "daemon off;"])
    E.wait_port(port)
    return p, port


def run_h2load_h2(conns, streams):
    def f(url, host, port, path, secs):
        out, cpu, rss = E.timed(["h2load", "-t1", f"-c{conns}", f"-m{streams}", "-D", str(secs),
                                 url], secs * 3 + 30)
        return (E.num(r"finished in [\d.]+m?s, ([\d.]+) req/s", out),
                E.num(r"requests: \d+ total, \d+ started, (\d+) done", out), cpu, rss)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-install", action="store_true")
    a = ap.parse_args()
    if not a.skip_install:
        subprocess.run([os.path.join(E.ROOT, "scripts", "install-deps.sh")], check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=E.ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="volley-bench-tls-")
    # nginx's worker runs as an unprivileged user: mkdtemp's 0700 would make every
    # answer a 403 (which the peers would count as requests done).
    os.chmod(tmp, 0o755)
    docroot = os.path.join(tmp, "www")
    os.makedirs(docroot)
    with open(os.path.join(docroot, "a.html"), "wb") as f:
        f.write(b"<html><body>" + b"x" * (700 - 26) + b"</body></html>\n"[:14])
    procs = []
    try:
        np_, port = start_nginx_tls(tmp, docroot)
        procs.append(np_)
        url = f"https://127.0.0.1:{port}/a.html"
        args = (url, "127.0.0.1", port, "/a.html", a.seconds, a.rounds)
        print(f"# volley TLS benchmark, {a.seconds}s x {a.rounds} rounds, nginx on core "
              f"{E.SERVER_CORE}, clients on core {E.CLIENT_CORE}")
        E.compare("HTTP/2 keep-alive over TLS, 16 connections x 10 streams, nginx", [
            ("volley", E.run_volley(["--insecure", "--h2", "-k", "-c", "16", "--streams", "10"])),
            ("h2load", run_h2load_h2(16, 10)),
        ], *args)
        E.compare("HTTPS HTTP/1.1 keep-alive, 64 connections, nginx", [
            ("volley", E.run_volley(["--insecure", "-k", "-c", "64"])),
            ("wrk", E.run_wrk(["-c64"])),
        ], *args)
        E.compare("HTTPS new connection per request (full handshake each), 16 at once, nginx", [
            ("volley", E.run_volley(["--insecure", "-c", "16", "--tls-resume", "off"])),
            ("ab", E.run_ab([], 16)),
            ("volley-resume", E.run_volley(["--insecure", "-c", "16", "--tls-resume", "on"])),
        ], *args)
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
