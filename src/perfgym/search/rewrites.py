"""Textbook loop rewrites of a C kernel, made by perfgym itself, not by a model.

A climb (search/climb.py) asks the model for one named change of a kernel that works; these
are the same changes written by rule, offered beside the model's answers each round and judged
like them (compiled, checked at every train size, timed; kept only when faster). Why: asked for
a loop order, the coder (1.5B) rewrote dgemm's naive kernel with its loops in the same order 4
times in 4 and, shown the worked OpenMP example, dropped the k loop; the i-k-j order that a
textbook gives is 3.5x naive on a 2-core AVX2 EPYC (6.8x with `omp simd`), 7.9x on a
Xeon. A search that cannot find the textbook is no search; one that
starts from it spends the model's answers on what lies past it.

The rewrites:

- `sink_sum` (loop order): a loop that sums into a local over an inner loop and stores it,

      for (j) { T s = init; for (k) s += E; OUT[idx] = s; }

  becomes the sum added into its outputs with the two loops exchanged,

      for (j) OUT[idx] = init;
      for (k) for (j) OUT[idx] += E;

  when `idx` does not name k, E does not read OUT, and k's bounds do not name j. For dgemm the
  innermost loop then walks C and B with stride 1 (i-k-j).
- `omp_outer` (threads): `#pragma omp parallel for` on each outermost loop of the entry that
  declares its own counter and assigns no variable declared outside it, with a `reduction(+:s)`
  for a scalar it only adds to, and writes array elements only at indices that name its
  counter outside any array read (not `counts[bin]++`), or adds to an array only at an inner
  loop's counter, which it then reduces as a section (column sums' `s[j] += A[i * M + j]`
  under `for (i)`: `reduction(+:s[:M])`, each thread its own copy of `s`, as the prompts'
  OpenMP transform says). Loops nested in a parallel loop are
  left alone. `omp_inner`: the same on the loops directly inside each outermost loop (a
  stencil's sweeps inside its time steps).
- `simd_inner` (an inner loop the compiler vectorizes): `#pragma omp simd` on each innermost
  loop that could take `parallel for` by the same rule, with its reduction clause: gcc -O3
  vectorizes a floating-point sum only when told it may reorder it.

- `unroll_jam` (register blocking): an outermost loop whose iterations are independent (the
  `parallel for` rule, no reduction) with a loop inside, done JAM_ROWS iterations at a time:
  its inner loops run once for the rows together, each statement in them once per row, and
  the rows' tail as before,

      for (i0 = 0; i0 < M; i0 += 4)
        if (i0 + 4 <= M) { for (k) { a0 = A[i0*K+k]; ... for (j) { b0 = B[k*N+j];
                             C[i0*N+j] += a0 * b0; C[(i0+1)*N+j] += a1 * b0; ... } } }
        else for (i = i0; i < M; i++) BODY

  with each read the innermost loop does not change taken into a local before it, and a read
  its rows repeat taken once per iteration: gcc keeps neither in a register itself, since a
  store to C might change A or B, and the jammed nest without them ran at 0.45x the i-k-j
  kernel it came from.

None of them proves its change legal: the gym's check at fresh inputs and every train size is the
judge, as for any answer. A kernel the parser cannot read (C++, macros, GNU extensions) gets
no rewrite.
"""
from __future__ import annotations

import copy
import re
from typing import Callable

MAX_CODE_CHARS = 20_000  # a parent's code is capped at 6,000 (search.engine); past this, none

# types the kernels use that only their headers declare: declared for the parser, not printed
_TYPEDEFS = ("typedef unsigned long size_t; typedef long ptrdiff_t; typedef int int32_t; "
             "typedef long int64_t; typedef unsigned int uint32_t; typedef unsigned long "
             "uint64_t; typedef unsigned char uint8_t; typedef signed char int8_t; "
             "typedef short int16_t; typedef unsigned short uint16_t;\n")


def rewrite(code: str, entry_name: str, name: str) -> str | None:
    """`code` with the rewrite `name` applied, as the whole kernel file (its #include lines
    first), or None where it does not apply or the code does not parse."""
    try:
        return _rewrite(code, entry_name, name)
    except RecursionError:  # a model's expression nested past the parser's stack
        return None


def _rewrite(code: str, entry_name: str, name: str) -> str | None:
    if len(code) > MAX_CODE_CHARS:
        return None
    parsed = _parse(code)
    if parsed is None:
        return None
    includes, ast = parsed
    funcs = [n for n in ast.ext if type(n).__name__ == "FuncDef"
             and n.decl.name == entry_name]
    if len(funcs) != 1:
        return None
    before = _generate(ast)
    if not REWRITES[name](funcs[0]):
        return None
    after = _generate(ast)
    if after == before:
        return None
    if "#pragma omp" in after and not any("<omp.h>" in line for line in includes):
        includes = includes + ["#include <omp.h>"]
    return "\n".join(includes) + ("\n\n" if includes else "") + after.strip() + "\n"


