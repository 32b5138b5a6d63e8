"""perfgym's verifiers reward stays asynchronous: the event loop runs while an answer is judged,
a scoring timeout stops the evaluation, and the trace says what was judged.

The reward is called as verifiers calls it (awaited on its event loop) with a trace holding
the model's answer; a heartbeat task on the same loop measures its longest stall."""
from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace

import pytest

vf = pytest.importorskip("verifiers.v1", reason="the verifiers extra is not installed: pip install 'perfgym[verifiers]'")

from answers import ANSWERS, LABEL  # noqa: E402
from perfgym import lane  # noqa: E402
from perfgym.integrations import verifiers_env as env  # noqa: E402


def fresh(name: str) -> str:
    """The answer with a constant no cache has seen (a comment alone would not do: the cache
    keys the kernel's code)."""
    return ANSWERS[name].replace("out[0] = s;", f"out[0] = s + 0.0 * {uuid.uuid4().int % 10**9};")


def task_and_trace(name: str, turns: int = 1):
    """A task and a trace of `turns` answers, each new to the cache."""
    task = env.KernelTask(env.KernelData(idx=0, id="dot", name="dot", prompt="p", label=LABEL),
                          env.KernelTaskConfig())
    nodes = [SimpleNamespace(sampled=True, message=vf.AssistantMessage(content=fresh(name)))
             for _ in range(turns)]
    return task, SimpleNamespace(nodes=nodes, info={}, metrics={})


async def with_heartbeat(coro) -> tuple[object, float]:
    """coro's result and the event loop's longest stall past a 10 ms tick while it ran.

    The heap the test session built before (thousands of tests' objects) is frozen out of the
    garbage collector meanwhile: a full collection of it stops every thread, the loop's too,
    for as long as the session is big, whoever allocated last. The reward's own objects are
    still collected. (A CI run once saw a 0.52 s stall here that no run of this file alone, or
    beside a busy loop, showed; a full collection after importing torch, transformers, TRL and
    Ray alone takes 0.27-0.29 s on a 2-core AMD EPYC.)"""
    gc.collect()
    gc.freeze()
    try:
        return await _beating(coro)
    finally:
        gc.unfreeze()


async def _beating(coro) -> tuple[object, float]:
    stall = 0.0

    async def beat():
        nonlocal stall
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            stall = max(stall, now - last - 0.01)
            last = now

    heart = asyncio.create_task(beat())
    await asyncio.sleep(0.05)
    try:
        result = await coro
        await asyncio.sleep(0.03)  # the heartbeat's turn: a stall that lasted to the end counts
        return result, stall
    finally:
        heart.cancel()


def test_the_reward_leaves_the_event_loop_running_and_the_trace_says_what_was_judged():
    from perfgym.machine import machine_info
    machine_info()  # (a stale cached probe is measured again first: not the reward's cost)
    task, trace = task_and_trace("wrong_answer", turns=4)  # each compiled and checked
    started = time.monotonic()
    reward, stall = asyncio.run(with_heartbeat(task.perfgym(trace)))
    assert time.monotonic() - started > 0.3  # the judging took long enough to show a stall
    assert stall <= 0.1, f"the event loop stalled {stall:.3f} s"
    assert reward == -10.0  # tiered: a wrong answer
    assert trace.info["perfgym"]["status"] == ["WRONG_ANSWER"] * 4
    assert trace.info["perfgym"]["refused"] == [False] * 4
    assert trace.metrics["perfgym_refused"] == 0.0


HOLDER = """
import sys, time
from pathlib import Path
from perfgym import lane
lane.LOCK_PATH = Path(sys.argv[1])
with lane.LANE.exclusive():
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_scoring_timeout_stops_the_evaluation(tmp_path, monkeypatch):
    path = tmp_path / "lane.lock"  # the test's own lane: the machine's is left alone
    monkeypatch.setattr(lane, "LOCK_PATH", path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        task, trace = task_and_trace("naive")  # must be timed: it waits for the lane
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(asyncio.wait_for(task.perfgym(trace), 1.0))
        ends = time.monotonic() + 3
        while time.monotonic() < ends and (lane.LANE._writers_waiting or lane.LANE._readers):
            time.sleep(0.05)
        # nothing of it still waits (PERFGYM_REWARD_WAIT alone would keep it 120 s)
        assert lane.LANE._writers_waiting == 0 and lane.LANE._readers == 0
    finally:
        holder.kill()
        holder.wait()
