# SPDX-License-Identifier: MIT
"""sbx.Sandbox against real local sandboxes: lifecycle, exec, files,
timeouts, errors."""
import os
import uuid

import pytest

import sbx


def test_lifecycle_and_listing(runtime):
    tag = uuid.uuid4().hex
    sb = sbx.Sandbox("busybox", labels={"pytest": tag}, runtime=runtime)
    try:
        assert sb.id and sb.backend == "local" and not sb.closed
        rows = runtime.list_sandboxes(labels={"pytest": tag})
        assert [r.id for r in rows] == [sb.id]
        assert rows[0].labels["pytest"] == tag and rows[0].image == "busybox"
        assert sb.info() == rows[0]  # its own row, without the listing
        assert rows[0].pid > 0 and rows[0].state == "running"
        before = sb.stats()
        # btrfs accounts the layer's qgroup at commit: sync makes it now
        assert sb.exec("head -c 2000000 /dev/urandom > /root/blob; sync").ok
        st = sb.stats()
        assert st.mem_bytes > 0 and st.cpu_s >= before.cpu_s  # ticks: a short command may read 0
        assert st.disk_bytes >= before.disk_bytes + 1900000, (before, st)
        assert st.disk_total_bytes >= st.disk_bytes
        again = sbx.Sandbox.attach(sb.id, runtime=runtime)
        assert again.exec("echo attached").stdout == b"attached\n"
        again.close()  # the same sandbox: destroyed through either handle
    finally:
        sb.destroy()
    sb.destroy()  # idempotent
    assert sb.closed
    assert runtime.list_sandboxes(labels={"pytest": tag}) == []
    with pytest.raises(sbx.Closed):
        sb.exec("true")
    with pytest.raises(sbx.Closed):
        sb.info()
    with pytest.raises(sbx.Closed):
        sb.stats()


def test_context_manager_destroys(runtime):
    tag = uuid.uuid4().hex
    with sbx.Sandbox("busybox", labels={"pytest": tag}, runtime=runtime) as sb:
        assert sb.exec("true").exit_code == 0
    assert sb.closed
    assert runtime.list_sandboxes(labels={"pytest": tag}) == []


def test_exec_streams_exit_codes_and_argv(sandbox):
    r = sandbox.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, b"out\n", b"err\n", False)
    assert r.stdout_text == "out\n" and r.stderr_text == "err\n" and not r.ok
    r = sandbox.exec(["printf", "%s|", "a b", "c"])
    assert r.stdout == b"a b|c|" and r.ok
    r = sandbox.exec(["/no/such/program"])
    assert r.exit_code == 127 and r.stderr


def test_exec_env_cwd_user_stdin(runtime):
    with sbx.Sandbox("busybox", env={"BASE": "b"}, runtime=runtime) as sb:
        r = sb.exec("echo $BASE $EXTRA; pwd; id -u", env={"EXTRA": "e"}, cwd="/tmp",
                    user="1000")
        assert r.stdout_text.split() == ["b", "e", "/tmp", "1000"]
        r = sb.exec("cat", stdin=b"\x00binary\xff")
        assert r.stdout == b"\x00binary\xff"
        r = sb.exec("wc -c", stdin="héllo")
        assert r.stdout_text.strip() == str(len("héllo".encode()))


def test_exec_binary_output_and_cap(sandbox):
    r = sandbox.exec("printf '\\000\\001\\377'")
    assert r.stdout == b"\x00\x01\xff"
    r = sandbox.exec("yes x | head -c 100000", output_max=1000)
    assert r.stdout_truncated and len(r.stdout) <= 1000


def test_exec_timeout(sandbox):
    r = sandbox.exec("echo started; sleep 30", timeout=0.5)
    assert r.timed_out and r.exit_code != 0
    assert r.stdout == b"started\n"
    assert sandbox.exec("echo alive").stdout == b"alive\n"


def test_files_roundtrip(sandbox, tmp_path):
    blob = bytes(range(256)) * 1000
    sandbox.write_file("/work/sub/dir/blob.bin", blob, mode=0o600)
    assert sandbox.read_file("/work/sub/dir/blob.bin") == blob
    assert sandbox.exec("stat -c %a /work/sub/dir/blob.bin").stdout == b"600\n"
    sandbox.write_file("/tmp/t.txt", "text ✓")
    assert sandbox.read_file("/tmp/t.txt").decode() == "text ✓"
    assert sandbox.read_file("/tmp/t.txt", max_bytes=1000) == "text ✓".encode()
    with pytest.raises(sbx.TooLarge):
        sandbox.read_file("/work/sub/dir/blob.bin", max_bytes=10)
    sandbox.write_file("/tmp/empty", b"")
    assert sandbox.read_file("/tmp/empty") == b""


