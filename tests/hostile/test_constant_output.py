"""A task whose reference output does not depend on its inputs rewards a constant: a ModelNew
that works the answer out once, when it is built, and hands it back on every call passes every
trial and is called as fast as an empty function. KernelBench's level2/80_Gemm_Max_Subtract_GELU
is shaped so (a max over a dimension kept at size 1 minus the mean over it: zeros; its issue
#116, and public fixes elsewhere call it a no-op exploit). The session refuses such a task as
the task's fault (TaskError), and
must not refuse a task whose output merely looks constant on one call (a scalar loss, an output
constant but for one element)."""
import textwrap

import pytest

from perfgym import EvalConfig, Status, evaluate
from perfgym.tasks import TaskError
from perfgym.tasks.selfcheck import reference_as_candidate
from perfgym.tasks.torch_task import load_torch_task

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")

PLAIN = EvalConfig(use_cache=False, trials=3, max_time=0.2, max_samples=5, min_samples=3,
                   torch_timeout=60.0, require_custom_kernel=False)


def problem(tmp_path, body: str):
    path = tmp_path / "problem.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
    return load_torch_task(path)


# max over a dimension of size 1 after keepdim, minus the mean over it: zeros, whatever x is
MAX_MINUS_MEAN = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 32)
        def forward(self, x):
            y = self.fc(x).max(dim=1, keepdim=True).values
            return torch.nn.functional.gelu(y - y.mean(dim=1, keepdim=True))
    def get_inputs(): return [torch.randn(16, 64)]
    def get_init_inputs(): return []
    """

# depends on the weights only: the same on every input to one instance
WEIGHTS_ONLY = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(128))
        def forward(self, x):
            return torch.tanh(self.w) + 0.0 * x.sum()
    def get_inputs(): return [torch.randn(256)]
    def get_init_inputs(): return []
    """

ZEROS = """import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros(x.shape[0], 1)
"""

# built once from its own weights, handed back on every call
CACHED = """import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(128))
        self.answer = None
    def forward(self, x):
        if self.answer is None:
            self.answer = torch.tanh(self.w).detach().clone()
        return self.answer
"""


@pytest.mark.parametrize("body,attack", [(MAX_MINUS_MEAN, ZEROS), (WEIGHTS_ONLY, CACHED)],
                         ids=["max_minus_mean_zeros", "weights_only_cached"])
def test_an_input_independent_reference_is_the_tasks_fault(tmp_path, body, attack):
    task = problem(tmp_path, body)
    for code in (attack, reference_as_candidate(task.source)):
        with pytest.raises(TaskError, match="output 0 was the same on all 3 trials"):
            evaluate(task, code, None, PLAIN)


def test_a_second_output_that_is_constant_is_named(tmp_path):
    task = problem(tmp_path, """
        class Model(nn.Module):
            def forward(self, x):
                return x * 2, torch.ones(4) + 0.0 * x.sum()
        def get_inputs(): return [torch.randn(64)]
        def get_init_inputs(): return []
        """)
    with pytest.raises(TaskError, match="output 1 was the same"):
        evaluate(task, reference_as_candidate(task.source), None, PLAIN)


@pytest.mark.parametrize("body", [
    # a scalar loss: one element, so "its own mean" passes on any one call
    """
    class Model(nn.Module):
        def forward(self, a, b): return torch.mean((a - b) ** 2)
    def get_inputs(): return [torch.randn(32, 32), torch.randn(32, 32)]
    def get_init_inputs(): return []
    """,
    # constant but for one element, which follows the input
    """
    class Model(nn.Module):
        def forward(self, x):
            out = torch.ones(1000)
            out[7] = x.sum()
            return out
    def get_inputs(): return [torch.randn(50)]
    def get_init_inputs(): return []
    """,
    # a softmax over 16k columns: every value about 6e-5, yet each follows the input
    """
    class Model(nn.Module):
        def forward(self, x): return torch.softmax(x, dim=1)
    def get_inputs(): return [0.1 * torch.randn(2, 16384)]
    def get_init_inputs(): return []
    """,
], ids=["scalar_loss", "one_element_varies", "wide_softmax"])
def test_an_output_that_follows_its_inputs_is_not_refused(tmp_path, body):
    task = problem(tmp_path, body)
    o = evaluate(task, reference_as_candidate(task.source), None, PLAIN)
    assert o.status is Status.OK, o.message


def test_kernelbench_mode_draws_one_seed_and_is_not_refused(tmp_path):
    """KernelBench's protocol draws every trial from seed 42: the same inputs each time show
    nothing about dependence, so a task there is not refused for it."""
    task = problem(tmp_path, """
        class Model(nn.Module):
            def forward(self, x): return torch.relu(x)
        def get_inputs(): return [torch.randn(512)]
        def get_init_inputs(): return []
        """)
    o = evaluate(task, reference_as_candidate(task.source), None,
                 PLAIN.replace(kernelbench=True, trials=1))
    assert o.status is Status.OK, o.message
