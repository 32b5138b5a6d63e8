"""The C++ backend: C++ kernels evaluate through the C pipeline, and the escapes C++ adds
(static initialisers, threads, clocks, files, exceptions, operator new) are refused."""
import shutil

import pytest

from perfgym import evaluate
from perfgym.backends import backend_for
from perfgym.backends.c.build import C, CPP
from perfgym.outcome import Status
from perfgym.tasks import TaskError, load_task

SIZE = {"M": 48, "N": 40, "K": 32}

GOOD = """```cpp
#include <vector>
#include <algorithm>

void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    std::vector<double> row(N);
    for (int i = 0; i < M; i++) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int k = 0; k < K; k++) {
            const double a = A[i * K + k];
            auto axpy = [&](int j) { row[j] += a * B[k * N + j]; };
            for (int j = 0; j < N; j++) axpy(j);
        }
        std::copy(row.begin(), row.end(), C + i * N);
    }
}
```"""


@pytest.fixture(scope="module")
def cpp_dgemm(tmp_path_factory, dgemm):
    directory = tmp_path_factory.mktemp("tasks") / "dgemm_cpp"
    shutil.copytree(dgemm.directory, directory)
    toml = directory / "task.toml"
    text = toml.read_text()
    text = text.replace('name = "dgemm"', 'name = "dgemm_cpp"', 1)
    toml.write_text(text.replace('language = "c"', 'language = "cpp"', 1))
    return load_task(directory)


def kernel(body: str, includes: str = "") -> str:
    return f"```cpp\n{includes}\n{body}\n```"


NAIVE = """void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    %s
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}"""


def run(task, text, fast):
    return evaluate(task, text, SIZE, fast)


@pytest.fixture(params=["a C++ task", "a C task, a ```cpp answer"])
def either(request, cpp_dgemm, dgemm):
    """The C++ rules hold the same for a C++ task and for a C task's C++ answer."""
    return cpp_dgemm if request.param == "a C++ task" else dgemm


def test_the_task_is_served_by_the_cpp_backend(cpp_dgemm):
    assert cpp_dgemm.language == "cpp" and backend_for(cpp_dgemm).label == "C++/OpenMP"


def test_a_cpp_kernel_with_containers_and_lambdas_is_ok(either, fast):
    o = run(either, GOOD, fast)
    assert o.status is Status.OK, o.message + o.details


def test_a_wrong_cpp_kernel_is_caught_at_the_check_call(either, fast):
    o = run(either, GOOD.replace("row[j] += a *", "row[j] -= a *"), fast)
    assert o.status is Status.WRONG_ANSWER and "first input set" in o.message


def test_the_naive_c_kernel_compiles_as_cpp_too(cpp_dgemm, fast):
    o = run(cpp_dgemm, cpp_dgemm.baseline.read_text(), fast)
    assert o.status is Status.OK, o.message


def test_a_cpp_answer_on_a_c_task_is_judged_as_cpp(dgemm, fast):
    from perfgym.backends import backend_for_answer
    assert backend_for_answer(dgemm, GOOD).language == "cpp"
    o = evaluate(dgemm, GOOD, SIZE, fast.replace(compare_baseline=True))
    assert o.status is Status.OK, o.message
    assert o.speedup is not None  # against the task's own C kernel
    # the same code under a ```c fence is C, where <vector> is no header
    as_c = GOOD.replace("```cpp", "```c", 1)
    assert backend_for_answer(dgemm, as_c).language == "c"
    o = evaluate(dgemm, as_c, SIZE, fast)
    assert o.status is Status.LIBRARY_VIOLATION and "<vector>" in o.message
    # the block that defines the entry decides, not a ```cpp snippet before it
    mixed = "```cpp\nint unused;\n```\n" + as_c
    assert backend_for_answer(dgemm, mixed).language == "c"


def test_a_cpp_file_on_a_c_task_from_the_command_line(dgemm, tmp_path):
    import subprocess
    import sys
    source = tmp_path / "k.cpp"
    source.write_text(GOOD.split("\n", 1)[1].rsplit("```", 1)[0])  # the code, no fence
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", str(source), "--task",
                        "dgemm", "--size", "M=48,N=40,K=32", "--json"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert '"status": "OK"' in r.stdout


@pytest.mark.parametrize("header", ["thread", "chrono", "fstream", "iostream", "future",
                                    "atomic", "mutex"])
