"""Hostile PyTorch/Triton/CUDA candidates against the GPU backend, run on the CPU (Triton in
interpreter mode). Each file's first line names the status and a fragment of the message."""
import re
import tempfile
from pathlib import Path

import pytest

from perfgym import EvalConfig, Status, evaluate, get_task
from perfgym.sandbox import UID_BASE, UID_SLOTS, processes_of_uid

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
pytest.importorskip("triton", reason="the gpu extra is not installed: pip install 'perfgym[gpu]'")

CANDIDATES = sorted(p for p in (Path(__file__).parent / "gpu").glob("*.py")
                    if not p.name.startswith("_"))  # _cuda_relu_valid: the slow nvcc test
QUICK = EvalConfig(use_cache=False, trials=2, max_time=0.2, max_samples=5, min_samples=3,
                   torch_timeout=30.0)


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_gpu_hostile(path):
    m = re.match(r"# expect: (\w+) ?(.*)", path.read_text().splitlines()[0])
    expected, fragment = Status(m.group(1)), m.group(2).strip()
    pwned = Path(tempfile.gettempdir()) / "perfgym-pwned"
    pwned.unlink(missing_ok=True)
    outcome = evaluate(get_task("relu"), path.read_text(), None, QUICK)
    assert outcome.status is expected, f"{outcome.status}: {outcome.message}\n{outcome.details}"
    assert fragment in outcome.message, outcome.message
    assert not pwned.exists()
    assert [p for u in range(UID_BASE, UID_BASE + UID_SLOTS) for p in processes_of_uid(u)] == []


@pytest.mark.parametrize("name", ["relu", "softmax", "matmul", "scale_bias_gelu"])
def test_builtin_solutions_are_right(name):
    task = get_task(name)
    o = evaluate(task, task.expert.read_text(), None, QUICK)
    assert o.ok, o.message + o.details
    assert o.device == "cpu" and "not a GPU figure" in o.message
    assert o.speedup > 0 and o.reference_timing.median > 0


def test_plain_pytorch_candidate_on_the_cpu():
    code = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return torch.clamp(x, min=0.0)\n")
    task = get_task("relu")
    assert evaluate(task, code, None, QUICK).status is Status.LIBRARY_VIOLATION
    o = evaluate(task, code, None, QUICK.replace(require_custom_kernel=False))
    assert o.ok and o.speedup > 0


def test_precision_downcast_is_flagged_and_judged_at_the_references_dtype():
    task = get_task("relu")
    code = task.expert.read_text().replace("x = x.contiguous()", "x = x.half().float()")
    o = evaluate(task, code, None, QUICK)
    assert o.status is Status.WRONG_ANSWER and "rtol 0.0001" in o.message, o.message
    assert "precision_downcast" in o.flags


def test_weighted_reward_and_fast_p_over_the_gpu_suite():
    from perfgym.metrics import fast_p
    from perfgym.rewards import score
    outs = [evaluate(get_task(n), get_task(n).expert.read_text(), None, QUICK)
            for n in ("relu", "softmax")]
    broken = evaluate(get_task("relu"), (Path(__file__).parent / "gpu" / "wrong_kernel.py")
                      .read_text(), None, QUICK)
    rewards = score("weighted", outs + [broken])
    # correct but slower than PyTorch on the CPU interpreter: 0.8; wrong: 0.4
    assert rewards == [pytest.approx(0.8), pytest.approx(0.8), pytest.approx(0.4)]
    assert fast_p([(o.ok, o.speedup) for o in outs], 0.0) == 1.0
    assert fast_p([(o.ok, o.speedup) for o in outs], 1.0) == 0.0


@pytest.mark.slow
def test_cuda_candidate_compiles_with_nvcc():
    import shutil
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the CUDA compile check needs the CUDA toolkit")
    code = (Path(__file__).parent / "gpu" / "_cuda_relu_valid.py").read_text()
    o = evaluate(get_task("relu"), code, None, QUICK)
    assert o.status is Status.RUNTIME_ERROR and "compiles" in o.message
