#!/usr/bin/env python3
"""Speed of several injectors (issue 13's speed bar), side by side, on loopback.

Run: python3 bench/injectors.py [--rounds 4] [--requests 40000]

  * an agent's cost per request against `volley bench`'s, in the same rounds (A B A B):
    `volley bench -n N -c 4 -k` and a study step with `[injectors] count = 1` of the same
    load. Two figures per side: the generator's own CPU over the measured load, as each
    run records it (`generator.cpu_cores_used x duration / completed`: bench's JSON, the
    injector's own summary in the study's store) -- the agent's per-request cost; and
    user+sys of the whole process tree (getrusage of reaped children), which for the
    study also carries the coordinator, the private nats-server and every start-up;
  * the coordinator's cost with 12 local agents: the `volley study` process's own CPU
    (utime+stime from /proc/PID/stat, children excluded) over the step's wall time, as a
    share of one core, per round.
The server is `volley serve` (its own process, not counted). Nothing here is a test.
"""
import argparse
import os
import json
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import bootstrap_median_ci  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOLLEY = os.path.join(ROOT, "target", "release", "volley")
TICK = os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def start_server(tmp):
    www = os.path.join(tmp, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "a.html"), "w") as f:
        f.write("x" * 700)
    p = subprocess.Popen([VOLLEY, "serve", "--root", www], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    base = line.removeprefix("listening on ").rstrip("/")
    return p, base


def study_file(tmp, base, count, requests, conns):
    path = os.path.join(tmp, f"inj{count}.toml")
    with open(path, "w") as f:
        f.write(f"""name = "bench-inj"
[[target]]
name = "served"
kind = "external"
url = "{base}/a.html"
[[workload]]
name = "w"
paths = ["/a.html"]
requests = {requests}
[load]
model = "closed"
concurrency = {conns}
keepalive = true
[injectors]
count = {count}
[steps]
warmup = "0s"
cooldown = "0s"
""")
    return path


def gen_us_per_req(summary):
    """The generator's own CPU over the measured load, microseconds per request."""
    cores = summary["generator"]["cpu_cores_used"]
    return cores * summary["duration_s"] * 1e6 / summary["requests"]["completed"]


def run_bench(base, n, tmp):
    c0 = children_cpu()
    js = os.path.join(tmp, "bench.json")
    out = subprocess.run([VOLLEY, "bench", "-n", str(n), "-c", "4", "-k", "-q", "--json", js,
                          f"{base}/a.html"], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"volley bench failed: {out.stderr}")
    tree = (children_cpu() - c0) * 1e6 / n
    with open(js) as f:
        doc = json.load(f)
    runs = doc.get("runs") or [doc]
    return gen_us_per_req(runs[0]), tree


def injector_summary(db):
    con = sqlite3.connect(db)
    (summary,) = con.execute("select summary from steps").fetchone()
    con.close()
    return json.loads(summary)["injectors"][0]["summary"]


def own_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def run_study(path, db, n):
    if os.path.exists(db):
        os.remove(db)
    c0 = children_cpu()
    t0 = time.monotonic()
    p = subprocess.Popen([VOLLEY, "study", "run", path, "--db", db],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    own = 0.0
    while p.poll() is None:
        try:
            own = own_cpu_s(p.pid)
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"volley study failed: {p.stderr.read()}")
    return (children_cpu() - c0) * 1e6 / n, own, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--requests", type=int, default=40000)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        server, base = start_server(tmp)
        try:
            one = study_file(tmp, base, 1, args.requests, 4)
            twelve = study_file(tmp, base, 12, args.requests, 12)
            db = os.path.join(tmp, "v.db")
            ratios, tree_ratios, coord = [], [], []
            for k in range(args.rounds):
                order = ["bench", "agent"] if k % 2 == 0 else ["agent", "bench"]
                got = {}
                for who in order:
                    if who == "bench":
                        got[who] = run_bench(base, args.requests, tmp)
                    else:
                        tree = run_study(one, db, args.requests)[0]
                        got[who] = (gen_us_per_req(injector_summary(db)), tree)
                ratios.append(got["agent"][0] / got["bench"][0])
                tree_ratios.append(got["agent"][1] / got["bench"][1])
                _, own, wall = run_study(twelve, db, args.requests)
                coord.append(own / wall)
                print(f"round {k + 1}: generator CPU bench {got['bench'][0]:.2f} us/req, agent "
                      f"{got['agent'][0]:.2f} us/req (ratio {ratios[-1]:.3f}); process trees "
                      f"{got['bench'][1]:.2f} vs {got['agent'][1]:.2f} us/req; 12 injectors: "
                      f"coordinator {own:.2f} s CPU over {wall:.1f} s = {100 * own / wall:.1f}% of a core",
                      flush=True)
        finally:
            server.terminate()
            server.wait()
    med, (lo, hi) = statistics.median(ratios), bootstrap_median_ci(ratios)
    cmed, (clo, chi) = statistics.median(coord), bootstrap_median_ci(coord)
    tmed, (tlo, thi) = statistics.median(tree_ratios), bootstrap_median_ci(tree_ratios)
    print(f"\ngenerator CPU per request, agent / volley bench: median {med:.3f} "
          f"[{lo:.3f}, {hi:.3f}] over {len(ratios)} rounds")
    print(f"whole process tree per request, study with 1 injector / volley bench: median "
          f"{tmed:.3f} [{tlo:.3f}, {thi:.3f}] (coordinator, nats-server and start-ups included)")
    print(f"coordinator with 12 agents: median {100 * cmed:.1f}% of a core "
          f"[{100 * clo:.1f}, {100 * chi:.1f}] (whole study process: gather, clocks, merge, judge, store)")


if __name__ == "__main__":
    main()