def applicable(code: str, entry_name: str) -> dict[str, str]:
    """Each rewrite that changes `code`, with the code it gives."""
    out = {}
    for name in REWRITES:
        new = rewrite(code, entry_name, name)
        if new is not None:
            out[name] = new
    return out


# The rewrites that only add a pragma above a loop, which `line_edit` writes into a kernel's text
LINE_EDITS = ("omp_outer", "omp_inner", "simd_inner")
# The "loop" gate of line_edit: a thread pragma's `if` clause on its loop's own bound, copied
# from the loop's line (`for (int i = 0; i < N - 1; i++)`: `N - 1`; a loop that starts at
# no literal, as a CSR row's `j = row_ptr[i]`, has no bound to copy). Threads start past
# LOOP_GATE_TRIPS iterations of the threaded loop, whatever its body does. 16, as UNREAD_TRIPS:
# a handful of rows stays on one thread; chosen, not tuned (no run measured another value).
LOOP_GATE_TRIPS = 16
_LOOP_BOUND = re.compile(r"\s*for\s*\(\s*(?:[A-Za-z_]\w*\s+)*[A-Za-z_]\w*\s*=\s*\d+\s*;"
                         r"\s*[A-Za-z_]\w*\s*<\s*([^;=<>][^;]*);")
_PREPROCESSOR = ("#include", "#define", "#if", "#endif", "#else", "#undef")


def line_edit(code: str, entry_name: str, name: str, gate: str | None = None) -> str | None:
    """`code` with the pragmas of the rewrite `name` (one of LINE_EDITS), each written as one
    line above its loop in `code`'s own text, and nothing else changed: no line re-printed and
    one copy of each nest. No `gate`: threads at every size. Where the rewrite bounds a
    threaded loop's work, `gate` "work" writes that bound as the thread pragma's `if(...)`
    clause (`if((long)(M) * (N) * (K) > 32768)`), and "loop" the loop's own bound as it is
    written on the line below the pragma (`if(M > 16)`, LOOP_GATE_TRIPS). None where the
    rewrite does not apply, a loop it threads does not start its line or has a pragma line
    above it, or (gate "loop") a gated loop's line is not `for (... = literal; counter <
    bound; ...)`.

    Why: `rewrite` prints the whole kernel again (its parentheses, braces and casts) and copies
    a threaded nest under a work bound. Trained on such pairs, a 135M student wrote an unseen
    stencil in that shape and got its index wrong in 9 answers of 9, and most ran out of tokens
    in the nest's second copy (docs/training/learning-speed.md). This form is the edit itself.
    The `if` clause is not `rewrite`'s bound (`_versioned`: false, it still enters the OpenMP
    runtime), but without any bound the right stencil edits of the unbounded form's student
    ran at 0.75x naive over the train sizes: 0.08x at the smallest (3 x 50 x 7). And the
    "work" bound names every size of the nest, some from lines far below: trained on it, the
    student wrote stencil3d's as `(long)(NX) * (NY) * (Z)` (no `Z` there) in 11 of 15
    answers, all compile errors. The "loop" gate names one bound, the one on the next line."""
    if gate not in (None, "work", "loop"):
        raise ValueError(f"gate {gate!r}: None, 'work' or 'loop'")
    if name not in LINE_EDITS or len(code) > MAX_CODE_CHARS or "\\\n" in code:
        return None
    from pycparser import c_parser
    from pycparser.c_parser import ParseError

    from ..extract import strip_comments
    lines = code.splitlines()
    # comments blanked and preprocessor lines emptied, never removed: line numbers are kept
    text = "\n".join("" if ln.strip().startswith(_PREPROCESSOR) else ln
                      for ln in strip_comments(code).splitlines())
    if re.search(r"\b(template|class|namespace|__attribute__|__restrict__|asm)\b", text):
        return None
    try:  # _TYPEDEFS is one line: the code's line n is the parse's line n + 1
        ast = c_parser.CParser().parse(_TYPEDEFS + text)
    except (ParseError, AssertionError, IndexError, TypeError, AttributeError, RecursionError):
        return None
    funcs = [n for n in ast.ext if _kind(n) == "FuncDef" and n.decl.name == entry_name]
    if len(funcs) != 1 or not REWRITES[name](funcs[0]):
        return None
    added: dict[int, tuple[int, str]] = {}  # line of the loop -> (its column, the pragma)
    bounds: dict[int, str] = {}  # line of a loop _versioned threads -> its work bound
    for node in _walk_all(funcs[0]):
        threaded = node.iftrue.block_items if _kind(node) == "If" and _kind(node.cond) == "ID" \
            and node.cond.name.endswith(f"> {MIN_PARALLEL_WORK}") else None
        if threaded and len(threaded) == 2 and _kind(threaded[1]) == "For":
            bounds[threaded[1].coord.line - 1] = node.cond.name
        items = node.block_items if _kind(node) == "Compound" else None
        for before, loop in zip(items or [], (items or [])[1:]):
            if _kind(before) == "Pragma" and before.coord is None and _kind(loop) == "For":
                line = loop.coord.line - 1
                # the threaded copy's pragma, not the serial copy's `omp simd`
                if line not in added or "parallel" in before.string:
                    added[line] = (loop.coord.column, before.string)
    if not added:
        return None
    for line, (column, pragma) in sorted(added.items(), reverse=True):
        if not 1 <= line <= len(lines):
            return None  # the parser numbered lines otherwise than the text has them
        at = lines[line - 1]
        indent = at[:len(at) - len(at.lstrip())]
        pragma_above = line > 1 and lines[line - 2].strip().startswith("#pragma")
        if len(indent) != column - 1 or pragma_above:
            return None
        if gate and line in bounds and pragma.startswith("omp parallel"):
            if gate == "work":
                pragma += f" if({bounds[line]})"
            elif written := _LOOP_BOUND.match(at):
                pragma += f" if({written.group(1).strip()} > {LOOP_GATE_TRIPS})"
            else:
                return None
        lines.insert(line - 1, f"{indent}#pragma {pragma}")
    return "\n".join(lines) + ("\n" if code.endswith("\n") else "")


