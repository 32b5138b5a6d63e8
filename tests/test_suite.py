"""The built-in suite: every naive and expert kernel right at its smallest size, wrong variants
caught, reduction tolerances that pass a reordered sum and fail a wrong one."""
import json
import os
import subprocess
import sys

import pytest

from perfgym import EvalConfig, Status, evaluate, get_task, load_task
from perfgym.multisize import aggregate, evaluate_sizes
from perfgym.prompts import generate_prompt
from perfgym.tasks import builtin_names
from perfgym.tasks.scaffold import scaffold

TASKS = builtin_names()


def test_suite_covers_the_kinds():
    assert len(TASKS) >= 12
    kinds = {get_task(n).kind for n in TASKS}
    assert {"dense linear algebra", "stencil", "sparse linear algebra", "reduction", "scan",
            "data movement", "convolution", "pairwise distances", "histogram"} <= kinds


@pytest.mark.parametrize("name", TASKS)
def test_naive_and_expert_are_right(name, fast):
    task = get_task(name)
    assert task.expert is not None
    awkward = [s for s in task.sizes("all") if any(v % 8 for v in s.values())]
    assert awkward, f"{name} needs sizes that are not multiples of 8"
    size = task.sizes("smallest")[0]
    for path in (task.baseline, task.expert):
        o = evaluate(task, path.read_text(), size, fast)
        assert o.ok, f"{path.name} at {size}: {o.message} {o.details}"


def _eval(name, old, new, size, fast):
    task = get_task(name)
    code = task.expert.read_text()
    assert old in code
    return evaluate(task, code.replace(old, new), size, fast)


def test_wrong_dot_float_accumulator_fails(fast):
    """A float accumulator loses digits: outside the tolerance a correct reorder stays inside."""
    task = get_task("dot")
    naive = task.baseline.read_text().replace("double sum = 0.0;", "float sum = 0.0f;")
    o = evaluate(task, naive, {"N": 100003}, fast)
    assert o.status is Status.WRONG_ANSWER and "out[0]" in o.message
    # the parallel, 16-way reordered expert passes at the same size
    assert evaluate(task, task.expert.read_text(), {"N": 100003}, fast).ok


def test_wrong_dot_drops_the_tail(fast):
    o = _eval("dot", "for (long i = (long)N / 16 * 16; i < N; i++)",
              "for (long i = (long)N / 16 * 16; i < N - 1; i++)", {"N": 100003}, fast)
    assert o.status is Status.WRONG_ANSWER


def test_wrong_prefix_sum_exclusive_fails(fast):
    task = get_task("prefix_sum")
    code = task.baseline.read_text().replace("        sum += x[i];\n        y[i] = sum;",
                                             "        y[i] = sum;\n        sum += x[i];")
    assert evaluate(task, code, {"N": 1000}, fast).status is Status.WRONG_ANSWER


def test_wrong_transpose_copy_fails(fast):
    o = _eval("transpose", "B[j * N + i] = A[i * M + j];", "B[i * M + j] = A[i * M + j];",
              {"N": 37, "M": 53}, fast)
    assert o.status is Status.WRONG_ANSWER


def test_wrong_histogram_skips_clearing_fails(fast):
    task = get_task("histogram")
    code = task.baseline.read_text().replace("for (int b = 0; b < BINS; b++) counts[b] = 0;", "")
    assert evaluate(task, code, {"N": 1000, "BINS": 17}, fast).status is Status.WRONG_ANSWER


def test_wrong_stencil_boundary_fails(fast):
    o = _eval("stencil3d", "o[NZ - 1] = c[NZ - 1];", "o[NZ - 1] = 0.0;",
              {"NX": 5, "NY": 6, "NZ": 7}, fast)
    assert o.status is Status.WRONG_ANSWER


def test_trsm_reading_the_upper_triangle_fails(fast):
    """L's upper triangle is NaN: a kernel that multiplies by it is caught."""
    task = get_task("trsm")
    code = task.baseline.read_text().replace("for (int j = 0; j < i; j++)",
                                             "for (int j = 0; j < N; j++) if (j != i)")
    assert evaluate(task, code, {"N": 16, "R": 3}, fast).status is Status.WRONG_ANSWER


