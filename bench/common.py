"""Helpers shared by bench/engine.py and bench/tls.py.

Why paired rounds: on a shared 2-core machine, throughput drifts by 10-20% over a
minute (other work, frequency, caches). A median of each tool's rounds still mixes that
drift into the comparison. Running the tools back to back in one *round*, alternating
their order (round k forwards, round k+1 backwards, so neither tool always runs first
or last), and comparing volley's round k with the peer's round k cancels most of the
drift; the median of those per-round ratios, with a bootstrap 95% CI, says how sure the
comparison is (docs/methodology.md, "Repeats, intervals and noise").

Why the server's CPU: when the server uses ~100% of its pinned core whatever the client,
the server is the bottleneck and req/s measures the server's behaviour under each client,
not the clients. Then the fair comparison of generators is their own CPU per request.
Server CPU comes from /proc/<pid>/stat (utime + stime, clock ticks), server syscalls from
/proc/<pid>/io (syscr + syscw), summed over the server's processes (nginx: master and
workers), as deltas around each run.
"""
import json
import os
import random
import re
import socket
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# VOLLEY_BIN points the scripts at another build (e.g. target/debug/volley with
# --skip-build, to try a script change without a release build; figures then mean nothing).
VOLLEY = os.environ.get("VOLLEY_BIN", os.path.join(ROOT, "target", "release", "volley"))
SERVER_CORE = "0"
CLIENT_CORE = "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# At or above this share of its core, the server is taken as the bottleneck.
SATURATED_SHARE = 0.95
# Put before every client command `timed` runs (bench/counts.py: `perf stat` counting the
# client's own context switches, wake-ups and system calls); empty by default.
CLIENT_WRAP = []
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240601


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


def stop_all(procs):
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def timed(cmd, timeout):
    """Runs cmd pinned to the client core under GNU time; returns (output, cpu_s, maxrss_kb)."""
    tf = tempfile.NamedTemporaryFile(delete=False)
    tf.close()
    full = ["/usr/bin/time", "-o", tf.name, "-f", "%U %S %M"] + CLIENT_WRAP + ["taskset", "-c", CLIENT_CORE] + cmd
    try:
        r = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
        with open(tf.name) as f:
            last = f.read().strip().splitlines()[-1].split()
    finally:
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


# --- the server's side, from /proc ---------------------------------------------------

def process_tree(pid):
    """pid and its descendants (nginx: master and workers), from /proc/PID/task/*/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def proc_cpu_ticks(pid):
    """utime + stime of one process, clock ticks (fields 14 and 15 of /proc/PID/stat,
    counted after the parenthesised name, which may itself hold spaces)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def proc_syscalls(pid):
    """syscr + syscw of one process (read- and write-class system calls), or None
    when /proc/PID/io is not readable (another user's process without privilege)."""
    try:
        with open(f"/proc/{pid}/io") as f:
            kv = dict(line.split(":", 1) for line in f if ":" in line)
        return int(kv["syscr"]) + int(kv["syscw"])
    except (OSError, KeyError, ValueError):
        return None


class Server:
    """A started server: its Popen and the pids whose CPU and syscalls count as its own."""

    def __init__(self, popen, port):
        self.popen = popen
        self.port = port
        # nginx forks its worker after the port opens; the tree is read once it answers.
        self.pids = process_tree(popen.pid)

    def snapshot(self):
        """(cpu ticks, syscalls or None), summed over the server's processes."""
        ticks, calls = 0, 0
        for p in self.pids:
            try:
                ticks += proc_cpu_ticks(p)
            except OSError:
                continue
            c = proc_syscalls(p)
            calls = None if (c is None or calls is None) else calls + c
        return ticks, calls


class CpuWatch:
    """Samples the server's CPU ticks every 0.5 s on a thread while a client runs, so the
    *steady* share of its core can be computed without the client's start-up and exit
    (when the server idles) diluting it."""

    PERIOD_S = 0.5

    def __init__(self, server):
        self.server = server
        self.samples = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while True:
            self.samples.append((time.monotonic(), self.server.snapshot()[0]))
            if self._stop.wait(self.PERIOD_S):
                return

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    def steady_share(self):
        """Share of one core over the samples that skip the first and last second (the
        whole run when it is shorter than 3 s)."""
        s = self.samples
        if len(s) < 2:
            return None
        inner = [x for x in s if s[0][0] + 1.0 <= x[0] <= s[-1][0] - 1.0]
        a, b = (inner[0], inner[-1]) if len(inner) >= 2 else (s[0], s[-1])
        dt = b[0] - a[0]
        return (b[1] - a[1]) / CLK_TCK / dt if dt > 0 else None


def measure(fn, server, args):
    """Runs one client invocation fn(*args) -> (req/s, requests, cpu_s, rss_kb) and returns
    a record with the generator's and the server's figures."""
    t0 = time.monotonic()
    before = server.snapshot()
    with CpuWatch(server) as watch:
        rps, n, cpu, rss = fn(*args)
    after = server.snapshot()
    wall = time.monotonic() - t0
    n = max(n, 1)
    dticks = after[0] - before[0]
    calls = None if before[1] is None or after[1] is None else after[1] - before[1]
    return {
        "req_per_s": rps,
        "requests": n,
        "gen_cpu_s": cpu,
        "gen_us_per_req": cpu * 1e6 / n,
        "rss_kb": rss,
        "wall_s": wall,
        "server_share": watch.steady_share(),
        "server_us_per_req": dticks / CLK_TCK * 1e6 / n,
        "server_syscalls_per_req": None if calls is None else calls / n,
    }


# --- statistics ----------------------------------------------------------------------

