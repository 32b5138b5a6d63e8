"""GRPO's rollouts on an OpenAI-compatible server (perfgym.train.server_engine), against a real
one: `transformers serve` with no model pinned, handed the trainer's weights by path."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("trl", reason="the train extra is not installed: pip install 'perfgym[train]'")
pytest.importorskip("openai", reason="the llm extra is not installed: pip install 'perfgym[llm]'")


def test_the_server_engine_is_asked_for_as_its_settings_say():
    from perfgym.train import grpo
    base = dict(model_path=None, task="dot", output_dir="unused")
    with pytest.raises(ValueError, match="needs a server URL"):
        grpo.GRPOSettings(**base, engine="server")
    with pytest.raises(ValueError, match="a server URL needs --engine server"):
        grpo.GRPOSettings(**base, engine="openvino", server_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="fixed mode's rollouts"):
        grpo.GRPOSettings(**base, engine="server", server_url="http://127.0.0.1:1/v1",
                          mode="sqd")
    settings = grpo.GRPOSettings(**base, engine="server", server_url="http://127.0.0.1:1/v1",
                                 turns=3)
    assert settings.turns == 3


def test_a_stop_other_than_the_entrys_brace_is_refused(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    from perfgym.models import resolve_model
    from perfgym.train.server_engine import ServerEngine
    model = str(resolve_model(quiet=True))
    engine = ServerEngine("http://127.0.0.1:1/v1", tmp_path, AutoConfig.from_pretrained(model),
                          AutoTokenizer.from_pretrained(model))
    with pytest.raises(RuntimeError, match="no weights yet"):
        engine.generate([[1, 2, 3]], 1, max_tokens=4)
    engine.checkpoint = tmp_path  # (as if loaded: the stop is checked before any request)
    with pytest.raises(ValueError, match="closing brace only"):
        engine.generate([[1, 2, 3]], 1, max_tokens=4, stop=("</s>",))


def _greedy_local(model, ids: list[int], n: int) -> list[int]:
    import torch
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False)
    return out[0, len(ids):].tolist()


@pytest.mark.slow
def test_the_server_samples_from_the_weights_it_was_handed(tmp_path):
    """Greedy answers from the server equal the local model's from the same weights, for the
    base weights and for altered ones (so the server is not answering from the base model it
    could have found on its own), and the step before's checkpoint is removed."""
    import torch
    from model_server import transformers_serve
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from perfgym.models import resolve_model
    from perfgym.train.engine_rollout import merged_state
    from perfgym.train.server_engine import ServerEngine
    path = str(resolve_model(quiet=True))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Name three colours."}],
                                         add_generation_prompt=True, tokenize=False)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    base = _greedy_local(model, ids, 12)
    with transformers_serve() as url:
        engine = ServerEngine(url + "/v1", tmp_path / "weights", model.config, tokenizer)
        engine.load_weights(merged_state(model))
        first = engine.checkpoint
        served = engine.generate([ids], 1, max_tokens=12, temperature=0.0)[0][0]
        assert tokenizer.decode(served.ids) == tokenizer.decode(base)
        assert served.logprobs == [None] * len(served.ids)  # unknown, never made up

        with torch.no_grad():  # other weights: every layer's MLP output halved
            for layer in model.model.layers:
                layer.mlp.down_proj.weight.mul_(0.5)
        altered = _greedy_local(model, ids, 12)
        assert tokenizer.decode(altered) != tokenizer.decode(base)
        engine.load_weights(merged_state(model))
        served = engine.generate([ids], 1, max_tokens=12, temperature=0.0)[0][0]
        assert tokenizer.decode(served.ids) == tokenizer.decode(altered)
        assert not first.exists() and engine.checkpoint.exists()
        engine.close()
        assert not (tmp_path / "weights").exists()


@pytest.mark.slow
def test_multi_turn_grpo_on_the_server_stores_every_turn(tmp_path):
    from model_server import transformers_serve

    from perfgym.train import grpo
    with transformers_serve() as url:
        settings = grpo.GRPOSettings(model_path=None, task="dot",
                                     output_dir=str(tmp_path / "run"), steps=1, G=2,
                                     groups_per_step=1, max_completion_length=48, lora=True,
                                     save_steps=1, engine="server", server_url=url + "/v1",
                                     turns=2, answer_start=True, prompt_op="improve",
                                     temperature=0.7)
        run = grpo.train(settings)
    turns = [c for c in run.store.candidates() if c.slot.startswith("grpo:mt:")]
    first = [c for c in turns if c.slot.endswith(":0")]
    assert len(first) == 2 and all(c.outcome is not None for c in turns)
    for c in turns:
        if not c.slot.endswith(":0"):  # a later turn answers the gym's feedback on its parent
            assert c.parent_id is not None and c.op in ("improve", "repair")
    # the step's weights were written for the server and named in its requests
    weights = tmp_path / "run" / "server-weights" / "weights-1"
    assert (weights / "model.safetensors").exists()
    assert run.rollout.engine.policy.model == str(weights)
    # the server generates with its KV cache (the trainer's is off, for checkpointing)
    assert json.loads((weights / "config.json").read_text())["use_cache"] is True
    assert (tmp_path / "run" / "final").exists()
