#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One table of every bench's headline figures, each against its peer in the
same run, rewritten in place in docs/performance.md between
<!-- bench-summary:begin --> and <!-- bench-summary:end -->.

  bench/report.py BUILD_DIR [--doc FILE] [--stdout]    re-render from BUILD_DIR/bench-results/
  bench/report.py BUILD_DIR --run [--only a,b]          run the benches (small sizes) first

For each bench the newest results directory is read (raw samples and JSON
where the bench writes them, its summary.md or captured stdout where not);
a bench with no results shows as "not run". Standard library only.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

BEGIN = "<!-- bench-summary:begin -->"
END = "<!-- bench-summary:end -->"
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- reading -------------------------------------------------------------------

def tsv(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("\t")
                if k:
                    out[k] = v
    except OSError:
        pass
    return out


def samples(path, col=0):
    """Column col of a samples file (ms, one run a line), or None."""
    try:
        with open(path) as f:
            v = [float(line.split()[col]) for line in f if line.strip()]
    except (OSError, ValueError, IndexError):
        return None
    return v or None


def median(path, col=0):
    v = samples(path, col)
    return statistics.median(v) if v else None


def last_json(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text) if text.startswith("{\n") else json.loads(text.splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


STAMP = re.compile(r"(\d{8}-\d{6})$")


def newest(results, prefix):
    """The newest directory in results named PREFIX<yyyymmdd-hhmmss>."""
    try:
        names = os.listdir(results)
    except OSError:
        return None
    best = None
    for n in names:
        m = STAMP.search(n)
        if m and n[:m.start()] == prefix and os.path.isdir(os.path.join(results, n)):
            if best is None or m.group(1) > STAMP.search(best).group(1):
                best = n
    return os.path.join(results, best) if best else None


def run_info(d, host):
    """date, commit, load as the bench recorded them (or the dir's name)."""
    date = host.get("date")
    if not date:
        m = STAMP.search(os.path.basename(d))
        if m:
            t = datetime.datetime.strptime(m.group(1), "%Y%m%d-%H%M%S")
            date = t.strftime("%Y-%m-%dT%H:%M") + " (dir name)"
    commit = host.get("git") or host.get("commit") or host.get("after") or host.get("build")
    if commit:
        commit = commit.replace(" + working tree", "+wt")
    ls = host.get("load_start") or host.get("load")
    le = host.get("load_end")
    load = None
    if ls:
        load = ls.split()[0] + (" → " + le.split()[0] if le else "")
    return {"date": date or "?", "commit": commit or "?", "load": load or "?",
            "dir": os.path.basename(d)}


# --- figures -------------------------------------------------------------------

def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "ms":
        return f"{v:.2f} ms"
    if unit == "/s":
        return f"{v:.1f}/s"
    if unit == "MiB":
        return f"{v:.3f} MiB"
    return f"{v:.2f}{unit}"


def row(what, sbx, peer_name, peer, unit, target=None, ok=None, ratio=None, note=""):
    """ratio defaults to sbx/peer; ok(ratio, sbx) -> bool judges the target."""
    if ratio is None and sbx is not None and peer:
        ratio = sbx / peer
    met = ""
    if target:
        try:  # a verdict on a ratio needs the peer; one on sbx's own value does not
            met = "**met**" if ok(ratio, sbx) else "**not met**"
        except TypeError:
            met = "not measured"
    return {"what": what, "sbx": fmt(sbx, unit) + note, "peer": peer_name and
            f"{peer_name} {fmt(peer, unit)}" or "—", "ratio": ratio_str(ratio),
            "target": target or "—", "met": met or "—"}


def ratio_str(r):
    if r is None:
        return "—"
    return f"{r:.3f}x" if r < 0.1 else f"{r:.2f}x"


def le(x):
    return lambda r, s: r <= x


def ge(x):
    return lambda r, s: r >= x


def lifecycle(d):
    host = tsv(os.path.join(d, "host.tsv"))
    rows = []
    s, b = median(os.path.join(d, "lat-sbx.samples")), median(os.path.join(d, "lat-bwrap.samples"))
    rows.append(row("library lifecycle (create → exec `true` → destroy), median", s, "bwrap", b, "ms",
                    "≤ 0.5x bwrap", le(0.5)))
    for w in (2, 4):
        js, jb = (last_json(os.path.join(d, f"tput-{t}-w{w}.json")) for t in ("sbx", "bwrap"))
        rows.append(row(f"throughput, {w} workers", js and js.get("per_s"), "bwrap", jb and jb.get("per_s"), "/s",
                        "≥ 2x bwrap", ge(2.0)))
    ds, db = (last_json(os.path.join(d, f"density-{t}.json")) for t in ("sbx", "bwrap"))
    pts = (ds or {}).get("points") or []
    bpts = {p["count"]: p for p in (db or {}).get("points") or []}
    if pts:
        last = pts[-1]
        peer = bpts.get(last["count"])
        rows.append(row(f"idle density: host memory per sandbox at {last['count']}", last["mib_per"],
                        "bwrap", peer and peer["mib_per"], "MiB", "≥ 5000 at ≤ 0.4 MiB each",
                        lambda r, v: last["count"] >= 5000 and v <= 0.4))  # peer shown, not judged

        def marg(i):
            prev = pts[i - 1] if i else {"count": 0, "used_kib": 0}
            return (pts[i]["used_kib"] - prev["used_kib"]) / 1024 / max(pts[i]["count"] - prev["count"], 1)
        if len(pts) >= 3:
            a, b2 = marg(len(pts) - 2), marg(len(pts) - 1)
            rows.append(row(f"idle density: marginal MiB per sandbox {pts[-2]['count']}→{last['count']} "
                            f"vs {pts[-3]['count']}→{pts[-2]['count']}", b2,
                            f"{pts[-3]['count']}→{pts[-2]['count']}", a, "MiB", "within 10 %",
                            lambda r, v: 0.9 <= r <= 1.1))
        else:
            rows.append(row("idle density: marginal cost flat", None, "", None, "MiB", "within 10 %"))
    else:
        rows.append(row("idle density: host memory per sandbox", None, "bwrap", None, "MiB",
                        "≥ 5000 at ≤ 0.4 MiB each"))
    return rows, host


def cli(d):
    host = tsv(os.path.join(d, "host.tsv"))
    bw = median(os.path.join(d, "bwrap.samples"))
    rows = [row("`sbx exec ID -- true` (whole CLI process), median", median(os.path.join(d, "exec-after.samples")),
                "bwrap", bw, "ms", "≤ 0.3x bwrap", le(0.3)),
            row("`sbx run IMAGE -- true` (whole CLI process), median", median(os.path.join(d, "run-after.samples")),
                "bwrap", bw, "ms", "≤ 0.7x bwrap", le(0.7))]
    if os.path.exists(os.path.join(d, "run-pool.samples")):
        rows.append(row("`sbx run IMAGE -- true` from a warm pool, median",
                        median(os.path.join(d, "run-pool.samples")), "bwrap", bw, "ms", "≤ 0.7x bwrap", le(0.7)))
    rows.append(row("`sbx --version`, median", median(os.path.join(d, "version-after.samples")), "bwrap", bw, "ms"))
    if os.path.exists(os.path.join(d, "cmd-true.samples")):
        # Two process starts any `sbx exec ID -- true` makes, with no sandbox
        floor = median(os.path.join(d, "host-true.samples")) + median(os.path.join(d, "cmd-true.samples"))
        rows.append(row("floor of `sbx exec`: host `/bin/true` + `busybox true` started, medians",
                        floor, "bwrap", bw, "ms"))
    return rows, host


def exec_pair(d, cases, a, b, what, peer_name):
    host = tsv(os.path.join(d, "host.tsv"))
    rows = []
    for c, label in cases:
        for col, kind in ((0, "wall"), (1, "CLI CPU")):
            rows.append(row(f"{what} {label}: {kind}, median", median(os.path.join(d, f"{c}-{a}.samples"), col),
                            peer_name, median(os.path.join(d, f"{c}-{b}.samples"), col), "ms"))
    return rows, host


def exec_stdio(d):
    # the peer is whatever build BEFORE was: name its commit (with --run, this build itself)
    before = tsv(os.path.join(d, "host.tsv")).get("before") or "?"
    return exec_pair(d, [("true", "`true`"), ("out10-null", "10 MiB out")], "after", "before",
                     "`sbx exec`", f"before ({before})")


def exec_tty(d):
    return exec_pair(d, [("true", "`true`"), ("out10-null", "10 MiB out")], "tty", "pipes",
                     "`sbx exec -t`", "pipes")


def turn(d):
    host = tsv(os.path.join(d, "host.tsv"))
    t = median(os.path.join(d, "turn-turn.samples"))
    layer = median(os.path.join(d, "turn-layer.samples"))
    return [row("agent turn `sbx_episode_turn(true)`, median", t, "bwrap `true`",
                median(os.path.join(d, "turn-bwrap.samples")), "ms", "≤ 2 ms per turn", lambda r, v: v <= 2.0),
            row("agent turn against the same exec without a turn (`sh -c true`, timeout, cap, user), median", t,
                "exec", median(os.path.join(d, "turn-exec-sh-timeout.samples")), "ms"),
            row("turn layer (each turn minus its own exec), median", layer, "", None, "ms")], host


STAT = re.compile(r"^(?P<label>.+?)\s+median\s+(?P<median>[\d.]+) ms\s+p90\s+(?P<p90>[\d.]+)", re.M)


def stdout_stats(text):
    return {m.group("label").strip(): float(m.group("median")) for m in STAT.finditer(text)}


def stdout_host(d, text):
    """host.tsv when report.py --run wrote one, else the bench's 'host:' line."""
    host = tsv(os.path.join(d, "host.tsv"))
    m = re.search(r"^host: .*?load ([\d.]+)", text, re.M)
    if m and "load_start" not in host:
        host["load_start"] = m.group(1)
    m = re.search(r"^host: .*?git (\w+)", text, re.M)
    if m and "git" not in host:
        host["git"] = m.group(1)
    return host


def pool(d):
    text = read(os.path.join(d, "stdout.txt"))
    st = stdout_stats(text)
    cold = st.get("cold create (ttl 600)")
    rows = [row("create from a warm pool (no TTL), median", st.get("pooled, no ttl"), "cold create", cold, "ms",
                "≤ 0.1x cold", le(0.1)),
            row("create from a warm pool (TTL + keepalive, as episodes), median", st.get("pooled, ttl+keepalive"),
                "cold create", cold, "ms", "≤ 0.1x cold", le(0.1))]
    m = re.search(r"^memory: \d+ idle pooled sandboxes: .*?attributed ([\d.]+) MiB each", text, re.M)
    rows.append(row("idle pooled sandbox, attributed memory", m and float(m.group(1)), "", None, "MiB"))
    return rows, stdout_host(d, text)


def fork(d):
    text = read(os.path.join(d, "stdout.txt"))
    st = stdout_stats(text)
    fk = next((k for k in st if re.match(r"fork\(\d+\), \d+ MiB written", k)), None)
    n = re.match(r"fork\((\d+)\), (\d+) MiB", fk) if fk else None
    what = f"fork({n.group(1)}) of a sandbox with {n.group(2)} MiB written, median" if n else "fork(N), median"
    snap = st.get("snapshot, 100 MiB upper")
    rows = [row(what, st.get(fk) if fk else None, "2 cold creates", st.get("2 cold creates"), "ms",
                "< 1x 2 cold creates", lambda r, v: r < 1),
            row("snapshot of a 100 MiB upper dir, median", snap, "snapshot, 0 MiB upper",
                st.get("snapshot, 0 MiB upper"), "ms", "≤ 50 ms", lambda r, v: v <= 50)]
    return rows, stdout_host(d, text)


def serve(d):
    j = last_json(os.path.join(d, "result.json")) or {}
    seq, con = j.get("sequential") or {}, j.get("concurrent") or {}
    p50 = (seq.get("total") or {}).get("p50")
    return [row("`sbx serve` lifecycle through the e2b SDK, sequential p50", p50, "", None, "ms"),
            row(f"`sbx serve` lifecycles/s at concurrency {con.get('concurrency', '?')}", con.get("lifecycles_per_s"),
                "sequential", seq.get("lifecycles_per_s"), "/s")], tsv(os.path.join(d, "host.tsv"))


# name, results-dir prefix, reader, what its --run runs (small sizes, 10-15 min in all, most of it the density steps to 5000)
BENCHES = [
    ("lifecycle", "", lifecycle,
     lambda b: ["bash", "bench/lifecycle.sh", b, "--n", "200", "--rounds", "4", "--seconds", "5",
                "--counts", "100,1000,3000,5000"]),
    ("cli", "cli-", cli, lambda b: ["bash", "bench/cli.sh", b, b, "--n", "60", "--rounds", "3"]),
    ("pool", "pool-", pool, lambda b: ["bash", "bench/pool.sh", b, "--n", "20", "--rounds", "2", "--idle", "20"]),
    ("fork", "fork-", fork, lambda b: ["bash", "bench/fork.sh", b, "--rounds", "2"]),
    ("turn", "turn-", turn, lambda b: ["bash", "bench/turn.sh", b, "--n", "50", "--rounds", "2"]),
    ("exec-stdio", "exec-stdio-", exec_stdio,
     lambda b: ["bash", "bench/exec_stdio.sh", b, b, "--n", "12", "--rounds", "2"]),
    ("exec-tty", "exec-tty-", exec_tty, lambda b: ["bash", "bench/exec_tty.sh", b, "--n", "12", "--rounds", "2"]),
    ("serve", "serve-", serve,
     lambda b: ["bash", "bench/serve.sh", b, "--seq", "30", "--total", "64", "--burst", "32"]),
]
# Benches whose script writes no results dir today: --run keeps their stdout.
STDOUT_ONLY = {"pool", "fork"}


# --- rendering -----------------------------------------------------------------

def render(results):
    out = ["Regenerated by `make bench-report` (`bench/report.py`) from the newest results of each bench in "
           "`build/bench-results/`; sbx against its peer in the same run. Load average: at the run's start → end "
           "(2 vCPUs). Figures from a loaded machine: read the ratios.", "",
           "| bench | figure | sbx | peer | ratio | target | verdict | run (date, commit, load) |",
           "|---|---|---:|---:|---:|---|---|---|"]
    for name, prefix, reader, _ in BENCHES:
        d = newest(results, prefix)
        if not d:
            out.append(f"| {name} | not run | | | | | | |")
            continue
        try:
            rows, host = reader(d)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            out.append(f"| {name} | unreadable results (`{os.path.basename(d)}`: {type(e).__name__}) "
                       f"| | | | | | |")
            continue
        info = run_info(d, host)
        run = f"{info['date']}, {info['commit']}, load {info['load']}"
        for r in rows:
            out.append(f"| {name} | {r['what']} | {r['sbx']} | {r['peer']} | {r['ratio']} | {r['target']} | "
                       f"{r['met']} | {run} |")
    return "\n".join(out) + "\n"


def rewrite(doc, table):
    """Replace what lies between the markers; nothing else changes."""
    with open(doc) as f:
        text = f.read()
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < b:
        raise SystemExit(f"report: {doc} has no {BEGIN} ... {END} block")
    new = text[:b + len(BEGIN)] + "\n" + table + text[e:]
    if new != text:
        tmp = doc + ".tmp"
        with open(tmp, "w") as f:
            f.write(new)
        os.replace(tmp, doc)
    return new != text


def run_benches(build, only):
    results = os.path.join(build, "bench-results")
    # The lifecycle bench runs last: its density phase leaves thousands of
    # sandboxes for the kernel to tear down (load average in the hundreds for
    # minutes), which every bench after it would measure.
    order = [b for b in BENCHES if b[0] != "lifecycle"] + [b for b in BENCHES if b[0] == "lifecycle"]
    for name, prefix, _, cmd in order:
        if only and name not in only:
            continue
        argv = cmd(build)
        print(f"== {name}: {' '.join(argv)}", flush=True)
        if name in STDOUT_ONLY:
            d = os.path.join(results, prefix + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
            os.makedirs(d, exist_ok=True)
            git = subprocess.run(["git", "-C", SRC, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
            with open(os.path.join(d, "host.tsv"), "w") as f:
                f.write(f"date\t{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%MZ}\n"
                        f"git\t{git}\nload_start\t{loadavg()}\n")
            with open(os.path.join(d, "stdout.txt"), "w") as f:
                rc = subprocess.run(argv, cwd=SRC, stdout=f).returncode
            with open(os.path.join(d, "host.tsv"), "a") as f:
                f.write(f"load_end\t{loadavg()}\n")
        else:
            rc = subprocess.run(argv, cwd=SRC).returncode
        if rc:
            print(f"report: {name} failed (exit {rc}); its row shows its newest complete results", file=sys.stderr)


def loadavg():
    return " ".join(read("/proc/loadavg").split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--doc", default=os.path.join(SRC, "docs", "performance.md"))
    ap.add_argument("--run", action="store_true", help="run every bench first (as root, 10-15 minutes)")
    ap.add_argument("--only", default="", help="with --run: comma-separated bench names")
    ap.add_argument("--stdout", action="store_true", help="print the table, do not rewrite the doc")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if a.run:
        run_benches(build, set(filter(None, a.only.split(","))))
    table = render(os.path.join(build, "bench-results"))
    if a.stdout:
        sys.stdout.write(table)
    else:
        changed = rewrite(a.doc, table)
        print(f"report: {a.doc} {'updated' if changed else 'unchanged'}")


if __name__ == "__main__":
    main()
