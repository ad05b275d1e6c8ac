#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarises one bench/lifecycle.sh results directory as Markdown (stdout).

Reads host.tsv, notes.tsv, lat-<tool>.samples (raw ms, merged over the
interleaved rounds), tput-<tool>-w<N>.json and density-<tool>.json.
"""
import json
import math
import os
import sys

TOOLS = [("sbx", "sbx (library)"), ("sbx-userns-host", "sbx (library), userns=host"),
         ("sbx-nopool", "sbx (library), SBX_NS_POOL=0"),
         ("sbx-cli", "sbx run (CLI)"), ("bwrap", "bubblewrap"), ("crun", "crun"),
         ("host-true", "host /bin/true, no sandbox")]
LAT_TARGET = 0.5      # sbx median <= 0.5 x bwrap median
TPUT_TARGET = 2.0     # sbx lifecycles/s >= 2 x bwrap's, 2 and 4 workers (issue 18)
DENSITY_COUNT = 5000  # idle sandboxes ...
DENSITY_MIB = 0.4     # ... at <= this much host memory each
FLAT = 0.10           # marginal cost of the last interval within 10 % of the one before


def tsv(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.rstrip("\n").partition("\t")
            out.append((k, v))
    return out


def load_json(path):
    if not os.path.exists(path):
        return None
    try:
        text = open(path).read().strip()
        return json.loads(text.splitlines()[-1]) if text else None
    except (ValueError, IndexError):
        return None


def stats(v):
    v = sorted(v)
    n = len(v)
    if n == 0:
        return None

    def pct(p):
        return v[min(n, max(1, math.ceil(p / 100 * n))) - 1]
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return {"n": n, "median": med, "p90": pct(90), "p99": pct(99), "mean": sum(v) / n, "min": v[0], "max": v[-1]}


def samples(d, tool):
    p = os.path.join(d, f"lat-{tool}.samples")
    if not os.path.exists(p):
        return None
    return stats([float(x) for x in open(p) if x.strip()])


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"


def verdict(ok):
    return "**met**" if ok else "**not met**"


def main():
    d = sys.argv[1]
    host = dict(tsv(os.path.join(d, "host.tsv")))
    notes = tsv(os.path.join(d, "notes.tsv"))
    p = print
    p(f"Run {host.get('date', '?')} on {host.get('cpu', '?')}, {host.get('mem', '?')}, "
      f"Linux {host.get('kernel', '?')}, sbx {host.get('git', '?')}; {host.get('bwrap', 'bwrap ?')}, "
      f"{host.get('crun', 'crun ?')}; cgroups {host.get('cgroups', '?')}; "
      f"load average {host.get('load_start', '?')} at the start, {host.get('load_end', '?')} at the end.")
    p()

    # Latency.
    lat = {t: samples(d, t) for t, _ in TOOLS}
    n = host.get("n", "?")
    p(f"### Lifecycle latency: create -> exec `true` -> destroy ({n} per tool, "
      f"{host.get('rounds', '?')} interleaved rounds)")
    p()
    p("| tool | n | median ms | p90 ms | p99 ms | mean ms | sbx/tool median | sbx/tool p99 |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|")
    s = lat.get("sbx")
    for t, name in TOOLS:
        st = lat.get(t)
        if not st:
            p(f"| {name} | - | not measured | | | | | |")
            continue
        peer = s and t not in ("sbx", "host-true")
        r_med = ratio(s["median"], st["median"]) if peer else ""
        r_p99 = ratio(s["p99"], st["p99"]) if peer else ""
        p(f"| {name} | {st['n']} | {st['median']:.2f} | {st['p90']:.2f} | {st['p99']:.2f} | "
          f"{st['mean']:.2f} | {r_med} | {r_p99} |")
    p()
    parts = []
    for t, name in TOOLS:
        st = lat.get(t)
        if st:
            rr = f" (sbx/{t} = {ratio(s['median'], st['median'])})" if s and t not in ("sbx", "host-true") else ""
            parts.append(f"{name} {st['median']:.2f} ms{rr}")
    if parts:
        p("Medians: " + ", ".join(parts) + ".")
        p()

    # Throughput.
    rows = []
    for w in (2, 4):
        for t in ("sbx", "bwrap", "crun"):
            j = load_json(os.path.join(d, f"tput-{t}-w{w}.json"))
            if j and "per_s" in j:
                rows.append((t, w, j))
    tput = {}
    if rows:
        p(f"### Throughput ({host.get('seconds', '?')} s per measurement)")
        p()
        p("| tool | workers | lifecycles/s | median ms under load | p99 ms under load | sbx/tool |")
        p("|---|---:|---:|---:|---:|---:|")
        for t, w, j in rows:
            tput[(t, w)] = j["per_s"]
        for t, w, j in rows:
            rs = ratio(tput.get(("sbx", w)), j["per_s"]) if t != "sbx" else ""
            p(f"| {t} | {w} | {j['per_s']:.1f} | {j['median_ms']:.2f} | {j['p99_ms']:.2f} | {rs} |")
        p()

    # Density.
    dens = {}
    for t in ("sbx", "bwrap"):
        j = load_json(os.path.join(d, f"density-{t}.json"))
        if j:
            dens[t] = j
    if dens:
        p("### Idle density (host memory = delta of MemTotal - MemAvailable; "
          "attributed = Pss_Anon + slab + kernel stacks + page tables + shmem deltas)")
        p()
        p("| tool | sandboxes | host MiB | MiB/sandbox | marginal MiB/sandbox | attributed MiB/sandbox | processes | created/s |")
        p("|---|---:|---:|---:|---:|---:|---:|---:|")
        for t, j in dens.items():
            prev = None
            for pt in j.get("points", []):
                c = pt["count"]
                used = pt["used_kib"] / 1024
                if prev:
                    marg = (pt["used_kib"] - prev["used_kib"]) / 1024 / (c - prev["count"])
                    step = c - prev["count"]
                else:
                    marg, step = used / c, c
                rate = step / pt["create_s"] if pt.get("create_s") else 0
                p(f"| {t} | {c} | {used:.1f} | {pt['mib_per']:.3f} | {marg:.3f} | "
                  f"{pt['attributed_mib_per']:.3f} | {pt['procs']} | {rate:.0f} |")
                prev = pt
        p()
        for t, j in dens.items():
            extra = f"; stopped: {j['error']}" if j.get("error") else ""
            destroy = f", destroyed in {j['destroy_s']:.1f} s" if "destroy_s" in j else ""
            slab = f" (slab {j['residual_slab_kib'] / 1024:+.1f})" if "residual_slab_kib" in j else ""
            p(f"- {t}: {j.get('fit', 0)} alive at the end{extra}{destroy}; after teardown host memory "
              f"{j.get('residual_kib', 0) / 1024:+.1f} MiB against the baseline{slab}.")
            top = j["points"][-1].get("slab_top") if j.get("points") else None
            if top:
                p(f"  Slab growth at {j['points'][-1]['count']}: {top}.")
        p()

    # Targets.
    p("### Targets")
    p()
    if s and lat.get("bwrap"):
        r = s["median"] / lat["bwrap"]["median"]
        p(f"- Lifecycle median <= {LAT_TARGET}x bubblewrap's: sbx {s['median']:.2f} ms vs bwrap "
          f"{lat['bwrap']['median']:.2f} ms = {r:.2f}x: {verdict(r <= LAT_TARGET)}")
    else:
        p("- Lifecycle median vs bubblewrap: not measured")
    ws = [w for w in (2, 4) if ("sbx", w) in tput and ("bwrap", w) in tput]
    if ws:
        rs = {w: tput[("sbx", w)] / tput[("bwrap", w)] for w in ws}
        parts = ", ".join(f"{tput[('sbx', w)]:.1f}/s vs {tput[('bwrap', w)]:.1f}/s with {w} workers "
                          f"({rs[w]:.2f}x)" for w in ws)
        p(f"- Throughput >= {TPUT_TARGET:.0f}x bubblewrap's at 2 and 4 workers: {parts}: "
          f"{verdict(len(ws) == 2 and min(rs.values()) >= TPUT_TARGET)}")
    else:
        p("- Throughput: not measured")
    j = dens.get("sbx")
    if j and j.get("points"):
        last = j["points"][-1]
        first = j["points"][0]
        ok = last["count"] >= DENSITY_COUNT and last["mib_per"] <= DENSITY_MIB
        # Flat = the cost of one more sandbox does not grow with the count:
        # the marginal cost of the last interval within 10 % of the one
        # before. The first count's average is not used: its first
        # allocations come from pages the kernel already holds (see
        # bench_memory_settle in common.c).
        pts = j["points"]

        def marg(i):
            prev = pts[i - 1] if i else {"count": 0, "used_kib": 0}
            return (pts[i]["used_kib"] - prev["used_kib"]) / 1024 / max(pts[i]["count"] - prev["count"], 1)
        if len(pts) >= 3:
            a, b = marg(len(pts) - 2), marg(len(pts) - 1)
            flat = abs(b - a) <= a * FLAT
            shape = (f"marginal {a:.3f} MiB per sandbox from {pts[-3]['count']} to {pts[-2]['count']}, "
                     f"{b:.3f} from {pts[-2]['count']} to {last['count']} ({b / a:.2f}x): "
                     f"{'flat' if flat else 'not flat'}")
        else:
            shape = "flatness needs three counts"
        p(f"- >= {DENSITY_COUNT} idle sandboxes at <= {DENSITY_MIB} MiB each: {last['count']} alive at "
          f"{last['mib_per']:.3f} MiB each (attributed {last['attributed_mib_per']:.3f}; {first['mib_per']:.3f} "
          f"at {first['count']}): {verdict(ok)}; {shape}")
    else:
        p("- Density: not measured")
    if notes:
        p()
        p("### Notes")
        p()
        for k, v in notes:
            p(f"- {k}: {v}")


if __name__ == "__main__":
    main()
