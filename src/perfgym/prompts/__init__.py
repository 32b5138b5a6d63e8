"""Prompt templates: what a model is asked. Templates are text files with {placeholders};
users can override any of them from a directory of their own."""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from ..backends import backend_for
from ..checks.stages import describe_stage
from ..config import EvalConfig
from ..tasks import Task


def template(name: str, override_dir: Path | None = None) -> str:
    if override_dir and (override_dir / f"{name}.txt").is_file():
        return (override_dir / f"{name}.txt").read_text()
    return resources.files("perfgym.prompts").joinpath("templates", f"{name}.txt").read_text()


def machine_facts(machine: dict[str, Any] | None) -> str:
    if not machine:
        return "an x86-64 or ARM CPU"
    fp = machine.get("fingerprint", machine)
    parts = [f"{fp.get('cpu', 'CPU')}, {fp.get('cores')} cores",
             "ISA: " + " ".join(fp.get("isa", []))]
    if fp.get("caches"):
        parts.append("caches: " + ", ".join(f"{k} {v}" for k, v in fp["caches"].items()))
    if machine.get("peak_gflops"):
        parts.append(f"measured FP64 FMA peak {machine['peak_gflops']:.0f} GFLOP/s")
    if machine.get("bandwidth_gbs"):
        parts.append(f"memory bandwidth {machine['bandwidth_gbs']:.0f} GB/s")
    return "; ".join(parts)


def openmp_example(stage: int | None, override_dir: Path | None = None) -> str:
    """How OpenMP is written (the `openmp` template), where the stage allows OpenMP: at a stage
    that forbids it, words about it invite a violation. perfgym's own says it in words; the
    coder's (`worked_example/`, models.prompt_templates) shows a worked example, which a rule in
    words did not get it to follow (compile 45% -> 73% of its one-shot answers) and which cost
    the 135M model correct answers (20% -> 10%; experiments/prompt_ab/)."""
    if stage is not None and "OpenMP" not in describe_stage(stage)[0]:
        return ""
    return template("openmp", override_dir)


def blocking_example(stage: int | None, override_dir: Path | None = None) -> str:
    """How a blocked loop ends at the array's end (the `blocking` template), at the stages that
    ask for blocking without OpenMP (SQD's 1-3). perfgym's own is empty: its prompts say
    "correct at every size" in words. The coder's shows it: its blocked dgemm kernels ran past
    the arrays at any size their block did not divide (every correct kernel of three no-flag
    searches). Where OpenMP is allowed, the coder's fast answers are parallel loops, and the
    example drew them to blocking instead: one-shot (every technique allowed) its dgemm and
    sgemm answers fell from 69% and 94% correct to 12% and 6% (docs/models/coder.md)."""
    if stage is None or "OpenMP" in describe_stage(stage)[0]:
        return ""
    return template("blocking", override_dir)


def stage_rules(stage: int | None) -> str:
    if stage is None:
        return "Any optimization technique is allowed."
    allowed, forbidden = describe_stage(stage)
    text = f"Optimization stage {stage}: allowed techniques: {', '.join(allowed)}."
    if forbidden:
        text += f" Do NOT use: {', '.join(forbidden)} (a kernel that does is rejected)."
    return text


def compile_line(config: EvalConfig | None, source) -> str:
    """How the harness compiles the kernel, as the prompt states it (the -O level matters: at
    O0 the model must know the compiler will not optimize for it). `source`: the kernel's
    language as the C-family backends build it (backends.c.build.Language)."""
    config = config or EvalConfig()
    return f"{source.compiler(config.compiler)} {' '.join(source.flags(config))}"


def generate_prompt(task: Task, stage: int | None = None, machine: dict | None = None,
                    size: dict[str, int] | None = None, override_dir: Path | None = None,
                    config: EvalConfig | None = None) -> str:
    """The prompt that asks a model for a fast kernel for `task` from scratch."""
    return backend_for(task).prompt(task, "generate", stage=stage, machine=machine, size=size,
                                    override_dir=override_dir, config=config)


OPS = ("generate", "improve", "deepen", "repair", "crossover", "transform")


def transform_names() -> tuple[str, ...]:
    """The textbook transforms a climb step can ask for (prompts/transforms/NAME.txt)."""
    root = resources.files("perfgym.prompts").joinpath("transforms")
    return tuple(sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".txt")))


def transform_text(name: str, override_dir: Path | None = None) -> tuple[str, str]:
    """(title, instructions) of a transform: the file's first line, then the rest. A user's
    templates directory may hold its own transforms/NAME.txt."""
    own = override_dir / "transforms" / f"{name}.txt" if override_dir else None
    text = (own.read_text() if own and own.is_file() else resources.files("perfgym.prompts")
            .joinpath("transforms", f"{name}.txt").read_text())
    title, _, how = text.partition("\n")
    return title.strip(), how


