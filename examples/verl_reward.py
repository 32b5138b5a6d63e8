"""A verl-style custom reward, `compute_score(data_source, solution_str, ground_truth,
extra_info)` for one sample, that asks a remote `perfgym serve` (standard library client only,
so the trainer needs nothing of perfgym's evaluator).

verl: reward.custom_reward_function.path=examples/verl_reward.py
      reward.custom_reward_function.name=compute_score

It reads the rows `perfgym export verl` writes: `data_source` is "perfgym/<task>" and
`reward_model.ground_truth` perfgym's label ({"task", "sizes", "stage", "opened"}), where
`extra_info.stage` is -1 for none. (`perfgym.integrations.verl.compute_score` judges on this
machine or a Ray cluster instead of over HTTP.)
"""
import json
import os

from perfgym.client import RewardClient

client = RewardClient(os.environ.get("PERFGYM_URL", "http://127.0.0.1:8000"),
                      os.environ.get("PERFGYM_TOKEN"))
SIZE_POLICIES = ("default", "train", "heldout", "all", "smallest")  # not one size: the default


def candidate(data_source, solution_str, ground_truth=None):
    """The /evaluate candidate for one sample: the task without verl's "perfgym/" prefix, the
    label's stage (null for none, never -1) and its size when it names one."""
    label = json.loads(ground_truth) if ground_truth else {}
    task = label.get("task") or str(data_source).removeprefix("perfgym/")
    sizes = label.get("sizes") or "default"
    return {"task": task, "code": solution_str, "stage": label.get("stage"),
            "size": None if sizes in SIZE_POLICIES else sizes,
            "opened": bool(label.get("opened", False))}


def compute_score(data_source, solution_str, ground_truth=None, extra_info=None,
                  reward="tiered"):
    result = client.evaluate([candidate(data_source, solution_str, ground_truth)],
                             reward=reward)[0]
    # null: refused (a disturbed timing, a copy); 0.0 keeps verl's batch numeric
    return {"score": result["reward"] if result["reward"] is not None else 0.0,
            "refused": float(result["reward"] is None)}