def _parse(code: str):
    from pycparser import c_parser
    from pycparser.c_parser import ParseError

    from ..extract import strip_comments
    text = strip_comments(code)
    includes = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("#include")]
    body = "\n".join(ln for ln in text.splitlines()
                     if not ln.strip().startswith(_PREPROCESSOR))
    if re.search(r"\b(template|class|namespace|__attribute__|__restrict__|asm)\b", body):
        return None
    try:
        ast = c_parser.CParser().parse(_TYPEDEFS + body)
    except (ParseError, AssertionError, IndexError, TypeError, AttributeError):
        return None
    ast.ext = [n for n in ast.ext if type(n).__name__ != "Typedef"
               or n.name not in _TYPEDEFS]
    return includes, ast


def _generate(ast) -> str:
    """C from the tree, with no parentheses the operators' precedence does not need: the
    next prompt shows this code, and the coder, shown `((i * M) + j) - 1` on every line,
    closed one parenthesis too many in 8 answers of 8 (jacobi2d)."""
    from pycparser import c_generator
    return c_generator.CGenerator(reduce_parentheses=True).visit(ast)


# -- the AST's shapes ------------------------------------------------------------------------

def _kind(node) -> str:
    return type(node).__name__


def _loop_var(loop) -> str | None:
    """The counter a `for` declares or assigns in its init (for (int i = 0; ...))."""
    init = loop.init
    if init is None:
        return None
    if _kind(init) == "DeclList" and len(init.decls) == 1:
        return init.decls[0].name
    if _kind(init) == "Assignment" and _kind(init.lvalue) == "ID":
        return init.lvalue.name
    return None


def _names(node) -> set[str]:
    """Every identifier `node` reads or writes."""
    found = set()

    def walk(n):
        if n is None:
            return
        if _kind(n) == "ID":
            found.add(n.name)
        for _, child in n.children():
            walk(child)
    walk(node)
    return found


def _statements(node) -> list:
    if node is None:
        return []
    return list(node.block_items or []) if _kind(node) == "Compound" else [node]


def _block(items: list):
    from pycparser import c_ast
    return c_ast.Compound(items) if len(items) != 1 else items[0]


def _each_statement_list(func, visit: Callable[[list], bool]) -> bool:
    """Calls `visit` with every statement list in `func` (a Compound's items, a loop's body
    made a list) until one returns True; the list may be edited in place."""
    from pycparser import c_ast

    def walk(node) -> bool:
        if node is None:
            return False
        if _kind(node) == "Compound" and node.block_items:
            if visit(node.block_items):
                return True
            return any(walk(n) for n in list(node.block_items))
        if _kind(node) in ("For", "While", "DoWhile"):
            if _kind(node.stmt) != "Compound":  # a lone statement: its list of one
                node.stmt = c_ast.Compound([node.stmt])
                if walk(node.stmt):
                    return True
                if len(node.stmt.block_items) == 1:
                    node.stmt = node.stmt.block_items[0]
                return False
            return walk(node.stmt)
        if _kind(node) == "If":
            return walk(node.iftrue) or walk(node.iffalse)
        return False
    return walk(func.body)


