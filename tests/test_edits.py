"""Edit answers (perfgym.edits): SEARCH/REPLACE blocks of the prompt's kernel, made by perfgym
and then judged like any answer; an edit that does not apply is a format error that says why."""
import pytest

from perfgym import EvalConfig, evaluate
from perfgym.edits import (DIVIDER, MAX_EDITS, REPLACE, SEARCH, EditError, apply_edits,
                           edits_between, no_change, parse_edits, resolve_answer)
from perfgym.tasks import builtin_names, get_task

QUICK = EvalConfig(use_cache=False, compare_baseline=False, timeout=5.0)


def block(search: str, replace: str) -> str:
    return f"{SEARCH}\n{search}\n{DIVIDER}\n{replace}\n{REPLACE}"


def naive(name: str) -> str:
    return get_task(name).baseline.read_text()


def test_a_pragma_added_by_an_edit_is_judged_right_on_the_real_kernel():
    """stencil3d's nest, the one the trained students broke writing it out again: the edit
    adds the pragma alone (indented wrongly, as small models do) and the result is right."""
    kernel = naive("stencil3d")
    answer = "Thread the outer loop:\n```\n" + block(
        "for (int x = 0; x < NX; x++)",
        "#pragma omp parallel for\nfor (int x = 0; x < NX; x++)") + "\n```"
    code, error = resolve_answer(answer, kernel)
    assert error is None
    assert code.count("#pragma omp parallel for") == 1
    assert code.replace("#pragma omp parallel for\n", "").replace(
        "for (int x = 0; x < NX; x++)", "    for (int x = 0; x < NX; x++)") == kernel
    outcome = evaluate(get_task("stencil3d"), code, {"NX": 33, "NY": 17, "NZ": 9}, config=QUICK)
    assert outcome.ok, outcome.message


def test_blocks_apply_in_order_each_to_the_kernel_the_one_before_left():
    kernel = "a\nb\nc\n"
    text = block("b", "B1\nB2") + "\n" + block("B2\nc", "C")
    assert apply_edits(kernel, text) == "a\nB1\nC\n"


@pytest.mark.parametrize("text, says", [
    (block("for (int q = 0; q < 9; q++)", "x"), "edit 1's SEARCH lines are not in the kernel"),
    (block("", "#pragma omp parallel for"), "edit 1's SEARCH is empty"),
    (block("   ", "#pragma omp parallel for"), "edit 1's SEARCH is empty"),
    (f"{SEARCH}\nfor (int x = 0; x < NX; x++)\n{DIVIDER}\nx", "edit 1 is not closed"),
    (f"{SEARCH}\na\n{SEARCH}\nb\n{DIVIDER}\nc\n{REPLACE}", "opens a new SEARCH"),
    ("no edits here, and no kernel either", "holds no complete edit"),
])
def test_an_edit_that_does_not_apply_says_which_and_why(text, says):
    with pytest.raises(EditError, match=says):
        apply_edits(naive("stencil3d"), text)


def test_a_search_matching_two_places_is_refused_not_guessed():
    """jacobi2d's naive kernel has the same `for (int j ...)` line in both sweeps: an edit of
    that line alone could mean either, and perfgym does not pick one."""
    kernel = naive("jacobi2d")
    line = next(x.strip() for x in kernel.splitlines() if x.strip().startswith("for (int j"))
    assert sum(x.strip() == line for x in kernel.splitlines()) >= 2
    with pytest.raises(EditError, match=r"match \d+ places"):
        apply_edits(kernel, block(line, "#pragma omp simd\n" + line))


def test_too_many_blocks_are_refused():
    text = "\n".join(block("a", "a") for _ in range(MAX_EDITS + 1))
    with pytest.raises(EditError, match=f"more than {MAX_EDITS} edits"):
        parse_edits(text)
    assert len(parse_edits("\n".join(block("a", "a") for _ in range(MAX_EDITS)))) == MAX_EDITS


def test_a_whole_kernel_is_still_an_answer_and_a_broken_edit_is_judged_a_format_error():
    kernel = naive("dot")
    whole = "```c\n" + kernel + "```"
    assert resolve_answer(whole, kernel) == (whole, None)
    broken = block("for (int k = 0; k < N; k++)", "x")
    text, error = resolve_answer(broken, kernel)
    assert text == broken and "not in the kernel" in error
    assert evaluate(get_task("dot"), text, config=QUICK).status.value == "FORMAT_ERROR"


