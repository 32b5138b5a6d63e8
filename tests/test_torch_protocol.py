"""The PyTorch backend's protocol on the CPU: tolerances, the speedup bound, task faults, the
KernelBench mode, shrinking, outputs above 1 GiB and a suite's references scored as their own
candidates. Hostile candidates are in tests/hostile/test_gpu_hostile.py. KernelBench's own
problems are not shipped; `perfgym tasks selfcheck KernelBench/level1` runs them from a local
checkout."""
import textwrap

import numpy as np
import pytest

from perfgym import EvalConfig, Status, evaluate, get_task
from perfgym.backends.torch.tolerance import judge_for, mismatches
from perfgym.backends.torch.session import (TAMPER_MIN_CALLS, Samples, Verdict, cross_check,
                                             speedup_lower_bound)
from perfgym.outcome import Outcome
from perfgym.rewards import score
from perfgym.tasks import TaskError
from perfgym.tasks.selfcheck import reference_as_candidate, selfcheck
from perfgym.tasks.torch_task import builtin_gpu_names, load_torch_task

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")

QUICK = EvalConfig(use_cache=False, trials=2, max_time=0.2, max_samples=5, min_samples=3,
                   torch_timeout=60.0)
PLAIN = QUICK.replace(require_custom_kernel=False)


def problem(tmp_path, body: str, name: str = "problem"):
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
    return load_torch_task(path)


def test_kernelbench_tolerances_and_scaling_where_a_constant_would_pass():
    rng = np.random.default_rng(0)
    big = rng.standard_normal(1000).astype(np.float32)
    judge = judge_for(big, "float32")
    assert (judge.rtol, judge.atol, judge.tightened) == (1e-4, 1e-4, False)
    assert judge_for(big, "float16").rtol == 1e-2
    assert judge_for(np.arange(5), "int64").describe() == "exact"
    # a softmax over 16k columns: every value ~6e-5, so zeros pass atol 1e-4
    x = 0.1 * rng.standard_normal(16384)
    soft = (np.exp(x) / np.exp(x).sum()).astype(np.float32)
    assert mismatches(np.zeros_like(soft), soft, judge_for(big, "float32"))[0] == 0
    judge = judge_for(soft, "float32")
    assert judge.tightened
    assert mismatches(np.zeros_like(soft), soft, judge)[0] == soft.size
    assert mismatches(np.full_like(soft, soft.mean()), soft, judge)[0] > 0
    assert mismatches(soft * (1 + 5e-6), soft, judge)[0] == 0  # float32 rounding still passes
    # np.isclose's rule: equal NaNs and infinities agree, a NaN against a number does not
    special = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert mismatches(special, special, judge) == (0, -1)
    assert mismatches(np.array([1.0, np.nan], np.float32), np.array([1.0, 2.0], np.float32),
                      judge) == (1, 1)


def test_speedup_bound_is_a_sign_test():
    assert speedup_lower_bound([1.0] * 9, [0.5] * 9) == 0.0  # 9 rounds cannot show 99.9%
    assert speedup_lower_bound([1.0] * 10, [0.5] * 10) == pytest.approx(2.0)
    rng = np.random.default_rng(1)
    same = [speedup_lower_bound(list(1 + 0.1 * rng.random(40)), list(1 + 0.1 * rng.random(40)))
            for _ in range(200)]
    assert sum(b > 1 for b in same) <= 2  # 0.1% false "faster" rate, with room for chance


def samples(worker: float, parent: float, n: int) -> Samples:
    return Samples([worker] * n, [parent] * n)


def test_a_clock_that_disagrees_on_every_call_is_tampering():
    ref = samples(0.75, 1.9, 10)  # 1.15 s of channel: a 1 GiB output
    with pytest.raises(Verdict, match="tampering"):
        cross_check(ref, samples(0.75, 4.6, TAMPER_MIN_CALLS))


def test_one_slow_exchange_is_charged_not_called_tampering():
    # the same disagreement seen once may be a busy moment: charged in full, not judged
    ref = samples(0.75, 1.9, 1)
    timing = cross_check(ref, samples(0.75, 4.6, 1))
    assert timing.new[0] == pytest.approx(0.75 + (4.6 - 0.75) - 1.15)
    assert timing.new[0] > 3 * timing.ref[0]


def test_weighted_bonus_needs_the_bound():
    noisy = Outcome(Status.OK, "t", {}, speedup=1.3, speedup_low=0.9)
    shown = Outcome(Status.OK, "t", {}, speedup=1.3, speedup_low=1.1)
    assert score("weighted", [noisy, shown]) == [pytest.approx(0.8), pytest.approx(1.0)]


