"""Search loops that use the gym: climb, SQD, refine, best-of-n, evolve. All resumable from the run
store."""
from .best_of_n import BestOfN
from .climb import Climb, ClimbConfig
from .engine import Engine, Step
from .evolve import Evolve, EvolveConfig
from .refine import Refine
from .sqd import SQD, SQDConfig, select

__all__ = ["SQD", "BestOfN", "Climb", "ClimbConfig", "Engine", "Evolve", "EvolveConfig", "Refine", "SQDConfig", "Step",
           "select"]