def test_upload_download(sandbox, tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "f.txt").write_text("one")
    (src / "x.sh").write_text("#!/bin/sh\necho x\n")
    os.chmod(src / "x.sh", 0o755)
    sandbox.upload(src, "/work/up")
    r = sandbox.exec("cat /work/up/a/f.txt; /work/up/x.sh")
    assert r.stdout == b"onex\n"
    sandbox.exec("mkdir -p /work/out && echo back > /work/out/b.txt")
    dst = tmp_path / "dst"
    sandbox.download("/work/out", dst)
    assert (dst / "b.txt").read_text() == "back\n"
    sandbox.download("/work/up/x.sh", tmp_path / "x.sh")
    assert os.access(tmp_path / "x.sh", os.X_OK)


def test_set_timeout(sandbox, runtime):
    sandbox.set_timeout(3600)
    row = [r for r in runtime.list_sandboxes() if r.id == sandbox.id][0]
    assert row.expires_at > row.created_at
    sandbox.set_timeout(0)
    row = [r for r in runtime.list_sandboxes() if r.id == sandbox.id][0]
    assert row.expires_at == 0


def test_error_mapping(sandbox, runtime):
    with pytest.raises(sbx.NotFound) as e:
        sandbox.read_file("/no/such/file")
    assert e.value.code < 0 and e.value.code_name == "ENOENT" and "/no/such/file" in str(e.value)
    assert isinstance(e.value, LookupError) and isinstance(e.value, sbx.SbxError)
    with pytest.raises(sbx.InvalidArgument):
        sandbox.read_file("/tmp")  # a directory
    with pytest.raises(sbx.NotFound) as e:
        sbx.Sandbox("no-such-image-" + uuid.uuid4().hex[:8], runtime=runtime)
    assert "no-such-image" in str(e.value)
    with pytest.raises(sbx.NotFound):
        sbx.Sandbox.attach("0" * 12, runtime=runtime)
    with pytest.raises(sbx.NotFound):
        sandbox.upload("/no/such/host/path", "/tmp/x")


@pytest.mark.parametrize("kw, word", [
    (dict(memory="lots"), "memory"), (dict(memory=-1), "memory"), (dict(storage="1Q"), "storage"),
    (dict(cpus=0), "cpus"), (dict(cpus="2"), "cpus"), (dict(network="wifi"), "network"),
    (dict(env={"1BAD": "x"}), "env"), (dict(env={"K": 3}), "env"), (dict(env=["K=V"]), "env"),
    (dict(labels={"a=b": "c"}), "labels"), (dict(ttl=-5), "ttl"), (dict(ttl="1h"), "ttl"),
    (dict(backend="nosuchbackend"), "nosuchbackend"), (dict(create_timeout=float("nan")),
                                                       "create_timeout"),
])
def test_bad_arguments_name_the_argument(runtime, kw, word):
    with pytest.raises(sbx.InvalidArgument) as e:
        sbx.Sandbox("busybox", runtime=runtime, **kw)
    assert word in str(e.value)


def test_bad_exec_arguments(sandbox):
    for cmd in ("", "   ", [], [""], ["a\0b"], 42, None):
        with pytest.raises(sbx.InvalidArgument) as e:
            sandbox.exec(cmd)
        assert "cmd" in str(e.value)
    with pytest.raises(sbx.InvalidArgument, match="timeout"):
        sandbox.exec("true", timeout=-1)
    with pytest.raises(sbx.InvalidArgument, match="mode"):
        sandbox.write_file("/tmp/x", b"", mode=0o70000)
    with pytest.raises(sbx.InvalidArgument, match="data"):
        sandbox.write_file("/tmp/x", 12)
    with pytest.raises(sbx.InvalidArgument, match="path"):
        sandbox.read_file("")


def test_secret_values_never_in_errors(runtime):
    secret = "sk-" + uuid.uuid4().hex
    with pytest.raises(sbx.SbxError) as e:
        sbx.Sandbox("no-such-image", env={"API_KEY": secret}, runtime=runtime)
    assert secret not in str(e.value) and secret not in repr(e.value.args)
    with pytest.raises(sbx.InvalidArgument) as e:
        sbx.Sandbox("busybox", env={"API_KEY": secret, "BAD-NAME": secret}, runtime=runtime)
    assert secret not in str(e.value)


def test_gc_destroys_forgotten_sandbox(runtime):
    tag = uuid.uuid4().hex
    sb = sbx.Sandbox("busybox", labels={"pytest": tag}, runtime=runtime)
    with pytest.warns(ResourceWarning):
        del sb
        import gc
        gc.collect()
    assert runtime.list_sandboxes(labels={"pytest": tag}) == []


