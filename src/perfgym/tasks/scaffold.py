"""`perfgym tasks new NAME`: a task directory that loads and evaluates as it is, to edit."""
from __future__ import annotations

import re
from pathlib import Path

from .spec import TaskError, load_task

TASK_TOML = '''name = "{name}"
language = "c"
kind = "vector"
description = """
y = a * x + y for vectors x and y of N doubles, with a = 2.5 (replace this text: it is the
task statement a model reads). x must not be modified."""
# The C function a candidate must define. Pointer parameters are arrays below; scalar
# parameters are sizes.
entry = "void {name}_optimized(double *x, double *y_in, double *y, int N)"
flops = "2*N"              # a formula of the sizes
bytes = "24*N"             # bytes a kernel must move at least
reference = "2.5 * x + y_in"   # NumPy over the input arrays and sizes, or "reference.py"
baseline = "naive.c"       # speedups are measured against it
expert = "expert.c"        # optional: your own fast version

[arrays.x]
shape = ["N"]
dtype = "float64"
role = "in"                # inputs are drawn uniformly from [low, high)
low = -1.0
high = 1.0

[arrays.y_in]
shape = ["N"]
dtype = "float64"
role = "in"

[arrays.y]
shape = ["N"]
dtype = "float64"
role = "out"               # holds garbage on entry; every element must be written

[sizes]
default = {{ N = 1000000 }}
train = [{{ N = 1000000 }}, {{ N = 999983 }}]
heldout = [{{ N = 1 }}, {{ N = 4000037 }}]

[verify]
mode = "full"              # or "sampled"
rtol = 1e-12
atol = 1e-12
'''

NAIVE_C = '''/* The baseline: written plainly. */
void {name}_optimized(double *x, double *y_in, double *y, int N) {{
    for (int i = 0; i < N; i++)
        y[i] = 2.5 * x[i] + y_in[i];
}}
'''

EXPERT_C = '''/* The expert version: split over threads, vectorized. */
void {name}_optimized(double *x, double *y_in, double *y, int N) {{
#pragma omp parallel for simd schedule(static) if (N > 100000)
    for (int i = 0; i < N; i++)
        y[i] = 2.5 * x[i] + y_in[i];
}}
'''


def scaffold(name: str, parent: Path) -> Path:
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise TaskError(f"task name {name!r} must be lower-case letters, digits and _ "
                        "(it becomes a C identifier)")
    directory = parent / name
    if directory.exists():
        raise TaskError(f"{directory} already exists; choose another name or --dir")
    directory.mkdir(parents=True)
    (directory / "task.toml").write_text(TASK_TOML.format(name=name))
    (directory / "naive.c").write_text(NAIVE_C.format(name=name))
    (directory / "expert.c").write_text(EXPERT_C.format(name=name))
    load_task(directory)  # what we write must load
    return directory