# -- sink_sum --------------------------------------------------------------------------------

def sink_sum(func) -> bool:
    """The first summing loop nest of `func`, as the module's docstring shows; True if made."""
    return _each_statement_list(func, _sink_in)


def _sink_in(items: list) -> bool:
    from pycparser import c_ast
    for at, outer in enumerate(items):
        if _kind(outer) != "For" or (j := _loop_var(outer)) is None:
            continue
        body = _statements(outer.stmt)
        body = [s for s in body if _kind(s) != "Pragma"]
        if len(body) != 3:
            continue
        decl, inner, store = body
        if not (_kind(decl) == "Decl" and decl.init is not None and _kind(inner) == "For"
                and _kind(store) == "Assignment" and store.op == "="
                and _kind(store.rvalue) == "ID" and store.rvalue.name == decl.name
                and _kind(store.lvalue) == "ArrayRef"):
            continue
        s, k = decl.name, _loop_var(inner)
        sums = [x for x in _statements(inner.stmt) if _kind(x) != "Pragma"]
        if (k is None or len(sums) != 1 or _kind(sums[0]) != "Assignment"
                or sums[0].op != "+=" or _kind(sums[0].lvalue) != "ID"
                or sums[0].lvalue.name != s):
            continue
        term, out = sums[0].rvalue, store.lvalue
        out_name = _names(out.name)
        if (k in _names(out.subscript) or j not in _names(out.subscript)
                or out_name & _names(term) or s in _names(term) or s in _names(decl.init)
                or j in _names(inner.init) | _names(inner.cond) | _names(inner.next)):
            continue
        zero = c_ast.For(copy.deepcopy(outer.init), copy.deepcopy(outer.cond),
                         copy.deepcopy(outer.next),
                         c_ast.Assignment("=", copy.deepcopy(out), copy.deepcopy(decl.init)))
        add = c_ast.For(copy.deepcopy(outer.init), copy.deepcopy(outer.cond),
                        copy.deepcopy(outer.next),
                        c_ast.Assignment("+=", copy.deepcopy(out), copy.deepcopy(term)))
        swapped = c_ast.For(copy.deepcopy(inner.init), copy.deepcopy(inner.cond),
                            copy.deepcopy(inner.next), add)
        items[at:at + 1] = [zero, swapped]
        return True
    return False


# -- omp_outer -------------------------------------------------------------------------------

def omp_outer(func) -> bool:
    """`#pragma omp parallel for` on the entry's outermost loops that can take it."""
    if _threaded(func):
        return False  # threads already: not this rewrite's kernel
    return _parallelize(func.body.block_items or [])


def omp_inner(func) -> bool:
    """The same one level in: on the loops directly inside each outermost loop, for a kernel
    whose outer loop carries a dependence (a stencil's time steps)."""
    if _threaded(func):
        return False
    made = False
    for loop in func.body.block_items or []:
        if _kind(loop) == "For":
            if _kind(loop.stmt) != "Compound":
                from pycparser import c_ast
                loop.stmt = c_ast.Compound([loop.stmt])
            made = _parallelize(loop.stmt.block_items or []) or made
    return made


def _threaded(func) -> bool:
    return any(_kind(n) == "Pragma" and "omp parallel" in n.string
               for n in _walk_all(func.body))


def simd_inner(func) -> bool:
    """`#pragma omp simd` on the innermost loops that can take it, with `reduction(+:s)` for a
    scalar they only add to: gcc vectorizes a sum of doubles only when told it may reorder it
    (a dot product's naive loop: one add waits for the last)."""
    made = False

    def visit(items: list) -> bool:
        nonlocal made
        at = 0
        while at < len(items):
            loop = items[at]
            before = items[at - 1] if at else None
            if (_kind(loop) == "For" and _kind(loop.init) == "DeclList"
                    and not any(_kind(n) in ("For", "While", "DoWhile")
                                for n in _walk_all(loop.stmt))
                    and not (before is not None and _kind(before) == "Pragma")):
                clause = _parallel_clause(loop)
                if clause is not None:
                    from pycparser import c_ast
                    items.insert(at, c_ast.Pragma("omp simd" + clause))
                    made, at = True, at + 1
            at += 1
        return False
    _each_statement_list(func, visit)
    return made


def _parallelize(items: list) -> bool:
    made, at = False, 0
    while at < len(items):
        loop = items[at]
        before = items[at - 1] if at else None
        simd = (before is not None and _kind(before) == "Pragma"
                and before.string.startswith("omp simd"))  # one loop: threads and lanes
        if (_kind(loop) == "For" and _kind(loop.init) == "DeclList"
                and (before is None or _kind(before) != "Pragma" or simd)):
            clause = _parallel_clause(loop)
            if clause is not None:
                start = at - 1 if simd else at
                made_items = _versioned(loop, items[start:at + 1],
                                        "omp parallel for" + " simd" * simd + clause)
                items[start:at + 1] = made_items
                made, at = True, start + len(made_items)
                continue
        at += 1
    return made


# Iterations of a loop nest's bodies below which its threads are not started: waking a team
# costs microseconds, and a dot product of 7 elements on two threads ran at 0.003x its serial
# loop (first_search.json). The expert Jacobi uses 16384 points.
MIN_PARALLEL_WORK = 1 << 15
# What an inner loop whose count cannot be read counts for. Threaded at every size, spmv's CSR
# rows ran at 0.0014x naive for one row (first_search.json); counted as one iteration, trsm's
# triangle at 2000x8 (16 million multiply-adds) would stay on one thread. 16: a handful of
# rows stays serial, and a nest of a few thousand rows still reaches the bound.
UNREAD_TRIPS = 16


def _versioned(loop, serial: list, pragma: str) -> list:
    """The loop threaded under `pragma` when its work passes MIN_PARALLEL_WORK, else as it was
    (`serial`: the loop and its simd pragma): `if (work > bound) {threaded} else {serial}`.
    Not the pragma's own if clause: false, it still enters the OpenMP runtime (a team of
    one), and a 5x5 transpose behind it ran at 0.14x naive. An inner loop whose count cannot
    be read counts UNREAD_TRIPS (see `_work`); only a loop whose own count has no plain form
    is threaded at every size."""
    from pycparser import c_ast
    own = {d.name for d in _walk_all(loop) if _kind(d) == "Decl"}
    work = _work(loop, own)
    serial_copy = copy.deepcopy(serial)
    threaded = [c_ast.Pragma(pragma), loop]
    if work is None:
        return threaded
    # the condition as C text: pycparser prints an ID's name as it is
    condition = c_ast.ID(f"(long){work} > {MIN_PARALLEL_WORK}")
    return [c_ast.If(condition, c_ast.Compound(threaded), c_ast.Compound(serial_copy))]


def _work(loop, own: set[str]) -> str | None:
    """The loop's trip count times the work of its body (loops side by side add), as C, from
    bounds the pragma can see (none that name a counter or local of the nest, in `own`); None
    when the loop's own count has no such form. An inner loop whose count cannot be read (a
    triangle's `j < i`, a CSR row's `row_ptr[i + 1]`, a while, a loop inside an if) counts
    UNREAD_TRIPS."""
    trips = _trip_count(loop)
    if trips is None or _names(trips) & own:
        return None
    body = []
    for n in _statements(loop.stmt):
        if _kind(n) == "For":
            body.append(_work(n, own) or str(UNREAD_TRIPS))
        elif any(_kind(m) in ("For", "While", "DoWhile") for m in _walk_all(n)):
            body.append(str(UNREAD_TRIPS))
    count = f"({_generate(trips)})"
    if not body:
        return count
    return f"{count} * " + (body[0] if len(body) == 1 else f"({' + '.join(body)})")


def _trip_count(loop):
    """`B - A` for `for (i = A; i < B; i++)` (`B - A + 1` for <=), None for any other shape."""
    from pycparser import c_ast
    var = _loop_var(loop)
    cond, step = loop.cond, loop.next
    if var is None or _kind(cond) != "BinaryOp" or cond.op not in ("<", "<=") \
            or _kind(cond.left) != "ID" or cond.left.name != var:
        return None
    if not (_kind(step) == "UnaryOp" and step.op in ("p++", "++") and _kind(step.expr) == "ID"
            and step.expr.name == var):
        return None
    start = loop.init.decls[0].init if _kind(loop.init) == "DeclList" else loop.init.rvalue
    if start is None:
        return None
    trips = cond.right
    if not (_kind(start) == "Constant" and start.value == "0"):
        trips = c_ast.BinaryOp("-", trips, start)
    if cond.op == "<=":
        trips = c_ast.BinaryOp("+", trips, c_ast.Constant("int", "1"))
    return trips


# math.h's functions, which write nothing: a loop that calls them can run in parallel
_PURE = {f + suffix for f in ("sqrt", "fabs", "exp", "log", "fmin", "fmax", "sin", "cos",
                              "tan", "pow", "floor", "ceil", "tanh", "erf", "expm1", "log1p",
                              "hypot", "fma", "round", "trunc", "cbrt", "atan", "atan2")
         for suffix in ("", "f")} | {"abs", "min", "max"}


def _walk_all(node):
    yield node
    for _, child in node.children():
        yield from _walk_all(child)


