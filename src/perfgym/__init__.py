"""perfgym: score kernels a model writes by compiling, running, checking and timing them."""
from .config import EvalConfig
from .evaluate import evaluate
from .outcome import Outcome, Status, Timing
from .tasks import Task, get_task, load_task

__all__ = ["EvalConfig", "Outcome", "Status", "Task", "Timing", "evaluate", "get_task",
           "load_task"]
__version__ = "0.1.0"
