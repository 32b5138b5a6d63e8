"""A verl / OpenRLHF-style custom reward: `compute_score(data_source, solution_str,
ground_truth, extra_info)` for one sample, calling a remote perfgym service.

verl: custom_reward_function.path=examples/verl_reward.py custom_reward_function.name=compute_score
"""
import os

from perfgym.client import RewardClient

client = RewardClient(os.environ.get("PERFGYM_URL", "http://127.0.0.1:8000"),
                      os.environ.get("PERFGYM_TOKEN"))


def compute_score(data_source, solution_str, ground_truth=None, extra_info=None):
    """data_source names the perfgym task; extra_info may carry "stage" and "size"."""
    extra = extra_info or {}
    candidate = {"task": data_source, "code": solution_str, "stage": extra.get("stage"),
                 "size": extra.get("size")}
    result = client.evaluate([candidate], reward=extra.get("reward", "weighted"))[0]
    return result["reward"]