def _parallel_clause(loop) -> str | None:
    """"" or " reduction(+:a,b)" when every variable the loop's body assigns is its own or an
    array element (a scalar declared outside it only added to), else None. An array the body
    only adds to at an inner loop's counter (`s[j] += E` inside `for (int j = 0; j < M; j++)`)
    is reduced as a section, `reduction(+:s[:M])`: each thread adds into its own copy."""
    own = {d.name for d in _walk_all(loop) if _kind(d) == "Decl"}
    counter = _loop_var(loop)
    sums, others, sections, added = set(), set(), {}, []
    for n in _walk_all(loop.stmt):
        target = (n.lvalue if _kind(n) == "Assignment" else n.expr
                  if _kind(n) == "UnaryOp" and n.op in ("p++", "p--", "++", "--") else None)
        if target is not None and _kind(target) == "ArrayRef" \
                and counter not in _direct_names(target.subscript):
            section = _section(loop, n, target, own)
            if section is None:
                return None  # an element other iterations may write too (counts[bin]++)
            name, length = section
            if sections.setdefault(name, length) != length:
                return None
            added.append(target)
        if target is not None and _kind(target) not in ("ArrayRef", "ID"):
            return None  # a write through a pointer: where, the loop cannot tell
        if _kind(n) == "Assignment" and _kind(n.lvalue) == "ID" and n.lvalue.name not in own:
            (sums if n.op == "+=" else others).add(n.lvalue.name)
        elif (_kind(n) == "UnaryOp" and n.op in ("p++", "p--", "++", "--")
              and _kind(n.expr) == "ID" and n.expr.name not in own):
            others.add(n.expr.name)
        elif _kind(n) == "FuncCall" and not (_kind(n.name) == "ID" and n.name.name in _PURE):
            return None  # a call may write anything
        elif _kind(n) in ("Goto", "Return", "Break"):
            return None  # a jump out of a parallel loop is illegal
    if others:
        return None
    # a reduced array is touched only where it is added to: a read elsewhere would see one
    # thread's partial sums
    for name in sections:
        if any(_kind(n) == "ArrayRef" and _kind(n.name) == "ID" and n.name.name == name
               and not any(n is t for t in added) for n in _walk_all(loop.stmt)):
            return None
    clauses = sorted(sums) + [f"{name}[:{length}]" for name, length in sorted(sections.items())]
    return f" reduction(+:{','.join(clauses)})" if clauses else ""


def _section(loop, node, target, own: set[str]) -> tuple[str, str] | None:
    """(array, length) when `node` adds to `target`, `ARRAY[j]`, where ARRAY is declared
    outside `loop` and j is the counter of a loop inside it running from 0 to a bound the
    whole nest shares (`for (int j = 0; j < M; j++)`); else None."""
    adds = (_kind(node) == "Assignment" and node.op == "+=") or \
        (_kind(node) == "UnaryOp" and node.op in ("p++", "++"))
    if not (adds and _kind(target.name) == "ID" and target.name.name not in own
            and _kind(target.subscript) == "ID"):
        return None
    index = target.subscript.name
    loops = [n for n in _walk_all(loop.stmt) if _kind(n) == "For" and _loop_var(n) == index]
    if len(loops) != 1:
        return None  # none, or two loops of that name: which one's bound, the tree would say
    trips = _trip_count(loops[0])
    start = loops[0].init.decls[0].init if _kind(loops[0].init) == "DeclList" else None
    if trips is None or _kind(start) != "Constant" or start.value != "0" \
            or _names(trips) & own:
        return None
    return target.name.name, _generate(trips)


def _direct_names(node) -> set[str]:
    """The identifiers of an index expression outside any array read in it (in x[i] + j: j)."""
    if node is None or _kind(node) == "ArrayRef":
        return set()
    if _kind(node) == "ID":
        return {node.name}
    return set().union(*(_direct_names(c) for _, c in node.children()))


# -- unroll_jam ------------------------------------------------------------------------------

# Rows a jammed loop does at once. dgemm's threaded i-k-j kernel on a 2-core Xeon (AVX-512 and
# AMX), written by hand, ran at 7.83x naive over the train sizes, 9.04x with 2 rows and 9.79x
# with 4 (a row of B loaded once for 4 rows of C), in one run of `perfgym eval --sizes train`;
# this rewrite's 4 rows, 10.42x and 9.83x against 7.73x and 7.54x unjammed, in two runs
JAM_ROWS = 4


