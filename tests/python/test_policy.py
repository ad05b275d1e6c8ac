# SPDX-License-Identifier: MIT
"""run_episode with the policy agent: agent_args reach the agent, the record
carries its end reason and trajectory. The model is tests/fakes/openai_server.py
(a FAKE on loopback: a real model API is a cloud unreachable from CI)."""
import json
import subprocess
import uuid

import pytest

import sbx
import sbx.aio
from conftest import FIXTURE_TASKS, SOURCE_ROOT


@pytest.fixture(scope="module")
def model_api(tmp_path_factory):
    fake = SOURCE_ROOT / "tests" / "fakes" / "openai_server.py"
    if not fake.exists():
        pytest.skip("this tree has no tests/fakes/openai_server.py (the policy agent's fake)")
    d = tmp_path_factory.mktemp("fake")
    record = d / "requests.jsonl"
    # The fake finds a task by its instruction, which several fixtures share:
    # give it only the one played here.
    (d / "tasks").mkdir()
    (d / "tasks" / "pass").symlink_to(FIXTURE_TASKS / "pass")
    proc = subprocess.Popen(["/usr/bin/python3", str(fake), "--tasks-dir", str(d / "tasks"),
                             "--record", str(record)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        assert line and line[0] == "PORT", line
        yield f"http://127.0.0.1:{line[1]}/v1", record
    finally:
        proc.kill()
        proc.wait()


def test_policy_agent_plays_pass(runtime, model_api, tmp_path):
    api_base, record = model_api
    secret = "sk-test-" + uuid.uuid4().hex
    key = tmp_path / "key"
    key.write_text(secret + "\n")
    rec = sbx.run_episode(FIXTURE_TASKS / "pass", agent="policy",
                          agent_args={"api_base": api_base, "model": "replay",
                                      "api_key_file": str(key)}, runtime=runtime)
    assert rec.agent == "policy" and rec.status == "Submitted" and rec.reward == 1.0
    assert rec.end_reason == "task_complete"
    assert rec.trajectory["turns"] and rec.trajectory["messages"]
    assert secret not in json.dumps(rec.record) and secret not in repr(rec)
    sent = [json.loads(l) for l in record.read_text().splitlines()]
    assert sent and all(r["body"]["model"] == "replay" for r in sent)


def test_policy_agent_bad_setting_is_in_the_record(runtime, model_api):
    rec = sbx.run_episode(FIXTURE_TASKS / "pass", agent="policy",
                          agent_args={"api_base": "http://user:pw@127.0.0.1:1/v1"},
                          runtime=runtime)
    assert rec.status == "AgentError" and rec.reward is None
    assert "pw" not in (rec.detail or "")


def test_policy_agent_from_asyncio(runtime, model_api):
    import asyncio
    api_base, _ = model_api

    async def main():
        return await asyncio.gather(*(sbx.aio.run_episode(
            FIXTURE_TASKS / "pass", agent="policy",
            agent_args={"api_base": api_base, "model": "replay"}, runtime=runtime)
            for _ in range(4)))
    assert [r.reward for r in asyncio.run(main())] == [1.0] * 4
