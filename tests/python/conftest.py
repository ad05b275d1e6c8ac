# SPDX-License-Identifier: MIT
"""Fixtures of the Python tests: a private runtime (state dir of its own under
the build tree, the build's test image store) and the "busybox" test image,
built offline from busybox-static exactly as tests/support/fixtures.c does
and under the same lock, so the C and Python tests share it."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_ROOT = Path(os.environ.get("SBX_SOURCE_ROOT") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(SOURCE_ROOT / "python"))

import sbx  # noqa: E402

BUILD_ROOT = Path(os.environ.get("SBX_BUILD_ROOT") or SOURCE_ROOT / "build")
FIXTURE_TASKS = SOURCE_ROOT / "tests" / "fixtures" / "tasks"
# Never the host's stores: a run by hand outside meson lands in the build tree too.
os.environ.setdefault("SBX_SCRATCH_DIR", str(BUILD_ROOT / "test-scratch"))
os.environ.setdefault("SBX_SCRATCH_SIZE", "16G")
os.environ.setdefault("SBX_STATE_DIR", str(BUILD_ROOT / "test-state" / "default"))
os.environ.setdefault("SBX_IMAGE_DIR", str(BUILD_ROOT / "test-images-default"))

MUST_WORK = os.environ.get("SBX_MUST_WORK") == "1"


def skip(reason: str) -> None:
    """Skips for something missing on this machine; a failure under
    SBX_MUST_WORK=1 (CI must run everything)."""
    if MUST_WORK:
        pytest.fail(f"SBX_MUST_WORK=1: {reason}")
    pytest.skip(reason)


def _build_rootfs(root: Path) -> None:
    for d in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "root", "home",
              "home/user", "proc", "dev", "sys", "var", "var/tmp", "work"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    os.chown(root / "home/user", 1000, 1000)
    shutil.copy2("/bin/busybox", root / "bin/busybox")
    apps = subprocess.run(["/bin/busybox", "--list-full"], check=True, capture_output=True,
                          text=True).stdout.split()
    for app in apps:
        if app and app != "bin/busybox":
            try:
                os.symlink("/bin/busybox", root / app)
            except FileExistsError:
                pass
    (root / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
    (root / "etc/group").write_text(
        "root:x:0:\nuser:x:1000:\nstaff:x:50:user\nnogroup:x:65534:\n")


def ensure_busybox(rt: "sbx.Runtime") -> None:
    if not os.access("/bin/busybox", os.X_OK):
        skip("busybox-static is not installed (scripts/deps.sh installs it)")
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with open(BUILD_ROOT / "test-images.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if rt.has_image("busybox"):
            return
        root = BUILD_ROOT / f"test-busybox-rootfs.{os.getpid()}"
        try:
            _build_rootfs(root)
            rt.import_image("busybox", str(root))
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def runtime():
    """A private runtime for the whole session, with the busybox image."""
    if os.geteuid() != 0:
        skip("needs root for namespaces, overlayfs and cgroups")
    state = BUILD_ROOT / "test-state" / f"py-{os.getpid()}"
    rt = sbx.Runtime(state_dir=str(state), image_dir=str(BUILD_ROOT / "test-images"))
    ensure_busybox(rt)
    sbx.set_default_runtime(rt)
    yield rt
    sbx.set_default_runtime(None)
    rt.close()
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def sandbox(runtime):
    with sbx.Sandbox("busybox", runtime=runtime) as sb:
        yield sb


def pytest_sessionfinish(session, exitstatus):
    # Meson reads 77 as SKIP: a run where everything skipped is not a pass.
    # Exit 5 (nothing collected) is a failure here, never a quiet pass.
    rep = session.config.pluginmanager.get_plugin("terminalreporter")
    if rep is None:
        return
    passed = len(rep.stats.get("passed", []))
    skipped = len(rep.stats.get("skipped", []))
    if exitstatus == 0 and passed == 0 and skipped > 0:
        session.exitstatus = 77
    elif exitstatus == 5:
        session.exitstatus = 1
