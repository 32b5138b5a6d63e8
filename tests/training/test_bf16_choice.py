"""bf16 autocast is chosen at run time (cpuinfo.use_bf16): "auto" only where the hardware
computes bf16, since an emulated bf16 update on an AVX2 CPU is far slower than FP32."""
import pytest

from perfgym import cpuinfo


def _cpu(monkeypatch, flags: str) -> None:
    monkeypatch.setattr(cpuinfo, "_cpuinfo", lambda: {"flags": flags})
    torch = pytest.importorskip("torch", reason="pip install torch==2.13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("flags, expected", [
    ("fpu sse2 avx avx2 fma", False),                           # an AVX2 AMD EPYC
    ("avx2 avx512f avx512bw avx512vl", False),                  # AVX-512 without BF16
    ("avx2 avx512f avx512_bf16", True),                         # Zen 4, Cooper Lake
    ("avx2 avx512f amx_tile amx_bf16", True),                   # Sapphire Rapids
])
def test_auto_follows_the_cpu(monkeypatch, flags, expected):
    _cpu(monkeypatch, flags)
    assert cpuinfo.use_bf16("auto") is expected


def test_on_off_and_a_bool_are_kept_and_anything_else_is_refused(monkeypatch):
    _cpu(monkeypatch, "avx2")
    assert cpuinfo.use_bf16("on") is True and cpuinfo.use_bf16(True) is True
    assert cpuinfo.use_bf16("off") is False and cpuinfo.use_bf16(False) is False
    with pytest.raises(ValueError, match="auto, on, off"):
        cpuinfo.use_bf16("yes")


def test_the_settings_default_to_auto():
    pytest.importorskip("trl", reason="pip install 'perfgym[train]'")
    from perfgym.train.grpo import GRPOSettings
    from perfgym.train.sft import SFTSettings
    assert GRPOSettings(model_path=None).bf16 == "auto"
    assert SFTSettings(model_path=None, pairs="pairs.jsonl").bf16 == "auto"


def test_the_cli_refuses_an_unknown_choice_in_one_line(tmp_path):
    pytest.importorskip("trl", reason="pip install 'perfgym[train]'")
    from typer.testing import CliRunner

    from perfgym.cli import app
    result = CliRunner().invoke(app, ["train", "grpo", "--bf16", "maybe", "--steps", "1",
                                      "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert "--bf16 'maybe' is not one of auto, on, off" in result.output
    assert "Traceback" not in result.output
