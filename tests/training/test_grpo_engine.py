"""GRPO's rollouts on the fast CPU engine, with the real default model: the engine generates
from the trainer's current weights (a LoRA update merged in), re-synced once per optimizer step,
and TRL trains on what it returns."""
from __future__ import annotations

import types

import pytest

pytest.importorskip("trl", reason="the train extra is not installed: pip install 'perfgym[train]'")
pytest.importorskip("openvino_genai", reason="the fast engine is not installed: "
                    "pip install 'perfgym[local]'")
pytestmark = pytest.mark.slow


def fake_trainer(model, tokenizer, step: int):
    """What the rollout reads of a trainer: its step, its (unwrapped) model, its tokenizer."""
    return types.SimpleNamespace(state=types.SimpleNamespace(global_step=step),
                                 accelerator=types.SimpleNamespace(unwrap_model=lambda m: m),
                                 model=model, processing_class=tokenizer)


def test_the_rollout_generates_from_the_trainers_updated_weights(monkeypatch):
    import torch
    from peft import LoraConfig, get_peft_model

    from perfgym.models import resolve_model, shipped_gguf
    from perfgym.policies.hf import load_model
    from perfgym.train.engine_rollout import EngineRollout, merged_state

    base, tokenizer = load_model(resolve_model(None))
    peft = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, task_type="CAUSAL_LM",
                                           target_modules=["q_proj", "v_proj", "o_proj"]))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # the "update" a training step would make: LoRA's B leaves zero
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.copy_(0.05 * torch.randn(p.shape, generator=generator))
    peft.eval()
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a C function that sums an array of doubles."}],
        tokenize=False, add_generation_prompt=True)
    G, tokens = 2, 24
    from perfgym.engine.openvino import OpenVINOEngine
    compiled = []
    load = OpenVINOEngine._load
    monkeypatch.setattr(OpenVINOEngine, "_load",
                        lambda self, gguf: compiled.append(gguf) or load(self, gguf))
    rollout = EngineRollout(str(shipped_gguf()), G, tokens, temperature=0)
    out = rollout([prompt] * G, fake_trainer(peft, tokenizer, step=0))
    # one compile, of the trainer's weights (before, the shipped file was compiled first and
    # thrown away at once)
    assert compiled == [rollout.engine.gguf] and rollout.engine.gguf != shipped_gguf()
    ids = tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        want = peft.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                             dtype=torch.long), max_new_tokens=tokens, do_sample=False)
    assert out["completion_ids"] == [want[0, len(ids):].tolist()] * G  # the updated policy's
    assert out["prompt_ids"] == [ids] * G and len(out["logprobs"]) == G
    # the adapter is unmerged again: training goes on from the same parameters
    assert any("lora_B" in k for k in peft.state_dict())
    state = merged_state(peft)
    assert not any("lora_" in k for k in state) and "model.layers.0.self_attn.q_proj.weight" in state
    with torch.no_grad():
        unmerged = peft.base_model.model.model.layers[0].self_attn.q_proj.base_layer.weight
        assert not torch.equal(unmerged, state["model.layers.0.self_attn.q_proj.weight"])
    # one sync per optimizer step
    gguf = rollout.engine.gguf
    rollout([prompt] * G, fake_trainer(peft, tokenizer, step=0))
    assert rollout.engine.gguf == gguf
    rollout([prompt] * G, fake_trainer(peft, tokenizer, step=1))
    assert rollout.engine.gguf != gguf and rollout.synced_step == 1
    assert len(compiled) == 2
    rollout.engine.close()


def test_a_grpo_step_on_the_engine_trains_on_what_it_generated(tmp_path):
    from perfgym.train import grpo
    settings = grpo.GRPOSettings(model_path=None, task="dot", output_dir=str(tmp_path / "run"),
                                 steps=1, G=2, groups_per_step=1, max_completion_length=12,
                                 lora=True, save_steps=10**6, engine="openvino")
    run = grpo.train(settings)
    assert run.rollout.synced_step == 0 and run.rollout.calls == 1
    written = [c for c in run.store.candidates() if c.policy == "grpo"]
    assert len(written) == 2 and all(c.outcome is not None for c in written)


def test_the_engine_refuses_modes_it_does_not_serve():
    from perfgym.train import grpo
    with pytest.raises(ValueError, match="fixed mode"):
        grpo.GRPOSettings(model_path=None, mode="sqd", engine="openvino")
    with pytest.raises(ValueError, match="engine"):
        grpo.GRPOSettings(model_path=None, engine="vulkan")


def test_a_guided_group_trains_on_the_guide_in_place_of_its_last_sample(tmp_path):
    """Off-policy guidance (GRPOSettings.guides): the last sample of each of the task's groups
    is the guide, judged by the gym like the others, so a group of one wrong answer differs."""
    from perfgym.train import grpo
    loop = "    for (int i = 0; i < N; i++)"
    guide = (f"<<<<<<< SEARCH\n{loop}\n=======\n    #pragma omp parallel for reduction(+:sum)\n"
             f"{loop}\n>>>>>>> REPLACE")
    settings = grpo.GRPOSettings(model_path=None, task="dot", output_dir=str(tmp_path / "run"),
                                 steps=1, G=2, groups_per_step=1, max_completion_length=12,
                                 lora=True, save_steps=10**6, engine="openvino",
                                 prompt_op="improve", answer_form="edits",
                                 guides={"dot": guide})
    run = grpo.train(settings)
    assert run.rollout.guided == 1
    written = [c for c in run.store.candidates() if c.policy == "grpo"]
    assert len(written) == 2
    guided = [c for c in written if "reduction(+:sum)" in c.completion]
    assert len(guided) == 1 and guided[0].status == "OK", [c.status for c in written]


def test_guides_need_the_engine_and_a_task_the_run_trains_on():
    from perfgym.train import grpo
    with pytest.raises(ValueError, match="guides replace a sample"):
        grpo.GRPOSettings(model_path=None, task="dot", guides={"dot": "x"})  # transformers
    with pytest.raises(ValueError, match="does not train on: sgemm"):
        grpo.GRPOSettings(model_path=None, task="dot", engine="openvino",
                          guides={"sgemm": "x"})