def feedback(outcome: dict[str, Any] | None) -> str:
    """The measured outcome, as a model should read it."""
    if not outcome:
        return "not measured yet"
    status = outcome["status"]
    if status == "OK":
        lines = [f"correct; {outcome.get('message') or ''}".rstrip("; ")]
        if outcome.get("techniques"):
            lines.append("techniques detected: " + ", ".join(outcome["techniques"]))
        return "\n".join(lines + _profile_lines(outcome))
    lines = [f"{status}: {outcome.get('message', '')}"]
    details = (outcome.get("details") or "").strip()
    if details:
        lines += details.splitlines()[:12]
    if status == "STAGE_VIOLATION":  # a small model keeps what it is not told to remove
        lines.append("Remove every use of the technique named above: its pragmas, its calls and "
                     "its header (for OpenMP: every #pragma omp line, omp_* call and "
                     "#include <omp.h>). Keep the rest of the kernel.")
    return "\n".join(lines + _profile_lines(outcome))


def _profile_lines(outcome: dict[str, Any]) -> list[str]:
    """What the profilers measured (EvalConfig.profile; perfgym.profiling), bounded there. A
    multi-size outcome shows the profile of the first size that failed, else of the first."""
    from ..profiling import render
    sizes = outcome.get("per_size") or []
    failed = [s for s in sizes if s.get("status") != "OK"]
    profile = outcome.get("profile") or next(
        (s.get("profile") for s in failed + sizes if s.get("profile")), None)
    lines = [ln for ln in render(profile) if not ln.startswith("[profile]")]
    return ["Profile of this version:", *lines] if lines else []


def expand_prompt(task: Task, op: str, parent_code: str | None = None,
                  parent_outcome: dict[str, Any] | None = None, stage: int | None = None,
                  machine: dict | None = None, size: dict[str, int] | None = None,
                  override_dir: Path | None = None, config: EvalConfig | None = None,
                  second: tuple[str, dict[str, Any] | None] | None = None,
                  transform: str | None = None) -> str:
    """The prompt for one search step: generate from scratch, or improve / deepen / repair a
    parent with its code and measured outcome; crossover shows a `second` parent (code,
    outcome) too; transform asks for one named textbook change of the parent (climb)."""
    if op not in OPS:
        raise ValueError(f"prompt op {op!r} is not one of {', '.join(OPS)}")
    if op == "generate" or parent_code is None:
        return generate_prompt(task, stage, machine, size, override_dir, config)
    other = (second[0], feedback(second[1])) if op == "crossover" and second else None
    extra = {}
    if op == "transform":
        if transform is None:
            raise ValueError("a transform step names its transform")
        extra["transform"] = transform_text(transform, override_dir)
    return backend_for(task).prompt(task, op if other or op != "crossover" else "improve",
                                    parent_code, feedback(parent_outcome), stage=stage,
                                    machine=machine, size=size, override_dir=override_dir,
                                    config=config, second=other, **extra)


# Where a prompt shows memory kernels (the search's --memory): where a model writes a kernel to
# be fast, not where it fixes one that failed.
MEMORY_OPS = ("generate", "improve", "deepen")
MEMORY_CODE_CHARS = 3000  # per kernel: k of them must fit a small model's context


def add_memory(prompt: str, task: Task, kernels: list, override_dir: Path | None = None) -> str:
    """`prompt` with a "verified kernels for similar tasks" section (memory.txt) before its
    last paragraph (the answer format): each kernel with its task, size, measured rate and
    techniques. `kernels`: memory.Kernel records, already chosen for this task."""
    if not kernels:
        return prompt
    from ..tasks import format_size
    fence = getattr(backend_for(task), "fences", ("c",))[0]
    blocks = []
    for k in kernels:
        rate = (f"{k.gflops:.2f} GFLOP/s" if k.gflops is not None else
                f"{k.gbps:.2f} GB/s" if k.gbps is not None else "rate not measured")
        if k.fraction_of_peak is not None:
            rate += f" ({k.fraction_of_peak:.0%} of peak)"
        code = k.code.replace("```", "").strip()  # a fence inside would end the block early
        if len(code) > MEMORY_CODE_CHARS:  # comments go first, then the tail
            from ..extract import strip_comments
            code = "\n".join(ln for ln in strip_comments(code).splitlines() if ln.strip())
        if len(code) > MEMORY_CODE_CHARS:
            code = code[:MEMORY_CODE_CHARS] + "\n/* ... cut */"
        blocks.append(f"\n{k.task} ({k.kind}) at size {format_size(k.size)}: {rate}; "
                      f"techniques: {', '.join(k.techniques) or 'none'}\n"
                      f"```{fence}\n{code}\n```")
    section = template("memory", override_dir).format(kernels="\n".join(blocks)).strip()
    head, sep, last = prompt.rstrip().rpartition("\n\n")
    return f"{head}\n\n{section}\n\n{last}\n" if sep else f"{section}\n\n{prompt}"