def test_spmv_inputs_are_valid_csr():
    import numpy as np
    from perfgym.backends.c.build import make_inputs
    task = get_task("spmv")
    for size in task.sizes("all"):
        if size["N"] * size["R"] > 2_000_000:
            continue
        d = make_inputs(task, size, np.random.default_rng(0))
        rp, ci = d["row_ptr"].astype(np.int64), d["col_idx"]
        assert rp[0] == 0 and rp[-1] == size["N"] * size["R"] and (np.diff(rp) >= 0).all()
        rows = np.repeat(np.arange(size["N"]), np.diff(rp))
        same_row = rows[1:] == rows[:-1]
        assert (np.diff(ci)[same_row] > 0).all() and ci.min() >= 0 and ci.max() < size["N"]


def test_only_right_at_the_training_size_shows(fast):
    """A kernel that assumes its size is right at the default size, wrong elsewhere; the folded
    outcome says so in one line."""
    task = get_task("dgemm")
    code = task.baseline.read_text().replace("for (int k = 0; k < K; k++)",
                                             "for (int k = 0; k < 256; k++)")
    folded = evaluate_sizes(task, code, task.sizes("all")[:3], fast)
    assert folded.status in (Status.WRONG_ANSWER, Status.RUNTIME_ERROR)
    assert folded.message.startswith("1/3 sizes OK")
    assert len(folded.per_size) == 3 and folded.per_size[0]["status"] == "OK"


def test_aggregate_of_all_ok_is_a_geomean(fast):
    task = get_task("dot")
    folded = evaluate_sizes(task, task.expert.read_text(), [{"N": 1000}, {"N": 4001}], fast)
    assert folded.ok and folded.gflops > 0
    rates = [o["gflops"] for o in folded.per_size]
    assert min(rates) <= folded.gflops <= max(rates)
    with pytest.raises(ValueError):
        aggregate([])


def test_a_disturbed_size_makes_the_fold_disturbed():
    from perfgym.outcome import Outcome
    parts = [Outcome(status=Status.OK, task="dot", sizes={"N": n}, gflops=1.0) for n in (1, 7)]
    assert aggregate(parts).disturbed is None
    parts[1].disturbed = "others took the CPU"
    assert aggregate(parts).disturbed == "N=7: others took the CPU"


def test_roofline_fields(fast):
    task = get_task("transpose")
    o = evaluate(task, task.expert.read_text(), {"N": 512, "M": 512}, fast)
    assert o.ok and o.gflops is None and o.gbps > 0
    assert o.bound == "memory" and o.fraction_of_roofline > 0
    dg = get_task("dgemm")
    o = evaluate(dg, dg.expert.read_text(), None, fast)
    assert o.bound == "compute" and 0 < o.fraction_of_roofline <= 1.5


def test_scaffolded_task_evaluates(tmp_path, fast):
    directory = scaffold("my_axpy", tmp_path)
    task = load_task(directory)
    for path in (task.baseline, task.expert):
        assert evaluate(task, path.read_text(), {"N": 1001}, fast).ok


def test_prompt_names_the_entry_and_the_stage_rules():
    task = get_task("spmv")
    prompt = generate_prompt(task, stage=3)
    assert task.entry in prompt and "Do NOT use: OpenMP, prefetch" in prompt
    assert "SIMD" in prompt and "```c" in prompt


def test_how_openmp_is_written_is_said_only_where_the_stage_allows_openmp():
    """perfgym's prompts say it in words; the coder's own show a worked example (what stopped
    most of its compile errors). At a stage that forbids OpenMP neither is shown: it would
    invite a STAGE_VIOLATION."""
    from perfgym.models import prompt_templates
    from perfgym.prompts import expand_prompt
    coder = prompt_templates("coder")
    assert prompt_templates(None) is None and prompt_templates("smollm2") is None
    assert (coder / "openmp.txt").is_file()
    task = get_task("dgemv")
    naive = task.baseline.read_text()
    for op in ("generate", "improve", "deepen", "repair", "crossover"):
        for stage in (None, 4, 6):
            ours = expand_prompt(task, op, naive, None, stage=stage)
            assert "never a pointer" in ours and "#pragma omp" not in ours, op
            worked = expand_prompt(task, op, naive, None, stage=stage, override_dir=coder)
            assert "#pragma omp parallel for reduction(+:total)" in worked, op
            assert "never a pointer" not in worked and "Write the function once" in worked
        for stage in (1, 2, 3):
            for override in (None, coder):
                prompt = expand_prompt(task, op, naive, None, stage=stage, override_dir=override)
                assert "#pragma omp" not in prompt and "reduction" not in prompt, (op, stage)


