"""perfgym's own textbook rewrites: what they make of the built-in tasks' naive kernels, what
they refuse, and that what they make is right (compiled, checked and timed by the gym)."""
import pytest

from perfgym import EvalConfig, evaluate, get_task
from perfgym.search.rewrites import (LINE_EDITS, LOOP_GATE_TRIPS, MIN_PARALLEL_WORK,
                                     UNREAD_TRIPS, applicable, line_edit, rewrite)

FAST = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)


def naive(name):
    task = get_task(name)
    return task, task.baseline.read_text(), task.signature.name


def squeeze(code: str) -> str:
    return "".join(code.split())


def test_dgemm_sink_sum_is_the_ikj_order_and_omp_outer_threads_its_rows():
    task, code, entry = naive("dgemm")
    ikj = rewrite(code, entry, "sink_sum")
    flat = squeeze(ikj)
    assert "C[i*N+j]=0.0;" in flat
    assert "for(intk=0;k<K;k++)for(intj=0;j<N;j++)C[i*N+j]+=A[i*K+k]*B[k*N+j];" in flat
    threaded = rewrite(ikj, entry, "omp_outer")
    assert squeeze("#pragma omp parallel for\n  for (int i = 0;") in squeeze(threaded)
    # threads only past a work bound (the i-k-j nest's two inner loops add), else as it was
    bound = f"if ((long)(M) * ((N) + (K) * (N)) > {MIN_PARALLEL_WORK})"
    assert squeeze(bound) in squeeze(threaded)
    assert squeeze(ikj.split("{", 1)[1].rsplit("}", 1)[0]) in squeeze(threaded)
    assert threaded.startswith("#include <omp.h>")
    assert rewrite(threaded, entry, "omp_outer") is None  # threads already


def test_a_reduction_gets_its_clause_and_a_scattered_write_no_pragma():
    _, dot, entry = naive("dot")
    assert "reduction(+:sum)" in rewrite(dot, entry, "omp_outer")
    _, hist, entry = naive("histogram")
    made = rewrite(hist, entry, "omp_outer")
    # the zeroing loop is threaded; counts[data[i]]++ is not: two iterations may hit one bin
    assert made.count("#pragma omp parallel for") == 1
    assert squeeze("#pragma omp parallel for\nfor (int b = 0;") in squeeze(made)
    assert squeeze(f"if ((long)(BINS) > {MIN_PARALLEL_WORK})") in squeeze(made)


@pytest.mark.parametrize("code", [
    # a call that may write anything
    "void f(double *x, int n) { for (int i = 0; i < n; i++) g(x, i); }",
    # a scalar declared outside, assigned (not summed)
    "void f(double *x, int n) { double last = 0; for (int i = 0; i < n; i++) last = x[i];"
    " x[0] = last; }",
    # a write through a pointer
    "void f(double *x, int n) { for (int i = 0; i < n; i++) *(x + i) = 1.0; }",
    # a jump out of the loop
    "void f(double *x, int n) { for (int i = 0; i < n; i++) { if (x[i] < 0) break; x[i] = 1; }"
    " }",
])
def test_omp_outer_leaves_a_loop_it_cannot_show_independent(code):
    assert rewrite(code, "f", "omp_outer") is None


def test_sums_into_an_array_at_an_inner_counter_are_reduced_as_a_section():
    """Column sums: the row loop adds every row into s[j]; each thread adds into its own copy
    of s (`reduction(+:s[:M])`), the textbook's fix, where the row loop was left serial."""
    _, code, entry = naive("colsum")
    made = rewrite(code, entry, "omp_outer")
    assert squeeze("#pragma omp parallel for reduction(+:s[:M])\nfor (int i = 0;") in \
        squeeze(made)
    assert squeeze(f"if ((long)(N) * (M) > {MIN_PARALLEL_WORK})") in squeeze(made)
    assert "#pragma omp parallel for reduction(+:s[:M]) if(" in \
        line_edit(code, entry, "omp_outer", gate="work")
    # a scalar sum and an array section in one clause
    both = ("void f(double *a, double *s, double *t, int n, int m) { for (int i = 0; i < n; "
            "i++) for (int j = 0; j < m; j++) { s[j] += a[i * m + j]; t[0] += a[i]; } }")
    assert rewrite(both, "f", "omp_outer") is None  # t[0]: an element, not a section
    both = both.replace("t[0] += a[i];", "total += a[i];").replace(
        "{ for (int i", "{ double total = 0; for (int i").replace("} } }", "} t[0] = total; }")
    assert "reduction(+:total,s[:m])" in rewrite(both, "f", "omp_outer")


