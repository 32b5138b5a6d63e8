"""The command line's shared parts: the app, option limits, and one-line errors."""
from __future__ import annotations

import typer
from rich.console import Console

from ..errors import HostError
from ..tasks import TaskError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Score kernels by compiling, running, checking and timing them.")
console = Console()
err_console = Console(stderr=True)


class UserError(Exception):
    """An error the user can fix; printed as one line."""


# A candidate is a kernel or a model's answer, a few KB; a larger file is refused before it is
# read, so no check runs over megabytes.
MAX_CANDIDATE_BYTES = 1 << 20
MAX_TIMEOUT = 24 * 3600.0  # seconds: the run limits and timers take whole, finite seconds
PROFILE_HELP = ("profiling feedback for each kernel (the default chain: perf counters, else the "
                "instruction mix; the vectorization report; the roofline position)")
PROFILERS_HELP = ("profiling providers instead of the default chain, comma-separated (implies "
                  "--profile): vectorization, instructions, roofline, scaling (a second timed "
                  "run on one thread), cachegrind (simulated misses at a small size), perf, "
                  "default")


def _check_timeout(flag: str, seconds: float | None) -> None:
    import math
    if seconds is not None and not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise UserError(f"{flag} is seconds, more than 0 and at most {MAX_TIMEOUT:g} (a day), "
                        f"not {seconds:g}")


def _fail(message: str) -> None:
    from rich.markup import escape  # a message naming "[sft]" is text, not a style tag
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _guard(fn):
    """Turn the errors a user can cause into one-line messages instead of tracebacks."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (TaskError, HostError, UserError, ValueError) as exc:
            _fail(str(exc))
        except FileNotFoundError as exc:
            _fail(f"{exc.filename}: no such file")
        except OSError as exc:
            if exc.filename is None:  # not about a path the user gave: a bug, with its traceback
                raise
            _fail(f"{exc.filename}: {exc.strerror or exc}")
    return wrapper
