# SPDX-License-Identifier: MIT
"""docs/python.md's training loop (examples/python/training_loop.py) runs as
documented: PYTHONPATH=python alone, the default runtime from the environment."""
import os
import shutil
import subprocess
import uuid

from conftest import BUILD_ROOT, FIXTURE_TASKS, SOURCE_ROOT


def test_training_loop_example(runtime):
    state = BUILD_ROOT / "test-state" / f"py-example-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYTHONPATH=str(SOURCE_ROOT / "python"), SBX_STATE_DIR=str(state),
               SBX_IMAGE_DIR=runtime.image_dir)
    try:
        r = subprocess.run(["/usr/bin/python3", str(SOURCE_ROOT / "examples/python/training_loop.py"),
                            str(FIXTURE_TASKS / "pass"), "2", "3"], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines == [f"epoch {i}: mean reward 1.00 over 3 rollouts "
                         "(Submitted, Submitted, Submitted)" for i in range(2)]
    finally:
        shutil.rmtree(state, ignore_errors=True)
