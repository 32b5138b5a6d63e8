"""perfgym as verl's reward: custom reward functions in verl's two forms.

    compute_score        one sample: verl's reward loop (its trainer's only reward path in
                         0.9) calls it per sample, concurrently, off its event loop
    compute_score_batch  the whole batch at once, for verl's batch-based reward manager
                         (`verl.workers.reward_manager.BatchRewardManager`, the reward path of
                         earlier verl): one evaluation batch, so builds run in parallel, and
                         GRPO groups are known, which group_normalized needs

    reward:
      custom_reward_function:
        path: pkg://perfgym.integrations.verl   # verl imports it as a module
        name: compute_score
        reward_kwargs: {reward: tiered, ray_address: auto}   # auto: the cluster verl runs in

The row's `reward_model.ground_truth` is perfgym's Label (`perfgym export verl` writes it);
without one, `data_source` names the task. Both return verl's dict form: `score` is the
reward, the other keys are logged beside it (numbers only: verl averages them).
"""
from __future__ import annotations

from typing import Any

# absolute: verl may load this module from its file path, outside the package
from perfgym.integrations import (Label, Scored, check_scheme, executor_for, recent,
                                  score_answers)


def label_of(data_source: str, ground_truth: Any) -> Label:
    if ground_truth not in (None, ""):
        return Label.parse(ground_truth)
    return Label.parse(str(data_source).removeprefix("perfgym/"))


def compute_score(data_source: str, solution_str: str, ground_truth: Any = None,
                  extra_info: dict | None = None, reward: str = "tiered",
                  ray_address: str | None = None, **verl_kwargs: Any) -> dict[str, float]:
    """One sample's reward. `verl_kwargs`: what verl adds when a reward model serves
    (reward_router_address, reward_model_tokenizer), unused here. A refused answer (no
    verdict: a disturbed timing, a lane wait past its bound, a host fault) cannot see its
    group here, so it scores the mean of the last rewards this prompt's answers earned in this
    process (RecentRewards; 0 before any), about its group's mean: an advantage near zero."""
    check_scheme(reward)
    if reward == "group_normalized":
        raise ValueError("group_normalized compares a GRPO group: use compute_score_batch "
                         "(reward_manager: batch)")
    label = label_of(data_source, ground_truth)
    scored = score_answers([(label, solution_str)], reward, executor=executor_for(ray_address))
    row = row_key(data_source, ground_truth, extra_info)
    if scored[0].refused:
        scored[0].reward = recent.neutral(row)
    else:
        recent.record(row, scored[0].reward)
    return _result(scored[0])


def row_key(data_source: str, ground_truth: Any, extra_info: dict | None) -> tuple:
    """Which prompt a sample answers, as far as one sample tells: its row's label, index and
    prompt kind."""
    info = extra_info or {}
    return (str(data_source), str(ground_truth), info.get("index"), info.get("op"))


def compute_score_batch(data_sources: list, solution_strs: list[str], ground_truths: list,
                        extra_infos: list | None = None, reward: str = "tiered",
                        ray_address: str | None = None, uids: list | None = None,
                        **verl_kwargs: Any) -> list[dict]:
    """A batch's rewards, evaluated together. The answers to one prompt form a group: verl's
    `uid` of each sample (verl gives every prompt one before it repeats it n times for GRPO)
    from `uids` or extra_info["uid"] when given; else the rows with the same label, index
    and prompt kind (one export's row index alone would join rows of two exports)."""
    labels = [label_of(d, g) for d, g in zip(data_sources, ground_truths)]
    infos = list(extra_infos) if extra_infos is not None else [None] * len(labels)
    given = list(uids) if uids is not None else [(info or {}).get("uid") for info in infos]
    groups = [("uid", uid) if uid is not None else row_key(d, g, info)
              for uid, d, g, info in zip(given, data_sources, ground_truths, infos)]
    scored = score_answers(list(zip(labels, solution_strs)), reward, groups=groups,
                           executor=executor_for(ray_address))
    return [_result(s) for s in scored]


def _result(s: Scored) -> dict[str, float]:
    o = s.outcome
    return {"score": s.reward, "ok": float(o.ok), "gflops": float(o.gflops or 0.0),
            "speedup": float(o.speedup or 0.0), "refused": float(s.refused)}
