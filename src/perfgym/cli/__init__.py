"""The `perfgym` command line: one module per command group, all on one app."""
from __future__ import annotations

import os
import signal

from .. import sandbox
# each module registers its commands on the app; in this order `perfgym --help` lists them
from . import eval_cmd, suite, machine, search, report, serve  # noqa: F401,I001
from . import tasks, model, train, pairs, memory, cluster, export  # noqa: F401,I001
from .common import app


def main() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _die_cleanly)
    app()


def _die_cleanly(signum: int, frame) -> None:
    """SIGTERM / SIGINT: end the sandboxed commands and remove the work directories, then die
    of the signal (the usual exit status: 143, 130). A search's run store keeps what it
    recorded; --resume continues it."""
    sandbox.abandon()
    for fd in (1, 2):  # a live view or progress bar hid the cursor
        if os.isatty(fd):
            os.write(fd, b"\x1b[?25h\n")
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
