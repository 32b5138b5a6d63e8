"""Online GRPO for a few steps on the CPU, with the real evaluator scoring real completions."""
import json

import pytest
import torch

from conftest import TEMPLATES

FAST = {"max_time": 0.2, "max_samples": 10, "min_samples": 3}


def run(mode, model_path, out, steps=2, groups=2):
    from perfgym.train import grpo
    settings = grpo.GRPOSettings(
        model_path=str(model_path), mode=mode, output_dir=str(out), steps=steps, G=4,
        groups_per_step=groups, max_completion_length=200, learning_rate=1e-4, save_steps=1,
        beta=0.04 if mode == "fixed" else 0.0,  # KL to the reference model in one of them
        templates=str(TEMPLATES), eval_overrides=FAST,
        reward="group_normalized" if mode == "sqd" else "tiered")
    r = grpo.build(settings)
    before = {n: p.detach().clone() for n, p in r.trainer.model.named_parameters()}
    r.trainer.train()
    after = dict(r.trainer.model.named_parameters())
    changed = sum(not torch.equal(before[n], after[n].detach()) for n in before)
    return r, changed


@pytest.mark.parametrize("mode", ["fixed", "sqd"])
def test_grpo_steps(mode, coder_model, tmp_path):
    r, changed = run(mode, coder_model, tmp_path / mode)
    batch = 2 * 4
    # the reward function saw every completion of every step
    assert len(r.reward.seen) == 2 * batch
    # the store holds each one with its outcome and reward
    cands = [c for c in r.store.candidates() if c.op != "seed"]
    assert len(cands) == 2 * batch
    assert all(c.outcome and c.status == c.outcome["status"] and c.reward is not None
               for c in cands)
    assert {c.completion for c in cands} <= set(r.reward.seen)
    # the rewards varied inside groups, so the policy really moved
    assert any(s["statuses"].get("OK") for s in r.reward.step_stats)
    assert changed > 0
    # logs: TRL's metrics and ours, one JSON line per step
    log = [json.loads(ln) for ln in (tmp_path / mode / "train_log.jsonl").read_text().splitlines()]
    assert any("perfgym/ok_fraction" in entry for entry in log)
    step = next(e for e in log if "perfgym/status/OK" in e)
    shares = [v for k, v in step.items() if k.startswith("perfgym/status/")]
    from perfgym.outcome import Status
    assert len(shares) == len(Status) and abs(sum(shares) - 1.0) < 1e-6  # the step's status mix
    assert "perfgym/max_reward" in step and "reward" in step  # TRL's mean reward beside ours
    if mode == "fixed":
        assert any("kl" in e for e in log)
    assert list((tmp_path / mode / "checkpoints").glob("runs/*/events.out.tfevents.*")) or list(
        (tmp_path / mode / "checkpoints").rglob("events.out.tfevents.*"))  # TensorBoard
    assert (tmp_path / mode / "checkpoints" / "checkpoint-1").is_dir()


def test_sqd_second_step_draws_from_first_steps_children(coder_model, tmp_path):
    r, _ = run("sqd", coder_model, tmp_path / "sqd")
    first, second = r.rollout.prompts_by_step
    first_ids = {c.id for c in r.store.candidates() if c.slot.startswith("grpo:1:")}
    # step 1 expanded the seed (improve at stage 1, deepen to stage 2): iteration 1's plan
    assert {(n["op"], n["stage"]) for n in first} == {("improve", 1), ("deepen", 2)}
    # step 2 is iteration 2: the seed again, then nodes step 1 created
    assert all(n["iteration"] == 2 for n in second)
    assert any(n["parent_id"] in first_ids for n in second)
    # the pool told the store when iteration 1 was complete
    assert [d["iteration"] for _, _, d in r.store.events("pool_iteration_done")] == [1]


def test_a_refused_reward_is_neutral_in_its_group():
    # a host error or a disturbed timing is refused (NaN); GRPO gets the group's mean instead,
    # an advantage of zero, and no NaN reaches the loss
    from perfgym.train import grpo
    assert grpo.neutral_for_refused([1.0, float("nan"), 3.0]) == [1.0, 2.0, 3.0]
    assert grpo.neutral_for_refused([float("nan")] * 2) == [0.0, 0.0]


