"""The PyTorch backend: KernelBench-format tasks, candidates in Triton, CUDA (load_inline) or,
when allowed, plain PyTorch (protocol.py: static checks and the session; session.py: the
parent's side of the three workers; channel.py: the pipes; tolerance.py: the judge)."""
from __future__ import annotations

from ...outcome import Status
from .. import Backend, Prepared
from .protocol import FormatError, check_statically, extract_python, run_session


class TorchBackend(Backend):
    language = "torch"
    label = "PyTorch/Triton/CUDA, KernelBench format"
    fences = ("python", "py")
    separate_baseline = False  # the session times the reference beside the candidate
    seed_op = "generate"  # the seed is the PyTorch reference, which a model rewrites
    own_flags = ("--allow-torch", "--kernelbench", "--input-budget")
    task_format = "kernelbench"
    baseline_label = "reference"

    def baseline_candidate(self, task, config):
        """The reference itself, renamed ModelNew and judged as plain PyTorch: OK at about 1.0x,
        never a FORMAT_ERROR for lacking ModelNew."""
        from ...tasks.selfcheck import reference_as_candidate
        return reference_as_candidate(task.source), config.replace(require_custom_kernel=False)

    def extract(self, task, text: str) -> str:
        return extract_python(text)

    def key_text(self, task, text: str) -> str:
        try:  # exact: in Python, indentation is meaning
            return self.extract(task, text).rstrip()
        except FormatError:
            return text.rstrip()

    def prepare(self, task, text, size, config, machine, started, fail):
        try:
            code = self.extract(task, text)
        except FormatError as exc:
            return fail(Status.FORMAT_ERROR, str(exc))
        checked = check_statically(code, config, fail)
        if not isinstance(checked, tuple):
            return checked
        audit, device = checked
        return Prepared(task, code, size, config, machine, started,
                        state={"audit": audit, "device": device})

    def measure(self, p, fail):  # the session takes the exclusive lane for its timing only
        return run_session(p.task, p.code, p.config, p.state["audit"], p.state["device"], fail)

    def timeout_field(self) -> str:
        return "torch_timeout"

    def prompt(self, task, op: str, parent_code: str | None = None, feedback: str = "",
               stage=None, machine=None, size=None, override_dir=None, config=None,
               second: tuple[str, str] | None = None) -> str:
        from ...prompts import machine_facts, template
        fields = dict(description=task.description, source=task.source.strip(),
                      machine=machine_facts(machine))
        if op == "generate":
            return template("generate_torch", override_dir).format(**fields)
        name = "repair_torch" if op == "repair" else "improve_torch"
        if op == "crossover" and second:  # the second parent's code as part of the feedback
            feedback += ("\n\nAnother working version to borrow from:\n```python\n"
                         f"{second[0].strip()}\n```\nIt measured: {second[1]}")
        return template(name, override_dir).format(parent_code=parent_code.strip(),
                                                   feedback=feedback, **fields)

    def describe(self, task) -> list[str]:
        return [f"{task.name} (GPU, KernelBench format)  {task.path}"]


BACKEND = TorchBackend()