@pytest.mark.parametrize("code", [
    # the sums are read inside the loop: a thread would read its own partial sums
    "void f(double *a, double *s, double *t, int n, int m) { for (int i = 0; i < n; i++) {"
    " for (int j = 0; j < m; j++) s[j] += a[i * m + j]; t[i] = s[0]; } }",
    # the index is no inner loop's counter
    "void f(double *a, double *s, int n, int k) { for (int i = 0; i < n; i++) s[k] += a[i]; }",
    # the inner loop's bound names the outer counter (a triangle): no one length
    "void f(double *a, double *s, int n) { for (int i = 0; i < n; i++)"
    " for (int j = 0; j < i; j++) s[j] += a[i * n + j]; }",
    # the inner loop starts past 0
    "void f(double *a, double *s, int n, int m) { for (int i = 0; i < n; i++)"
    " for (int j = 1; j < m; j++) s[j] += a[i * m + j]; }",
    # assigned, not added to: the last iteration's value, not a sum
    "void f(double *a, double *s, int n, int m) { for (int i = 0; i < n; i++)"
    " for (int j = 0; j < m; j++) s[j] = a[i * m + j]; }",
    # subtracted: only + is reduced
    "void f(double *a, double *s, int n, int m) { for (int i = 0; i < n; i++)"
    " for (int j = 0; j < m; j++) s[j] -= a[i * m + j]; }",
    # two lengths of one array
    "void f(double *a, double *s, int n, int m, int p) { for (int i = 0; i < n; i++) {"
    " for (int j = 0; j < m; j++) s[j] += a[j]; for (int k = 0; k < p; k++) s[k] += a[k]; } }",
    # two inner loops of that name: whose bound is the section's, the rule does not guess
    "void f(double *a, double *s, int n, int m) { for (int i = 0; i < n; i++) {"
    " for (int j = 0; j < 4; j++) a[i * m + j] = 0; for (int j = 0; j < m; j++) s[j] += a[j]; }"
    " }",
    # a scatter through data: which elements, no loop says (histogram's counts[data[i]]++)
    "void f(int *d, int *c, int n) { for (int i = 0; i < n; i++) c[d[i]]++; }",
])
def test_an_array_is_reduced_only_where_each_thread_s_copy_gives_the_sum(code):
    assert rewrite(code, "f", "omp_outer") is None


@pytest.mark.parametrize("code", [
    # the store names the inner counter: not one output per outer iteration
    "void f(double *a, double *y, int n) { for (int j = 0; j < n; j++) { double s = 0;"
    " for (int k = 0; k < n; k++) s += a[k]; y[k] = s; } }",
    # the sum reads the output
    "void f(double *a, double *y, int n) { for (int j = 0; j < n; j++) { double s = 0;"
    " for (int k = 0; k < n; k++) s += y[k] * a[j]; y[j] = s; } }",
    # the inner bounds name the outer counter (a triangle)
    "void f(double *a, double *y, int n) { for (int j = 0; j < n; j++) { double s = 0;"
    " for (int k = 0; k < j; k++) s += a[k]; y[j] = s; } }",
])
def test_sink_sum_leaves_a_nest_it_cannot_exchange(code):
    assert rewrite(code, "f", "sink_sum") is None


def test_code_the_parser_cannot_read_gets_no_rewrite():
    assert applicable("template <int N> void f(double *x) { x[0] = N; }", "f") == {}
    assert applicable("void f(double *x) { x[0] = ; }", "f") == {}
    assert applicable("void g(double *x) { for (int i = 0; i < 4; i++) x[i] = 0; }", "f") == {}