def test_fixed_prompts_of_several_tasks_are_judged_at_each_tasks_own_train_sizes(tmp_path):
    """GRPO over several tasks with sizes "train" (the learning experiment's): each prompt's
    answers are judged at its own task's train sizes. With one task's size list for all, the
    first dgemv answer met dgemm's M=256,N=256,K=256 and the run died (SizeError)."""
    from perfgym import EvalConfig
    from perfgym.executors import evaluate_many
    from perfgym.store import RunStore
    from perfgym.tasks import get_task
    from perfgym.train.grpo import PerfgymReward
    dgemm, dgemv = get_task("dgemm"), get_task("dgemv")
    asked = []

    def recording(requests, **kw):  # the real evaluator; the sizes it was asked are kept
        asked.extend((r.task.name, tuple(sorted(r.size.items()))) for r in requests)
        return evaluate_many(requests, **kw)

    config = EvalConfig(use_cache=False, compare_baseline=False, timeout=3.0)
    reward = PerfgymReward(dgemm, RunStore(tmp_path / "run"), config, "tiered", G=2,
                           sizes=dgemm.sizes("train"), executor=recording, size_set="train",
                           prompts={"p-dgemm": (dgemm, None), "p-dgemv": (dgemv, None)})
    broken = "```c\nvoid f( {\n```"  # no compile: the sizes are checked, nothing is timed
    rewards = reward.score(["p-dgemm"] * 2 + ["p-dgemv"] * 2, [broken] * 4, {})
    assert len(rewards) == 4
    for task in (dgemm, dgemv):
        want = {tuple(sorted(s.items())) for s in task.sizes("train")}
        assert {size for name, size in asked if name == task.name} == want


def test_a_task_named_again_comes_again_in_the_prompt_cycle(coder_model):
    # the lever for tasks a student forgets: more of GRPO's groups are theirs
    from transformers import AutoTokenizer

    from perfgym import EvalConfig
    from perfgym.machine import machine_info
    from perfgym.train import grpo
    tokenizer = AutoTokenizer.from_pretrained(str(coder_model))
    # (perfgym's own templates: each task's prompt shows its kernel, so each text is its own)
    settings = grpo.GRPOSettings(model_path=str(coder_model), task="dgemm,dot,transpose,dot")
    prompts, cycle = grpo.fixed_prompts(settings, tokenizer, machine_info(), EvalConfig())
    assert [prompts[t][0].name for t in cycle] == ["dgemm", "dot", "transpose", "dot"]
    assert len(prompts) == 3 and cycle[1] == cycle[3]


def test_edit_answers_are_made_on_the_prompts_kernel_then_judged_and_kept(tmp_path):
    """answer_form "edits": the reward makes each answer's SEARCH/REPLACE edits on the kernel
    its prompt showed, judges the result and keeps it in the run store; an edit that does not
    apply is a FORMAT_ERROR, and an answer that is a whole kernel is judged as one."""
    from perfgym import EvalConfig
    from perfgym.edits import DIVIDER, REPLACE, SEARCH
    from perfgym.store import RunStore
    from perfgym.tasks import get_task
    from perfgym.train.grpo import PerfgymReward, prompt_kernel
    dot = get_task("dot")
    config = EvalConfig(use_cache=False, compare_baseline=False, timeout=5.0)
    store = RunStore(tmp_path / "run")
    reward = PerfgymReward(dot, store, config, "tiered", G=3, prompts={"p-dot": (dot, None)})
    kernel = prompt_kernel(dot, config)
    reward.parents = {"p-dot": kernel}
    loop = next(x for x in kernel.splitlines() if x.strip().startswith("for"))
    good = f"{SEARCH}\n{loop}\n{DIVIDER}\n#pragma omp simd reduction(+:sum)\n{loop}\n{REPLACE}"
    bad = f"{SEARCH}\nfor (int i = 1; i < N; i++)\n{DIVIDER}\nx\n{REPLACE}"
    whole = "```c\n" + kernel + "```"
    rewards = reward.score(["p-dot"] * 3, [good, bad, whole], {})
    by_slot = {c.slot: c for c in store.candidates()}
    made, broken, kept = (by_slot[f"grpo:fixed:0:{i}"] for i in range(3))
    assert made.status == "OK" and "#pragma omp simd reduction(+:sum)" in made.completion
    assert SEARCH not in made.completion and loop.strip() in made.completion
    assert broken.status == "FORMAT_ERROR" and rewards[1] < rewards[0]
    assert kept.status == "OK"


def test_edit_answers_need_the_improve_prompt_and_plain_answers():
    from perfgym.train.grpo import GRPOSettings
    GRPOSettings(None, task="dot", prompt_op="improve", answer_form="edits")  # fine
    for bad in ({"prompt_op": "generate"}, {"answer_start": True}, {"mode": "sqd"}):
        with pytest.raises(ValueError, match="edit answers edit the improve prompt's kernel"):
            GRPOSettings(None, task="dot", **{"prompt_op": "improve", "answer_form": "edits", **bad})
    with pytest.raises(ValueError, match="answer_form"):
        GRPOSettings(None, task="dot", answer_form="diff")
