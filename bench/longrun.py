#!/usr/bin/env python3
"""Long runs stay flat (issue 26, item 4): three loads of MINUTES each, at once, on loopback.

Run: python3 bench/longrun.py [--minutes 60] [--every 10] [--out longrun.jsonl]
                               [--loads bench,office,injected]

  * keep-alive bench: `volley bench -k --rate RATE -d ...s --save` against `volley serve`;
  * office day: `volley study run` of one office step of 50 users for MINUTES (real time,
    compress 1) against the built-in server the study starts (`dav = true`); a study,
    not `volley bench --caldav`, because the study stores the office's seconds;
  * injected run: `volley study run` of one open-loop step of MINUTES with
    `[injectors] count = 3` (the coordinator starts its private, secured nats-server and
    three local `volley agent` processes).
Every EVERY seconds, each process of each tree (found through /proc/PID/task/*/children)
is sampled: VmRSS (and its anonymous and file-backed parts, RssAnon and RssFile) and
Threads from /proc/PID/status, open fds from /proc/PID/fd. Each sample is one JSON line
in OUT. At the end, per process: RSS at the end of the first 5 minutes against the
lowest and highest after it (flat = within 10% of that reference), the same for its
anonymous part (what the process holds; the file-backed rest is the binary's code and
read-only data mapped from the page cache, which other processes of the same binary
also bring in), fds and threads at 5 minutes against their highest after; and per
store, the distinct seconds of load stored against the run's length (the stores are
kept beside OUT). The loads end on their own; a deadline of MINUTES + 10 minutes stops
whatever is left (nothing unbounded). Nothing here is a test.

Why all three at once: one hour, not three; the machine is shared either way, and
flatness is about growth over time, which contention does not create.

Measured 27 Nov 2026 on this busy 2-core VM (others building), rate 100 req/s, RSS slope
from minute 5 to the end:
- `--minutes 60`, release build of ae39413: `volley serve` (both) 0.1-0.2 KB/s (flat);
  `volley bench --save` 16.6 -> 20.6 MB (1.2 KB/s: the closed seconds it keeps to
  store at the end, ~1 KB each; not flat within 10%); office study (50 users) 53.0 ->
  61.2 MB (2.4 KB/s); agents 25.3 -> 29.3 MB each (1.2 KB/s: their closed seconds,
  sent again in the final record); nats-server 15.9 -> 17.3 MB; the coordinator 206 MB
  -> 2.34 GB (637 KB/s: every merged second's seven histograms kept decoded, 94 KB
  each). No fd or thread growth anywhere (bench's fds follow its open-loop pool, 6-41).
  Every second of bench (3601) and the office (3595 of 3600) stored; the injected run
  stored 10,801 injector seconds (3 x 3600) but NO step: at the end every agent's final
  record timed out ("delivering the buffered records and the final record timed out
  after 10s") and the step failed with "no agent sent its recorder".
- `--minutes 40 --loads injected`, debug build with merged seconds packed (before the
  agents' record histograms were dropped too): coordinator 36.9 -> 54.9 MB (8.5 KB/s,
  75x less); agents 1.1 KB/s; the same final-record failure at the end.
- `--minutes 60`, debug build of c0885eb (bench --save storing each second as it closes,
  agents keeping none): `volley bench --save` 30.4 MB at 5 min, 30.4..32.9 after (+8.5%,
  most of it SQLite's 2 MB page cache, since capped for the live writer: a 25-minute
  `--loads bench` run of c9b6bc1 read 29.6..30.0 MB, +1.3%); agents 39.5 MB, +2.0% at
  most (0.4 KB/s, was 1.2); the injected run now stores its step (3600 seconds, all
  three loads every second); the coordinator still grows, 36.7 -> 52.9 MB over the run
  (5.9 KB/s) and 118 MB while closing. Office study (old per-operation recorders)
  74.0 -> 80.4 MB (+8.6%); `--minutes 30 --loads office` of 28ac82b: 75.8, after it
  71.8..78.0 MB (+2.8%). No fd or thread growth.
- `--minutes 12 --loads injected`, debug builds, RSS from minute 3 to the last sample
  before closing (28 Nov 2026): main at 23f9aca, coordinator 36.0 -> 39.1 MB (5.8 KB/s,
  54.4 MB while closing); with merged seconds stored as they close, agents' records let
  go once merged and seconds kept slim (e2b47bc), 36.6 -> 37.6 MB (2.1 KB/s; 1.9 in a
  second run), 37.7 MB while closing; the same 721 seconds x 7 histogram kinds stored.
  Agents 0.3-0.7 KB/s. nats-server 16.4 -> 17.6 MB in both (2.3 KB/s): the same with
  volley's change, so not the coordinator's holding; volley's subscriptions are a fixed
  handful per party (no subject per second or per request: replies share one inbox
  wildcard each) and JetStream is off (no `jetstream` block, no `-js`), so the growth
  is the server's own (its Go heap; its subject-match cache is bounded), not measured
  from inside the server (the private bus runs without a monitoring port).
- `--minutes 10 --every 20 --loads injected`, debug builds, slope = least squares from
  the settle point (2.5 min) to the load's end (28 Nov 2026): before (ad437fc) the
  coordinator (`volley study`) 42.8 -> 46.3 MB, 3.7 KB/s; with phases cut as the
  seconds close and no merged second kept (`fold::Tally`: a summary row a second,
  ~0.35 KB) 35.7 -> 36.2 MB, 1.0 KB/s, and in a second run 35.1 -> 35.6 MB, 2.9 KB/s
  (34.3 MB at the settle point, then allocator steps of ~0.5 MB). Agents 2.9-3.4, 1.8
  and 1.8-2.4 KB/s, nats-server 1.2, 3.0 and 2.9 KB/s in the same runs: ten minutes do
  not tell 1 KB/s from the allocator's steps; a 60-minute run on a quiet machine is
  still owed.
- `--minutes 45 --every 30 --loads injected`, the two builds side by side at once on a
  machine at load 14-24 (others' builds and tests): both coordinators rose from ~34 to
  113 MB between minutes 4 and 18, while the load was heaviest, and stayed there to
  the end (113.1 -> 113.9 and 112.0 -> 112.4 MB over the last 27 minutes), so the
  slopes (28.8 and 25.5 KB/s) are that rise, not a per-second holding. The same rise
  in both suggests the live merge's pending seconds (each holds seven decoded
  histograms, up to ~650 KB, while an agent's record of it is late) piling up behind
  starved agents; not measured from inside.
- `--minutes 60 --every 30`, debug build of c0b7b2f (a second closes once every agent
  is past it, waiting seconds hold records' bytes only: a unit test's 120 s lag holds
  341 KB, 48 MB before), all three loads at the lowest CPU share beside six builders
  (load 11-13), 28 Nov 2026: coordinator (`volley study`) 36.9 MB at 5 min,
  36.9..40.3 after (+9.2%, flat within 10%; 1.07 KB/s), 40.3 MB while closing (no
  peak); it never held 10 seconds waiting (no backlog note), no record late. Agents
  33.5-34.0 -> 36.9-37.2 MB (+10.1%, two just past 10%; 0.9 KB/s); nats-server 16.7
  -> 17.8 MB; bench --save 28.2 -> 30.9 MB (flat); serve flat. Office study 58.5 ->
  68.6 MB (+17%, NOT flat; 2.4 KB/s, as before). No fd or thread growth (bench's fds
  follow its pool). Every second stored: bench 3601, office 3600, injected 3600.
- Office alone under heaptrack (debug build of 66cdc34, `users = [50]`, 300 s window,
  load 9-24, 28 Nov 2026; not a fix, where the growth goes): the heap rose from
  11.5 MB at 80 s to 17.0 MB at 320 s. The day sent 1,198 requests (4 a second), so
  the growth is not a per-request holding. Its calendars went from 1,000 items to 1,131
  (134 creates): each item is kept three times (the truth and each device's mirror, as
  a real client keeps its copy), ~1.1 KB of text each, so ~1.5 KB/s of the growth is
  the calendars' items, data the office must keep, proportional to the items created
  (the day's decisions), not to time. The rest is per-second state every study step
  keeps to store at its end (monitor samples, stall seconds, the seconds' digests),
  the same floor as the injected coordinator's ~1 KB/s. Not yet shown side by side:
  a run with the item texts shared between the truth and the mirrors (one copy).
- 29 Nov 2026, release builds, beside other measurements: `--minutes 60` of b8e275d,
  every second stored, no fd or thread growth; not flat by the letter: bench --save
  +11.2%, agents +15-18%, coordinator +22% (its file-backed part: code first run after
  minute 5; its anonymous memory flat). `--loads bench,injected` with the anonymous and
  file-backed parts: b8e275d for 60 minutes, file-backed constant from minute 5 in
  every volley process, bench --save +10.1% (0.54 KB/s), agents +13.7-13.9% (0.74-0.81
  KB/s); with the stall probe's older seconds on disk (b74d387), 30 minutes in the same
  minutes: bench --save +3.4% (0.33 KB/s), agents +3.7-4.4% (0.18-0.32 KB/s),
  coordinator +13.6% (its anonymous part swinging 6-9 MB as in every run).
- 29 Nov 2026, release of fc017e3, `--minutes 60 --every 30`, all three loads. Beside
  a seed-002 study, the test suite and builds (15:23-16:23): bench +6.4%, office
  +3.8% (its closing, shown apart, peaked at 36.6 MB), agents +18-20%, coordinator
  +13%: the agents' and bench's rise came in the minutes the builds ran, and stopped
  with them. The cause, shown alone (`volley bench --rate 200 -c 8 -k` against
  `volley serve` stopped 3 s with SIGSTOP, twice): RSS +1.0 MB (+7.7%) after the first
  stop, +12 KB after the second: the histograms grow once to the longest latency seen
  (`volley_metrics::hist`), at most to the hour. The same hour on a quiet machine
  (16:43-17:44), every process within 10% of its RSS at minute 5: bench 16.5-16.6 MB
  (0.03 KB/s), agents 17.9-19.2 MB (+5.4-7.3%, 0.21-0.32 KB/s), coordinator 22.0-25.0
  MB (-3.7%/+9.6%, -0.44 KB/s), office study 24.1-25.1 MB (+4.1%), servers flat;
  no fd or thread growth; every second of the three loads stored (3600 each).
"""
import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import VOLLEY, free_port, process_tree, stop_all, wait_port  # noqa: E402

