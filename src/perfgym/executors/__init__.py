"""Where evaluations run. Every executor offers `evaluate_many(requests) -> list[Outcome]`."""
from .local import Request, evaluate_many

__all__ = ["Request", "evaluate_many"]