@pytest.mark.parametrize("name", ["colsum", "dgemm", "dgemv", "dot", "jacobi2d", "transpose"])
def test_every_rewrite_of_a_naive_kernel_compiles_and_the_gym_judges_it(name):
    """Made by rule, judged like any answer: each compiles and runs; what is wrong is a
    WRONG_ANSWER, never a crash of perfgym's own. At the smallest train size: this is about
    the verdict, not the speed (a threaded 4096x4096 dgemv on this busy 2-core host once ran
    past the 8 s limit)."""
    import math
    task, code, entry = naive(name)
    made = applicable(code, entry)
    assert made, f"no rewrite applies to {name}'s naive kernel"
    size = min(task.sizes("train"), key=lambda s: math.prod(s.values()))
    for rule, new in made.items():
        o = evaluate(task, f"```c\n{new}```", size, FAST)
        assert o.status.value in ("OK", "WRONG_ANSWER"), (rule, o.message)
    if name == "dgemm":
        assert evaluate(task, f"```c\n{made['sink_sum']}```", size, FAST).ok
    if name == "colsum":  # the section reduction, threaded at its smallest train size
        assert evaluate(task, f"```c\n{made['omp_outer']}```", size, FAST).ok


def test_a_model_s_pathological_code_gets_no_rewrite_and_no_crash():
    deep = "void f(double *x) { x[0] = " + "(" * 5000 + "1" + ")" * 5000 + "; }"
    assert applicable(deep, "f") == {}
    long = "void f(double *x) { " + "x[0] = 1; " * 5000 + "}"
    assert applicable(long, "f") == {}


def test_simd_inner_lets_a_sum_vectorize_and_threads_join_it_on_one_loop():
    _, dot, entry = naive("dot")
    lanes = rewrite(dot, entry, "simd_inner")
    assert "#pragma omp simd reduction(+:sum)" in lanes
    both = rewrite(lanes, entry, "omp_outer")
    assert "#pragma omp parallel for simd reduction(+:sum)" in both
    # below the work bound, the loop as it was: lanes, no threads
    assert both.count("#pragma omp simd reduction(+:sum)") == 1
    assert both.count("#pragma") == 2 and both.count("#include <omp.h>") == 1
    assert rewrite(both, entry, "simd_inner") is None  # a pragma there already


@pytest.mark.parametrize("code, bound", [
    ("void f(double *x, int n) { for (int i = 0; i < n; i++) x[i] = 0; }", "(n)"),
    ("void f(double *x, int n, int m) { for (int i = 1; i <= n; i++)"
     " for (int j = 2; j < m; j++) x[i * m + j] = 0; }", "(n - 1 + 1) * (m - 2)"),
    # loops side by side in the body add
    ("void f(double *x, int n, int m) { for (int i = 0; i < n; i++) {"
     " for (int j = 0; j < m; j++) x[i * m + j] = 0;"
     " for (int j = 0; j < 4; j++) x[i * m + j] += 1; } }", "(n) * ((m) + (4))"),
])
def test_threads_start_only_past_the_nest_s_work(code, bound):
    made = rewrite(code, "f", "omp_outer")
    assert f"if ((long){bound} > {MIN_PARALLEL_WORK})" in made and "else" in made


@pytest.mark.parametrize("code, bound", [
    # a triangle: the inner count names the outer counter, which the pragma cannot see
    ("void f(double *x, int n) { for (int i = 0; i < n; i++) for (int j = 0; j < i; j++)"
     " x[i * n + j] = 0; }", f"(n) * {UNREAD_TRIPS}"),
    # CSR rows: the inner count is read from memory
    ("void f(int *p, double *v, double *y, int n) { for (int i = 0; i < n; i++) {"
     " double s = 0; for (int k = p[i]; k < p[i + 1]; k++) s += v[k]; y[i] = s; } }",
     f"(n) * {UNREAD_TRIPS}"),
    # a while loop: no count
    ("void f(double *x, int n) { for (int i = 0; i < n; i++) { int k = i; while (k > 0) k /= 2;"
     " x[i] = k; } }", f"(n) * {UNREAD_TRIPS}"),
    # a loop inside an if, beside a counted one
    ("void f(double *x, int n, int m) { for (int i = 0; i < n; i++) {"
     " for (int j = 0; j < m; j++) x[i * m + j] = 0;"
     " if (x[i] > 0) for (int j = 0; j < m; j++) x[i * m + j] += 1; } }",
     f"(n) * ((m) + {UNREAD_TRIPS})"),
])
def test_an_inner_loop_whose_count_is_unread_counts_a_few_trips(code, bound):
    """One row of a CSR matrix must not start a team (spmv ran at 0.0014x naive at N=1
    threaded unconditionally); thousands of rows still do."""
    made = rewrite(code, "f", "omp_outer")
    assert f"if ((long){bound} > {MIN_PARALLEL_WORK})" in made and "else" in made