USERS = 50


def status(pid):
    """(rss_kb, anon_kb, file_kb, threads, fds) of one process, or None when it is gone."""
    try:
        got = {}
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                    got[key] = int(rest.split()[0])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return (got.get("VmRSS", 0), got.get("RssAnon", 0), got.get("RssFile", 0),
                got.get("Threads", 0), fds)
    except OSError:
        return None


def role(pid):
    """A short name of what the process is: serve, bench, study, agent, nats-server."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    if not argv:
        return None
    exe = os.path.basename(argv[0])
    if exe.startswith("volley") and len(argv) > 1:
        return "volley " + argv[1]
    return exe


def study_file(tmp, url, minutes, rate):
    path = os.path.join(tmp, "injected.toml")
    with open(path, "w") as f:
        f.write(f"""name = "longrun-injected"
[[target]]
name = "served"
kind = "external"
url = "{url}"
[[workload]]
name = "page"
paths = ["/a.html"]
[load]
model = "open"
rate = {rate}
concurrency = 4
keepalive = true
[injectors]
count = 3
[steps]
duration = "{minutes * 60}s"
warmup = "0s"
cooldown = "0s"
retries = 0
""")
    return path


def office_file(tmp, minutes):
    path = os.path.join(tmp, "office.toml")
    with open(path, "w") as f:
        f.write(f"""name = "longrun-office"
