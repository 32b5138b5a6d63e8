"""Answers as edits of the kernel in the prompt: SEARCH/REPLACE blocks.

    <<<<<<< SEARCH
        for (int x = 0; x < NX; x++)
    =======
        #pragma omp parallel for
        for (int x = 0; x < NX; x++)
    >>>>>>> REPLACE

A model that adds one pragma to a kernel it was shown need not write the kernel out again.
Small models copy long lines badly: of the 37 answers the trained 135M students of the colsum
run (both arms) wrote to the held-out stencil3d with an `omp parallel` pragma, 35 had changed
the nest's body (its boundary test, its index) and failed, where the pragma alone is right.

Each block's SEARCH lines must match exactly one run of whole lines of the kernel as it stands
after the blocks before it, compared without their leading and trailing whitespace (an
indentation slip is no reason to fail); REPLACE's lines take their place as written. The
result is plain code, judged like any answer. A block that matches nowhere, or in more than
one place, is a format error that says which block and why.
"""
from __future__ import annotations

import difflib
import re

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_COMMENT = re.compile(r"//.*|/\*.*?\*/")  # a comment within one line
MAX_EDITS = 32  # blocks read in one answer


class EditError(ValueError):
    """An answer's edits do not apply to the kernel; the message says which and why."""


def has_edits(text: str) -> bool:
    return any(line.strip() == SEARCH for line in text.splitlines())


def parse_edits(text: str) -> list[tuple[list[str], list[str]]]:
    """(search lines, replace lines) of each block, in order."""
    edits: list[tuple[list[str], list[str]]] = []
    state, search, replace = None, [], []
    for line in text.splitlines():
        mark = line.strip()
        if mark == SEARCH:
            if state is not None:
                raise EditError(f"edit {len(edits) + 1} opens a new SEARCH before its "
                                f"{REPLACE} line")
            state, search, replace = "search", [], []
        elif mark == DIVIDER and state == "search":
            state = "replace"
        elif mark == REPLACE and state == "replace":
            edits.append((search, replace))
            state = None
            if len(edits) > MAX_EDITS:
                raise EditError(f"the answer holds more than {MAX_EDITS} edits, the most that "
                                "are read: send the whole kernel instead")
        elif state == "search":
            search.append(line)
        elif state == "replace":
            replace.append(line)
    if state is not None:
        raise EditError(f"edit {len(edits) + 1} is not closed: end it with a {REPLACE} line")
    return edits


def _matches(lines: list[str], search: list[str]) -> list[int]:
    """Where `search` starts in `lines`, whole lines compared without surrounding spaces."""
    want = [s.strip() for s in search]
    have = [s.strip() for s in lines]
    n = len(want)
    return [i for i in range(len(have) - n + 1) if have[i:i + n] == want]


def apply_edits(kernel: str, text: str) -> str:
    """The kernel with the answer's edits made, one after another."""
    edits = parse_edits(text)
    if not edits:
        raise EditError(f"the answer holds no complete edit ({SEARCH} ... {DIVIDER} ... "
                        f"{REPLACE})")
    lines = kernel.splitlines()
    for k, (search, replace) in enumerate(edits, 1):
        if not any(s.strip() for s in search):
            raise EditError(f"edit {k}'s SEARCH is empty: copy the kernel's lines to change")
        found = _matches(lines, search)
        if not found:
            raise EditError(f"edit {k}'s SEARCH lines are not in the kernel: copy them from "
                            "it exactly")
        if len(found) > 1:
            raise EditError(f"edit {k}'s SEARCH lines match {len(found)} places in the kernel: "
                            "add a line around them that makes them one")
        i = found[0]
        lines[i:i + len(search)] = replace
    return "\n".join(lines) + "\n"