def test_faster_is_confirmed_by_a_second_pair_of_processes(tmp_path):
    # a reference that loops in Python and a candidate that does not: faster by far, and the
    # finding is replicated in fresh worker processes before it counts
    task = problem(tmp_path, """
        class Model(nn.Module):
            def forward(self, x):
                return torch.stack([row * 2.0 for row in x])
        def get_inputs(): return [torch.randn(256, 64)]
        def get_init_inputs(): return []
        """)
    fast = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x): return x * 2.0\n"
    o = evaluate(task, fast, None, PLAIN.replace(max_samples=30, min_samples=20))
    assert o.status is Status.OK and o.speedup_low > 1, o.message
    assert "in each of 2 pairs of worker processes" in o.message


def test_a_problem_that_cannot_import_is_the_tasks_fault(tmp_path):
    task = problem(tmp_path, """
        import nonexistent_module_xyz
        class Model(nn.Module):
            def forward(self, x): return x
        def get_inputs(): return [torch.randn(8)]
        def get_init_inputs(): return []
        """)
    with pytest.raises(TaskError, match="cannot be imported"):
        evaluate(task, reference_as_candidate(task.source.replace(
            "import nonexistent_module_xyz\n", "")), None, PLAIN)


def test_a_reference_that_raises_is_the_tasks_fault(tmp_path):
    task = problem(tmp_path, """
        class Model(nn.Module):
            def forward(self, x): raise ValueError("broken reference")
        def get_inputs(): return [torch.randn(8)]
        def get_init_inputs(): return []
        """)
    code = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x): return x\n"
    with pytest.raises(TaskError, match="broken reference"):
        evaluate(task, code, None, PLAIN)


def test_memory_is_checked_before_anything_is_allocated(tmp_path):
    task = problem(tmp_path, """
        class Model(nn.Module):
            def forward(self, x): return x * 2
        n = 1 << 20
        def get_inputs(): return [torch.randn(n, n)]  # 4 TiB
        def get_init_inputs(): return []
        """)
    code = reference_as_candidate(task.source)
    with pytest.raises(TaskError, match="needs about 28672.0 GiB.*--input-budget"):
        evaluate(task, code, None, PLAIN)
    o = evaluate(task, code, None, PLAIN.replace(input_budget=1 << 16))
    assert o.ok and "sizes reduced: n=256" in o.message, o.message


def test_input_budget_keeps_sizes_that_must_agree(tmp_path):
    task = problem(tmp_path, """
        batch = 4096
        shape = (4096,)
        class Model(nn.Module):
            def forward(self, a, b): return (a * b).sum(dim=1)  # b broadcasts: batch == shape
        def get_inputs(): return [torch.randn(batch, *shape), torch.randn(batch)]
        def get_init_inputs(): return []
        """)
    o = evaluate(task, reference_as_candidate(task.source), None,
                 PLAIN.replace(input_budget=1 << 16))
    assert o.ok, o.message
    assert "sizes reduced: batch=256, shape=[256]" in o.message


def test_kernelbench_mode_takes_the_mean_of_100_calls():
    task = get_task("relu")
    o = evaluate(task, task.expert.read_text(), None, QUICK.replace(
        kernelbench=True, trials=1))
    assert o.ok, o.message
    assert len(o.timing.samples) == 100 and "mean of 100 paired calls" in o.message


def test_outputs_above_one_gib_are_compared_in_chunks(tmp_path):
    # 2^28 + 2^20 floats: 1.004 GiB out, compared in 64 MiB chunks
    task = problem(tmp_path, """
        class Model(nn.Module):
            def forward(self, x): return x.expand(257, -1).reshape(-1) + 1.0
        def get_inputs(): return [torch.randn(1 << 20)]
        def get_init_inputs(): return []
        """)
    config = PLAIN.replace(trials=1, max_samples=1, min_samples=1, torch_timeout=300)
    o = evaluate(task, reference_as_candidate(task.source), None, config)
    assert o.ok, o.message
    wrong = reference_as_candidate(task.source).replace(
        "+ 1.0", "+ torch.where(torch.arange(257 << 20) == (257 << 20) - 5, 2.0, 1.0)")
    o = evaluate(task, wrong, None, config)
    assert o.status is Status.WRONG_ANSWER and "[269484027]" in o.message, o.message


def test_every_builtin_reference_passes_as_its_own_candidate_and_is_not_faster():
    paths = [get_task(n).path for n in builtin_gpu_names()]
    rows = selfcheck(paths, QUICK.replace(max_samples=20, min_samples=20, max_time=5))
    assert [r.stage for r in rows] == ["ok"] * len(paths), [(r.problem, r.message) for r in rows]
    assert not any(r.called_faster for r in rows), [(r.problem, r.message) for r in rows]