def test_a_loop_whose_own_count_is_not_plain_threads_at_every_size():
    # a step other than 1: the outer count has no plain form
    made = rewrite("void f(double *x, int n) { for (int i = 0; i < n; i += 2) x[i] = 0; }",
                   "f", "omp_outer")
    assert "#pragma omp parallel for" in made and "else" not in made


def test_the_work_bound_keeps_a_small_loop_out_of_the_runtime_and_a_large_one_threaded(tmp_path):
    """The rewrite as gcc runs it: which threads ran the loop and whether the OpenMP runtime
    was entered at all, at a size under the bound and one over it, with two threads asked
    for. (The body is made to record its thread after the rewrite: a call is no loop the
    rewrite threads.)"""
    import subprocess
    made = rewrite("void f(int *who, int n) { for (int i = 0; i < n; i++) who[i] = -1; }",
                   "f", "omp_outer")
    made = made.replace("who[i] = -1", "who[i] = omp_in_parallel() ? omp_get_thread_num() : -1")
    (tmp_path / "t.c").write_text(made + """
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]), threads = 0, serial = 0;
    int *who = calloc(n, sizeof(int));
    f(who, n);
    for (int i = 0; i < n; i++) { threads |= who[i] > 0; serial |= who[i] < 0; }
    printf("%d %d\\n", threads, serial);
    return 0;
}""")
    subprocess.run(["gcc", "-O2", "-fopenmp", "-o", tmp_path / "t", tmp_path / "t.c"],
                   check=True)

    def run(n: int) -> str:
        return subprocess.run([tmp_path / "t", str(n)], capture_output=True, text=True,
                              env={"OMP_NUM_THREADS": "2", "OMP_DYNAMIC": "false"}).stdout
    assert run(7).split() == ["0", "1"]  # one thread, outside any parallel region
    assert run(4 * MIN_PARALLEL_WORK).split() == ["1", "0"]  # a team: thread 1 ran some


C_TASKS = ["colsum", "conv2d", "dgemm", "dgemv", "dot", "histogram", "jacobi2d", "pdist",
           "prefix_sum", "sgemm", "spmv", "transpose", "trsm"]


@pytest.mark.parametrize("name", C_TASKS)
def test_a_line_edit_is_the_kernel_s_own_text_with_pragma_lines_added(name):
    """line_edit: the rewrite's pragmas, each one line above its loop at the loop's indent;
    every other line byte for byte as it was (comments too), and no work bound."""
    _, code, entry = naive(name)
    for rule in LINE_EDITS:
        new = line_edit(code, entry, rule)
        if new is None:
            continue
        lines = new.splitlines()
        added = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("#pragma omp")]
        assert [ln for i, ln in enumerate(lines) if i not in added] == code.splitlines()
        for i in added:
            loop = lines[i + 1]
            assert loop.lstrip().startswith("for (")
            assert lines[i][:len(lines[i]) - len(lines[i].lstrip())] == \
                loop[:len(loop) - len(loop.lstrip())]
        assert str(MIN_PARALLEL_WORK) not in new and new.endswith("\n") == code.endswith("\n")


def test_line_edits_thread_what_the_rule_threads_and_nothing_it_refuses():
    _, hist, entry = naive("histogram")
    made = line_edit(hist, entry, "omp_outer")
    assert made.count("#pragma omp parallel for") == 1  # the zeroing loop, not counts[...]++
    assert "#pragma omp parallel for\n    for (int b = 0;" in made
    _, dot, entry = naive("dot")
    assert "#pragma omp parallel for reduction(+:sum)\n" in line_edit(dot, entry, "omp_outer")
    _, jacobi, entry = naive("jacobi2d")
    assert line_edit(jacobi, entry, "omp_outer") is None  # the time loop carries a dependence
    assert line_edit(jacobi, entry, "omp_inner").count("#pragma omp parallel for") == 2
    _, dgemm, entry = naive("dgemm")
    assert line_edit(dgemm, entry, "sink_sum") is None  # not an edit of lines


