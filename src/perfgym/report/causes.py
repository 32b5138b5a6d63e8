"""Why a run's answers failed: each failed answer's cause, counted, and the next step to try.
`perfgym search` prints it when nothing passed, and the report's summary has it always."""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

NO_BLOCK = "no fenced code block"
CUT_OFF = "cut off: a code block that never closes (the token limit?)"
SIGNATURE = "the entry's signature is missing or different"

# the next thing to try, by cause (the first word of the cause for the open-ended ones)
NEXT_STEP = {
    NO_BLOCK: "the model does not answer in a code block: let perfgym open its answers "
              "(--answer-start) or use a larger model",
    CUT_OFF: "answers run out of tokens: raise --max-tokens or ask for shorter kernels",
    SIGNATURE: "perfgym can write the signature for the model: --answer-start",
    "compile": "show the model its compiler errors (--algo sqd or refine repairs them) and "
               "sample cooler (--temperature 0.3)",
    "WRONG_ANSWER": "wrong answers: the repair prompt shows where (--algo sqd or refine); check "
                    "the task's description in perfgym tasks show",
    "RUNTIME_ERROR": "crashes: usually out-of-bounds indexing at the odd sizes; --algo refine "
                     "shows the signal and its likely cause",
    "TIMEOUT": "kernels too slow to finish: sample cooler (--temperature 0.3)",
    "STAGE_VIOLATION": "kernels use techniques their SQD stage forbids (the repair prompt names "
                       "them): keep --algo sqd for its stages, or search without stages "
                       "(--algo best-of-n, refine or evolve)",
    "LIBRARY_VIOLATION": "kernels break the source or object rules (a BLAS call, I/O, a global "
                         "helper): the message names the rule; perfgym tasks show TASK lists "
                         "them",
    "HOST_ERROR": "the host failed, not the kernel: rerun with --resume; if it repeats, run "
                  "perfgym eval on one answer and report the error",
    "format": "answers perfgym cannot read as the task's kernel: --answer-start writes the "
              "signature for the model",
}


def cause(status: str, message: str, answer: str) -> str:
    """One failed answer's cause, short enough to count."""
    if status == "FORMAT_ERROR":
        if "```" not in answer:
            return NO_BLOCK
        if answer.count("```") % 2:
            return CUT_OFF
        if "define" in message:
            return SIGNATURE
        return f"format: {message[:80]}"
    if status == "COMPILE_ERROR":
        first = re.search(r":\d+:\d+: (?:fatal )?error: (.*)", message)
        text = first.group(1) if first else message
        text = re.sub(r"'[^']*'", "'…'", text)  # one cause for every undeclared name
        return f"compile error: {text.strip()[:80]}"
    return status


def failure_causes(failures: Iterable[tuple[str, str, str]]) -> Counter:
    """(status, message, answer) of each failed answer -> the count of each cause."""
    return Counter(cause(s, m, a) for s, m, a in failures if s != "OK")


def next_step(causes: Counter) -> str | None:
    """What to try about the most common cause, or None when nothing failed."""
    if not causes:
        return None
    top = causes.most_common(1)[0][0]
    if top in NEXT_STEP:
        return NEXT_STEP[top]
    key = "compile" if top.startswith("compile") else top.split(":")[0]
    return NEXT_STEP[key]


def run_causes(store) -> Counter:
    """The causes over a run's answers (the task's own kernel, op "seed", is no answer)."""
    return failure_causes((c.status, (c.outcome or {}).get("message", ""), c.completion)
                          for c in store.candidates()
                          if not c.pending and c.op != "seed" and not c.ok)


def lines(causes: Counter, top: int = 6) -> list[str]:
    """The causes as text lines, most common first, and the next step."""
    if not causes:
        return []
    out = [f"{n:3d}  {c}" for c, n in causes.most_common(top)]
    if len(causes) > top:
        out.append(f"     ... {sum(causes.values()) - sum(n for _, n in causes.most_common(top))}"
                   " more, of other causes")
    out.append(f"next: {next_step(causes)}")
    return out
