"""The C/OpenMP backend: a kernel in C, built by gcc or clang, linked with perfgym's harness
and timed in the sandbox (build.py: build, audit, inputs, run; measure.py: the timed half)."""
from __future__ import annotations

import shutil

from ...checks import check_source, detect_techniques, missing_techniques, stage_violations
from ...checks.source import ALLOWED_HEADERS
from ...checks.stages import STAGES
from ...extract import FormatError, extract_code, normalize
from ...lane import LANE
from ...outcome import Status
from ...tasks import format_size
from .. import Backend, Prepared
from . import build as cbuild
from .measure import measure


class CBackend(Backend):
    language = "c"
    label = "C/OpenMP"
    fences = ("c",)
    separate_baseline = True
    seed_op = "improve"
    source = cbuild.C  # how the kernel's language is built
    headers = ALLOWED_HEADERS  # the system headers a kernel may include

    # what an opened answer includes for the model: memory, math and OpenMP (the kinds of call
    # a kernel may make; intrinsics headers are left out: they tie a kernel to one ISA)
    opening_headers = ("stdlib.h", "string.h", "math.h", "omp.h")

    def answer_start(self, task, stage: int | None = None) -> str:
        # ends on the brace, not after it: the model's own next token is "\n" plus the body's
        # indentation in one piece, which an opening ending in "{\n" would split (measured: the
        # default model then writes #define lines instead of a body)
        headers = self.opening_headers
        if stage is not None and "openmp" not in STAGES[stage]:
            # an opening that includes <omp.h> at a stage that forbids OpenMP invites it (the
            # coder: 22 of 36 answers of an SQD run were STAGE_VIOLATION at stages 1-2)
            headers = tuple(h for h in headers if h != "omp.h")
        includes = "".join(f"#include <{h}>\n" for h in headers)
        return f"```{self.fences[0]}\n{includes}\n{task.entry} {{"

    def signature_problem(self, signature) -> str | None:
        if self.source is cbuild.C and signature.uses_cpp:
            return ("std::vector and std::complex are C++: set language = \"cpp\" or take "
                    "pointers")
        return None

    def extract(self, task, text: str) -> str:
        return extract_code(text, task.signature)

    def key_text(self, task, text: str) -> str:
        try:  # the kernel, so answers that differ only in prose share a verdict
            return normalize(self.extract(task, text))
        except FormatError:
            return normalize(text)

    def prepare(self, task, text, size, config, machine, started, fail):
        try:
            code = self.extract(task, text)
        except FormatError as exc:
            return fail(Status.FORMAT_ERROR, str(exc))

        def stage_failure(found: dict[str, str], built: bool = False):
            broken = (stage_violations(found, config.stage, config.strict_stages)
                      if config.stage is not None else [])
            if built:  # a required technique may show only in the object (OpenMP in a macro)
                broken += missing_techniques(found, task.require)
            return fail(Status.STAGE_VIOLATION, broken[0], "\n".join(broken),
                        techniques=sorted(found)) if broken else None

        if reason := check_source(code, task.forbidden_calls, self.headers):
            return fail(Status.LIBRARY_VIOLATION, reason)
        found = detect_techniques(code)
        if failed := stage_failure(found):
            return failed

        workdir = cbuild.sandbox.make_workdir()
        try:
            with LANE.shared():
                build = cbuild.build(task, code, config, workdir, self.source)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        if not build.ok:
            shutil.rmtree(workdir, ignore_errors=True)
            status = Status.LIBRARY_VIOLATION if build.violation else Status.COMPILE_ERROR
            return fail(status, build.message, "" if build.violation else build.details,
                        techniques=sorted(found))
        # Object-level evidence (OpenMP runtime calls, prefetch instructions) cannot hide in
        # macros.
        found = detect_techniques(code, build.facts.undefined, build.facts.mnemonics)
        if failed := stage_failure(found, built=True):
            shutil.rmtree(workdir, ignore_errors=True)
            return failed
        return Prepared(task, code, size, config, machine, started, sorted(found), workdir,
                        seconds={"build": build.seconds})

    def measure(self, p, fail):  # measure takes the exclusive lane for the timed run only
        return measure(p, fail)

    def cleanup(self, p) -> None:
        if p.workdir is not None and not p.config.extra.get("keep_workdir"):
            shutil.rmtree(p.workdir, ignore_errors=True)

    def prompt(self, task, op: str, parent_code: str | None = None, feedback: str = "",
               stage=None, machine=None, size=None, override_dir=None, config=None,
               second: tuple[str, str] | None = None,
               transform: tuple[str, str] | None = None) -> str:
        from ...prompts import (blocking_example, compile_line, machine_facts, openmp_example,
                                stage_rules, template)
        fields = dict(language=self.label.split("/")[0], fence=self.fences[0],
                      description=task.description, entry=task.entry,
                      size=format_size(size or task.default_size),
                      stage_rules=stage_rules(stage), openmp=openmp_example(stage, override_dir),
                      blocking=blocking_example(stage, override_dir),
                      machine=machine_facts(machine),
                      headers=", ".join(sorted(self.headers)),
                      compile=compile_line(config, self.source))
        if op != "generate":
            fields.update(parent_code=parent_code.strip(), feedback=feedback)
        if second:
            fields.update(other_code=second[0].strip(), other_feedback=second[1])
        if transform:  # (name, how): the one change a climb step asks for
            fields.update(transform_name=transform[0], transform=transform[1].strip())
            # the worked OpenMP example only where OpenMP is the change: the coder copied its
            # matrix-vector loop into dgemm answers asked for a loop order (dropping k)
            if "OpenMP" not in transform[0]:
                fields.update(openmp="", blocking="")
        return template(op, override_dir).format(**fields)

    def describe(self, task) -> list[str]:
        languages = ("C (```c) or C++ (```cpp, or a .cpp file)" if self.source is cbuild.C
                     else "C++ (```cpp)")
        return [f"{task.name} ({task.kind})  {task.directory}",
                f"entry: {task.entry}", f"answers in: {languages}",
                f"FLOPs: {task.flops}   bytes: {task.bytes}   reference: {task.reference}",
                f"verify: {task.verify_mode}, |got-expected| <= {task.atol:g} + "
                f"{task.rtol:g}*{'max' if task.tolerance_scale == 'array' else ''}|expected|",
                *(f"{label} sizes: " + "; ".join(format_size(s) for s in task.sizes(label))
                  for label in ("train", "heldout"))]


BACKEND = CBackend()