def test_attached_handle_dropped_leaves_sandbox(sandbox, runtime):
    import gc
    other = sbx.Sandbox.attach(sandbox.id, runtime=runtime)
    del other
    gc.collect()
    assert sandbox.exec("echo alive").stdout == b"alive\n"


def test_runtime_close_with_calls_in_flight(tmp_path):
    """close() destroys open sandboxes, waits for calls still running in
    other threads, then frees the runtime; later calls raise Closed."""
    import threading
    from conftest import BUILD_ROOT
    state = BUILD_ROOT / "test-state" / f"py-close-{uuid.uuid4().hex[:8]}"
    rt = sbx.Runtime(state_dir=str(state), image_dir=str(BUILD_ROOT / "test-images"))
    sb = sbx.Sandbox("busybox", runtime=rt)
    got = {}

    def slow():
        try:
            got["r"] = sb.exec("echo started; sleep 60")
        except sbx.SbxError as e:
            got["e"] = e
    t = threading.Thread(target=slow)
    t.start()
    while b"sleep" not in sb.exec("ps").stdout:  # until the command runs
        pass
    rt.close()
    t.join()
    assert sb.closed and ("r" in got or "e" in got)
    with pytest.raises(sbx.Closed):
        sbx.Sandbox("busybox", runtime=rt)
    with pytest.raises(sbx.Closed):
        sb.exec("true")
    rt.close()  # idempotent
    import shutil
    shutil.rmtree(state, ignore_errors=True)


def _fds():
    """This process's fds, less the local provider's pooled namespaces
    (refilled in the background: not a leak), once two counts agree."""
    import time

    def count():
        n = 0
        for name in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                continue
            if not target.startswith(("net:[", "uts:[", "ipc:[", "user:[", "/run/sbx-idmap/")):
                n += 1
        return n
    a = count()
    for _ in range(50):
        time.sleep(0.02)
        b = count()
        if a == b:
            break
        a = b
    return a


def test_no_fd_or_sandbox_leak_over_cycles(runtime, tmp_path):
    from conftest import FIXTURE_TASKS
    tag = uuid.uuid4().hex
    with sbx.Sandbox("busybox", runtime=runtime) as sb:  # warm up the pools
        sb.exec("true")
    before = _fds()
    for i in range(20):
        with sbx.Sandbox("busybox", labels={"pytest": tag}, runtime=runtime) as sb:
            assert sb.exec(["echo", str(i)]).stdout == f"{i}\n".encode()
            sb.write_file("/tmp/f", b"x")
            sb.read_file("/tmp/f")
            with pytest.raises(sbx.NotFound):
                sb.read_file("/nope")
    for _ in range(3):
        assert sbx.run_episode(FIXTURE_TASKS / "pass", labels={"pytest": tag},
                               runtime=runtime).reward == 1.0
    # Fewer is fine: something transient (a pool refill's socket) was open before.
    assert _fds() <= before
    assert runtime.list_sandboxes(labels={"pytest": tag}) == []


def test_create_timeout_leaves_no_sandbox():
    from conftest import BUILD_ROOT
    import shutil
    state = BUILD_ROOT / "test-state" / f"py-ctimeout-{uuid.uuid4().hex[:8]}"
    images = str(BUILD_ROOT / "test-images")
    rt = sbx.Runtime(state_dir=str(state), image_dir=images)
    try:
        with pytest.raises(sbx.Timeout) as e:
            sbx.Sandbox("busybox", create_timeout=0.0001, runtime=rt)
        assert isinstance(e.value, TimeoutError)
    finally:
        rt.close()  # waits for the abandoned create, which destroys its sandbox
    rt = sbx.Runtime(state_dir=str(state), image_dir=images)
    try:
        assert rt.list_sandboxes() == []
    finally:
        rt.close()
        shutil.rmtree(state, ignore_errors=True)


def test_exec_from_many_threads(sandbox):
    import threading
    errs = []

    def worker(i):
        for j in range(10):
            r = sandbox.exec(["echo", f"{i}-{j}"])
            if r.stdout != f"{i}-{j}\n".encode():
                errs.append((i, j, r))
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errs == []


def test_exec_bad_cwd_and_user(sandbox):
    with pytest.raises(sbx.NotFound, match="/nonexistent"):
        sandbox.exec("true", cwd="/nonexistent")
    with pytest.raises(sbx.NotFound, match="nosuchuser"):
        sandbox.exec("true", user="nosuchuser")