def edits_between(before: str, after: str, body: str | None = None) -> str:
    """SEARCH/REPLACE blocks that turn `before` into `after` (teacher data in this form): one
    block per changed run of lines, each made unique in `before` by the lines around it; a
    pure insertion carries the line it goes before (or after, at the end), and with `body`
    ("loop", or "leaf" for a loop with no loop inside), where that line opens such a loop, the
    loop's body too (`loop_end`). Where those blocks would
    not make `after`, one block replaces the whole kernel. The same kernel: "" (nothing to
    edit)."""
    old, new = before.splitlines(), after.splitlines()
    if old == new:
        return ""
    blocks = []
    ops = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(ops):  # last first: earlier blocks keep their lines
        if tag == "equal":
            continue
        lo, hi, pre, post = i1, i2, [], []
        if lo == hi:  # an insertion: anchor it on a neighbouring line
            if hi < len(old):
                hi = loop_end(old, lo, leaf=body == "leaf") if body else hi + 1
                post = old[lo:hi]
            else:
                lo -= 1
                pre = [old[lo]]
        while len(_matches(old, old[lo:hi])) > 1 or not any(s.strip() for s in old[lo:hi]):
            if hi < len(old):
                post.append(old[hi])
                hi += 1
            elif lo > 0:
                lo -= 1
                pre.insert(0, old[lo])
            else:
                break
        blocks.append((old[lo:hi], pre + new[j1:j2] + post))
    text = _blocks_text(list(reversed(blocks)))
    # blocks widened to be unique can overlap, or an earlier REPLACE can repeat a later
    # SEARCH: then one block, the whole kernel for the whole kernel
    try:
        if apply_edits(before, text).splitlines() == new:
            return text
    except EditError:
        pass
    return _blocks_text([(old, new)])


def no_change(kernel: str, at_loop: bool = False, body: str | None = None) -> str:
    """An edit that changes nothing: its first line that occurs once, for itself (the whole
    kernel where no line does). The edit form's way to hand a kernel back (an answer with no
    edit is no answer). `at_loop`: its first such `for` line where it has one, the line a
    pragma edit anchors on, so the hand-back answers there what a pragma edit would; with
    `body`, that loop's body too, as `edits_between(..., body)` anchors a pragma."""
    lines = kernel.splitlines()
    once = [i for i, x in enumerate(lines) if x.strip() and len(_matches(lines, [x])) == 1]
    loops = [i for i in once if lines[i].lstrip().startswith("for")] if at_loop else []
    if not (loops or once):
        return _blocks_text([(lines, lines)])
    at = (loops or once)[0]
    block = lines[at:loop_end(lines, at, leaf=body == "leaf") if body else at + 1]
    return _blocks_text([(block, block)])


def loop_end(lines: list[str], at: int, most: int = 6, leaf: bool = False) -> int:
    """Where the loop whose `for` line is lines[at] ends: the index after its body's last line
    when the loop spans at most `most` lines, else after its first statement; `at + 1` for a
    line that is no `for`, and (`leaf`) for a loop with another `for` in those lines.

    Why: a pragma edit anchored on the `for` line alone is written before the student has the
    body in view, and a 135M student wrote one loop's pragma on every one-loop kernel
    (`parallel for if(N > 16)`: no reduction on dot, threads on the scan;
    docs/training/learning-speed.md); anchored through the body, its SEARCH lines put `sum +=
    x[i] * y[i];` or the scan's `y[i] = sum;` just above the pragma it writes. `leaf`: anchored
    through whole nests, a probe's student copied stencil3d's nest into SEARCH and broke it."""
    if not lines[at].lstrip().startswith("for"):
        return at + 1
    code = [_COMMENT.sub("", x).rstrip() for x in lines]  # `a; // why` ends a statement
    depth, end = 0, None
    for k in range(at, min(len(lines), at + most)):
        depth += code[k].count("{") - code[k].count("}")
        if depth <= 0 and code[k].endswith((";", "}")):
            end = k + 1
            break
    if end is None:
        end = next((k for k in range(at, len(lines)) if code[k].endswith(";")), at) + 1
    # a nest copied into SEARCH is what the edit form spares the student (probe: 2026-12-04)
    if leaf and any(x.lstrip().startswith("for") for x in lines[at + 1:end]):
        return at + 1
    return end


def _blocks_text(blocks: list[tuple[list[str], list[str]]]) -> str:
    return "\n".join("\n".join([SEARCH, *s, DIVIDER, *r, REPLACE]) for s, r in blocks)


def resolve_answer(text: str, kernel: str) -> tuple[str, str | None]:
    """(what to judge, why the edits did not apply or None): the kernel with the answer's
    edits made when it holds any, else the answer itself (a whole kernel is an answer too).
    Edits that do not apply leave the answer as it is, judged as such: without a kernel of
    its own it is a FORMAT_ERROR."""
    if not has_edits(text):
        return text, None
    try:
        return apply_edits(kernel, text), None
    except EditError as exc:
        return text, str(exc)
