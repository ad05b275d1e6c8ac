#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What idle keep-alive connections cost `sbx serve`: threads and resident
memory of the server process with N connections open, each having made one
request (GET /health) and kept open (HTTP/1.1 keep-alive), as an SDK's
connection pool leaves them. No sandbox is created.

    bench/serve_idle.py SBX_BINARY [--conns N[,N...]] [--repeat R]

Prints one line per (binary, N): threads and VmRSS before and after, and
(VmRSS after - before) / N. Give several binaries (e.g. main's build and
this one) by running it once per binary in the same session. Root needed
(sbx serve insists on it).
"""
import argparse
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "Threads"):
                out[k] = int(v.split()[0])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sbx")
    ap.add_argument("--conns", default="2000")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = tempfile.mkdtemp(prefix="sbx-bench-idle.")
    try:
        for n in [int(x) for x in a.conns.split(",")]:
            for _ in range(a.repeat):
                run(a.sbx, n, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(sbx, n, work):
    state = tempfile.mkdtemp(dir=work)
    p = subprocess.Popen([sbx, "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", state,
                          "--image-dir", os.path.join(work, "images"), "--no-access-log"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        for line in p.stdout:
            if port is None:
                port = int(line)
            if "ready url=" in line:
                break
        req = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

        def ask(s):
            s.sendall(req)
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = s.recv(4096)
                if not d:
                    raise RuntimeError("connection closed")
                buf += d
            assert buf.startswith(b"HTTP/1.1 204"), buf[:40]

        warm = socket.create_connection(("127.0.0.1", port))
        ask(warm)
        time.sleep(0.5)
        before = status(p.pid)
        t0 = time.monotonic()
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            ask(s)
            socks.append(s)
        wall = time.monotonic() - t0
        time.sleep(0.5)
        after = status(p.pid)
        t1 = time.monotonic()
        ask(warm)
        probe_ms = (time.monotonic() - t1) * 1e3
        print(f"{os.path.realpath(sbx)}: {n} idle keep-alive connections: threads {before['Threads']} -> "
              f"{after['Threads']}, VmRSS {before['VmRSS']} -> {after['VmRSS']} KiB = "
              f"{(after['VmRSS'] - before['VmRSS']) / n:.1f} KiB per connection; opened in {wall:.2f} s; "
              f"a request meanwhile {probe_ms:.1f} ms; load {os.getloadavg()[0]:.1f}", flush=True)
        for s in socks:
            s.close()
        warm.close()
    finally:
        p.terminate()
        p.wait(30)


if __name__ == "__main__":
    sys.exit(main())
