"""The same 8 answers scored by `perfgym eval` and through each framework integration: the
rewards side by side, and each path's time per answer over a direct `evaluate`.

    python benchmarks/integrations_compare.py [--reward tiered] [--json [OUT]]

The answers are tests/integrations/answers.py's (the dot task at N=200000), with the cache on:
`perfgym eval answer.md --reward R` judges each once, and every path after it reads the same
cached outcome, so what a path adds over `evaluate` is its own plumbing. Paths:

  verl (reward loop)   verl's RewardLoopWorker with custom_reward_function = compute_score
  verl (batch)         verl's BatchRewardManager with compute_score_batch
  OpenRLHF             OpenRLHF's SingleTurnAgentExecutor posting to perfgym serve /openrlhf
                       (a stand-in vLLM engine answers with each answer's tokens)
  verifiers            verifiers' Task.score on a trace holding the answer (the reward the
                       environment records), timed as verifiers times its scoring stage

Each path runs once over the 8 answers; times are wall-clock per answer, in one run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from results_by_machine import json_flag, record

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "integrations"), str(ROOT / "tests")]

from answers import ANSWERS, LABEL, SIZE, TASK  # noqa: E402


def eval_rewards(reward: str, tmp: Path) -> dict[str, float]:
    out = {}
    for name, text in ANSWERS.items():
        path = tmp / f"{name}.md"
        path.write_text(text)
        run = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", str(path), "--task",
                              TASK, "--size", SIZE, "--reward", reward, "--json"],
                             capture_output=True, text=True, check=True)
        out[name] = json.loads(run.stdout)["reward"]
    return out


def direct(reward: str) -> tuple[dict[str, float], float]:
    from perfgym import EvalConfig, evaluate, get_task
    from perfgym.rewards import score
    from perfgym.tasks import parse_size
    task = get_task(TASK)
    size = parse_size(SIZE, task)
    started = time.perf_counter()
    got = {n: score(reward, [evaluate(task, t, size, EvalConfig())])[0]
           for n, t in ANSWERS.items()}
    return got, (time.perf_counter() - started) / len(ANSWERS)


def verl_batch(reward: str, model: str, tmp: Path):
    """(tokenizer, DataProto) of the exported row repeated once per answer, with the rollout's
    tensors, as tests/integrations/test_verl.py builds it."""
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
    path = tmp / "train.parquet"
    subprocess.run([sys.executable, "-m", "perfgym.cli", "export", "verl", "--task", TASK,
                    "--sizes", SIZE, "-o", str(path)], check=True, capture_output=True)
    tok = AutoTokenizer.from_pretrained(model)
    dataset = RLHFDataset([str(path)], tok, OmegaConf.create(
        {"max_prompt_length": 4096, "filter_overlong_prompts": False, "cache_dir": str(tmp)}))
    data = DataProto.from_single_dict(collate_fn([dataset[0]])).repeat(len(ANSWERS), True)
    prompt = tok.apply_chat_template(list(data.non_tensor_batch["raw_prompt"][0]),
                                     add_generation_prompt=True, tokenize=False)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    answers = [tok(a, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
               for a in ANSWERS.values()]
    width = max(map(len, answers))
    prompts = torch.tensor([ids] * len(answers))
    responses = torch.tensor([a + [tok.pad_token_id] * (width - len(a)) for a in answers])
    mask = torch.tensor([[1] * (len(ids) + len(a)) + [0] * (width - len(a)) for a in answers])
    rollout = DataProto.from_dict({"prompts": prompts, "responses": responses,
                                   "input_ids": torch.cat([prompts, responses], 1),
                                   "attention_mask": mask})
    return tok, data.union(rollout)


def verl_paths(reward: str, model: str, tmp: Path):
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.workers.reward_manager import BatchRewardManager

    from perfgym.integrations.verl import compute_score_batch
    tok, data = verl_batch(reward, model, tmp)
    names = list(ANSWERS)
    config = OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": model, "tokenizer_path": None}},
        "reward": {"custom_reward_function": {"path": "pkg://perfgym.integrations.verl",
                                              "name": "compute_score",
                                              "reward_kwargs": {"reward": reward}},
                   "reward_manager": {"source": "register", "name": "naive"},
                   "reward_model": {"enable": False}}})
    worker = RewardLoopWorker(config)
    started = time.perf_counter()
    out = worker.loop.run_until_complete(worker.compute_score_batch(data))
    loop_time = (time.perf_counter() - started) / len(names)
    loop = {n: o["reward_score"] for n, o in zip(names, out)}

    manager = BatchRewardManager(tok, num_examine=0, compute_score=compute_score_batch,
                                 reward=reward)
    started = time.perf_counter()
    result = manager(data, return_dict=True)
    batch_time = (time.perf_counter() - started) / len(names)
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:].sum(dim=1)
    batch = {n: result["reward_tensor"][i, lengths[i] - 1].item() for i, n in enumerate(names)}
    return (loop, loop_time), (batch, batch_time), tok, data


def openrlhf_path(reward: str, tok, data) -> tuple[dict[str, float], float]:
    from openrlhf.utils.agent import SingleTurnAgentExecutor
    from service import running_service
    prompt = tok.apply_chat_template(list(data.non_tensor_batch["raw_prompt"][0]),
                                     add_generation_prompt=True, tokenize=False)

    class Engine:
        def __init__(self, text):
            self.ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]

        async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
            out = SimpleNamespace(token_ids=self.ids, finish_reason="stop", logprobs=None)
            return SimpleNamespace(outputs=[out])

    got = {}
    with running_service(token="bench") as (_, url, _client):
        executor = SingleTurnAgentExecutor(url.replace("http://", "http://perfgym:bench@")
                                           + f"/openrlhf?reward={reward}")
        params = SimpleNamespace(max_tokens=1024, logprobs=None)
        started = time.perf_counter()
        for name, text in ANSWERS.items():
            out = asyncio.run(executor.execute(prompt, LABEL, params, 8192, tok, Engine(text)))
            got[name] = out["reward"][0]
        elapsed = (time.perf_counter() - started) / len(ANSWERS)
    return got, elapsed


def verifiers_path(reward: str) -> tuple[dict[str, float], float]:
    import verifiers.v1 as vf

    import perfgym.integrations.verifiers_env as pg
    env = pg.load_environment(tasks=TASK, sizes=SIZE, reward=reward)
    (task,) = list(env.taskset)
    got, spent = {}, 0.0
    for name, text in ANSWERS.items():
        trace = vf.Trace.model_validate({"task": {"type": "KernelTask",
                                                  "data": task.data.model_dump(mode="json")},
                                         "agent": {"config": {}},
                                         "nodes": [{"message": {"role": "user",
                                                                "content": task.data.prompt}},
                                                   {"message": {"role": "assistant",
                                                                "content": text},
                                                    "parent": 0, "sampled": True}]})
        started = time.perf_counter()
        asyncio.run(task.score(trace))
        spent += time.perf_counter() - started
        got[name] = trace.rewards["perfgym"].score
    return got, spent / len(ANSWERS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reward", default="tiered")
    json_flag(ap, "integrations_compare")
    args = ap.parse_args()
    from perfgym.models import resolve_model
    model = str(resolve_model(quiet=True))
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "perfgym-integrations-compare"
    tmp.mkdir(parents=True, exist_ok=True)

    expected = eval_rewards(args.reward, tmp)
    from perfgym.cache import evaluator_digest
    evaluator_digest.cache_clear()  # as the eval subprocesses hashed the evaluator
    base, base_time = direct(args.reward)
    paths = {"evaluate (direct)": (base, base_time)}
    loop, batch, tok, data = verl_paths(args.reward, model, tmp)
    paths["verl reward loop"] = loop
    paths["verl batch manager"] = batch
    paths["OpenRLHF /openrlhf"] = openrlhf_path(args.reward, tok, data)
    paths["verifiers rubric"] = verifiers_path(args.reward)

    names = list(ANSWERS)
    print(f"{len(names)} answers, dot at {SIZE}, reward {args.reward}, cache on\n")
    print("| answer | perfgym eval | " + " | ".join(paths) + " |")
    print("|---|---|" + "---|" * len(paths))
    for n in names:
        cells = [f"{p[0][n]:.4f}" for p in paths.values()]
        print(f"| {n} | {expected[n]:.4f} | " + " | ".join(cells) + " |")
    print("\n| path | identical to perfgym eval | ms per answer | over evaluate |")
    print("|---|---|---|---|")
    for label, (got, per) in paths.items():
        same = sum(math.isclose(got[n], expected[n], rel_tol=1e-6, abs_tol=1e-9)
                   for n in names)
        exact = sum(got[n] == expected[n] for n in names)
        print(f"| {label} | {exact} of {len(names)} exactly ({same} within 1e-6) | "
              f"{per * 1e3:.1f} | {(per - base_time) * 1e3:+.1f} ms |")
    result = {"expected": expected, "paths": {
        k: {"rewards": v[0], "seconds_per_answer": v[1]} for k, v in paths.items()}}
    if args.json:
        record("integrations_compare", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds: each path's time
    per answer, and how many of its rewards are perfgym eval's exactly."""
    want = result["expected"]
    return {f"{path}, ms an answer": (
        f"{p['seconds_per_answer'] * 1e3:.1f} "
        f"({sum(p['rewards'][n] == want[n] for n in want)}/{len(want)} identical)")
        for path, p in result["paths"].items()}


if __name__ == "__main__":
    main()
