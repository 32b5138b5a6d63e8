"""Take the kernel's code out of a model's answer and check it defines the task's entry."""
from __future__ import annotations

import re

from .tasks.signature import Signature, canonical_type, split_args

_C_LANGS = {"", "c", "cpp", "c++", "cc", "h"}


MAX_BLOCKS = 100  # code blocks read in one answer (each is searched for the entry)


class FormatError(ValueError):
    pass


_FENCE_LANG = re.compile(r"[ \t]*([A-Za-z0-9_+\-]*)")


def fenced_blocks(text: str, most: int | None = None) -> list[tuple[str, str, int]]:
    """(language, body, end) of each ```lang ... ``` block, in order (the first `most`).

    Found with str.find, in time linear in the text: a regex for fences would search on from
    every ``` of a long line (quadratic in what an answer can send)."""
    blocks, pos = [], 0
    while (start := text.find("```", pos)) >= 0 and (most is None or len(blocks) < most):
        newline = text.find("\n", start)
        close = text.find("```", newline + 1) if newline >= 0 else -1
        if close < 0:  # no block closes after this fence, nor after any later one
            break
        lang = _FENCE_LANG.match(text, start + 3).group(1)
        blocks.append((lang, text[newline + 1:close], close + 3))
        pos = close + 3
    return blocks


def extract_code(text: str, signature: Signature) -> str:
    """The code block that defines the entry function; plain C text is taken as it is.

    When an answer holds several fenced blocks, the last C block that defines the entry wins
    (models often show a draft first and the final version last). Two near-misses a reviewer
    would accept are taken too, and still have to compile, pass and be timed like any answer:
    a last block whose closing fence never came (the answer hit its token limit or just
    stopped), and the entry's exact parameter list under another function name (renamed).
    """
    fenced = fenced_blocks(text, most=MAX_BLOCKS + 1)
    if len(fenced) > MAX_BLOCKS:
        raise FormatError(f"the answer holds more than {MAX_BLOCKS} code blocks, the most that "
                          "are read: send the kernel in one")
    blocks = [(lang.lower(), body) for lang, body, _ in fenced]
    tail = _unterminated_block(text, fenced[-1][2] if fenced else 0)
    if tail is not None:
        blocks.append(tail)
    if blocks:
        c_blocks = [body for lang, body in blocks if lang in _C_LANGS]
        defining = [b for b in c_blocks if defines_entry(b, signature)]
        if defining:
            return defining[-1]
        renamed = [r for r in (rename_entry(b, signature) for b in c_blocks) if r]
        if renamed:
            return renamed[-1]
        raise FormatError(f"no ```c code block defines {signature.c_decl()}")
    if defines_entry(text, signature):
        return text
    if renamed := rename_entry(text, signature):
        return renamed
    raise FormatError(f"the answer does not define {signature.c_decl()}")


def _unterminated_block(text: str, after: int) -> tuple[str, str] | None:
    """(language, body) of a fence opened after the last closed block (ending at `after`) and
    never closed."""
    rest = text[after:]
    start = rest.find("```")
    newline = rest.find("\n", start) if start >= 0 else -1
    if newline < 0 or "```" in rest[newline + 1:]:
        return None
    return _FENCE_LANG.match(rest, start + 3).group(1).lower(), rest[newline + 1:]


# (possessive blanks, and a return type that ends on a word: a run of blanks is read once)
_DEFINITION = re.compile(r"(?m)^[ \t]*+(static\s++)?(?:inline\s++)?([A-Za-z_](?:[\w \t]*?\w)?)"
                         r"\s++([A-Za-z_]\w*+)\s*+\(([^()]*+)\)\s*+\{")


def rename_entry(code: str, signature: Signature) -> str | None:
    """The code with its one function of the entry's return type and parameter list renamed to
    the entry (`int matmul(...)` for `matmul_optimized`), or None when there is not exactly
    one such function or the entry's name is already taken."""
    bare = strip_comments(code)
    if re.search(r"\b" + re.escape(signature.name) + r"\b", bare):
        return None
    matches = {m.group(3) for m in _DEFINITION.finditer(bare)
               if not m.group(1) and m.group(2).split()[-1] == signature.ret
               and m.group(3) not in _KEYWORDS and _params_match(m.group(4), signature)}
    if len(matches) != 1:
        return None
    return re.sub(r"\b" + re.escape(matches.pop()) + r"\b", signature.name, code)


_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof"}


def defines_entry(code: str, signature: Signature) -> bool:
    """True when `code` has a definition (not just a declaration) whose parameters match."""
    code = strip_comments(code)
    pattern = re.compile(r"\b" + re.escape(signature.ret) + r"\s+" + re.escape(signature.name)
                         + r"\s*\(([^()]*)\)\s*\{")
    for m in pattern.finditer(code):
        if _params_match(m.group(1), signature):
            return True
    return False


def _params_match(args: str, signature: Signature) -> bool:
    parts = [p for p in (a.strip() for a in split_args(args)) if p and p != "void"]
    if len(parts) != len(signature.params):
        return False
    for part, param in zip(parts, signature.params):
        part = re.sub(r"\b(const|restrict|__restrict__|__restrict)\b", " ", part)
        if param.vector:  # std::vector<T> &name or std::array<T, N> &name, spaced any way
            flat = "".join(part.split())
            if flat.replace("std::", "").rsplit("&", 1)[0] != \
                    "".join(param.container.split()).replace("std::", ""):
                return False
            continue
        if "&" in part:
            return False
        part = part.replace("*", " * ")
        tokens = part.split()
        if not tokens:
            return False
        pointer = "*" in tokens
        words = [t for t in tokens if t != "*"]
        ctype = canonical_type(" ".join(words[:-1])) if len(words) > 1 else ""
        if pointer != param.pointer or ctype != param.ctype:
            return False
    return True


