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
    and its own names renamed in order of first use (keywords and types kept). Two kernels of
    one shape are one kernel: a renamed variable, a moved brace or an added #include is no
    change. Other preprocessor lines are kept as written (`omp simd` is a change)."""
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
    return " ".join(out)
