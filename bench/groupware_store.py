#!/usr/bin/env python3
"""Storage figures of the multi-user groupware server: p50/p99 per operation with 100
users, and how they grow with the number of items.

An office's year is ~250 new items a working day, ~60,000 in all. The script lays out
USERS homes on disk in the server's own format (a calendar collection marker, one .ics
file per item, one change-journal line per item: exactly what PUTs would have left,
without spending an hour on fsyncs), starts `volley serve --users`, and times, over
keep-alive HTTP/1.1 connections on loopback, for randomly chosen users:

  propfind1    PROPFIND Depth 1 of the calendar (getetag, getcontenttype)
  sync-same    sync-collection with the current token (nothing changed)
  sync-1       sync-collection after one change
  query-week   calendar-query VEVENT in one week (recurring items expanded)
  get          GET of one item
  put          PUT of a new item (its calendar's UID index already built)

for each total item count in --totals (spread evenly over the users), then once more
with all items of the largest total in one user's calendar (--one-calendar), the
worst case for the per-collection operations. Timing is wall-clock per request on the
client. Run on a release build (target/release/volley; VOLLEY_BIN overrides).

Usage: bench/groupware_store.py [--users 100] [--totals 6000,30000,60000]
           [--samples 200] [--one-calendar 60000]
"""
import argparse
import base64
import http.client
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import VOLLEY, free_port, wait_port  # noqa: E402

PASSWORD = "office"
SEED = 20261125


def event(uid, day, hour, recurring):
    rule = "RRULE:FREQ=WEEKLY;COUNT=10\r\n" if recurring else ""
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:{uid}\r\nDTSTAMP:20240101T000000Z\r\n"
        f"DTSTART;TZID=Europe/Berlin:2024{1 + day // 28:02d}{1 + day % 28:02d}T{hour:02d}0000\r\n"
        f"DURATION:PT1H\r\n{rule}SUMMARY:Item {uid} with a plausible length of text\r\n"
        "DESCRIPTION:Agenda: budget\\, staffing\\, the next quarter's plans.\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )


def lay_out(root, users, per_user):
    """Homes, calendars, items and journals as the server writes them."""
    rnd = random.Random(SEED)
    for u in users:
        cal = os.path.join(root, u, "calendar")
        os.makedirs(cal)
        with open(os.path.join(cal, ".volley-collection"), "w") as f:
            f.write("type=calendar\ndisplayname=Calendar\n")
        lines = ["volley-sync 1 bench%s\n" % u]
        for i in range(per_user):
            name = f"item{i:06d}.ics"
            with open(os.path.join(cal, name), "w") as f:
                f.write(event(f"{u}-{i}", rnd.randrange(0, 336), rnd.randrange(8, 18),
                              rnd.random() < 0.2))
            lines.append(f"{i + 1} + {name} .\n")
        with open(os.path.join(cal, ".volley-sync"), "w") as f:
            f.writelines(lines)