def test_what_an_edit_writes_is_checked_like_any_answer():
    """The edits make code, and the code meets the gym's rules: an edit that adds a compiler
    pragma, a system call or a constructor is refused as a whole answer would be."""
    kernel = naive("dot")
    first = kernel.splitlines()[0]
    for added in ('#pragma GCC optimize("O3")', '#include <unistd.h>\nstatic int f(void) '
                  '{ return (int) fork(); }', '__attribute__((constructor)) static void g(void) '
                  '{ }'):
        code, error = resolve_answer(block(first, added + "\n" + first), kernel)
        assert error is None and added in code
        outcome = evaluate(get_task("dot"), code, config=QUICK)
        assert outcome.status.value == "LIBRARY_VIOLATION", outcome.message


@pytest.mark.parametrize("name", builtin_names())
def test_edits_between_two_kernels_make_the_second_from_the_first(name):
    """Teacher data in edit form: from the naive kernel to the expert's, and to the naive
    kernel with a pragma before its first loop; the edits made by perfgym give the target."""
    before = naive(name)
    expert = get_task(name).expert
    targets = [expert.read_text()] if expert and expert.exists() else []
    lines = before.splitlines()
    first_for = next(i for i, x in enumerate(lines) if x.strip().startswith("for"))
    targets.append("\n".join(lines[:first_for] + ["#pragma omp parallel for"]
                             + lines[first_for:]) + "\n")
    for after in targets:
        text = edits_between(before, after)
        assert apply_edits(before, text).splitlines() == after.splitlines()
    # the one-pragma edit is one small block, not the kernel again
    assert len(parse_edits(text)) == 1 and len(text) < len(before)


def test_edits_that_would_not_reproduce_the_target_fall_back_to_one_whole_block():
    """Repeated lines: blocks widened to be unique overlap, so the edits are the whole kernel
    for the whole kernel; that still makes the target."""
    before = "x\nx\nx\n"
    after = "y\nx\nz\n"
    text = edits_between(before, after)
    assert apply_edits(before, text).splitlines() == after.splitlines()
    assert edits_between(before, before) == ""  # nothing to edit


@pytest.mark.parametrize("name", builtin_names())
def test_no_change_hands_the_kernel_back_in_one_small_block(name):
    kernel = naive(name)
    text = no_change(kernel)
    assert apply_edits(kernel, text) == kernel.rstrip("\n") + "\n"
    assert len(parse_edits(text)) == 1 and len(text) < len(kernel)


@pytest.mark.parametrize("name", builtin_names())
def test_no_change_at_the_loop_anchors_on_the_first_loop_line_that_occurs_once(name):
    kernel = naive(name)
    text = no_change(kernel, at_loop=True)
    assert apply_edits(kernel, text) == kernel.rstrip("\n") + "\n"
    ((search, replace),) = parse_edits(text)
    lines = kernel.splitlines()
    first_loop = next(x for x in lines if x.lstrip().startswith("for") and lines.count(x) == 1)
    assert search == replace == [first_loop]


def test_no_change_at_the_loop_of_a_kernel_without_a_loop_is_its_first_line():
    kernel = "int f(void) {\n    return 1;\n}\n"
    assert no_change(kernel, at_loop=True) == no_change(kernel)


def test_no_change_of_a_kernel_whose_every_line_repeats_is_the_whole_kernel():
    kernel = "x;\nx;\n"
    assert apply_edits(kernel, no_change(kernel)) == kernel


def pragma_above_first_loop(kernel: str, pragma: str) -> str:
    lines = kernel.splitlines()
    at = next(i for i, x in enumerate(lines) if x.strip().startswith("for"))
    return "\n".join(lines[:at] + [pragma] + lines[at:]) + "\n"


def test_a_body_anchored_pragma_edit_carries_the_loop_body_the_student_must_read():
    """edits_between(body="loop"): the block of a pragma inserted above a loop holds its
    body, so the reduction's accumulate (dot) and the scan's store (prefix_sum) are written
    in SEARCH before the pragma; without `body` the loop line alone."""
    for name, body in (("dot", ["sum += x[i] * y[i];"]),
                       ("prefix_sum", ["sum += x[i];", "y[i] = sum;", "}"])):
        before = naive(name)
        after = pragma_above_first_loop(before, "#pragma omp simd")
        ((search, replace),) = parse_edits(edits_between(before, after, body="loop"))
        assert [s.strip() for s in search[1:]] == body
        assert replace[0] == "#pragma omp simd" and replace[1:] == search
        assert apply_edits(before, edits_between(before, after, body="loop")) == after
        ((search, _),) = parse_edits(edits_between(before, after))
        assert len(search) == 1 and search[0].lstrip().startswith("for")


