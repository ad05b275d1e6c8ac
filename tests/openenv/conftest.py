# SPDX-License-Identifier: MIT
"""A real `sbx openenv serve` on 127.0.0.1 with local sandboxes, a private
state dir and the task image store run.sh prepared (tests/openenv/run.sh)."""
import json
import os
import signal
import subprocess
import time

import pytest

BUILD = os.environ["SBX_BUILD_ROOT"]
SOURCE = os.environ["SBX_SOURCE_ROOT"]
SBX = os.path.join(BUILD, "src", "cli", "sbx")
TASKS = os.path.join(SOURCE, "examples", "tasks")


class Server:
    def __init__(self, *extra):
        self.state = os.path.join(BUILD, "test-state", "openenv-%d-%d" % (os.getpid(), time.monotonic_ns()))
        os.makedirs(self.state, exist_ok=True)
        self.env = dict(os.environ, SBX_STATE_DIR=self.state)
        self.proc = subprocess.Popen(
            [SBX, "openenv", "serve", "--listen", "127.0.0.1:0", "--print-port", "--tasks-dir", TASKS, *extra],
            stdout=subprocess.PIPE, env=self.env)
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), "the server printed no port"
        self.port = int(line)
        self.url = "ws://127.0.0.1:%d/ws" % self.port
        self.http = "http://127.0.0.1:%d" % self.port

    def sandboxes(self):
        out = subprocess.run([SBX, "ls", "--json"], env=self.env, capture_output=True, check=True).stdout
        return json.loads(out)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=300)
            assert rc == 0, "sbx openenv serve exited %d on SIGTERM" % rc
        self.proc.stdout.close()
        assert self.sandboxes() == [], "sandboxes left after SIGTERM"


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


def wait_no_sandboxes(s, within):
    deadline = time.monotonic() + within
    while True:
        n = len(s.sandboxes())
        if n == 0 or time.monotonic() > deadline:
            return n
        time.sleep(0.1)
