"""The learning experiment lives in experiments/learning/ (its design, script, results and
figure). This module stays so that the scripts here that share its prompts, sampler and
settings (learning_speed.py, grpo_step.py --like-learning, update_speed.py) still
`import learning`: it loads experiments/learning/learning.py under that name. To run the
experiment: python experiments/learning/learning.py."""
import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parent.parent / "experiments" / "learning" / "learning.py"
_spec = importlib.util.spec_from_file_location("learning", _PATH)
_module = importlib.util.module_from_spec(_spec)
sys.modules["learning"] = _module
_spec.loader.exec_module(_module)
