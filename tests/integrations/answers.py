"""Model answers for the dot task, the same in every integration test and in
benchmarks/integrations_compare.py: each is scored through a framework and by `perfgym eval`,
at one small size so a test stays short."""
import json
import subprocess
import sys
from pathlib import Path

TASK = "dot"
SIZE = "N=200000"
LABEL = json.dumps({"task": TASK, "sizes": SIZE})


def answer(body: str) -> str:
    return ("Here is a faster kernel.\n\n```c\n#include <omp.h>\n\n"
            "void dot_optimized(double *x, double *y, double *out, int N) {\n"
            f"{body}}}\n```\n")


ANSWERS = {
    "naive": answer("    double s = 0.0;\n    for (int i = 0; i < N; i++)\n"
                    "        s += x[i] * y[i];\n    out[0] = s;\n"),
    "four_accumulators": answer(
        "    double a = 0, b = 0, c = 0, d = 0;\n    int i = 0;\n"
        "    for (; i + 3 < N; i += 4) {\n        a += x[i] * y[i]; b += x[i+1] * y[i+1];\n"
        "        c += x[i+2] * y[i+2]; d += x[i+3] * y[i+3];\n    }\n"
        "    for (; i < N; i++) a += x[i] * y[i];\n    out[0] = (a + b) + (c + d);\n"),
    "openmp_reduction": answer(
        "    double s = 0.0;\n    #pragma omp parallel for reduction(+:s)\n"
        "    for (int i = 0; i < N; i++)\n        s += x[i] * y[i];\n    out[0] = s;\n"),
    "simd_reduction": answer(
        "    double s = 0.0;\n    #pragma omp simd reduction(+:s)\n"
        "    for (int i = 0; i < N; i++)\n        s += x[i] * y[i];\n    out[0] = s;\n"),
    "wrong_answer": answer("    double s = 0.0;\n    for (int i = 0; i < N; i += 2)\n"
                           "        s += x[i] * y[i];\n    out[0] = s;\n"),
    "compile_error": answer("    double s = 0.0\n    for (int i = 0; i < N; i++)\n"
                            "        s += x[i] * y[i];\n    out[0] = s;\n"),
    "no_code": "I would unroll the loop and use OpenMP, but I cannot write the code now.\n",
    "library_call": answer("    extern double ddot_(int *, double *, int *, double *, int *);\n"
                           "    int one = 1;\n    out[0] = ddot_(&N, x, &one, y, &one);\n"),
}


def eval_reward(name: str, tmp: Path, reward: str = "tiered") -> float:
    """The reward `perfgym eval answer.md --reward R` prints for one answer (cache on)."""
    path = tmp / f"{name}.md"
    path.write_text(ANSWERS[name])
    out = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", str(path), "--task",
                          TASK, "--size", SIZE, "--reward", reward, "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)["reward"]


def fresh_digest() -> None:
    """Hash the evaluator's files again in this process before it scores what `eval_reward`
    just scored: the cache key holds their digest, taken once per process, and a developer
    editing the evaluator while the tests run would otherwise leave the two keys apart."""
    from perfgym.cache import evaluator_digest
    evaluator_digest.cache_clear()
