"""`perfgym model int8`: a GGUF written again as vLLM's int8 W8A8 checkpoint. Every linear
layer, the output layer too, is int8 per output channel within half a step of the GGUF's own
weights; the rest stays FP32; the config says so in compressed-tensors' terms; a finished
checkpoint is kept and a changed source is written again; bad input is one line, exit 2."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="the local extra is not installed: "
                            "pip install 'perfgym[local]'")
pytest.importorskip("gguf", reason="the local extra is not installed: "
                    "pip install 'perfgym[local]'")
pytest.importorskip("transformers", reason="the local extra is not installed: "
                    "pip install 'perfgym[local]'")

from perfgym.engine.int8_checkpoint import int8_per_channel, write_int8_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tiny_qwen2, tmp_path_factory):
    return write_int8_checkpoint(tiny_qwen2, tmp_path_factory.mktemp("out") / "int8")


@pytest.fixture(scope="module")
def fp32_model(tiny_qwen2):
    """The GGUF as transformers reads it, dequantized to FP32: what the checkpoint rounds."""
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(tiny_qwen2.parent, gguf_file=tiny_qwen2.name,
                                                dtype=torch.float32)


@pytest.fixture(scope="module")
def fp32_weights(fp32_model):
    return {k: v.clone() for k, v in fp32_model.state_dict().items()}


def test_rows_round_to_the_nearest_of_255_levels_of_their_own_peak():
    w = torch.randn(16, 64) * torch.logspace(-3, 2, 16)[:, None]  # rows of every magnitude
    w[3] = 0.0
    codes, scale = int8_per_channel(w)
    assert codes.dtype == torch.int8 and scale.shape == (16, 1)
    err = (codes.float() * scale - w).abs()
    assert bool((err <= scale / 2 + 1e-6 * scale).all())
    peaks = codes.abs().amax(dim=1)
    assert peaks[3] == 0 and bool((peaks[torch.arange(16) != 3] == 127).all())


def test_every_linear_layer_and_the_output_layer_are_int8_within_half_a_step(
        checkpoint, fp32_weights):
    from safetensors.torch import load_file
    tensors = load_file(str(checkpoint / "model.safetensors"))
    linear = [k for k in fp32_weights if k.endswith("_proj.weight") or k == "lm_head.weight"]
    assert "lm_head.weight" in linear and len(linear) == 2 * 7 + 1
    for name in linear:
        codes, scale = tensors[name], tensors[name[:-len("weight")] + "weight_scale"]
        assert codes.dtype == torch.int8, name
        assert scale.shape == (codes.shape[0], 1), name
        err = (codes.float() * scale - fp32_weights[name]).abs()
        assert bool((err <= scale / 2 + 1e-6).all()), name
    for name in fp32_weights.keys() - set(linear):  # embedding, norms, biases
        assert tensors[name].dtype == torch.float32, name
        assert torch.equal(tensors[name], fp32_weights[name]), name


def test_the_config_tells_vllm_what_it_holds(checkpoint, tiny_qwen2):
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["tie_word_embeddings"] is False  # the output layer is int8, the embedding not
    quant = config["quantization_config"]
    assert quant["quant_method"] == "compressed-tensors"
    assert quant["format"] == "int-quantized"
    group = quant["config_groups"]["group_0"]
    assert "Linear" in group["targets"] and any("lm_head" in t for t in group["targets"])
    assert group["weights"]["strategy"] == "channel" and group["weights"]["num_bits"] == 8
    assert group["input_activations"]["dynamic"] is True
    assert group["input_activations"]["strategy"] == "token"
    assert config["perfgym_int8"] == {"gguf": tiny_qwen2.name,
                                      "size": tiny_qwen2.stat().st_size}
    assert (checkpoint / "tokenizer.json").exists()


def test_the_int8_model_predicts_what_the_gguf_predicts(checkpoint, fp32_model):
    """The checkpoint's weights, read back and dequantized, give the GGUF model's logits."""
    import copy

    from safetensors.torch import load_file
    model = copy.deepcopy(fp32_model)
    ids = torch.randint(0, model.config.vocab_size, (1, 48), generator=torch.Generator()
                        .manual_seed(3))
    with torch.no_grad():
        want = fp32_model(ids).logits[0]
        tensors = load_file(str(checkpoint / "model.safetensors"))
        state = {k: v for k, v in tensors.items() if not k.endswith("weight_scale")}
        for name, codes in list(state.items()):
            if codes.dtype == torch.int8:
                state[name] = codes.float() * tensors[name[:-len("weight")] + "weight_scale"]
        model.config.tie_word_embeddings = False
        model.lm_head.weight = torch.nn.Parameter(state["lm_head.weight"])
        model.load_state_dict(state)
        got = model(ids).logits[0]
    corr = torch.corrcoef(torch.stack([want.flatten(), got.flatten()]))[0, 1]
    assert corr > 0.99  # a weight misread (transposed, mis-scaled) gives about 0
    assert (want.argmax(-1) == got.argmax(-1)).float().mean() >= 0.8  # near-ties of 151k


def test_a_finished_checkpoint_is_kept_and_a_changed_source_written_again(
        tiny_qwen2, checkpoint, tmp_path):
    import shutil
    out = tmp_path / "int8"
    shutil.copytree(checkpoint, out)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert write_int8_checkpoint(tiny_qwen2, out) == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    config = json.loads((out / "config.json").read_text())
    config["perfgym_int8"]["size"] += 1  # as if written from another file
    (out / "config.json").write_text(json.dumps(config))
    write_int8_checkpoint(tiny_qwen2, out)
    assert json.loads((out / "config.json").read_text())["perfgym_int8"]["size"] == \
        tiny_qwen2.stat().st_size
    assert not list(tmp_path.glob(".int8.*.tmp"))  # nothing half-written left beside it


@pytest.mark.parametrize("model, out, says", [
    ("missing.gguf", "dir", "not a named model or a .gguf file"),
    ("{notgguf}", "dir", "not a named model or a .gguf file"),
    ("{gguf}", "{file}", "exists and is not a directory"),
])
def test_bad_input_is_one_line_and_exit_2(model, out, says, tiny_qwen2, tmp_path):
    notgguf = tmp_path / "weights.bin"
    notgguf.write_bytes(b"\0" * 64)
    afile = tmp_path / "afile"
    afile.write_text("x")
    fill = {"notgguf": notgguf, "gguf": tiny_qwen2, "file": afile}
    done = subprocess.run([sys.executable, "-m", "perfgym.cli", "model", "int8",
                           model.format(**fill), str(tmp_path / out.format(**fill))
                           if out == "dir" else out.format(**fill)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr
