"""Hostile PyTorch/Triton/CUDA candidates against the GPU backend, run on the CPU (Triton in
interpreter mode).

Each file in gpu/ opens with comment lines naming what it must end in (a status, then a
fragment of the message):
    # expect: STATUS fragment      with the static rules on (the first filter and the wall)
    # wall: STATUS fragment        with EvalConfig(extra={"static_rules": False}): the wall alone
                                   (when absent, the same as expect)
    # task: NAME                   the task it attacks (default relu; wide_softmax is built here)
    # xfail[Error]: reason         a known hole or bug: the test fails today, with Error
                                   (AssertionError when not given), and must start passing
                                   once it is fixed (strict xfail); xfail-static: and
                                   xfail-wall: limit it to one mode
Several may share a line ("# expect: A x  # wall: B y"); "#   text" (indented) continues the
line before. No expectation may be OK.
Every run also checks that the evaluation left no sandbox process and no work directory behind,
and wrote nothing where a candidate tried to (marker files named perfgym-pwned). A candidate the
static rules let through is evaluated once for both modes: static_rules changes nothing else.

Both ways an evaluation starts its workers are held to every expectation. The candidates the
static rules let through are evaluated together in one batch (`batched_outcomes`), the way a
search step or a GRPO step judges its answers: workers forked from the batch's templates,
problem and reference workers kept warm from one candidate to the next, so a candidate that
leaves something behind for the next one is caught too. The candidates the rules stop are
evaluated by the wall alone with fresh workers each, as one `perfgym eval` or a per-sample
reward call is. PERFGYM_TEST_FORKED_WORKERS=1 puts every evaluation in a batch of its own;
PERFGYM_TEST_FRESH_WORKERS=1 starts every worker fresh.
"""
import builtins
import os
import re
import tempfile
from contextlib import nullcontext
from pathlib import Path

import pytest

from perfgym import EvalConfig, Status, evaluate, get_task
from perfgym.backends.torch import warm
from perfgym.backends.torch.python_rules import audit_python
from perfgym.sandbox import ROOT_WORK_DIR

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
pytest.importorskip("triton", reason="the gpu extra is not installed: pip install 'perfgym[gpu]'")

# PERFGYM_TEST_FORKED_WORKERS=1: every candidate in a batch of its own, so its worker and
# its replayer are forked from the batch's template (backends/torch/template.py) where this
# host forks workers; the expectations are the same
FORKED = warm.batch if os.environ.get("PERFGYM_TEST_FORKED_WORKERS") == "1" else nullcontext
# the let-through candidates in one batch (batched_outcomes) unless either variable is set
ONE_BATCH = FORKED is nullcontext and os.environ.get("PERFGYM_TEST_FRESH_WORKERS") != "1"
GPU_DIR = Path(__file__).parent / "gpu"
CANDIDATES = sorted(p for p in GPU_DIR.glob("*.py")
                    if not p.name.startswith("_"))  # _cuda_relu_valid: the slow nvcc test
QUICK = EvalConfig(use_cache=False, trials=2, max_time=0.2, max_samples=5, min_samples=3,
                   torch_timeout=30.0)
MODES = {"static": QUICK, "wall": QUICK.replace(extra={"static_rules": False})}

# A softmax whose every value is below 1e-4 (8 x 32768 columns of randn * 0.2: the largest is
# about e^(0.2 * 5) / 32768 = 8e-5), so all zeros pass KernelBench's atol = rtol = 1e-4.
WIDE_SOFTMAX = '''import torch
import torch.nn as nn

batch_size = 8
dim = 32768


class Model(nn.Module):
    """Softmax over the last dimension of a wide (batch_size, dim) tensor of small values."""

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim) * 0.2]


def get_init_inputs():
    return []
'''

_KEY = re.compile(r"#\s*(expect|wall|task|xfail(?:\[\w+\])?(?:-static|-wall)?):\s*")


def header(path: Path) -> dict[str, str]:
    """The leading comment lines' fields; a line "#   more" (indented) continues the last one."""
    fields, last = {}, None
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if last and re.match(r"#\s{2,}\S", line):
            fields[last] += " " + line[1:].strip()
            continue
        parts = _KEY.split(line)
        last = None
        for key, value in zip(parts[1::2], parts[2::2]):
            fields[key], last = value.strip(), key
    return fields


def expectation(fields: dict[str, str], mode: str) -> tuple[Status, str]:
    line = fields["wall"] if mode == "wall" and "wall" in fields else fields["expect"]
    status, _, fragment = line.partition(" ")
    return Status(status), fragment.strip()


def cases():
    for path in CANDIDATES:
        fields = header(path)
        for mode in MODES:
            marks = []
            for key, reason in fields.items():
                m = re.fullmatch(r"xfail(?:\[(\w+)\])?(?:-(static|wall))?", key)
                if m and m.group(2) in (None, mode):
                    raises = getattr(builtins, m.group(1) or "AssertionError")
                    marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
            yield pytest.param(path, mode, marks=marks, id=f"{path.stem}-{mode}")


@pytest.fixture(scope="module")
def wide_softmax(tmp_path_factory):
    from perfgym.tasks.torch_task import load_torch_task
    path = tmp_path_factory.mktemp("problems") / "wide_softmax.py"
    path.write_text(WIDE_SOFTMAX)
    return load_torch_task(path)


def _pwn_targets() -> list[Path]:
    """Where candidates try to leave a mark (sabotage_reference_files and friends)."""
    import torch
    torch_dir = Path(torch.__file__).parent
    return [Path(tempfile.gettempdir()) / "perfgym-pwned", Path("/var/tmp/perfgym-pwned"),
            Path("/dev/shm/perfgym-pwned"), ROOT_WORK_DIR / "perfgym-pwned",
            ROOT_WORK_DIR.parent / "perfgym-pwned", torch_dir / "perfgym-pwned",
            torch_dir.parent / "sitecustomize.py", torch_dir.parent / "usercustomize.py",
            Path.cwd() / "perfgym-pwned"]


def _marked(path: Path) -> bool:
    """The file exists and is a candidate's (named or containing perfgym-pwned)."""
    try:
        return "perfgym-pwned" in path.read_text() or path.name == "perfgym-pwned"
    except FileNotFoundError:
        return False
    except (IsADirectoryError, UnicodeDecodeError):
        return path.name == "perfgym-pwned"


@pytest.fixture
def leaves_nothing_behind(sandbox_use):
    """After the test: no process runs as the sandbox uids its evaluations took, every work
    directory they made is gone, and no marker file appeared outside them (conftest.py)."""
    targets = _pwn_targets()
    for t in targets:
        if _marked(t):
            t.unlink()
    yield
    assert [t for t in targets if _marked(t)] == []
    assert sandbox_use.workdirs_left() == []
    assert sandbox_use.processes_left() == {}


def let_through(path: Path) -> bool:
    """The static rules let it through: static_rules then changes nothing, and one evaluation,
    the wall's, answers for both modes."""
    return not audit_python(path.read_text(), QUICK.require_custom_kernel).violation


def config_for(fields: dict[str, str], mode: str, evaluated_in: str) -> EvalConfig:
    """The evaluation's config: `evaluated_in`'s (the wall's for a let-through candidate), and a
    deadline by what `mode` expects. A candidate meant to time out gets 12 s (load can only make
    it time out sooner); the others a deadline they only reach on a badly overloaded machine,
    so that load alone does not turn a verdict into TIMEOUT."""
    timeout = 12.0 if expectation(fields, mode)[0] is Status.TIMEOUT else 120.0
    return MODES[evaluated_in].replace(torch_timeout=timeout)


@pytest.fixture(scope="module")
def batched_outcomes(wide_softmax, module_sandbox_use):
    """Every let-through candidate evaluated in one batch, in turn (see the module's docstring):
    {path: (outcome or the exception it raised, marker files found after it)}, and what the
    batch left once it closed: (work directories, processes) of the uids it took."""
    results, targets = {}, _pwn_targets()
    with warm.batch():
        for path in CANDIDATES:
            if not let_through(path):
                continue
            fields = header(path)
            name = fields.get("task", "relu")
            task = wide_softmax if name == "wide_softmax" else get_task(name)
            try:
                outcome = evaluate(task, path.read_text(), None,
                                   config_for(fields, "static", "wall"))
            except Exception as exc:  # (raised in its own test)
                outcome = exc
            marked = [t for t in targets if _marked(t)]
            for t in marked:
                t.unlink()
            results[path] = (outcome, marked)
    return results, (module_sandbox_use.workdirs_left(), module_sandbox_use.processes_left())


@pytest.mark.parametrize("path, mode", list(cases()))
def test_gpu_hostile(path, mode, request, leaves_nothing_behind):
    fields = header(path)
    expected, fragment = expectation(fields, mode)
    assert expected is not Status.OK, "a hostile candidate may never be expected to pass"
    name = fields.get("task", "relu")
    task = request.getfixturevalue("wide_softmax") if name == "wide_softmax" else get_task(name)
    evaluated_in = mode
    if let_through(path):
        evaluated_in = "wall"  # (one evaluation for both modes)
        if ONE_BATCH:
            results, left_by_batch = request.getfixturevalue("batched_outcomes")
            outcome, marked = results[path]
            if isinstance(outcome, Exception):
                raise outcome
            assert marked == [], f"{path.name} wrote {marked}"
            assert left_by_batch == ([], {}), f"the batch left {left_by_batch}"
            _OUTCOMES[(path, name, evaluated_in)] = outcome
    key = (path, name, evaluated_in)
    if key not in _OUTCOMES:
        with FORKED():  # (inside a batch: the candidate's worker forked from its template)
            _OUTCOMES[key] = evaluate(task, path.read_text(), None,
                                      config_for(fields, mode, evaluated_in))
    outcome = _OUTCOMES[key]
    assert outcome.status is expected, f"{outcome.status}: {outcome.message}\n{outcome.details}"
    assert fragment in outcome.message, outcome.message


_OUTCOMES: dict = {}  # (candidate, task, mode evaluated in) -> Outcome


def test_wide_softmax_premise_and_fairness(wide_softmax):
    """The wide softmax task is what tol_*_softmax_wide need: all zeros pass KernelBench's
    tolerance on its outputs, the judge therefore scales it, and a right answer still passes."""
    import numpy as np
    import torch
    from perfgym.backends.torch.tolerance import KERNELBENCH, Judge, judge_for, mismatches
    namespace: dict = {}
    exec(WIDE_SOFTMAX, namespace)
    torch.manual_seed(1)
    ref = namespace["Model"]()(*namespace["get_inputs"]()).numpy()
    flat = ref.reshape(-1)
    plain = Judge(KERNELBENCH["float32"], KERNELBENCH["float32"])
    assert mismatches(np.zeros_like(flat), flat, plain)[0] == 0
    judge = judge_for(ref, "float32")
    assert judge.tightened
    solution = get_task("softmax").expert.read_text()
    o = evaluate(wide_softmax, solution, None, QUICK)
    assert o.ok, o.message + o.details


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
    """A float32 answer computed through half precision: flagged by the static rules, and
    judged at the reference's float32 tolerance, where half's rounding is wrong."""
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
    broken = evaluate(get_task("relu"), (GPU_DIR / "wrong_kernel.py").read_text(), None, QUICK)
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
    code = (GPU_DIR / "_cuda_relu_valid.py").read_text()
    o = evaluate(get_task("relu"), code, None, QUICK)
    assert o.status is Status.RUNTIME_ERROR and "compiles" in o.message
