"""How the kernel memory compares code: search terms for BM25 retrieval, and a fingerprint that
sees through renamed variables, whitespace and comments (the copy check).

Retrieval is Okapi BM25 over identifier words, in pure Python: the memory holds hundreds to a
few thousand kernels, which this ranks in milliseconds, and it needs no dependency (no
embedding model installs offline here; see README "perfgym memory").
"""
from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from typing import Sequence

from ..extract import strip_comments

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+[0-9]*(?![a-z])|[0-9]+")
# words too common in C kernels or task descriptions to tell one from another
_STOP = frozenset("""a an and are as at be by each for from if in int is it its long must n
not of on or out the to with void double float const return static i j k""".split())


def terms(text: str) -> list[str]:
    """Search terms of code or prose: each identifier whole and its snake/camel parts,
    lowercased (`_mm256_fmadd_pd` -> _mm256_fmadd_pd, mm256, fmadd, pd)."""
    out = []
    for word in _WORD.findall(strip_comments(text)):
        parts = [p.lower() for piece in word.split("_") for p in _CAMEL.findall(piece)]
        whole = word.lower()
        for t in ([whole] if len(parts) <= 1 else [whole, *parts]):
            if len(t) > 1 and t not in _STOP:
                out.append(t)
    return out


def bm25(query: Sequence[str], documents: Sequence[Sequence[str]], k1: float = 1.2,
         b: float = 0.75) -> list[float]:
    """Okapi BM25 score of each document (a list of terms) for the query terms."""
    n = len(documents)
    if n == 0:
        return []
    counts = [Counter(d) for d in documents]
    avg_len = sum(len(d) for d in documents) / n or 1.0
    df = Counter(t for c in counts for t in c)
    scores = []
    for doc, c in zip(documents, counts):
        s = 0.0
        for t in set(query):
            if t not in c:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            tf = c[t]
            s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avg_len))
        scores.append(s)
    return scores


_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")
# C and C++ keywords and type names: kept as they are, so `float` -> `double` is a change
_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool _Complex bool true false class template
typename namespace using std new delete nullptr constexpr __restrict __restrict__""".split())


def canonical_tokens(code: str) -> list[str]:
    """The code's tokens with every identifier that is not a keyword renamed by order of first
    appearance (v0, v1, ...): whitespace, comments and names do not change it."""
    names: dict[str, str] = {}
    out = []
    for tok in _TOKEN.findall(strip_comments(code)):
        if (tok[0].isalpha() or tok[0] == "_") and tok not in _KEYWORDS:
            tok = names.setdefault(tok, f"v{len(names)}")
        out.append(tok)
    return out


def fingerprint(code: str) -> str:
    """A hash of `canonical_tokens`: equal for two kernels that differ only in names,
    whitespace and comments."""
    return hashlib.sha256(" ".join(canonical_tokens(code)).encode()).hexdigest()[:24]
