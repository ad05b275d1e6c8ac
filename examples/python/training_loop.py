#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The shape of an RL training loop on sbx: reset -> policy turns ->
evaluate -> reward, with rollouts of a batch played concurrently (sbx.aio).

    PYTHONPATH=python examples/python/training_loop.py TASK_DIR [EPOCHS] [BATCH]

`policy` is a stand-in for the model being trained: it sees the instruction
and the observations so far and returns the next shell command, or None to
stop. Here it is scripted for tests/fixtures/tasks/pass.
"""
from __future__ import annotations

import asyncio
import sys
from typing import List, Optional, Tuple

import sbx
import sbx.aio

Turn = Tuple[str, sbx.Observation]


def policy(instruction: str, turns: List[Turn]) -> Optional[str]:
    """The next command, or None when the policy is done (a model goes here)."""
    script = ["ls /tmp", "echo hello > /tmp/answer", "cat /tmp/answer"]
    return script[len(turns)] if len(turns) < len(script) else None


async def rollout(task_dir: str, max_turns: int = 16) -> Tuple[float, List[Turn], sbx.EpisodeRecord]:
    """One episode: a fresh sandbox, the policy's turns, the task's verifier."""
    async with sbx.aio.Episode(task_dir, max_episode_s=600) as ep:
        instruction = await ep.reset()
        turns: List[Turn] = []
        while len(turns) < max_turns:
            command = policy(instruction, turns)
            if command is None:
                break
            obs = await ep.step(command, timeout=60)
            turns.append((command, obs))
            if obs.done:  # the agent's time is up
                break
        record = await ep.evaluate()
        # No verdict (status other than "Submitted") counts as 0 here; a
        # trainer may rather drop such a rollout.
        return (record.reward or 0.0), turns, record


async def train(task_dir: str, epochs: int, batch: int) -> None:
    for epoch in range(epochs):
        results = await asyncio.gather(*(rollout(task_dir) for _ in range(batch)))
        rewards = [r for r, _, _ in results]
        # trainer.update([(turns, reward) for reward, turns, _ in results])
        print(f"epoch {epoch}: mean reward {sum(rewards) / len(rewards):.2f} "
              f"over {len(rewards)} rollouts "
              f"({', '.join(rec.status for _, _, rec in results)})")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: training_loop.py TASK_DIR [EPOCHS] [BATCH]")
    asyncio.run(train(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2,
                      int(sys.argv[3]) if len(sys.argv) > 3 else 4))