def unroll_jam(func) -> bool:
    """Each outermost loop that can take it, jammed as the module's docstring shows; True if
    one was."""
    from pycparser import c_ast
    taken = _names(func) | {d.name for d in _walk_all(func) if _kind(d) == "Decl"}
    element = _element_types(func)
    made = False

    def visit(items: list) -> None:
        nonlocal made
        for at, node in enumerate(items):
            above = items[at - 1] if at else None
            if _kind(node) == "For" and not (  # a pragma over the nest its loops as they are
                    _kind(above) == "Pragma" and re.search(r"collapse|ordered", above.string)):
                jammed = _jammed(node, taken, element)
                if jammed is not None:
                    items[at], made = jammed, True
            elif _kind(node) == "If":
                for branch in ("iftrue", "iffalse"):
                    part = getattr(node, branch)
                    if part is not None and _kind(part) != "Compound":
                        setattr(node, branch, c_ast.Compound([part]))
                    if getattr(node, branch) is not None:
                        visit(getattr(node, branch).block_items or [])
            elif _kind(node) == "Compound":
                visit(node.block_items or [])
    visit(func.body.block_items or [])
    return made


def _jammed(loop, taken: set[str], element: dict[str, list[str]]):
    """`loop` done JAM_ROWS iterations at a time, or None where that is not shown safe: its
    iterations independent by the `parallel for` rule with nothing reduced, a loop inside, no
    inner loop's bounds naming its counter or a local, no `continue` (it would skip the other
    rows) and no pragma but `omp simd` on a loop, naming no local."""
    from pycparser import c_ast
    var, body = _loop_var(loop), _statements(loop.stmt)
    if var is None or _kind(loop.init) != "DeclList" or _trip_count(loop) is None \
            or loop.cond.op != "<" or _parallel_clause(loop) != "":
        return None
    inside = [n for s in body for n in _walk_all(s)]
    fors = [n for n in inside if _kind(n) == "For"]
    counters = {_loop_var(f) for f in fors}
    local = {n.name for n in inside if _kind(n) == "Decl"} - counters
    if not fors or None in counters or any(_kind(n) == "Continue" for n in inside):
        return None
    for f in fors:
        if (_names(f.init) | _names(f.cond) | _names(f.next)) & (local | {var}):
            return None
    for n in inside:
        if _kind(n) == "Pragma" and (not n.string.startswith("omp simd")
                                     or set(re.findall(r"\w+", n.string)) & local):
            return None
    block = _fresh(f"{var}0", taken)
    rows = []  # each row's renames: the counter as block + r, each local its own name
    for r in range(JAM_ROWS):
        row = {var: c_ast.ID(block) if r == 0 else
               c_ast.BinaryOp("+", c_ast.ID(block), c_ast.Constant("int", str(r)))}
        row.update({name: c_ast.ID(_fresh(f"{name}{r}", taken)) for name in sorted(local)})
        rows.append(row)
    jammed = _jam_list(body, rows, taken, element)
    head = copy.deepcopy(loop.init)
    _rename_decl(head.decls[0], block)
    end = loop.cond.right
    rest_init = copy.deepcopy(loop.init)
    rest_init.decls[0].init = c_ast.ID(block)
    rest = c_ast.For(rest_init, copy.deepcopy(loop.cond), copy.deepcopy(loop.next),
                     copy.deepcopy(loop.stmt))
    whole = c_ast.BinaryOp("<=", c_ast.BinaryOp("+", c_ast.ID(block),
                                                c_ast.Constant("int", str(JAM_ROWS))),
                           copy.deepcopy(end))
    return c_ast.For(head, c_ast.BinaryOp("<", c_ast.ID(block), copy.deepcopy(end)),
                     c_ast.Assignment("+=", c_ast.ID(block),
                                      c_ast.Constant("int", str(JAM_ROWS))),
                     c_ast.Compound([c_ast.If(whole, c_ast.Compound(jammed),
                                              c_ast.Compound([rest]))]))


def _jam_list(items: list, rows: list[dict], taken: set[str],
              element: dict[str, list[str]]) -> list:
    """The statements of `items` for every row at once: a loop once, with its body jammed; a
    pragma once; any other statement once per row, renamed to it."""
    from pycparser import c_ast
    out = []
    for s in items:
        if _kind(s) == "For":
            body = _jam_list(_statements(s.stmt), rows, taken, element)
            before = []
            if not any(_kind(n) in ("For", "While", "DoWhile") for b in body
                       for n in _walk_all(b)):
                before, body = _registers(body, _loop_var(s), taken, element)
            at = len(out) - 1 if out and _kind(out[-1]) == "Pragma" else len(out)
            out[at:at] = before  # a pragma stays right above its loop
            out.append(c_ast.For(copy.deepcopy(s.init), copy.deepcopy(s.cond),
                                 copy.deepcopy(s.next), c_ast.Compound(body)))
        elif _kind(s) == "Pragma":
            out.append(copy.deepcopy(s))
        else:
            out.extend(_renamed(copy.deepcopy(s), row) for row in rows)
    return out


