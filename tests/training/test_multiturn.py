"""Multi-turn GRPO (perfgym.train.multiturn) with the real default model on the fast engine:
every turn is judged and stored with its parent, the feedback between turns is in the sequence
but out of the loss, and a killed run resumes."""
from __future__ import annotations

import pytest

pytest.importorskip("trl", reason="the train extra is not installed: pip install 'perfgym[train]'")
pytest.importorskip("openvino_genai", reason="the fast engine is not installed: "
                    "pip install 'perfgym[local]'")


def test_the_feedback_between_turns_closes_the_answer_and_opens_the_next():
    from transformers import AutoTokenizer

    from perfgym.models import resolve_model
    from perfgym.opening import answer_start
    from perfgym.tasks import get_task
    from perfgym.train.multiturn import feedback_suffix
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model()))
    opening = answer_start(get_task("dot"))
    suffix = feedback_suffix(tokenizer, "first prompt", "FEEDBACK: compile error", opening)
    assert suffix.startswith("\n```")  # the fence the answer left open
    assert "FEEDBACK: compile error" in suffix and suffix.endswith(opening)
    assert "first prompt" not in suffix  # only what comes after the answer
    assert suffix.index("FEEDBACK") < suffix.rindex("```c")


@pytest.mark.slow
def test_turns_are_judged_stored_and_masked(tmp_path):
    from perfgym.train import grpo
    settings = grpo.GRPOSettings(model_path=None, task="dot", output_dir=str(tmp_path / "run"),
                                 steps=1, G=2, groups_per_step=1, max_completion_length=48,
                                 lora=True, save_steps=1, engine="openvino", turns=2,
                                 answer_start=True, prompt_op="improve", temperature=0.7)
    run = grpo.train(settings)
    turns = [c for c in run.store.candidates() if c.slot.startswith("grpo:mt:")]
    first = [c for c in turns if c.slot.endswith(":0")]
    assert len(first) == 2 and all(c.outcome is not None for c in turns)
    later = [c for c in turns if not c.slot.endswith(":0")]
    # a second turn exists unless the first reached the expert's speed, and it follows its first
    assert all(c.parent_id in {f.id for f in first} for c in later)
    assert all(c.op in ("repair", "improve") for c in later)
    stats = run.reward.step_stats[-1]
    assert stats["completions"] == 2 and stats["by_turn"][0]["trajectories"] == 2
    # resumed after the step: nothing is stored twice
    again = grpo.train(settings, resume=True)
    assert len([c for c in again.store.candidates() if c.slot.startswith("grpo:mt:")]) == \
        len(turns)


def test_resume_skips_a_checkpoint_whose_save_was_cut_short(tmp_path):
    from perfgym.train.grpo import last_complete_checkpoint
    assert last_complete_checkpoint(tmp_path) is None
    for step in (1, 2, 10):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-11").mkdir()  # killed while saving: no state file yet
    (tmp_path / "checkpoint-x").mkdir()
    assert last_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-10"  # 10 > 2, as numbers


@pytest.mark.slow
def test_three_turns_from_the_command_line_continue_after_kill_9(tmp_path):
    """`perfgym train grpo --turns 3` on the default model, killed with SIGKILL once its first
    step is saved and run again with --resume: it finishes, every turn is stored once, and
    every later turn follows the one before. Without gradient checkpointing, in micro-batches
    of one group (the shared-prefix update; the other multi-turn test keeps the default)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from perfgym.store import RunStore
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "perfgym.cli", "train", "grpo", "--task", "dot", "--turns", "3",
           "--steps", "2", "--G", "2", "--max-completion-length", "48", "--lora",
           "--save-steps", "1", "--prompt-op", "improve", "--temperature", "0.7",
           "--no-gradient-checkpointing", "--micro-batch", "2", "--output-dir", str(out)]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    saved = out / "checkpoints" / "checkpoint-1" / "trainer_state.json"  # (written last)
    deadline = time.monotonic() + 900
    while not saved.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert saved.exists(), proc.stderr.read().decode()[-3000:] if proc.poll() else "no step"
    time.sleep(1)  # the state file's write done; the second step takes tens of seconds
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "final").exists()  # killed before the end: the resume has work to do
    store = RunStore(out)
    first_step = sorted(c.slot for c in store.candidates() if c.slot.startswith("grpo:mt:0:"))
    config = store.config()
    store.close()
    assert config["gradient_checkpointing"] is False and config["micro_batch"] == 2
    assert first_step

    r = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "final").exists() and (out / "checkpoints" / "checkpoint-2").exists()
    store = RunStore(out)
    turns = [c for c in store.candidates() if c.slot.startswith("grpo:mt:")]
    store.close()
    slots = [c.slot for c in turns]
    assert len(slots) == len(set(slots))  # nothing stored twice
    assert sorted(s for s in slots if s.startswith("grpo:mt:0:")) == first_step
    assert any(s.startswith("grpo:mt:1:") for s in slots)  # the step after the kill ran
    by_slot = {c.slot: c for c in turns}
    for c in turns:
        step, trajectory, turn = c.slot.split(":")[2:]
        assert c.outcome is not None and int(turn) <= 2
        if turn != "0":
            before = by_slot[f"grpo:mt:{step}:{trajectory}:{int(turn) - 1}"]
            assert c.parent_id == before.id