[[target]]
name = "builtin-office"
kind = "builtin"
dav = true
[[workload]]
name = "office"
kind = "caldav"
users = [{USERS}]
compress = 1
[load]
model = "closed"
timeout = "10s"
[steps]
duration = "{minutes * 60}s"
warmup = "0s"
cooldown = "0s"
retries = 0
""")
    return path


def stored_seconds(db):
    """(steps, distinct load seconds stored) of the store's last run."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (run,) = con.execute("select max(id) from runs").fetchone()
        steps = con.execute("select count(*) from steps where run_id = ?", (run,)).fetchone()[0]
        secs = con.execute("select count(distinct s.second) from series s join steps t on "
                           "s.step_id = t.id where t.run_id = ? and s.source = 'load'",
                           (run,)).fetchone()[0]
        return steps, secs
    finally:
        con.close()


def slope(rows, key="rss_kb"):
    """Least-squares growth of `key` in KB/s over the samples: one number that a single
    allocator step (RSS rises in arena-sized jumps) sways less than first-to-last."""
    n = len(rows)
    mt = sum(r["t"] for r in rows) / n
    mr = sum(r[key] for r in rows) / n
    den = sum((r["t"] - mt) ** 2 for r in rows)
    return sum((r["t"] - mt) * (r[key] - mr) for r in rows) / den if den else 0.0