@pytest.mark.parametrize("name", builtin_names())
def test_body_anchored_edits_make_the_target_on_every_task(name):
    """Whatever the nest (braces or none, one-line loops, nests longer than a block's cap),
    the body-anchored blocks still make the kernel they were made from, and a hand-back at
    the loop gives the naive kernel back."""
    before = naive(name)
    expert = get_task(name).expert
    targets = [expert.read_text()] if expert and expert.exists() else []
    targets.append(pragma_above_first_loop(before, "#pragma omp parallel for"))
    for body in ("loop", "leaf"):
        for after in targets:
            text = edits_between(before, after, body=body)
            assert apply_edits(before, text).splitlines() == after.splitlines()
        text = no_change(before, at_loop=True, body=body)
        assert apply_edits(before, text) == before.rstrip("\n") + "\n"
        ((search, replace),) = parse_edits(text)
        assert search == replace and search[0].lstrip().startswith("for")


@pytest.mark.parametrize("lines, at, end", [
    (["for (i = 0; i < N; i++)", "    s += x[i];", "y = s;"], 0, 2),  # one statement
    (["for (i = 0; i < N; i++) {", "  a;", "  b;", "}", "c;"], 0, 4),  # a braced body
    (["for (i = 0; i < N; i++) y[i] = 0;", "z;"], 0, 1),  # a loop on one line
    (["for (i...)", "for (j...)", "for (k...)", "  c += a * b;", "d;"], 0, 4),  # a bare nest
    (["for (i...) {", "  for (j...) {", "    a;", "    b;", "    c;", "  }", "}"], 0, 3),
    (["int s = 0;", "for (i...)", "  s++;"], 0, 1),  # not a loop line: itself
    (["for (i...)  // rows", "  s += a[i];  /* sum */", "y = s;"], 0, 2),  # comments
    (["for (i...) { /* all */", "  a; // one", "} // done", "c;"], 0, 3),
])
def test_loop_end_takes_a_short_loop_whole_and_a_long_one_to_its_first_statement(
        lines, at, end):
    """loop_end: past the body's last line for a loop of at most `most` (6) lines, past its
    first statement for a longer one (the second braced nest: 7 lines), the line alone for
    a line that opens no loop; `leaf`: the line alone where a `for` is in what it took."""
    from perfgym.edits import loop_end
    assert loop_end(lines, at) == end
    nest = any(x.lstrip().startswith("for") for x in lines[at + 1:end])
    assert loop_end(lines, at, leaf=True) == (at + 1 if nest else end)


def test_a_leaf_anchor_takes_a_one_loop_body_and_leaves_a_nest_on_its_loop_line():
    """body="leaf": dot's and prefix_sum's single loops are anchored through their bodies as
    with "loop"; a nest (dgemm, stencil3d) keeps its `for` line alone, so no nest is copied
    into SEARCH; dgemv's inner loop, a leaf, takes its accumulate."""
    for name in ("dot", "prefix_sum"):
        before = naive(name)
        after = pragma_above_first_loop(before, "#pragma omp simd")
        assert edits_between(before, after, body="leaf") == edits_between(before, after,
                                                                           body="loop")
    for name in ("dgemm", "stencil3d"):
        before = naive(name)
        after = pragma_above_first_loop(before, "#pragma omp parallel for")
        ((search, _),) = parse_edits(edits_between(before, after, body="leaf"))
        assert len(search) == 1 and search[0].lstrip().startswith("for")
        assert len(parse_edits(edits_between(before, after, body="loop"))[0][0]) > 1
        ((search, _),) = parse_edits(no_change(before, at_loop=True, body="leaf"))
        assert len(search) == 1
    lines = naive("dgemv").splitlines()
    inner = next(i for i, x in enumerate(lines) if x.strip().startswith("for (int j"))
    after = "\n".join(lines[:inner] + ["#pragma omp simd"] + lines[inner:]) + "\n"
    ((search, _),) = parse_edits(edits_between(naive("dgemv"), after, body="leaf"))
    assert [s.strip() for s in search] == [lines[inner].strip(), lines[inner + 1].strip()]