@pytest.mark.parametrize("code", [
    # the loop does not start its line
    "void f(double *x, int n) { for (int i = 0; i < n; i++) x[i] = 1.0; }",
    # a pragma line above the loop already: never a second one on it
    "void f(double *x, int n) {\n  #pragma omp simd\n  for (int i = 0; i < n; i++)\n"
    "    x[i] = 1.0;\n}\n",
    # a comment before the loop on its line moves the loop's column
    "void f(double *x, int n) {\n  /* a */ for (int i = 0; i < n; i++)\n    x[i] = 1.0;\n}\n",
    # a line continued with a backslash: lines the parser numbers differently
    "void f(double *x, int n) {\n  for (int i = 0; \\\n i < n; i++)\n    x[i] = 1.0;\n}\n",
    # what the rule refuses and what the parser cannot read
    "void f(double *x, int n) {\n  for (int i = 0; i < n; i++)\n    g(x, i);\n}\n",
    "template <int N> void f(double *x) {\n  for (int i = 0; i < N; i++)\n    x[i] = N;\n}\n",
])
def test_a_line_edit_is_refused_where_its_line_is_not_clear(code):
    assert line_edit(code, "f", "omp_outer") is None
    assert line_edit(code, "f", "omp_outer", gate="work") is None


def test_a_line_edit_keeps_comments_tabs_and_the_lines_between():
    code = ("// a kernel\nvoid f(double *x, int n) {\n\t/* zero it\n\t   all */\n"
            "\tfor (int i = 0; i < n; i++)\n\t\tx[i] = 0.0;\n}")
    made = line_edit(code, "f", "omp_outer")
    assert made == code.replace("\tfor (", "\t#pragma omp parallel for\n\tfor (")
    assert line_edit(made, "f", "omp_outer") is None  # threads already


@pytest.mark.parametrize("name", ["dgemv", "jacobi2d"])
def test_line_edits_of_a_naive_kernel_compile_and_are_right(name):
    """Judged like any answer, at the smallest train size (the verdict, not the speed)."""
    import math
    task, code, entry = naive(name)
    size = min(task.sizes("train"), key=lambda s: math.prod(s.values()))
    made = {rule: new for rule in LINE_EDITS if (new := line_edit(code, entry, rule))}
    made["bounded"] = line_edit(code, entry, "omp_inner", gate="work")
    assert len(made) >= 3
    for rule, new in made.items():
        o = evaluate(task, f"```c\n{new}```", size, FAST)
        assert o.ok, (rule, o.message)


def test_a_bounded_line_edit_puts_the_work_bound_in_the_thread_pragma_s_if_clause():
    _, dgemm, entry = naive("dgemm")
    made = line_edit(dgemm, entry, "omp_outer", gate="work")
    assert f"    #pragma omp parallel for if((long)(M) * (N) * (K) > {MIN_PARALLEL_WORK})\n" \
        "    for (int i = 0;" in made
    assert made.count("for (") == dgemm.count("for (")  # one copy of the nest
    assert " if(" not in line_edit(dgemm, entry, "simd_inner", gate="work")
    # a loop whose count has no plain form gets no bound to put there: threaded as it was
    code = "void f(double *x, int n) {\n  for (int i = 0; i < n; i += 2)\n    x[i] = 0.0;\n}\n"
    assert line_edit(code, "f", "omp_outer", gate="work") == line_edit(code, "f", "omp_outer")
    assert line_edit(code, "f", "omp_outer", gate="loop") == line_edit(code, "f", "omp_outer")


def test_a_loop_gate_copies_the_bound_of_the_line_below_it():
    """gate "loop": the threaded loop's own bound as its line writes it, one name a student
    copies from the next line, not the nest's sizes from lines far below."""
    _, dgemm, entry = naive("dgemm")
    made = line_edit(dgemm, entry, "omp_outer", gate="loop")
    assert f"    #pragma omp parallel for if(M > {LOOP_GATE_TRIPS})\n    for (int i = 0;" in made
    assert made.count("for (") == dgemm.count("for (")  # one copy of the nest
    _, jacobi, entry = naive("jacobi2d")
    assert line_edit(jacobi, entry, "omp_inner", gate="loop").count(
        f"#pragma omp parallel for if(N - 1 > {LOOP_GATE_TRIPS})") == 2
    # a loop that starts where the data says (a CSR row) has no bound to copy: no such edit
    _, spmv, entry = naive("spmv")
    assert line_edit(spmv, entry, "omp_inner", gate="work") is not None
    assert line_edit(spmv, entry, "omp_inner", gate="loop") is None
    with pytest.raises(ValueError, match="gate 'size'"):
        line_edit(dgemm, entry, "omp_outer", gate="size")


