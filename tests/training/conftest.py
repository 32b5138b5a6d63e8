"""A tiny model that has learned, by SFT through perfgym's own SFT path, to answer every short
prompt with one of two real dgemm kernels. GRPO on it sees groups with different rewards, so its
updates are real updates."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))
TEMPLATES = Path(__file__).parent / "templates"


@pytest.fixture(scope="session")
def coder_model(tmp_path_factory):
    pytest.importorskip("trl", reason="the train extra is not installed: pip install 'perfgym[train]'")
    from perfgym.train.tiny import build_coder_model
    return build_coder_model(tmp_path_factory.mktemp("coder"), TEMPLATES)
