"""A TRL reward function that scores completions on a remote perfgym machine.

    perfgym serve --host 0.0.0.0 --token $TOKEN        # on the benchmark machine
    GRPOTrainer(..., reward_funcs=[perfgym_reward])     # on the trainer, with this file
"""
import os

from perfgym.client import RewardClient

client = RewardClient(os.environ.get("PERFGYM_URL", "http://127.0.0.1:8000"),
                      os.environ.get("PERFGYM_TOKEN"))


def perfgym_reward(prompts, completions, task=None, **kwargs):
    """TRL calls this with the batch; completions of one prompt form one GRPO group."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    tasks = task or ["dgemm"] * len(texts)
    groups = [str(p if isinstance(p, str) else p[-1]["content"])[-64:] for p in prompts]
    results = client.evaluate([{"task": t, "code": c, "group": g}
                               for t, c, g in zip(tasks, texts, groups)],
                              reward=os.environ.get("PERFGYM_REWARD", "group_normalized"))
    return [r["reward"] for r in results]