def test_a_loop_gated_edit_is_right_on_either_side_of_its_gate():
    """dgemv's row loop gated at LOOP_GATE_TRIPS rows: right on either side of the gate."""
    task, code, entry = naive("dgemv")
    made = line_edit(code, entry, "omp_outer", gate="loop")
    for rows in (LOOP_GATE_TRIPS - 1, 4 * LOOP_GATE_TRIPS):
        o = evaluate(task, f"```c\n{made}```", {"M": rows, "N": 300}, FAST)
        assert o.ok, (rows, o.message)


# -- unroll_jam ------------------------------------------------------------------------------

def threaded_ikj():
    _, code, entry = naive("dgemm")
    return rewrite(rewrite(code, entry, "sink_sum"), entry, "omp_outer"), entry


def test_unroll_jam_does_four_rows_of_dgemm_at_once_with_their_reads_in_registers():
    threaded, entry = threaded_ikj()
    flat = squeeze(rewrite(threaded, entry, "unroll_jam"))
    # the threads share out blocks of 4 rows; a block short of 4 runs row by row as before
    assert "#pragmaompparallelforfor(inti0=0;i0<M;i0+=4){if(i0+4<=M){" in flat
    assert "else{for(inti=i0;i<M;i++){for(intj=0;j<N;j++)C[i*N+j]=0.0;" in flat
    # each row's A[i][k] read once before the j loop, B[k][j] once for the 4 rows
    assert ("for(intk=0;k<K;k++){constdoublea0=A[i0*K+k];constdoublea1=A[(i0+1)*K+k];"
            "constdoublea2=A[(i0+2)*K+k];constdoublea3=A[(i0+3)*K+k];"
            "for(intj=0;j<N;j++){constdoubleb0=B[k*N+j];C[i0*N+j]+=a0*b0;"
            "C[(i0+1)*N+j]+=a1*b0;C[(i0+2)*N+j]+=a2*b0;C[(i0+3)*N+j]+=a3*b0;}") in flat
    # the serial copy under the work bound is jammed too, with names of its own
    assert "for(inti0_2=0;i0_2<M;i0_2+=4)" in flat and "constdoublea0_2=A[i0_2*K+k];" in flat
    assert rewrite(rewrite(threaded, entry, "unroll_jam"), entry, "unroll_jam") is None


def test_unroll_jam_gives_each_row_its_own_locals_under_names_the_kernel_does_not_use():
    code = ("void f(double *A, double *x, double *y, int n, int m) { double s0 = 1.0;"
            " for (int i = 0; i < n; i++) { double s = 0; for (int j = 0; j < m; j++)"
            " s += A[i * m + j] * x[j]; y[i] = s + s0; } }")
    flat = squeeze(rewrite(code, "f", "unroll_jam"))
    assert "doubles0_2=0;doubles1=0;doubles2=0;doubles3=0;" in flat
    # x[j], read by every row, once an iteration; A's rows are not the loop's invariants
    assert ("for(intj=0;j<m;j++){constdoublex0=x[j];s0_2+=A[i0*m+j]*x0;"
            "s1+=A[(i0+1)*m+j]*x0;") in flat
    assert "y[i0]=s0_2+s0;y[i0+1]=s1+s0;" in flat


@pytest.mark.parametrize("code", [
    # no loop inside: nothing to jam
    "void f(double *x, int n) { for (int i = 0; i < n; i++) x[i] = 2 * x[i]; }",
    # a sum into one scalar: the rows are not independent
    "void f(double *a, double *out, int n) { double t = 0; for (int i = 0; i < n; i++)"
    " for (int j = 0; j < n; j++) t += a[i * n + j]; out[0] = t; }",
    # a write no row owns
    "void f(int *idx, int *h, int n) { for (int i = 0; i < n; i++)"
    " for (int j = 0; j < n; j++) h[idx[i * n + j]] += 1; }",
    # the inner loop's count names the row (a triangle)
    "void f(double *a, double *y, int n) { for (int i = 0; i < n; i++)"
    " for (int j = 0; j < i; j++) y[i * n + j] = a[j]; }",
    # the inner loop's count is a local of the row (a CSR row)
    "void f(int *p, double *v, double *y, int n) { for (int i = 0; i < n; i++) {"
    " int len = p[i + 1] - p[i]; for (int j = 0; j < len; j++) y[i * n + j] = v[j]; } }",
    # a continue would skip the other rows' statements
    "void f(double *a, double *y, int n) { for (int i = 0; i < n; i++)"
    " for (int j = 0; j < n; j++) { if (a[j] < 0) continue; y[i * n + j] = a[j]; } }",
    # a loop of another step or bound
    "void f(double *a, double *y, int n) { for (int i = 0; i < n; i += 2)"
    " for (int j = 0; j < n; j++) y[i * n + j] = a[j]; }",
    "void f(double *a, double *y, int n) { for (int i = 0; i <= n; i++)"
    " for (int j = 0; j < n; j++) y[i * n + j] = a[j]; }",
    # a counter declared outside the loop
    "void f(double *a, double *y, int n) { int i; for (i = 0; i < n; i++)"
    " for (int j = 0; j < n; j++) y[i * n + j] = a[j]; }",
    # threads over the nest as it is: collapse(2) needs its two loops perfectly nested
    "void f(double *a, double *y, int n) {\n#pragma omp parallel for collapse(2)\n"
    " for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) y[i * n + j] = a[j]; }",
    # threads inside the row
    "void f(double *a, double *y, int n) { for (int i = 0; i < n; i++) {\n"
    "#pragma omp parallel for\n for (int j = 0; j < n; j++) y[i * n + j] = a[j]; } }",
    # a simd pragma that names a row's local, which each row renames
    "void f(double *a, double *y, int n) { for (int i = 0; i < n; i++) { double s = 0;\n"
    "#pragma omp simd reduction(+:s)\n for (int j = 0; j < n; j++) s += a[i * n + j];"
    " y[i] = s; } }",
])
def test_unroll_jam_leaves_a_loop_whose_rows_it_cannot_show_independent(code):
    assert rewrite(code, "f", "unroll_jam") is None


@pytest.mark.parametrize("code", [
    # a read under a condition may be one the kernel never makes: jammed, nothing hoisted
    "void f(double *A, double *B, double *C, int n) { for (int i = 0; i < n; i++)"
    " for (int k = 0; k < n; k++) for (int j = 0; j < n; j++)"
    " if (B[k * n + j] > 0) C[i * n + j] += A[i * n + k]; }",
    "void f(double *A, double *B, double *C, int n) { for (int i = 0; i < n; i++)"
    " for (int k = 0; k < n; k++) for (int j = 0; j < n; j++)"
    " C[i * n + j] += B[k * n + j] > 0 ? A[i * n + k] : 0; }",
    # a read of an array the loop writes: a store may change it
    "void f(double *a, int n) { for (int i = 1; i < n; i++) for (int j = 0; j < n; j++)"
    " a[i * n + j] += a[j] * a[j]; }",
])
def test_unroll_jam_takes_into_registers_only_reads_it_can_show_unchanged(code):
    made = rewrite(code, "f", "unroll_jam")
    assert made is not None and "i0 + 3" in made
    assert "const" not in made


def test_jammed_kernels_are_right_at_every_size_and_a_short_block_of_rows():
    """dgemm's threaded i-k-j kernel and dgemv's naive one, jammed, judged at the train and
    held-out sizes (255 and 97 rows leave a block of 3 and 1): the verdict, not the speed."""
    threaded, entry = threaded_ikj()
    dgemm = get_task("dgemm")
    jam = rewrite(threaded, entry, "unroll_jam")
    for size in dgemm.sizes("train") + dgemm.sizes("heldout"):
        o = evaluate(dgemm, f"```c\n{jam}```", size, FAST)
        assert o.ok, (size, o.message)
    dgemv, code, entry = naive("dgemv")
    jam = rewrite(code, entry, "unroll_jam")
    assert jam is not None and "i0 + 3" in jam
    size = min(dgemv.sizes("train"), key=lambda s: s["M"] * s["N"])
    assert evaluate(dgemv, f"```c\n{jam}```", size, FAST).ok