def flatness(late, key):
    """(reference, low, high, flat) of `key` over the samples from the settle point on:
    flat when every later sample is within 10% of the first."""
    ref = late[0][key]
    lo = min(r[key] for r in late)
    hi = max(r[key] for r in late)
    return ref, lo, hi, hi <= ref * 1.10 and lo >= ref * 0.90


def verdict(rows, settle_s, secs):
    """Per (load, role, pid): the reference at settle_s, the extremes and the slope from
    it to the end of the load, and apart from them the peak while the process closes
    (after the load's MINUTES: a study summarising its step, a bench writing its
    store), which is the end of a run, not growth during it."""
    by = {}
    for r in rows:
        by.setdefault((r["load"], r["role"], r["pid"]), []).append(r)
    out = []
    for (load, name, pid), rs in sorted(by.items()):
        late = [r for r in rs if r["t"] >= settle_s]
        if len(late) < 2:
            continue
        ref = late[0]
        # The load's own samples only: the closing's peak is shown apart.
        body = [r for r in late if r["t"] <= secs] or late
        closing = [r["rss_kb"] for r in late if r["t"] > secs]
        _, lo, hi, flat = flatness(body, "rss_kb")
        line = (f"{load:9} {name:16} pid {pid:>7}: RSS at {settle_s // 60} min {ref['rss_kb']} kB, "
                f"after it {lo}..{hi} kB ({'flat' if flat else 'NOT flat'} within 10%; "
                f"slope {slope(body):.2f} KB/s)")
        if "anon_kb" in ref:
            # The anonymous part is what the process holds; the file-backed part is the
            # binary's pages mapped from the page cache, which grows as code runs for the
            # first time and as the kernel maps around a fault the pages that other
            # processes of the same binary read (the three loads share one file).
            a_ref, a_lo, a_hi, a_flat = flatness(body, "anon_kb")
            line += (f"; of it anonymous {a_ref} kB, after it {a_lo}..{a_hi} kB "
                     f"({'flat' if a_flat else 'NOT flat'}; slope {slope(body, 'anon_kb'):.2f} "
                     f"KB/s), file-backed {ref['file_kb']} -> {late[-1]['file_kb']} kB")
        if closing:
            line += f"; closing (after {secs} s) up to {max(closing)} kB"
        out.append(line + f"; fds {ref['fds']} -> max {max(r['fds'] for r in late)}; threads "
                   f"{ref['threads']} -> max {max(r['threads'] for r in late)}; "
                   f"{late[-1]['t']:.0f} s sampled")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--every", type=int, default=10, help="seconds between samples")
    ap.add_argument("--rate", type=float, default=100.0, help="bench's and the study's req/s")
    ap.add_argument("--out", default="longrun.jsonl")
    ap.add_argument("--loads", default="bench,office,injected",
                    help="which of the three loads to run (comma-separated)")
    a = ap.parse_args()
    secs = a.minutes * 60
    settle = min(300, secs // 4)
    with tempfile.TemporaryDirectory(prefix="volley-longrun-") as tmp:
        www = os.path.join(tmp, "www")
        os.makedirs(www)
        with open(os.path.join(www, "a.html"), "w") as f:
            f.write("x" * 700)
        procs = []
        try:
            p1 = free_port()
            procs.append(("bench", subprocess.Popen(
                [VOLLEY, "serve", "--root", www, "--listen", f"127.0.0.1:{p1}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
            wait_port(p1)
            base = f"http://127.0.0.1:{p1}"
            wanted = [k for k in ("bench", "office", "injected") if k in a.loads.split(",")]
            dbs = {k: os.path.join(tmp, f"{k}.db") for k in wanted}
            logs = {k: open(os.path.join(tmp, f"{k}.log"), "w") for k in dbs}
            commands = {
                "bench": [VOLLEY, "bench", f"{base}/a.html", "-k", "-c", "8", "--rate",
                          str(a.rate), "-d", f"{secs}s", "-q", "--save", "--db", dbs.get("bench")],
                "office": [VOLLEY, "study", "run", office_file(tmp, a.minutes), "--db",
                           dbs.get("office")],
                "injected": [VOLLEY, "study", "run",
                             study_file(tmp, f"{base}/a.html", a.minutes, a.rate),
                             "--db", dbs.get("injected")],
            }
            for k in wanted:
                procs.append((k, subprocess.Popen(commands[k], stdout=logs[k],
                                                  stderr=subprocess.STDOUT)))
            loads = [p for _, p in procs[1:]]
            t0 = time.monotonic()
            deadline = t0 + secs + 600
            rows = []
            with open(a.out, "w") as out:
                while any(p.poll() is None for p in loads) and time.monotonic() < deadline:
                    t = time.monotonic() - t0
                    for load, p in procs:
                        for pid in process_tree(p.pid):
                            st, name = status(pid), role(pid)
                            if st is None or name is None:
                                continue
                            row = {"t": round(t, 1), "load": load, "role": name, "pid": pid,
                                   "rss_kb": st[0], "anon_kb": st[1], "file_kb": st[2],
                                   "threads": st[3], "fds": st[4]}
                            rows.append(row)
                            out.write(json.dumps(row) + "\n")
                    out.flush()
                    time.sleep(a.every)
            for k, p in zip(wanted, loads):
                print(f"{k}: exit {p.poll()}")
            for line in verdict(rows, settle, secs):
                print(line)
            for k, db in dbs.items():
                try:
                    steps, n = stored_seconds(db)
                    print(f"{k}: {steps} step(s), {n} distinct seconds of load stored "
                          f"(run of {secs} s)")
                except sqlite3.Error as e:
                    print(f"{k}: store unreadable: {e}")
            keep = os.path.dirname(os.path.abspath(a.out))
            for k, db in dbs.items():
                if os.path.exists(db):
                    shutil.copy(db, os.path.join(keep, f"longrun-{k}.db"))
            for k, f in logs.items():
                f.close()
                with open(f.name) as g:
                    tail = g.read()[-400:].strip()
                if tail:
                    print(f"--- {k} output (tail) ---\n{tail}")
        finally:
            stop_all([p for _, p in reversed(procs)])


if __name__ == "__main__":
    main()