def test_the_coders_prompts_show_a_blocked_loop_that_ends_at_the_array_end():
    """Every correct kernel of three no-flag coder searches ran past the arrays at a size its
    block did not divide, under a prompt that said "correct at every size" in words: the
    coder's prompts show the bounded loop at the stages that ask for blocking without OpenMP
    (where OpenMP is allowed it drew one-shot answers from parallel loops to wrong blocking);
    perfgym's stay as they were."""
    from perfgym.models import prompt_templates
    from perfgym.prompts import expand_prompt
    coder = prompt_templates("coder")
    task = get_task("dgemm")
    naive = task.baseline.read_text()
    for op in ("generate", "improve", "deepen", "repair", "crossover"):
        for stage in (None, 1, 2, 3, 4, 6):
            worked = expand_prompt(task, op, naive, None, stage=stage, override_dir=coder)
            shown = "i0 + 32 < M ? i0 + 32 : M" in worked
            assert shown == (stage in (1, 2, 3)), (op, stage)
            ours = expand_prompt(task, op, naive, None, stage=stage)
            assert "i0 + 32" not in ours and "\n\n\n\n" not in ours, (op, stage)


def test_prompt_states_the_flags_the_harness_compiles_with():
    """At --opt O0 (the online-RL paper's clearest signal) the model must be told the compiler
    will not optimize for it, and that it may not change the flags itself."""
    task = get_task("dgemm")
    prompt = generate_prompt(task, config=EvalConfig(opt="O0", march="x86-64-v3"))
    assert "compiled with gcc -O0 -march=x86-64-v3 -fopenmp" in prompt
    assert "-O3" not in prompt and "the harness sets the compiler flags" in prompt


def perfgym(*args):
    return subprocess.run([sys.executable, "-m", "perfgym.cli", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200"})


def test_bench_suite_command(tmp_path):
    r = perfgym("bench-suite", "--tasks", "dot,transpose", "--sizes", "smallest", "--out",
                str(tmp_path), "--no-blas")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((tmp_path / "suite.json").read_text())
    assert [row["task"] for row in report["rows"]] == ["dot", "transpose"]
    assert all(row["naive"]["status"] == "OK" and row["expert"]["status"] == "OK"
               for row in report["rows"])
    assert "| dot |" in (tmp_path / "suite.md").read_text()


def test_bench_suite_runs_a_pytorch_tasks_reference_as_its_baseline(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    r = perfgym("bench-suite", "--tasks", "relu", "--out", str(tmp_path), "--no-blas", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads((tmp_path / "suite.json").read_text())["rows"]
    assert row["naive"]["status"] == "OK", row["naive"]["message"]
    assert row["expert"]["status"] == "OK", row["expert"]["message"]


def test_tasks_commands(tmp_path):
    r = perfgym("tasks", "show", "conv2d")
    assert r.returncode == 0 and "conv2d_optimized" in r.stdout and "prompt" in r.stdout
    r = perfgym("tasks", "new", "my_task", "--dir", str(tmp_path))
    assert r.returncode == 0 and (tmp_path / "my_task" / "task.toml").is_file()
    r = perfgym("eval", "--task", str(tmp_path / "my_task"), "--size", "N=999", "--json")
    assert r.returncode == 0 and all(o["status"] == "OK" for o in json.loads(r.stdout))
    r = perfgym("tasks", "new", "my_task", "--dir", str(tmp_path))
    assert r.returncode == 2 and "already exists" in r.stderr
