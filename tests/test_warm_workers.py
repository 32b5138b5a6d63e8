"""A batch of PyTorch candidates shares one problem and one reference worker
(backends/torch/warm.py): each candidate still gets a fresh worker of its own, a verdict
leaves an idle pair in service, a pair still busy when its session ended is closed, a "faster"
finding is replicated in fresh workers, and a candidate that attacks the processes it can
reach changes no other candidate's verdict."""
import pytest

from perfgym import EvalConfig, Status, get_task, sandbox
from perfgym.backends.torch import protocol, warm
from perfgym.backends.torch.channel import Worker
from perfgym.executors.local import Request, evaluate_many
from perfgym.tasks.selfcheck import reference_as_candidate

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")

QUICK = EvalConfig(use_cache=False, trials=2, max_time=0.2, max_samples=5, min_samples=3,
                   torch_timeout=60.0)
PLAIN = QUICK.replace(require_custom_kernel=False)
# the static rules off: the attacks below must meet the sandbox, not the filter
WALL = PLAIN.replace(extra={"static_rules": False})

DOUBLE = ("import torch.nn as nn\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x): return x * 2.0\n")
WRONG = ("import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n"
         "    def forward(self, x): return torch.relu(x) + 1.0\n")
# at import: kill every process this uid may signal, then every process at all (-1)
KILLER = ("import os, torch.nn as nn\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x): return x\n"
          "for pid in range(2, 1 << 16):\n    try: os.kill(pid, 9)\n"
          "    except OSError: pass\nos.kill(-1, 9)\n")
SLEEPER = ("import time, torch.nn as nn\nclass ModelNew(nn.Module):\n"
           "    def forward(self, x):\n        time.sleep(30)\n        return x\n")


@pytest.fixture
def starts(monkeypatch):
    """The role of every worker the protocol starts, in order."""
    roles: list[str] = []

    class Counted(Worker):
        def __init__(self, role, *args, **kwargs):
            roles.append(role)
            super().__init__(role, *args, **kwargs)
    monkeypatch.setattr(protocol, "Worker", Counted)
    return roles


def replicated(outcome) -> bool:
    return "pairs of worker processes" in outcome.message


def test_one_pair_serves_the_batch_and_verdicts_are_unchanged(starts):
    relu = get_task("relu")
    same = reference_as_candidate(relu.source)
    texts = [same, WRONG, same]
    outs = evaluate_many([Request(relu, t, config=WALL) for t in texts])
    assert [o.status for o in outs] == [Status.OK, Status.WRONG_ANSWER, Status.OK], \
        [o.message for o in outs]
    fresh_pairs = 1 + sum(map(replicated, outs))
    assert starts.count("problem") == starts.count("reference") == fresh_pairs
    assert starts.count("candidate") == len(texts) + sum(map(replicated, outs))
    # and a verdict alone, with workers of its own, is the same
    alone = evaluate_many([Request(relu, WRONG, config=WALL)])
    assert alone[0].status is Status.WRONG_ANSWER
    # (the values differ: every evaluation draws its inputs from a secret seed)
    assert alone[0].message.split(": ")[0] == outs[1].message.split(": ")[0]
    assert warm.active() is None  # the batch's pool was closed with it


# elsewhere the killer would kill the test itself: it shares the test's uid
@pytest.mark.skipif(not sandbox.isolation().own_uid,
                    reason="not root: workers get uids of their own only when perfgym runs as "
                           "root, and the attack would kill every process of the test's uid")
def test_a_candidate_that_kills_what_it_can_reach_kills_only_its_own_worker(starts):
    relu = get_task("relu")
    same = reference_as_candidate(relu.source)
    outs = evaluate_many([Request(relu, t, config=WALL) for t in (same, KILLER, same)])
    assert [o.status for o in outs] == [Status.OK, Status.RUNTIME_ERROR, Status.OK], \
        [o.message for o in outs]
    # the pair went on serving the candidate after the killer
    assert starts.count("problem") == starts.count("reference") == \
        1 + sum(map(replicated, outs))


def test_a_candidate_that_timed_out_leaves_the_pair_in_service(starts):
    relu = get_task("relu")
    same = reference_as_candidate(relu.source)
    config = WALL.replace(torch_timeout=10.0)
    outs = evaluate_many([Request(relu, t, config=config) for t in (SLEEPER, same)])
    assert [o.status for o in outs] == [Status.TIMEOUT, Status.OK], [o.message for o in outs]
    # the pair was idle when the sleeper's time ran out: it answered the ping and served on
    assert starts.count("problem") == 1 + sum(map(replicated, outs))


def test_a_pair_still_busy_after_its_session_is_closed(tmp_path, starts):
    from perfgym.tasks.torch_task import load_torch_task
    path = tmp_path / "slow_reference.py"
    path.write_text("import time\nimport torch\nimport torch.nn as nn\n\n"
                    "class Model(nn.Module):\n"
                    "    def forward(self, x):\n        time.sleep(4)\n        return x\n"
                    "def get_inputs(): return [torch.randn(64)]\n"
                    "def get_init_inputs(): return []\n")
    task = load_torch_task(path)
    # an answer that returns at once: the session's time is the reference's calls, end to
    # end, so the deadline passes while the reference is inside one and its reply is still to
    # come, however fast the workers started
    at_once = ("import torch.nn as nn\nclass ModelNew(nn.Module):\n"
               "    def forward(self, x): return x\n")
    config = WALL.replace(torch_timeout=9.0)
    outs = evaluate_many([Request(task, at_once, config=config)] * 2)
    assert [o.status for o in outs] == [Status.TIMEOUT] * 2, [o.message for o in outs]
    assert starts.count("problem") == starts.count("reference") == 2


def test_a_faster_finding_is_replicated_in_fresh_workers(tmp_path, starts):
    from perfgym.tasks.torch_task import load_torch_task
    path = tmp_path / "slow.py"
    path.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n"
                    "        return torch.stack([row * 2.0 for row in x])\n"
                    "def get_inputs(): return [torch.randn(256, 64)]\n"
                    "def get_init_inputs(): return []\n")
    task = load_torch_task(path)
    config = PLAIN.replace(max_samples=30, min_samples=20)
    outs = evaluate_many([Request(task, DOUBLE, config=config)] * 2)
    assert all(o.status is Status.OK and replicated(o) for o in outs), [o.message for o in outs]
    # the first sessions shared a pair; each replicate started a pair of its own
    assert starts.count("problem") == 1 + 2


def test_a_pair_near_its_wall_limit_is_not_taken(starts, monkeypatch):
    relu = get_task("relu")
    same = reference_as_candidate(relu.source)
    # a lifetime that the next session (torch_timeout 60 s) could outlast
    monkeypatch.setattr(warm, "LIFETIME", 66.0)
    outs = evaluate_many([Request(relu, same, config=PLAIN)] * 2)
    assert all(o.ok for o in outs)
    assert starts.count("problem") == 2 + sum(map(replicated, outs))
