"""A tiny model that has learned, by SFT through perfgym's own SFT path, to answer every short
prompt with one of two real dgemm kernels (2-3 GFLOP/s naive, ~15 GFLOP/s i-k-j). GRPO on it
sees groups with different rewards, so its updates are real updates."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))
TEMPLATES = Path(__file__).parent / "templates"


@pytest.fixture(scope="session")
def coder_model(tmp_path_factory):
    pytest.importorskip("trl")
    from tiny_model import build_tiny_model

    from perfgym import get_task
    from perfgym.train import sft
    from perfgym.train.pairs import VARIANTS_DIR
    root = tmp_path_factory.mktemp("coder")
    base = build_tiny_model(root / "base", hidden=128)
    from perfgym.extract import normalize
    naive = normalize(get_task("dgemm").baseline.read_text()) + "\n"  # no comments: shorter
    ikj = normalize((VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()) + "\n"
    rows = [{"prompt": (TEMPLATES / f"{op}.txt").read_text() + "\n",
             "completion": f"```c\n{code}```"}
            for op in ("generate", "improve", "deepen", "repair") for code in (naive, ikj)]
    data = root / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows * 4))
    settings = sft.SFTSettings(model_path=str(base), pairs=str(data), output_dir=str(root / "sft"),
                               lora=False, learning_rate=3e-3, batch_size=8, max_steps=300,
                               warmup_steps=0, max_length=512)
    sft.train(settings)
    return root / "sft" / "final"
