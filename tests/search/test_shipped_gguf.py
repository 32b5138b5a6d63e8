"""The fast engine runs a GGUF as shipped: a qwen2 model (the coder's architecture, which the
rewrite for trained weights cannot write) loads without a rewrite, its tokenizer and chat
template read from the file, and its greedy tokens are transformers' for the same file. The
model is a tiny random qwen2 GGUF (tiny_qwen2.py, the `tiny_qwen2` fixture) with the default
model's tokenizer."""
from __future__ import annotations

import pytest

pytest.importorskip("openvino_genai", reason="the local extra is not installed: "
                    "pip install 'perfgym[local]'")
pytest.importorskip("gguf", reason="the local extra is not installed: "
                    "pip install 'perfgym[local]'")


def test_the_policy_runs_a_qwen2_gguf_without_a_rewrite(tiny_qwen2, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path / "models"))
    from perfgym.policies.openvino import OpenVINOPolicy
    policy = OpenVINOPolicy(model_path=tiny_qwen2, exact=True)
    assert policy.engine.gguf == tiny_qwen2  # the file as shipped: nothing was written
    assert not (tmp_path / "models" / "engine").exists()
    assert policy.tokenizer.chat_template  # read from the GGUF
    texts = policy.generate(["Write a dot product."], 2, temperature=0.0, max_tokens=12)
    assert len(texts) == 1 and len(texts[0]) == 2 and texts[0][0] == texts[0][1]
    assert texts[0][0].strip()


def test_greedy_tokens_are_transformers_tokens_for_the_same_file(tiny_qwen2, tmp_path,
                                                                 monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from perfgym.engine.openvino import OpenVINOEngine
    from perfgym.policies.openvino import gguf_tokenizer
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path / "models"))
    tokenizer = gguf_tokenizer(tiny_qwen2)
    ids = tokenizer("void dot(const double *a, const double *b, int n) {")["input_ids"]
    engine = OpenVINOEngine(tiny_qwen2, exact=True)
    ours = engine.generate([ids], 1, max_tokens=10, temperature=0.0, ignore_eos=True)[0][0].ids
    model = AutoModelForCausalLM.from_pretrained(str(tiny_qwen2.parent),
                                                 gguf_file=tiny_qwen2.name, dtype=torch.float32)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False,
                             min_new_tokens=10)
    assert ours == out[0, len(ids):].tolist()


def test_the_engine_probe_measures_every_setting_for_real_and_the_policy_takes_its_choice(
        tiny_qwen2, tmp_path, monkeypatch):
    """The probe's real measurement (engine.probe.measure_tok_s through the policy's
    _measured_settings) on a tiny GGUF: each setting decodes, the choice is stored, and a
    policy that is not exact runs with the chosen properties."""
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "cache"))
    from perfgym.engine.probe import CANDIDATES, choice_path
    from perfgym.policies.openvino import OpenVINOPolicy, _measured_settings
    chosen = _measured_settings(tiny_qwen2)
    assert chosen["name"] in CANDIDATES and choice_path(tiny_qwen2).is_file()
    assert [r["name"] for r in chosen["rows"]] == list(CANDIDATES)
    assert all(r["tok_s"] > 0 for r in chosen["rows"])
    policy = OpenVINOPolicy(model_path=tiny_qwen2)
    assert policy.engine_choice["name"] == chosen["name"]
    assert policy.engine.properties == CANDIDATES[chosen["name"]]
    assert len(policy.generate(["Say hi."], 2, max_tokens=4, temperature=0.5)[0]) == 2