def users_file(path, users):
    line = subprocess.run([VOLLEY, "passwd", "x", "--cost", "4"], input=PASSWORD + "\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    digest = line.split(":", 1)[1]
    with open(path, "w") as f:
        f.writelines(f"{u}:{digest}\n" for u in users)


class Client:
    def __init__(self, port):
        self.port = port
        self.conns = {}

    def call(self, user, method, path, body="", headers=None):
        conn = self.conns.get(user)
        if conn is None:
            conn = self.conns[user] = http.client.HTTPConnection("127.0.0.1", self.port,
                                                                  timeout=60)
            conn.connect()
            # Head and body leave in two writes: without this, Nagle holds the body
            # until the server's delayed ACK, 40 ms that are the client's, not the server's.
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        auth = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
        h = {"Authorization": "Basic " + auth}
        h.update(headers or {})
        start = time.perf_counter()
        conn.request(method, path, body=body.encode(), headers=h)
        resp = conn.getresponse()
        data = resp.read()
        elapsed = time.perf_counter() - start
        return resp.status, data.decode("utf-8", "replace"), elapsed


def token_of(body):
    return body.split("<D:sync-token>", 1)[1].split("<", 1)[0]


SYNC = ('<D:sync-collection xmlns:D="DAV:"><D:sync-token>{}</D:sync-token>'
        '<D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>')
PROPFIND = ('<propfind xmlns="DAV:"><prop><getetag/><getcontenttype/></prop></propfind>')
WEEK = ('<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">'
        '<D:prop><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR">'
        '<C:comp-filter name="VEVENT"><C:time-range start="20240311T000000Z" '
        'end="20240318T000000Z"/></C:comp-filter></C:comp-filter></C:filter>'
        '</C:calendar-query>')


def measure(client, users, per_user, samples):
    rnd = random.Random(SEED + per_user)
    times = {k: [] for k in ["propfind1", "sync-same", "sync-1", "query-week", "get", "put"]}
    tokens = {}
    serial = 0

    def ok(status, want, what):
        if status != want:
            raise SystemExit(f"{what}: status {status}, expected {want}")

    for u in users[: min(len(users), samples)]:
        # Warm-up per calendar: its token, and its UID index built by a first PUT.
        s, body, _ = client.call(u, "REPORT", f"/{u}/calendar/", SYNC.format(""))
        ok(s, 207, "initial sync")
        tokens[u] = token_of(body)
    for u in list(tokens):
        s, _, _ = client.call(u, "PUT", f"/{u}/calendar/warm.ics", event(f"{u}-warm", 3, 9, False))
        ok(s, 201, "warm-up put")
        s, body, _ = client.call(u, "REPORT", f"/{u}/calendar/", SYNC.format(tokens[u]))
        tokens[u] = token_of(body)
    chosen = list(tokens)
    for _ in range(samples):
        u = rnd.choice(chosen)
        cal = f"/{u}/calendar/"
        s, _, t = client.call(u, "PROPFIND", cal, PROPFIND, {"Depth": "1"})
        ok(s, 207, "propfind")
        times["propfind1"].append(t)
        s, body, t = client.call(u, "REPORT", cal, SYNC.format(tokens[u]))
        ok(s, 207, "sync")
        times["sync-same"].append(t)
        serial += 1
        s, _, t = client.call(u, "PUT", f"{cal}new{serial}.ics",
                              event(f"{u}-new{serial}", rnd.randrange(0, 336), 10, False))
        ok(s, 201, "put")
        times["put"].append(t)
        s, body, t = client.call(u, "REPORT", cal, SYNC.format(tokens[u]))
        ok(s, 207, "sync after change")
        times["sync-1"].append(t)
        tokens[u] = token_of(body)
        s, _, t = client.call(u, "REPORT", cal, WEEK, {"Depth": "1"})
        ok(s, 207, "query")
        times["query-week"].append(t)
        s, _, t = client.call(u, "GET", f"{cal}item{rnd.randrange(per_user):06d}.ics")
        ok(s, 200, "get")
        times["get"].append(t)
    return times


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run_case(label, n_users, per_user, samples, cal_users=None):
    tmp = tempfile.mkdtemp(prefix="volley-gwstore-")
    try:
        root = os.path.join(tmp, "root")
        os.makedirs(root)
        users = [f"u{i:03d}" for i in range(n_users)]
        t0 = time.time()
        lay_out(root, cal_users or users, per_user)
        laid = time.time() - t0
        users_file(os.path.join(tmp, "users"), users)
        port = free_port()
        server = subprocess.Popen([VOLLEY, "serve", "--root", root, "--users",
                                   os.path.join(tmp, "users"), "--listen", f"127.0.0.1:{port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            client = Client(port)
            times = measure(client, cal_users or users, per_user, samples)
            rss = 0
            with open(f"/proc/{server.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        rss = int(line.split()[1])
        finally:
            server.terminate()
            server.wait(timeout=10)
        row = [label]
        for k in ["propfind1", "sync-same", "sync-1", "query-week", "get", "put"]:
            row.append("%.2f / %.2f" % (pct(times[k], 50) * 1e3, pct(times[k], 99) * 1e3))
        row.append("%d" % (rss // 1024))
        print("| " + " | ".join(row) + " |", flush=True)
        print(f"   ({label}: laid out in {laid:.1f}s)", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--totals", default="6000,30000,60000")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--one-calendar", type=int, default=60000)
    a = ap.parse_args()
    if not os.path.exists(VOLLEY):
        raise SystemExit(f"{VOLLEY} missing: cargo build --release first")
    print(f"volley {VOLLEY}; p50 / p99 in ms per operation; {a.samples} samples each")
    print("| case | PROPFIND D1 | sync unchanged | sync 1 change | query week | GET | PUT new | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for total in [int(t) for t in a.totals.split(",") if t]:
        per_user = total // a.users
        run_case(f"{a.users} users x {per_user} = {total}", a.users, per_user, a.samples)
    if a.one_calendar:
        run_case(f"1 calendar x {a.one_calendar} ({a.users} accounts)", a.users,
                 a.one_calendar, max(20, a.samples // 10), cal_users=["u000"])


if __name__ == "__main__":
    main()
