#!/usr/bin/env python3
"""Where volley's CPU per request goes: a call-chain breakdown of its own samples.

Run: python3 bench/profile.py [--seconds 5] [--io epoll --io uring] [--frequency 4000]

lighttpd serves a 700-byte file pinned to core 0 (as bench/engine.py does); volley runs
keep-alive, 64 connections, one worker pinned to core 1 under `perf record -g` (cpu-clock
in a guest without a PMU), once per `--io`. Each sample is put in one bucket by its call
chain, first match wins:

  user space                 the sampled frame is volley's or libc's code
  loopback delivery in send  volley's send delivering the segment to the server's socket
                             (loopback runs the receive path in the sender's softirq),
                             waking the server included
  TCP send                   tcp_sendmsg otherwise
  TCP receive                tcp_recvmsg (the copy out of the socket)
  scheduler                  sleeping and switching (schedule)
  epoll                      epoll_wait's own work
  io_uring                   the ring's own work (submission, completion, task work)
  syscall entry/exit         the rest of a system call's way in and out
  other kernel               anything else (timers, interrupts, page faults)

Prints per io the request count, samples, and each bucket's share and us per request
(share x volley's CPU us per request from GNU time). Needs root and perf; nothing here
is a test.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import VOLLEY, timed, volley_json  # noqa: E402
from engine import start_lighttpd  # noqa: E402

BUCKETS = ["user space", "loopback delivery in send", "TCP send", "TCP receive", "scheduler",
           "epoll", "io_uring", "syscall entry/exit", "other kernel"]


def bucket(frames):
    """frames: [(symbol, dso)] from the sampled frame outwards."""
    if not frames:
        return "other kernel"
    sym, dso = frames[0]
    if "kernel" not in dso:
        return "user space"
    syms = [s for s, _ in frames]
    has = lambda *names: any(s.startswith(n) for s in syms for n in names)  # noqa: E731
    if has("tcp_sendmsg") and has("tcp_v4_rcv", "tcp_v6_rcv", "ip_rcv", "ipv6_rcv", "__netif_receive_skb",
                                  "net_rx_action", "process_backlog"):
        return "loopback delivery in send"
    if has("tcp_sendmsg"):
        return "TCP send"
    if has("tcp_recvmsg"):
        return "TCP receive"
    if has("schedule", "__schedule"):
        return "scheduler"
    if has("do_epoll_wait", "ep_poll", "ep_send_events"):
        return "epoll"
    if has("io_uring", "io_submit_sqes", "io_cqring_wait", "io_run_local_work", "io_issue_sqe",
           "__io_", "io_"):
        return "io_uring"
    if has("entry_SYSCALL", "do_syscall_64", "syscall_exit", "x64_sys_call", "__x64_sys"):
        return "syscall entry/exit"
    return "other kernel"


def samples(perf_data):
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "comm,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    frames = []
    for line in out.splitlines() + [""]:
        if not line.strip():
            if frames:
                yield frames
            frames = []
            continue
        if not line.startswith(("\t", " ")):
            continue  # the sample's header (comm)
        parts = line.split()
        if len(parts) < 2:
            continue
        sym = parts[1].split("+")[0]
        dso = line[line.rfind("(") + 1:line.rfind(")")] if "(" in line else ""
        frames.append((sym, dso))


def profile(url, io, secs, freq, tmp):
    data = os.path.join(tmp, f"perf-{io}.data")
    load = [VOLLEY, "bench", url, "-t", "1", "-k", "-c", "64", "-d", f"{secs}s", "--io", io,
            "--json", "-", "--quiet"]
    # CPU per request from a run without perf (perf's own work would count), then the
    # shares from a run under it (both pinned to the client core by `timed`).
    out, cpu, _ = timed(load, secs * 3 + 60)
    run = volley_json(out)["runs"][0]
    ok = run["requests"]["ok"]
    us_per_req = cpu * 1e6 / ok if ok else float("nan")
    timed(["perf", "record", "-F", str(freq), "-g", "-o", data, "-q", "--"] + load, secs * 3 + 60)
    counts = dict.fromkeys(BUCKETS, 0)
    for frames in samples(data):
        counts[bucket(frames)] += 1
    total = sum(counts.values()) or 1
    print(f"\n## --io {io} (ran {run['wire']['io']}): {ok} requests, {ok / secs:.0f} req/s, "
          f"CPU {us_per_req:.2f} us/request (a run without perf), {total} samples")
    for b in BUCKETS:
        share = counts[b] / total
        print(f"  {b:<27} {share * 100:5.1f}%  {share * us_per_req:5.2f} us/req")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--frequency", type=int, default=4000)
    ap.add_argument("--io", action="append", choices=["epoll", "uring"])
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="volley-profile-")
    os.chmod(tmp, 0o755)
    docroot = os.path.join(tmp, "www")
    os.makedirs(docroot)
    with open(os.path.join(docroot, "a.html"), "wb") as f:
        f.write(b"<html><body>" + b"x" * 674 + b"</body></html>")
    light = start_lighttpd(tmp, docroot)
    try:
        print(f"# load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        for io in a.io or ["epoll", "uring"]:
            profile(f"http://127.0.0.1:{light.port}/a.html", io, a.seconds, a.frequency, tmp)
        print(f"# load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        light.popen.terminate()
        light.popen.wait()


if __name__ == "__main__":
    main()
