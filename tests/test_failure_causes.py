"""A run's failed answers are counted by cause, with the next step for the most common one."""
from perfgym.report.causes import (CUT_OFF, NO_BLOCK, SIGNATURE, cause, failure_causes, lines,
                                   next_step)


def test_format_errors_say_what_was_wrong_with_the_answer():
    assert cause("FORMAT_ERROR", "no ```c code block defines ...", "Sure! Here it is.") == NO_BLOCK
    assert cause("FORMAT_ERROR", "no ```c code block defines ...",
                 "```c\nvoid f(double *x) {\n  for (;;") == CUT_OFF
    assert cause("FORMAT_ERROR", "the answer does not define void dot_optimized(...)",
                 "```c\nvoid dot(double *x) { }\n```") == SIGNATURE


def test_compile_errors_count_by_their_first_message_not_by_name():
    a = cause("COMPILE_ERROR", "compile error: candidate.c:5:25: error: 'TILE' undeclared "
              "(first use in this function)\nmore", "")
    b = cause("COMPILE_ERROR", "compile error: candidate.c:9:3: error: 'PANEL' undeclared "
              "(first use in this function)", "")
    assert a == b == "compile error: '…' undeclared (first use in this function)"


def test_counts_and_the_next_step_follow_the_most_common_cause():
    failures = [("FORMAT_ERROR", "no ```c code block", "text")] * 3 + [
        ("COMPILE_ERROR", "compile error: c.c:1:1: error: expected ';'", "```c\n```"),
        ("OK", "", "```c\n```")]
    causes = failure_causes(failures)
    assert causes == {NO_BLOCK: 3, "compile error: expected '…'": 1}
    assert "--answer-start" in next_step(causes)
    assert "--algo sqd" in next_step(failure_causes(failures[3:]))
    text = lines(causes)
    assert text[0].split(None, 1) == ["3", NO_BLOCK] and text[-1].startswith("next: ")
    assert next_step(failure_causes([])) is None and lines(failure_causes([])) == []