# A comment, or a run of code and literals (one match, not one per literal: fewer calls back).
# An unterminated comment runs to the end of the text, an unterminated literal to the end of
# its line, as gcc reads them (and so each is read once, not again from every later quote).
_COMMENT_OR_STRING = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|(?:\"(?:\\.|[^\"\\\n])*+\\?(?:\"|(?=\n)|\Z)"
    r"|'(?:\\.|[^'\\\n])*+\\?(?:'|(?=\n)|\Z)|[^/\"']++|/(?![/*]))++", re.DOTALL)


def strip_comments(code: str) -> str:
    """Code without comments; string and character literals are kept as they are."""
    def repl(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith("/*"):
            return " " + "\n" * s.count("\n")  # keep line numbers
        if s.startswith("//"):
            return ""
        return s
    # backslash-newline continuations join lines before comments are recognised (C phase 2)
    return _COMMENT_OR_STRING.sub(repl, code.replace("\\\n", ""))


def normalize(code: str) -> str:
    """Comment- and whitespace-insensitive form of the code, for the cache key."""
    lines = (" ".join(line.split()) for line in strip_comments(code).splitlines())
    return "\n".join(line for line in lines if line)


_C_WORDS = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool bool size_t int64_t int32_t uint64_t
uint32_t uint8_t int8_t int16_t uint16_t ptrdiff_t __restrict __restrict__ true false NULL
nullptr""".split())
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")


def code_shape(code: str | None) -> str:
    """C code as the compiler reads its loops: no comments, no #include lines, no white space,
    its own names renamed in order of first use (keywords and types kept), and no optional
    braces. Two kernels of one shape are one kernel: a renamed variable, a moved brace, braces
    around a one-statement loop body or an added #include is no change. Other preprocessor
    lines are kept as written (`omp simd` is a change)."""
    names: dict[str, str] = {}
    out = []
    for line in strip_comments(code or "").splitlines():
        if line.lstrip().startswith("#"):
            if not re.match(r"\s*#\s*include\b", line):
                out.append(" ".join(line.split()))
            continue
        for token in _TOKEN.findall(line):
            if (token[0].isalpha() or token[0] == "_") and token not in _C_WORDS:
                token = names.setdefault(token, f"v{len(names)}")
            out.append(token)
    return " ".join(_without_optional_braces(out))


def _without_optional_braces(tokens: list[str]) -> list[str]:
    """The tokens without the braces C lets go: those around one statement that is the body of
    a for, while, if, else or do (a model's `for (...) { sum += ...; }` is the naive loop
    written `for (...) sum += ...;`). Innermost blocks first, so nested loops shed theirs
    level by level. Kept: a block before `else` that holds an `if` (dropping its braces would
    hand the else to that if), and any block of more than one statement."""
    dropped: set[int] = set()
    opened: list[int] = []
    for i, token in enumerate(tokens):
        if token == "{":
            opened.append(i)
        elif token == "}" and opened:
            start = opened.pop()
            body = [t for j, t in enumerate(tokens[start + 1:i], start + 1) if j not in dropped]
            if _after_control(tokens, start) and body and _statement_end(body, 0) == len(body) \
                    and not ("if" in body and tokens[i + 1:i + 2] == ["else"]):
                dropped.update((start, i))
    return [t for i, t in enumerate(tokens) if i not in dropped]


def _after_control(tokens: list[str], i: int) -> bool:
    """Whether tokens[i] opens the body of a for, while, if, switch, else or do (not a
    function's body)."""
    if i > 0 and tokens[i - 1] in ("else", "do"):
        return True
    if i == 0 or tokens[i - 1] != ")":
        return False
    depth = 0
    for j in range(i - 1, -1, -1):
        depth += (tokens[j] == ")") - (tokens[j] == "(")
        if depth == 0:
            return j > 0 and tokens[j - 1] in ("for", "while", "if", "switch")
    return False


def _closing(tokens: list[str], i: int, left: str, right: str) -> int | None:
    """The index of the bracket that closes tokens[i] (a `left`), None when none does."""
    depth = 0
    for j in range(i, len(tokens)):
        depth += (tokens[j] == left) - (tokens[j] == right)
        if depth == 0:
            return j
    return None


def _statement_end(tokens: list[str], i: int) -> int | None:
    """Where the one C statement that starts at tokens[i] ends (the index after it), None when
    no statement starts there: a block, a for/while/switch/if (with its else) or do-while
    with its body, a #pragma line with the statement it applies to, or a simple statement up
    to its `;` (an initializer's braces inside it)."""
    if i >= len(tokens):
        return None
    t = tokens[i]
    if t == "{":
        close = _closing(tokens, i, "{", "}")
        return None if close is None else close + 1
    if t.startswith("#"):
        return _statement_end(tokens, i + 1)
    if t in ("for", "while", "switch", "if"):
        close = _closing(tokens, i + 1, "(", ")") if tokens[i + 1:i + 2] == ["("] else None
        end = None if close is None else _statement_end(tokens, close + 1)
        if t == "if" and end is not None and tokens[end:end + 1] == ["else"]:
            end = _statement_end(tokens, end + 1)
        return end
    if t == "do":
        end = _statement_end(tokens, i + 1)
        if end is None or tokens[end:end + 2] != ["while", "("]:
            return None
        close = _closing(tokens, end + 1, "(", ")")
        return close + 2 if close is not None and tokens[close + 1:close + 2] == [";"] else None
    depth = 0
    for j in range(i, len(tokens)):
        depth += (tokens[j] in "({[") - (tokens[j] in ")}]")
        if depth < 0:
            return None
        if tokens[j] == ";" and depth == 0:
            return j + 1
    return None
