"""The opened answer: perfgym writes the start of the model's answer, and the model writes the
body.

A small model that is asked for a chat answer with one fenced block holding a complete
translation unit with the exact signature rarely gives one (the default model: 8 of 8 format
errors). ParEval asks for a body under an open signature instead, and so does this: the answer
starts with the fence, a few includes and the entry's signature up to its opening brace
(`answer_start`); the model continues it, and generation stops at the brace that closes the
entry (`STOP`: a `}` at the start of a line). The policies put the opening after the chat
template's assistant header (a prefill) and return what the model wrote; `full_answer` joins
the two for the gym, which extracts and judges it like any answer.

Nothing unearned: the opening parses by construction, so
- an answer in which the model wrote no statement is not joined (`wrote_code`): it stays what
  the model wrote and is a format error, never an empty body that compiles;
- the reward schemes do not pay the opened answer's parse tier (rewards.penalty): a compile
  error scores as low as a format error.
"""
from __future__ import annotations

from .backends import backend_for
from .tasks import Task

# the entry's closing brace: the first "}" at the start of a line (the body is indented)
STOP = ("\n}",)

# The body as a grammar (xgrammar's EBNF, which OpenVINO GenAI's structured output runs): braces
# balance, no preprocessor line but `#pragma` (the default model's usual way out of a body is a
# run of #define lines), and the answer ends at the "}" that closes the entry.
GRAMMAR = r"""
root ::= item* "}"
item ::= [^{}#] | "{" item* "}" | "#pragma " [^\n]* "\n"
"""


def answer_start(task: Task, stage: int | None = None) -> str | None:
    """The opening of `task`'s answers at optimization `stage` (None: no stage rules; the
    opening then carries only what that stage allows), or None when its backend does not open
    answers."""
    return backend_for(task).answer_start(task, stage)


def wrote_code(completion: str) -> bool:
    """True when the model's part holds a statement: an empty body is the opening's work."""
    from .extract import strip_comments
    code = strip_comments(completion)
    # a lone ";" or "{;}" is an empty statement: something besides punctuation must be there
    return ";" in code and any(ch.isalnum() for ch in code)


def full_answer(opening: str | None, completion: str) -> str:
    """The answer the gym judges: the opening and what the model wrote after it, closed at the
    entry's brace; only what the model wrote when it wrote no code."""
    if not opening or not wrote_code(completion):
        return completion
    return opening + completion


def closed(text: str, server_stopped: bool = False) -> str:
    """What the model wrote, up to and with the entry's closing brace (`STOP`). A server that
    honours `stop` cuts the stop string from its reply: `server_stopped` (it said it stopped
    on one) puts the brace back. A server that ignores `stop` (transformers serve) sends the
    text past it, which is cut here."""
    end = text.find(STOP[0])
    if end >= 0:
        return text[:end + len(STOP[0])]
    return text + STOP[0] if server_stopped else text