def test_headers_for_threads_clocks_and_files_are_refused(either, fast, header):
    o = run(either, kernel(NAIVE % "", f"#include <{header}>"), fast)
    assert o.status is Status.LIBRARY_VIOLATION and f"<{header}>" in o.message


def test_a_static_initialiser_is_refused(either, fast):
    # code that would run before the harness: a global whose constructor does work
    body = ("struct Warm { double v; Warm() : v(1.0) { for (int i = 0; i < 1000; i++) v *= 1.0001; } };\n"
            "Warm warm;\n" + NAIVE % "")
    o = run(either, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION, o.message
    assert "init_array" in o.message or "global symbol" in o.message


def test_a_static_object_with_a_destructor_is_refused(either, fast):
    body = ("#include <vector>\nstatic std::vector<double> cache(16);\n" + NAIVE % "")
    o = run(either, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION, o.message


def test_a_function_local_static_memo_is_refused(either, fast):
    # dynamic initialisation of a local static needs the runtime's guard: state across calls
    prologue = "static double *memo = (double *)malloc(sizeof(double) * M * N); (void)memo;"
    o = run(either, kernel(NAIVE % prologue, "#include <cstdlib>"), fast)
    assert o.status is Status.LIBRARY_VIOLATION and "__cxa_guard" in o.message, o.message
    # and one with a destructor registers it with the runtime: refused as well
    prologue = "static std::vector<double> memo(M * N); (void)memo;"
    o = run(either, kernel(NAIVE % prologue, "#include <vector>"), fast)
    assert o.status is Status.LIBRARY_VIOLATION and "__cxa_" in o.message, o.message


def test_an_exception_escaping_the_entry_is_a_runtime_error(either, fast):
    o = run(either, kernel(NAIVE % "if (M > 0) throw 42;"), fast)
    assert o.status is Status.RUNTIME_ERROR and "exception" in o.message, o.message


def test_an_exception_caught_inside_the_kernel_is_fine(cpp_dgemm, fast):
    o = run(cpp_dgemm, kernel(NAIVE % "try { if (M > 0) throw 42; } catch (int) {}"), fast)
    assert o.status is Status.OK, o.message


@pytest.mark.parametrize("operator", [
    "void *operator new(std::size_t n) { return malloc(n); }",
    "void operator delete(void *p) noexcept { free(p); }",
    "void *operator new[](std::size_t n) { return malloc(n); }",
])
def test_replacing_operator_new_or_delete_is_refused(cpp_dgemm, fast, operator):
    o = run(cpp_dgemm, kernel(operator + "\n" + NAIVE % "", "#include <new>\n#include <cstdlib>"),
            fast)
    assert o.status is Status.LIBRARY_VIOLATION and "operator new or delete" in o.message, \
        o.message


def test_a_second_global_function_is_refused(cpp_dgemm, fast):
    body = "double helper(double x) { return x; }\n" + NAIVE % ""
    o = run(cpp_dgemm, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION and "helper" in o.message


C_LINKAGE = 'extern "C" ' + NAIVE % ""


@pytest.mark.parametrize("form", ["extern \"C\" void f(...)", "extern \"C\" { ... }"])
def test_an_entry_with_c_linkage_is_a_correct_cpp_answer(either, fast, form):
    body = C_LINKAGE if form.endswith("f(...)") else 'extern "C" {\n' + NAIVE % "" + "\n}"
    o = run(either, kernel(body), fast)
    assert o.status is Status.OK, o.message + o.details


def test_a_wrong_c_linkage_entry_is_wrong_not_refused(cpp_dgemm, fast):
    o = run(cpp_dgemm, kernel(C_LINKAGE.replace("s += A", "s -= A")), fast)
    assert o.status is Status.WRONG_ANSWER, o.message


def test_a_global_helper_beside_a_c_linkage_entry_is_named(either, fast):
    body = "double helper(double x) { return x; }\n" + C_LINKAGE
    o = run(either, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION, o.message
    assert "helper(double)" in o.message and "only the entry matmul_optimized may" in o.message
    assert "static" in o.message and "_Z" not in o.message, o.message


def test_a_global_helper_beside_a_cpp_entry_is_named_demangled(cpp_dgemm, fast):
    body = "double helper(double x) { return x; }\n" + NAIVE % ""
    o = run(cpp_dgemm, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION and "_Z" not in o.message, o.message
    assert ("global symbol helper(double); only the entry "
            "matmul_optimized(double*, double*, double*, int, int, int) may be global"
            in o.message), o.message


def test_an_entry_with_both_linkages_is_refused(cpp_dgemm, fast):
    body = C_LINKAGE + "\n" + (NAIVE % "").replace("void matmul_optimized(double *A",
                                                   "void matmul_optimized(const double *A")
    o = run(cpp_dgemm, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION and "matmul_optimized" in o.message, o.message


def test_an_entry_with_other_parameter_types_is_named(cpp_dgemm, fast):
    # (the answer's text passes the entry check; C++ mangles the const into the name)
    body = (NAIVE % "").replace("(double *A,", "(const double *A,")
    o = run(cpp_dgemm, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION, o.message
    assert "entry is matmul_optimized(double const*, double*, double*, int, int, int)" \
        in o.message
    assert "the task calls matmul_optimized(double*, double*, double*, int, int, int)" \
        in o.message and "parameter types" in o.message, o.message


def test_an_overload_of_the_entry_is_a_second_global(cpp_dgemm, fast):
    body = ("void matmul_optimized(float *A) { (void)A; }\n" + NAIVE % "")
    o = run(cpp_dgemm, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION, o.message


def test_a_weak_c_name_cannot_replace_a_libc_function(cpp_dgemm, fast):
    # an extern "C" inline definition is weak and unmangled: named clock_gettime it would take
    # libc's place in the harness
    # (its address taken, so the compiler emits it)
    body = ('extern "C" inline int labs_(int x) { return x < 0 ? -x : x; }\n'
            + NAIVE % "int (*volatile f)(int) = labs_; (void)f;")
    o = run(cpp_dgemm, kernel(body), fast)
    assert o.status is Status.LIBRARY_VIOLATION and "labs_" in o.message, o.message


def test_raw_string_and_asm_rules_hold_in_cpp(cpp_dgemm, fast):
    o = run(cpp_dgemm, kernel(NAIVE % 'asm volatile("nop");'), fast)
    assert o.status is Status.LIBRARY_VIOLATION and "assembly" in o.message


def test_openmp_and_simd_are_detected_in_cpp(cpp_dgemm, fast):
    body = NAIVE.replace("    for (int i = 0; i < M; i++)",
                         "    #pragma omp parallel for\n    for (int i = 0; i < M; i++)")
    o = run(cpp_dgemm, kernel(body % ""), fast.replace(stage=1))
    assert o.status is Status.STAGE_VIOLATION and "OpenMP" in o.message + o.details


def test_compiler_choice_maps_to_the_language_driver():
    assert (C.compiler("g++"), CPP.compiler("gcc")) == ("gcc", "g++")
    assert CPP.compiler("clang") == "clang++" and C.compiler("clang++") == "clang"
    assert CPP.compiler("/opt/bin/gcc-12") == "/opt/bin/g++-12"
    assert CPP.compiler("icx") == "icx"


def test_a_c_task_with_cc_gxx_builds_as_c(dgemm, fast):
    o = evaluate(dgemm, dgemm.baseline.read_text(), SIZE, fast.replace(compiler="g++"))
    assert o.status is Status.OK, o.message


def test_an_unknown_language_in_a_task_is_a_clear_error(tmp_path, dgemm):
    directory = tmp_path / "t"
    shutil.copytree(dgemm.directory, directory)
    toml = directory / "task.toml"
    toml.write_text(toml.read_text().replace('language = "c"', 'language = "fortran"', 1))
    with pytest.raises(TaskError, match="language is one of c, cpp"):
        load_task(directory)


def test_prompts_ask_for_cpp_in_a_cpp_block(cpp_dgemm, dgemm):
    from perfgym.prompts import expand_prompt, generate_prompt
    prompt = generate_prompt(cpp_dgemm)
    assert prompt.startswith("Write a fast C++ kernel") and "```cpp code block" in prompt
    assert "g++" in prompt and "-std=gnu++17" in prompt and "vector" in prompt
    improve = expand_prompt(cpp_dgemm, "improve", "void f() {}", {"status": "OK"})
    assert "```cpp\nvoid f() {}" in improve
    assert generate_prompt(dgemm).startswith("Write a fast C kernel")
