"""The parent's side of the kernel program's replay (backends/torch/session.py), against
scripted workers: the replay's time is the parent's clock, every replay's outputs are checked,
and a load_inline that ran earns no replay-free pass. No process is started: milliseconds."""
import time

import numpy as np
import pytest

from perfgym import EvalConfig
from perfgym.backends.torch.channel import Tensor
from perfgym.backends.torch.session import Session, Verdict


def tensor(values) -> Tensor:
    a = np.asarray(values, dtype=np.float32)
    return Tensor("float32", list(a.shape), bytearray(a.tobytes()))


class Scripted:
    """A worker that answers with a function of the request; tensors it sends are read back
    in order."""

    def __init__(self, role, answer):
        self.role, self.answer, self.pending, self.asked = role, answer, [], []

    def request(self, header, tensors=()):
        self.asked.append(header["op"])
        reply, outs = self.answer(header)
        self.pending = list(outs)
        return {**reply, "tensors": [t.meta() for t in outs]}

    def read(self, t):
        return self.pending.pop(0)


def problem():
    return Scripted("problem", lambda h: ({"args": [{"tensor": 0}]}, [tensor([-1.0, 2.0])]))


def reference():
    return Scripted("reference", lambda h: ({"seconds": 1e-3}, [tensor([0.0, 2.0])]))


def replayer(outputs, run_seconds=0.0):
    """A replayer whose k-th run gives outputs[k] (the last one after that)."""
    runs = []

    def answer(h):
        if h["op"] == "run":
            time.sleep(run_seconds)
            runs.append(1)
            return {"ran": True}, []
        if h["op"] == "outputs":
            return {"outputs": 1}, [tensor(outputs[min(len(runs), len(outputs)) - 1])]
        return {"staged": True} if h["op"] == "stage" else {"pong": 0}, []
    return Scripted("replayer", answer)


def session(replay, candidate=None):
    s = Session(problem(), reference(), candidate or Scripted("candidate", None),
                EvalConfig(seed=1), replayer=replay)
    s.program = ({"inputs": 1, "steps": [], "outputs": [0]}, [], "kernels")
    return s


def test_the_replay_is_timed_by_the_parent_not_by_the_replayer():
    """The replayer says nothing of time (a clock there is one the kernels' process could
    have patched); the parent's clock sees the 30 ms each replay takes."""
    s = session(replayer([[0.0, 2.0]], run_seconds=0.03))
    assert s.replay_seconds(repeat=3) >= 0.025
    asked = s.replayer.asked
    assert asked.count("run") == 3 and asked.count("stage") == 3  # fresh inputs each


@pytest.mark.parametrize("wrong", [1, 2])
def test_every_timed_replay_is_checked_not_only_the_first(wrong):
    outputs = [[0.0, 2.0]] * 3
    outputs[wrong] = [0.0, 0.0]  # skipped the work on a later replay
    s = session(replayer(outputs))
    with pytest.raises(Verdict, match=f"timed replay {wrong + 1} of 3"):
        s.replay_seconds(repeat=3)


def test_a_load_inline_that_ran_is_no_kernel_evidence():
    cand = Scripted("candidate", lambda h: ({"load_inline": 1}, []))
    with pytest.raises(Verdict, match="no kernel evidence") as v:
        session(replayer([[0.0, 2.0]]), cand).kernel_program("kernels", cuda=True)
    assert v.value.status == "LIBRARY_VIOLATION"


def test_a_load_inline_that_never_ran_leaves_the_replay_on():
    def answer(h):
        if h["op"] == "extensions":
            return {"load_inline": 0}, []
        return {"program": {"inputs": 1, "steps": [], "outputs": [0]}}, []
    cand = Scripted("candidate", answer)
    # the program's output is its input: a PyTorch answer's kernels compute nothing
    with pytest.raises(Verdict, match="decoy: the kernels forward launches do not compute"):
        session(replayer([[-1.0, 2.0]]), cand).kernel_program("kernels", cuda=True)
    assert cand.asked == ["extensions", "trace"]
