"""SFT with LoRA on slow/fast pairs for a few steps."""
import pytest
import torch


def test_sft_lora_updates_the_adapter(tmp_path):
    from perfgym.train import sft
    model_dir, data = tiny_model_and_pairs(tmp_path, 4)
    settings = sft.SFTSettings(model_path=str(model_dir), pairs=str(data),
                               output_dir=str(tmp_path / "sft"), max_steps=3, batch_size=2,
                               warmup_steps=0, max_length=1024)
    trainer = sft.build(settings)
    lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    assert lora, "LoRA adapters on the attention and MLP projections"
    base = {n: p.detach().clone() for n, p in trainer.model.named_parameters()
            if "lora" not in n}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(lora[n], after[n].detach()) for n in lora)
    assert all(torch.equal(base[n], after[n].detach()) for n in base)  # the base is frozen
    targets = set(trainer.model.peft_config["default"].target_modules)
    assert targets == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                       "down_proj"}


def test_seed_001_defaults():
    from perfgym.train.sft import SFTSettings
    s = SFTSettings(model_path="m", pairs="p")
    assert (s.lora_r, s.lora_alpha, s.lora_dropout, s.learning_rate, s.batch_size,
            s.max_length, s.epochs, s.warmup_steps) == (32, 64, 0.1, 2e-4, 4, 4096, 8, 100)


def test_pair_becomes_prompt_and_completion():
    from perfgym.train.pairs import Pair
    from perfgym.train.sft import example
    ex = example(Pair("bench", "f.c", "tiled", "void slow(){}", "void fast(){}"))
    # chat turns, so TRL wraps them in the chat template the policies and GRPO use
    assert ex["prompt"][0]["role"] == "user" and "void slow(){}" in ex["prompt"][0]["content"]
    assert ex["completion"] == [{"role": "assistant", "content": "```c\nvoid fast(){}\n```"}]


def tiny_model_and_pairs(tmp_path, pairs: int):
    """A tiny random model and the first `pairs` starter pairs, for SFT's plumbing."""
    pytest.importorskip("peft", reason="the train extra is not installed: pip install 'perfgym[train]'")
    from tiny_model import build_tiny_model

    from perfgym.train.pairs import starter_set, write_pairs
    data = tmp_path / "pairs.jsonl"
    write_pairs(data, starter_set()[:pairs])
    return build_tiny_model(tmp_path / "tiny"), data


def test_the_seed_sets_both_the_lora_init_and_the_data_order(tmp_path):
    """SFTSettings.seed makes an SFT run its own: the learning-speed experiment's seeds each
    train their own SFT, so another seed must draw another LoRA init and data order, and the
    same seed the same ones (a rerun is that run again)."""
    from perfgym.train import sft
    model_dir, data = tiny_model_and_pairs(tmp_path, 8)

    def start(seed: int):
        trainer = sft.build(sft.SFTSettings(
            model_path=str(model_dir), pairs=str(data), output_dir=str(tmp_path / f"s{seed}"),
            max_steps=2, batch_size=2, warmup_steps=0, max_length=1024, seed=seed))
        init = [p.detach().clone() for n, p in trainer.model.named_parameters()
                if "lora_A" in n]
        order = [b["input_ids"].tolist() for b in trainer.get_train_dataloader()]
        return init, order

    (init1, order1), (again1, same1), (init2, order2) = start(1), start(1), start(2)
    assert all(torch.equal(a, b) for a, b in zip(init1, again1)) and order1 == same1
    assert not any(torch.equal(a, b) for a, b in zip(init1, init2))
    assert order1 != order2


def test_checkpointing_is_a_setting_that_changes_no_weight(tmp_path):
    """SFTSettings.gradient_checkpointing reaches TRL (whose default is on), and turning it off
    trains the same LoRA weights: it changes where the backward's activations come from, not
    the arithmetic (the learning experiment's SFT runs without it, for time)."""
    pytest.importorskip("peft", reason="the train extra is not installed: pip install 'perfgym[train]'")
    from tiny_model import build_tiny_model

    from perfgym.train import sft
    from perfgym.train.pairs import starter_set, write_pairs
    model_dir = build_tiny_model(tmp_path / "tiny")
    data = tmp_path / "pairs.jsonl"
    write_pairs(data, starter_set()[:4])

    def trained(checkpointing: bool):
        trainer = sft.build(sft.SFTSettings(
            model_path=str(model_dir), pairs=str(data),
            output_dir=str(tmp_path / str(checkpointing)),
            max_steps=2, batch_size=2, warmup_steps=0, max_length=1024, lora_dropout=0.0,
            gradient_checkpointing=checkpointing))
        assert trainer.args.gradient_checkpointing is checkpointing
        trainer.train()
        return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora" in n}

    assert sft.SFTSettings(model_path="m", pairs="p").gradient_checkpointing  # TRL's default
    on, off = trained(True), trained(False)
    assert on.keys() == off.keys()
    assert all(torch.allclose(on[n], off[n], atol=1e-6) for n in on)


@pytest.mark.parametrize("flags, expected", [([], True), (["--no-gradient-checkpointing"], False)])
def test_the_cli_hands_checkpointing_to_the_sft(tmp_path, monkeypatch, flags, expected):
    pytest.importorskip("trl", reason="the train extra is not installed: pip install 'perfgym[train]'")
    from typer.testing import CliRunner

    from perfgym.cli import app
    from perfgym.train import sft
    seen = []
    monkeypatch.setattr(sft, "train", lambda settings: seen.append(settings))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("{}\n")
    out = CliRunner().invoke(app, ["train", "sft", "--pairs", str(pairs), *flags])
    assert out.exit_code == 0, out.output
    assert [s.gradient_checkpointing for s in seen] == [expected]
