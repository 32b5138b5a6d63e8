"""Opened answers (perfgym.opening): perfgym writes the fence, includes and the entry's
signature, the model writes the body. What the model writes is judged by the same rules as
any answer, and the part perfgym wrote earns nothing: an empty body is no kernel, and a compile
error of an opened answer pays no more than a format error."""
from __future__ import annotations

import math

import pytest

from perfgym import get_task
from perfgym.evaluate import evaluate
from perfgym.extract import extract_code
from perfgym.opening import STOP, answer_start, closed, full_answer, wrote_code
from perfgym.outcome import Outcome, Status
from perfgym.rewards import SCHEMES, score

DOT_BODY = "\n    double s = 0.0;\n    for (int i = 0; i < N; i++)\n        s += x[i] * y[i];\n" \
           "    out[0] = s;\n}"


@pytest.fixture(scope="module")
def dot():
    return get_task("dot")


def test_the_opening_is_the_fence_includes_and_signature_up_to_the_brace(dot):
    opening = answer_start(dot)
    assert opening.startswith("```c\n#include <")
    # ends on the brace: the model's first token is the newline and indentation in one
    assert opening.endswith(dot.entry + " {")
    assert answer_start(get_task("dgemm")).endswith(get_task("dgemm").entry + " {")


def test_a_cpp_task_opens_a_cpp_fence_with_cpp_headers(tmp_path):
    from perfgym.backends import backend
    cpp = backend("cpp")
    task = get_task("dot")
    opening = cpp.answer_start(task)
    assert opening.startswith("```cpp\n#include <c")
    for header in ("cstdlib", "cstring", "cmath"):  # C++'s names, not C's
        assert f"#include <{header}>\n" in opening
    assert ".h>" not in opening.replace("<omp.h>", "")
    assert all(h in cpp.headers for h in cpp.opening_headers)


def test_a_torch_task_is_not_opened():
    from perfgym.tasks.torch_task import builtin_gpu_names
    assert builtin_gpu_names()
    for name in builtin_gpu_names():
        assert answer_start(get_task(name)) is None


def test_the_c_openings_includes_are_allowed():
    from perfgym.backends import backend
    c = backend("c")
    assert all(h in c.headers for h in c.opening_headers)


def test_a_joined_body_extracts_as_the_entry(dot):
    answer = full_answer(answer_start(dot), DOT_BODY)
    code = extract_code(answer, dot.signature)
    assert code.rstrip().endswith("out[0] = s;\n}")


def test_a_body_that_hit_the_token_limit_is_still_read_and_fails_to_compile(dot, fast):
    cut = DOT_BODY[:40]  # no closing brace: generation stopped at the limit
    outcome = evaluate(dot, full_answer(answer_start(dot), cut), config=fast)
    assert outcome.status is Status.COMPILE_ERROR


@pytest.mark.parametrize("completion", ["\n}", "", "\n    \n}", "\n    /* done; */\n}",
                                        "\n    // nothing to do;\n}",
                                        "\n    ;\n}", "\n    { ; ; }\n}"])
def test_an_empty_body_is_no_kernel(dot, fast, completion):
    # the opening plus "}" would compile (and, for a kernel whose output is pre-zeroed, could
    # even pass): the model wrote no statement, so it is judged as what it wrote alone
    assert not wrote_code(completion)
    outcome = evaluate(dot, full_answer(answer_start(dot), completion), config=fast)
    assert outcome.status is Status.FORMAT_ERROR


def test_a_correct_body_passes(dot, fast):
    outcome = evaluate(dot, full_answer(answer_start(dot), DOT_BODY), config=fast)
    assert outcome.status is Status.OK, outcome.message


# What the model writes after the opening is held to every rule a whole answer is.
@pytest.mark.parametrize("body, status", [
    ("\n    extern double cblas_ddot(int, const double *, int, const double *, int);\n"
     "    out[0] = cblas_ddot(N, x, 1, y, 1);\n}", Status.LIBRARY_VIOLATION),
    ("\n    #pragma GCC optimize(\"O0\")\n    out[0] = 0;\n}", Status.LIBRARY_VIOLATION),
    ("\n    out[0] = 0;\n}\nint main(void) { return 0; }\n", Status.LIBRARY_VIOLATION),
    ("\n    system(\"true\");\n    out[0] = 0;\n}", Status.LIBRARY_VIOLATION),
    ("\n    out[0] = 0.0;\n}", Status.WRONG_ANSWER),
])
def test_the_models_part_is_held_to_the_rules(dot, fast, body, status):
    outcome = evaluate(dot, full_answer(answer_start(dot), body), config=fast)
    assert outcome.status is status, outcome.message


def test_a_second_block_after_the_opened_one_is_judged_as_extraction_says(dot, fast):
    # the model closes the opened block and writes another that defines the entry: the last
    # defining block wins as in any answer, and it is judged (here: wrong)
    body = "\n    out[0] = 1;\n}\n```\nNow better:\n```c\nvoid dot_optimized(double *x, " \
           "double *y, double *out, int N) { out[0] = 2.0; }\n```\n"
    answer = full_answer(answer_start(dot), body)
    assert "out[0] = 2.0" in extract_code(answer, dot.signature)
    assert evaluate(dot, answer, config=fast).status is Status.WRONG_ANSWER


def test_closed_cuts_at_the_entrys_brace_and_restores_a_stripped_one():
    assert closed("\n    a;\n}\n```\nmore text\n}") == "\n    a;\n}"
    # a server that honours `stop` strips it from the reply
    assert closed("\n    a;", server_stopped=True) == "\n    a;" + STOP[0]
    assert closed("\n    a;") == "\n    a;"  # the token limit: left open


def _o(status: Status, **kw) -> Outcome:
    return Outcome(status=status, task="dot", sizes={"N": 1}, **kw)


@pytest.mark.parametrize("scheme", ["tiered", "group_normalized", "log_speedup"])
def test_an_opened_compile_error_earns_no_more_than_a_format_error(scheme):
    group = [_o(Status.FORMAT_ERROR), _o(Status.COMPILE_ERROR),
             _o(Status.OK, gflops=2.0, speedup=1.0)]
    plain = score(scheme, group)
    opened = score(scheme, group, opened=True)
    assert plain[1] > plain[0]  # a whole answer that parsed earned the parse tier
    assert opened[1] == opened[0]  # an opened one did not: perfgym made it parse
    assert opened[2] == plain[2]  # the kernel's own merit is paid as before


def test_the_tiers_past_compiling_are_still_the_models_to_earn():
    group = [_o(s) for s in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.WRONG_ANSWER)]
    rewards = score("tiered", group, opened=True)
    assert rewards[0] < rewards[1] < rewards[2]


def test_weighted_pays_an_opened_empty_body_nothing(dot, fast):
    outcome = evaluate(dot, full_answer(answer_start(dot), "\n}"), config=fast)
    assert score("weighted", [outcome], opened=True) == [0.0]


def test_every_scheme_takes_opened():
    group = [_o(Status.COMPILE_ERROR), _o(Status.OK, gflops=1.0, speedup=1.0)]
    for scheme in SCHEMES:
        assert all(math.isfinite(r) for r in score(scheme, group, opened=True))
