"""Errors the host causes, not the candidate.

A missing compiler, a sandboxed interpreter that cannot start or a machine probe that cannot run
say nothing about the kernel under test, so they never become an Outcome (which would charge the
candidate a failure reward). They are raised instead: the CLI prints them as one line, the reward
service answers 503, and a training or search run stops rather than learn from them.
"""


class HostError(RuntimeError):
    """This machine cannot evaluate candidates as configured; the message says what to fix."""
