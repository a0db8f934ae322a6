#!/usr/bin/env python3
"""Writes link/code-order.txt: the release binary's functions that typical runs execute,
in the order they first ran, for the linker to lay out together (build.rs).

Why: a bench at 64 connections runs about 1 MB of volley's 17 MB of code, scattered
over the whole text in ThinLTO's order, and the kernel maps 64-128 KB around each code
page a process touches (fault-around, large page-cache folios; nothing a process can
turn off). So the 1 MB cost 5-6 MB of resident memory in every volley process. Laid
out together (lld's --symbol-ordering-file) it costs about its own size. The order is a
layout hint only: a name the code no longer has is skipped, a function missing from the
list is placed after the listed ones as before, so a stale list costs memory, never
correctness. Run this again when the 64-connection figure of bench/engine.py climbs.

How: the release binary runs each command below under valgrind's callgrind (exact,
unlike sampling: a start-up function that runs once counts), against `volley serve` on
loopback; the names callgrind saw (unmangled: --demangle=no) that the binary defines
are written in first-seen order, the keep-alive bench first. valgrind (Debian package)
is installed when missing. Usage: python3 scripts/code_order.py [--skip-build].
"""
import pathlib, re, shutil, signal, socket, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "volley"
OUT = ROOT / "link" / "code-order.txt"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runs(url):
    """The commands profiled, in the order their functions are laid out: the keep-alive
    bench the memory goal names, a new connection per request, an open loop, a JSON
    document, then the server itself (profiled apart, below)."""
    base = ["bench", url, "-t", "1", "-q"]
    return [
        base + ["-k", "-c", "64", "-d", "2s"],
        base + ["-c", "16", "-d", "2s"],
        base + ["-k", "-c", "16", "--rate", "500", "-d", "2s"],
        base + ["-k", "-c", "4", "-n", "500", "--json", "-"],
    ]


def callgrind(args, out, **kw):
    cmd = ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}",
           str(BIN), *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def main():
    if "--skip-build" not in sys.argv:
        subprocess.run(["cargo", "build", "--release", "--bin", "volley"], cwd=ROOT, check=True)
    if shutil.which("valgrind") is None:
        subprocess.run(["apt-get", "install", "-y", "-q", "valgrind"], check=True)
    defined = set()
    for line in subprocess.run(["nm", "--defined-only", str(BIN)], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            defined.add(parts[2])
    with tempfile.TemporaryDirectory(prefix="volley-code-order-") as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "root").mkdir()
        (tmp / "root" / "index.html").write_text("<p>volley</p>\n" * 50)
        port = free_port()
        url = f"http://127.0.0.1:{port}/index.html"
        profiles = []
        server = subprocess.Popen([str(BIN), "serve", "--root", str(tmp / "root"), "--listen",
                                   f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            for i, args in enumerate(runs(url)):
                out = tmp / f"bench{i}.out"
                if callgrind(args, out).wait(timeout=300) != 0:
                    sys.exit(f"code_order: `volley {' '.join(args)}` failed under valgrind")
                profiles.append(out)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
        # The server under callgrind, loaded by the native binary.
        out = tmp / "serve.out"
        server = callgrind(["serve", "--root", str(tmp / "root"), "--listen",
                            f"127.0.0.1:{port}"], out)
        try:
            time.sleep(3)
            for args in (["-k", "-c", "8", "-d", "2s"], ["-c", "4", "-d", "2s"]):
                subprocess.run([str(BIN), "bench", url, "-t", "1", "-q", *args],
                               stdout=subprocess.DEVNULL, check=True, timeout=120)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=120)
        profiles.append(out)
        names, seen = [], set()
        for p in profiles:
            for line in p.read_text(errors="replace").splitlines():
                m = re.match(r"^c?fn=\(\d+\) (.*)$", line)
                if m and m.group(1) in defined and m.group(1) not in seen:
                    seen.add(m.group(1))
                    names.append(m.group(1))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(names) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(names)} functions")


if __name__ == "__main__":
    main()
