"""Checks for /app/bin/rotate-logs (path from $ROTATE_BIN)."""
import os, subprocess, sys, tempfile, unittest

BIN = os.environ.get("ROTATE_BIN", "/app/bin/rotate-logs")


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30)


def write(path, size, ch="a"):
    with open(path, "w") as f:
        f.write(ch * size)


def read(path):
    with open(path) as f:
        return f.read()


class RotateLogs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def p(self, name):
        return os.path.join(self.d, name)

    def test_executable(self):
        self.assertTrue(os.access(BIN, os.X_OK), f"{BIN} is not executable")

    def test_default_threshold(self):
        write(self.p("big.log"), 1024, "b")
        write(self.p("small.log"), 1023, "s")
        r = run(self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "rotated big.log (1024 bytes)\n")
        self.assertEqual(read(self.p("big.log.1")), "b" * 1024)
        self.assertEqual(os.path.getsize(self.p("big.log")), 0)
        self.assertEqual(read(self.p("small.log")), "s" * 1023)
        self.assertFalse(os.path.exists(self.p("small.log.1")))

    def test_truncate_in_place(self):
        write(self.p("a.log"), 10)
        ino = os.stat(self.p("a.log")).st_ino
        with open(self.p("a.log"), "a") as held:
            r = run("-s", "1", self.d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(os.stat(self.p("a.log")).st_ino, ino, "a.log was replaced, not truncated")
            held.write("after")
        self.assertEqual(read(self.p("a.log.1")), "a" * 10)

    def test_keep_shifting(self):
        for gen in "12345":
            write(self.p("svc.log"), 5, gen)
            r = run("-k", "3", "-s", "0", self.d)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(self.p("svc.log.1")), "55555")
        self.assertEqual(read(self.p("svc.log.2")), "44444")
        self.assertEqual(read(self.p("svc.log.3")), "33333")
        self.assertFalse(os.path.exists(self.p("svc.log.4")))
        self.assertEqual(sorted(os.listdir(self.d)), ["svc.log", "svc.log.1", "svc.log.2", "svc.log.3"])

    def test_keep_one(self):
        write(self.p("x.log"), 3, "1")
        run("-k", "1", "-s", "0", self.d)
        write(self.p("x.log"), 3, "2")
        r = run("-k", "1", "-s", "0", self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(self.p("x.log.1")), "222")
        self.assertFalse(os.path.exists(self.p("x.log.2")))

    def test_order_spaces_and_non_logs(self):
        write(self.p("b.log"), 4)
        write(self.p("A.log"), 2)
        write(self.p("my app.log"), 3)
        write(self.p("notes.txt"), 50)
        write(self.p("old.log.1"), 50)
        os.mkdir(self.p("dir.log"))
        os.mkdir(self.p("sub"))
        write(self.p("sub/deep.log"), 50)
        r = run("-s", "2", self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "rotated A.log (2 bytes)\nrotated b.log (4 bytes)\nrotated my app.log (3 bytes)\n")
        self.assertEqual(read(self.p("my app.log.1")), "aaa")
        self.assertFalse(os.path.exists(self.p("notes.txt.1")))
        self.assertFalse(os.path.exists(self.p("old.log.1.1")))
        self.assertFalse(os.path.exists(self.p("sub/deep.log.1")))
        self.assertEqual(read(self.p("old.log.1")), "a" * 50)

    def test_usage_errors(self):
        write(self.p("a.log"), 5000)
        for args in ([], [self.p("nope")], [self.p("a.log")], ["-k", "0", self.d],
                     ["-k", "x", self.d], ["-s", "-5", self.d], [self.d, self.d]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, f"args {args}: exit {r.returncode}")
            self.assertEqual(r.stdout, "", f"args {args}: stdout not empty")
            self.assertNotEqual(r.stderr.strip(), "", f"args {args}: no usage on stderr")
        self.assertEqual(os.path.getsize(self.p("a.log")), 5000)
        self.assertFalse(os.path.exists(self.p("a.log.1")))


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