def _renamed(node, row: dict):
    """`node` with each identifier `row` names replaced (a declaration's name too)."""
    def pick(n):
        return copy.deepcopy(row[n.name]) if _kind(n) == "ID" and n.name in row else None
    if (new := pick(node)) is not None:
        return new
    _replace(node, pick)
    for n in _walk_all(node):
        if _kind(n) == "Decl" and n.name in row:
            _rename_decl(n, row[n.name].name)
    return node


def _registers(body: list, counter: str | None, taken: set[str],
               element: dict[str, list[str]]) -> tuple[list, list]:
    """(locals to declare before the loop, the body) for an innermost jammed loop: each read of
    a parameter's array at an index the loop does not change, taken once before it, and each
    read the body repeats, taken once per iteration. Only for a body of plain assignments:
    a read under a condition may be one the kernel never makes (past an array's end)."""
    from pycparser import c_ast
    if counter is None or not all(_kind(s) == "Assignment" for s in body) or any(
            _kind(n) in ("TernaryOp", "FuncCall") or (_kind(n) == "BinaryOp"
                                                      and n.op in ("&&", "||"))
            for s in body for n in _walk_all(s)):
        return [], body
    targets = [s.lvalue for s in body]
    written = {t.name.name for t in targets if _kind(t) == "ArrayRef" and _kind(t.name) == "ID"}
    changed = {t.name for t in targets if _kind(t) == "ID"} | {counter} | written
    reads: dict[str, list] = {}
    for s in body:
        for n in _walk_all(s.rvalue) if _kind(s.lvalue) == "ID" else \
                [*_walk_all(s.lvalue.subscript), *_walk_all(s.rvalue)]:
            if _kind(n) == "ArrayRef" and _kind(n.name) == "ID" and n.name.name in element \
                    and n.name.name not in written and _kind(n.subscript) != "ArrayRef":
                reads.setdefault(_generate(n), []).append(n)
    before, first, names, per_array = [], [], {}, {}
    for text, found in reads.items():
        invariant = not _names(found[0].subscript) & changed
        if not invariant and len(found) < 2:
            continue
        array = found[0].name.name
        per_array[array] = per_array.get(array, -1) + 1
        name = names[text] = _fresh(f"{array.lower()}{per_array[array]}", taken)
        decl = _const_decl(name, element[array], copy.deepcopy(found[0]))
        (before if invariant else first).append(decl)
    if not names:
        return [], body

    def pick(n):
        return c_ast.ID(names[_generate(n)]) if _kind(n) == "ArrayRef" \
            and _generate(n) in names and not any(n is t for t in targets) else None
    holder = c_ast.Compound(body)
    _replace(holder, pick)
    return before, first + holder.block_items


def _element_types(func) -> dict[str, list[str]]:
    """Each pointer parameter of `func` with its element's type (`double *A`: A, ["double"])."""
    params = getattr(func.decl.type.args, "params", None) or []
    out = {}
    for p in params:
        if _kind(p) == "Decl" and _kind(p.type) == "PtrDecl" and _kind(p.type.type) == "TypeDecl" \
                and _kind(p.type.type.type) == "IdentifierType":
            out[p.name] = list(p.type.type.type.names)
    return out


def _const_decl(name: str, type_names: list[str], value):
    from pycparser import c_ast
    return c_ast.Decl(name, ["const"], [], [], [],
                      c_ast.TypeDecl(name, ["const"], None, c_ast.IdentifierType(type_names)),
                      value, None)


def _replace(node, pick) -> None:
    """Each node under `node` for which `pick` gives a new one, replaced by it (the rest
    walked into)."""
    from pycparser import c_ast
    for attr in node.__slots__:
        if attr in ("coord", "__weakref__"):
            continue
        value = getattr(node, attr, None)
        if isinstance(value, c_ast.Node):
            new = pick(value)
            if new is not None:
                setattr(node, attr, new)
            else:
                _replace(value, pick)
        elif isinstance(value, list):
            for k, item in enumerate(value):
                if isinstance(item, c_ast.Node):
                    new = pick(item)
                    if new is not None:
                        value[k] = new
                    else:
                        _replace(item, pick)


def _rename_decl(decl, name: str) -> None:
    decl.name = name
    inner = decl.type
    while inner is not None and not hasattr(inner, "declname"):
        inner = getattr(inner, "type", None)
    if inner is not None:
        inner.declname = name


def _fresh(name: str, taken: set[str]) -> str:
    """`name`, or `name_2`, `name_3`... : the first no identifier of the kernel has."""
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name}_{k}"
    taken.add(out)
    return out


REWRITES: dict[str, Callable] = {"sink_sum": sink_sum, "omp_outer": omp_outer,
                                 "omp_inner": omp_inner, "simd_inner": simd_inner,
                                 "unroll_jam": unroll_jam}
