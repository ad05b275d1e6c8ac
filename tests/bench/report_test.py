#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/report.py over a fake results tree (tests/fixtures/bench-results):
the rendered rows, "not run" for a bench without results, the newest run of
a bench chosen, and the in-place rewrite of the marked block (idempotent,
nothing outside the markers touched). Runs no benchmark."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
REPORT = os.path.join(SRC, "bench", "report.py")
FIXTURES = os.path.join(SRC, "tests", "fixtures")  # holds bench-results/, as a build dir does

sys.path.insert(0, os.path.join(SRC, "bench"))
import report  # noqa: E402


def rows(table):
    return [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| bench ")]


def find(table, bench, what):
    hits = [r for r in rows(table) if r.startswith(f"| {bench} | {what}")]
    if len(hits) != 1:
        raise AssertionError(f"{bench} / {what}: {len(hits)} rows in\n{table}")
    return [c.strip() for c in hits[0].strip("|").split("|")]


class Render(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.table = report.render(os.path.join(FIXTURES, "bench-results"))

    def test_lifecycle_newest_run_and_ratios(self):
        c = find(self.table, "lifecycle", "library lifecycle")
        self.assertEqual(c[2:7], ["5.00 ms", "bwrap 12.00 ms", "0.42x", "≤ 0.5x bwrap", "**met**"])
        # the newer of the two lifecycle dirs, with what its host.tsv recorded
        self.assertEqual(c[7], "2026-12-04T10:00Z, abc1234, load 1.50 → 2.50")
        self.assertEqual(find(self.table, "lifecycle", "throughput, 2 workers")[2:7],
                         ["300.0/s", "bwrap 100.0/s", "3.00x", "≥ 2x bwrap", "**met**"])
        self.assertEqual(find(self.table, "lifecycle", "throughput, 4 workers")[6], "not measured")

    def test_density(self):
        c = find(self.table, "lifecycle", "idle density: host memory per sandbox at 5000")
        self.assertEqual(c[2:7], ["0.360 MiB", "bwrap 0.800 MiB", "0.45x", "≥ 5000 at ≤ 0.4 MiB each", "**met**"])
        # marginal 1000->3000 0.400, 3000->5000 0.300 MiB: 0.75x, more than 10 % apart
        c = find(self.table, "lifecycle", "idle density: marginal")
        self.assertEqual(c[2:7], ["0.300 MiB", "1000→3000 0.400 MiB", "0.75x", "within 10 %", "**not met**"])

    def test_cli_pool_turn_serve_tty(self):
        self.assertEqual(find(self.table, "cli", "`sbx exec ID")[2:7],
                         ["2.00 ms", "bwrap 10.00 ms", "0.20x", "≤ 0.3x bwrap", "**met**"])
        self.assertEqual(find(self.table, "cli", "`sbx run IMAGE -- true` (whole")[4:7],
                         ["3.00x", "≤ 0.7x bwrap", "**not met**"])
        c = find(self.table, "pool", "create from a warm pool (no TTL)")
        self.assertEqual(c[2:7], ["0.25 ms", "cold create 5.00 ms", "0.050x", "≤ 0.1x cold", "**met**"])
        # pool.sh keeps no host.tsv: date from the dir's name, load and commit from its "host:" line
        self.assertEqual(c[7], "2026-12-04T12:00 (dir name), 1111aaa, load 7.00")
        self.assertEqual(find(self.table, "pool", "create from a warm pool (TTL")[6], "**not met**")
        self.assertEqual(find(self.table, "turn", "agent turn `")[4:7], ["0.25x", "≤ 2 ms per turn", "**met**"])
        self.assertEqual(find(self.table, "turn", "agent turn against")[2:5], ["1.50 ms", "exec 1.25 ms", "1.20x"])
        self.assertEqual(find(self.table, "turn", "turn layer")[2:5], ["0.20 ms", "—", "—"])
        self.assertEqual(find(self.table, "serve", "`sbx serve` lifecycles/s")[2:5],
                         ["120.0/s", "sequential 40.0/s", "3.00x"])
        c = find(self.table, "exec-stdio", "`sbx exec` `true`: wall")
        self.assertEqual(c[2:5], ["2.00 ms", "before (0fa8c36) 4.00 ms", "0.50x"])
        self.assertEqual(c[7], "2026-12-04T16:00Z, 5555eee+wt, load 2.00 → 3.00")
        c = find(self.table, "exec-tty", "`sbx exec -t` `true`: wall")
        self.assertEqual(c[2:5], ["4.50 ms", "pipes 3.00 ms", "1.50x"])
        self.assertEqual(c[7], "2026-12-04T15:00Z, 4444ddd+wt, load 1.00 → 1.00")

    def test_missing_benches_say_not_run(self):
        self.assertEqual(find(self.table, "fork", "not run")[1], "not run")
        # every bench has at least one row
        for name, *_ in report.BENCHES:
            self.assertTrue(any(r.startswith(f"| {name} | ") for r in rows(self.table)), name)


class Rewrite(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sbx-report-test.")
        self.doc = os.path.join(self.dir, "performance.md")
        self.head = "# Performance\n\nIntro.\n\n"
        self.tail = "\n## Local provider lifecycle\n\nUntouched | text\n"
        with open(self.doc, "w") as f:
            f.write(self.head + report.BEGIN + "\nold table\n" + report.END + self.tail)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_report(self, *extra):
        return subprocess.run([sys.executable, REPORT, FIXTURES, "--doc", self.doc, *extra],
                              capture_output=True, text=True)

    def test_in_place_and_idempotent(self):
        p = self.run_report()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("updated", p.stdout)
        with open(self.doc) as f:
            first = f.read()
        self.assertTrue(first.startswith(self.head + report.BEGIN + "\n"))
        self.assertTrue(first.endswith(report.END + self.tail))
        self.assertNotIn("old table", first)
        self.assertIn("| lifecycle | library lifecycle", first)
        p = self.run_report()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("unchanged", p.stdout)
        with open(self.doc) as f:
            self.assertEqual(f.read(), first)

    def test_stdout_leaves_the_doc_alone(self):
        with open(self.doc) as f:
            before = f.read()
        p = self.run_report("--stdout")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("| cli | `sbx exec ID", p.stdout)
        with open(self.doc) as f:
            self.assertEqual(f.read(), before)

    def test_no_markers_is_an_error(self):
        with open(self.doc, "w") as f:
            f.write("# no markers\n")
        p = self.run_report()
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("bench-summary:begin", p.stderr)
        with open(self.doc) as f:
            self.assertEqual(f.read(), "# no markers\n")

    def test_the_real_doc_has_one_block(self):
        with open(os.path.join(SRC, "docs", "performance.md")) as f:
            text = f.read()
        self.assertEqual(text.count(report.BEGIN), 1)
        self.assertEqual(text.count(report.END), 1)
        self.assertLess(text.index(report.BEGIN), text.index(report.END))


if __name__ == "__main__":
    unittest.main()