def bootstrap_median_ci(values, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED):
    """95% CI of the median by the percentile bootstrap (resample with replacement,
    take each resample's median, read the 2.5th and 97.5th percentiles)."""
    if not values:
        return None, None
    rng = random.Random(seed)
    n = len(values)
    meds = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    lo = meds[int(0.025 * (resamples - 1))]
    hi = meds[int(round(0.975 * (resamples - 1)))]
    return lo, hi


def round_order(names, k, shuffle_seed=None):
    """Tool order of round k: the list rotated by one place every second round, forwards
    on even rounds and backwards on odd ones (so each tool takes every position and
    follows each neighbour from both sides), or a seeded shuffle per round when
    shuffle_seed is given.

    Plain forwards/backwards alternation kept the middle tool in the middle every
    round: in engine.py's new-connection case (five tools) the baseline build always
    ran third and main's always first or last, and main/baseline read 1.14 [1.11,
    1.19] in CPU per request where the same two builds, run alone in alternation, were
    level (2026-11-28): a position effect read as the build's."""
    if shuffle_seed is not None:
        order = list(names)
        random.Random(shuffle_seed * 1000 + k).shuffle(order)
        return order
    shift = (k // 2) % len(names) if names else 0
    order = list(names[shift:]) + list(names[:shift])
    return order if k % 2 == 0 else list(reversed(order))


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def med(rows, key):
    xs = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(xs) if xs else None


def compare(title, tools, args, server, rounds, shuffle_seed=None, raw=None, base="volley",
            also=()):
    """Runs `tools` [(name, fn)] for `rounds` paired rounds against `server`; prints
    per-tool medians and, for `base` vs each peer, the per-round ratios with their median
    and bootstrap CI; each name in `also` (another volley line) is compared with every
    tool but `base` the same way. Appends every record to `raw` (for --json). Returns
    {name: [record or None per round]}."""
    print(f"\n## {title}")
    names = [n for n, _ in tools]
    fns = dict(tools)
    res = {n: [None] * rounds for n in names}
    for k in range(rounds):
        order = round_order(names, k, shuffle_seed)
        for pos, name in enumerate(order):
            try:
                rec = measure(fns[name], server, args)
            except Exception as e:  # a peer failing is reported, not fatal
                print(f"  round {k}: {name}: failed: {str(e).strip().splitlines()[0]}")
                rec = None
            res[name][k] = rec
            if rec is not None and raw is not None:
                raw.append(dict(rec, section=title, round=k, position=pos, tool=name))
            time.sleep(1)
        print(f"  round {k} ({' '.join(order)}): "
              + ", ".join(f"{n} {fmt(res[n][k] and res[n][k]['req_per_s'], '.0f')}" for n in names))
    print(f"{'tool':<14} {'req/s':>9} {'gen us/req':>11} {'maxRSS KB':>10} "
          f"{'server CPU':>10} {'srv us/req':>10} {'srv sysc/req':>12}   (medians over rounds)")
    for name in names:
        rows = [r for r in res[name] if r]
        if not rows:
            continue
        share = med(rows, "server_share")
        print(f"{name:<14} {med(rows, 'req_per_s'):>9.0f} {med(rows, 'gen_us_per_req'):>11.2f} "
              f"{max(r['rss_kb'] for r in rows):>10} "
              f"{fmt(share and share * 100, '.0f') + '%':>10} "
              f"{fmt(med(rows, 'server_us_per_req'), '.2f'):>10} "
              f"{fmt(med(rows, 'server_syscalls_per_req'), '.2f'):>12}")
    if base in res:
        for name in names:
            if name != base:
                paired_report(base, name, res[base], res[name])
    for extra in also:
        if extra in res:
            for name in names:
                if name not in (base, extra):
                    paired_report(extra, name, res[extra], res[name])
    return res


def paired_report(a, b, ra, rb):
    """Prints a/b per-round ratios, their median and bootstrap 95% CI, for req/s, for
    generator CPU per request and for the server's CPU per request (what the same
    server paid per request under each client: above 1, `a`'s load costs the server
    more, so a saturated server serves fewer requests under it), and whether the server
    was saturated in those rounds."""
    pairs = [(x, y) for x, y in zip(ra, rb) if x and y]
    if not pairs:
        print(f"  {a}/{b}: no round where both ran")
        return
    print(f"  {a}/{b} over {len(pairs)} paired round(s):")
    for key, label in (("req_per_s", "req/s"), ("gen_us_per_req", "CPU us/request"),
                       ("server_us_per_req", "srv CPU us/req")):
        ratios = [x[key] / y[key] for x, y in pairs if x.get(key) is not None and y.get(key)]
        if not ratios:
            continue
        lo, hi = bootstrap_median_ci(ratios)
        print(f"    {label:<15} ratio median {statistics.median(ratios):.3f}, 95% CI "
              f"[{lo:.3f}, {hi:.3f}]; per round " + " ".join(f"{r:.2f}" for r in ratios))
    shares = [s for x, y in pairs for s in (x["server_share"], y["server_share"]) if s is not None]
    if not shares:
        print("    server CPU share unknown (could not read /proc)")
        return
    low = min(shares)
    if low >= SATURATED_SHARE:
        print(f"    SERVER SATURATED: its core was >= {low:.0%} busy under both clients in every "
              f"paired round, so req/s compares the server's behaviour under each client, "
              f"not the clients; compare generator CPU us/request instead")
    else:
        print(f"    server not saturated in every round (lowest share {low:.0%} of its core): "
              f"req/s compares the clients")


def dump_json(path, meta, raw):
    if path:
        with open(path, "w") as f:
            json.dump({"meta": meta, "records": raw}, f, indent=1)
        print(f"\nraw per-round figures written to {path}")
