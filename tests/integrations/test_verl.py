"""perfgym as verl's reward, through verl's own classes.

`perfgym export verl`'s Parquet is loaded by verl's RLHFDataset and collated into a DataProto
as its trainer does; the rollout (a GPU inference engine in verl's agent loop) is the one
stand-in: it tokenizes the chat-templated prompt and fixed answers, left- and right-padded
as verl lays out `prompts`, `responses` and `attention_mask`. verl's RewardLoopWorker (the
reward path of its trainer in 0.9.1) then loads `compute_score` from its
`custom_reward_function` config and scores the batch, and its `batch` reward manager scores it
with `compute_score_batch`: every reward must be the one `perfgym eval answer.md --reward R`
gives the same answer.
"""
import json
import subprocess
import sys

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed: pip install "
                    "'perfgym[verl]' && pip install --no-deps verl==0.9.1")
pytest.importorskip("transformers", reason="the tokenizer needs the local extra: pip install 'perfgym[local]'")

from answers import ANSWERS, LABEL, SIZE, TASK, eval_reward, fresh_digest  # noqa: E402

NAMES = ["simd_reduction", "wrong_answer", "compile_error", "no_code"]


@pytest.fixture(scope="module")
def model_path():
    from perfgym.models import resolve_model
    return str(resolve_model(quiet=True))


@pytest.fixture(scope="module")
def parquet(tmp_path_factory):
    path = tmp_path_factory.mktemp("verl") / "train.parquet"
    subprocess.run([sys.executable, "-m", "perfgym.cli", "export", "verl", "--task", TASK,
                    "--sizes", SIZE, "-o", str(path)], check=True, timeout=300)
    return path


@pytest.fixture(scope="module")
def batch(parquet, model_path):
    """The exported row through RLHFDataset and collate_fn, repeated once per answer (a GRPO
    group), with the rollout's tensors for those answers."""
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096,
                               "filter_overlong_prompts": False, "cache_dir": str(parquet.parent)})
    dataset = RLHFDataset([str(parquet)], tokenizer, config)
    assert len(dataset) == 1
    data = DataProto.from_single_dict(collate_fn([dataset[0]]))
    data = data.repeat(len(NAMES), interleave=True)

    prompt = tokenizer.apply_chat_template(list(data.non_tensor_batch["raw_prompt"][0]),
                                           add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answers = [tokenizer(ANSWERS[n], add_special_tokens=False)["input_ids"]
               + [tokenizer.eos_token_id] for n in NAMES]
    width = max(len(a) for a in answers)
    pad = tokenizer.pad_token_id
    prompts = torch.tensor([prompt_ids] * len(NAMES))
    responses = torch.tensor([a + [pad] * (width - len(a)) for a in answers])
    mask = torch.tensor([[1] * len(prompt_ids) + [1] * len(a) + [0] * (width - len(a))
                         for a in answers])
    rollout = DataProto.from_dict({"prompts": prompts, "responses": responses,
                                   "input_ids": torch.cat([prompts, responses], dim=1),
                                   "attention_mask": mask})
    return tokenizer, data.union(rollout)


def test_the_exported_row_is_what_verl_reads(batch):
    _, data = batch
    row = {k: v[0] for k, v in data.non_tensor_batch.items()}
    assert row["data_source"] == f"perfgym/{TASK}"
    assert json.loads(row["reward_model"]["ground_truth"]) == {**json.loads(LABEL),
                                                              "stage": None, "opened": False}
    assert row["extra_info"]["task"] == TASK and row["extra_info"]["sizes"] == SIZE
    assert row["extra_info"]["opening"].startswith("```c")
    assert row["raw_prompt"][0]["role"] == "user"


def test_the_prompt_is_perfgyms_own_grpo_prompt(batch):
    """dataset.task_prompt keeps the train extra out of the export; it must not drift from
    the prompt perfgym's GRPO sends."""
    pytest.importorskip("trl", reason="the train extra is not installed: pip install 'perfgym[train]'")
    from perfgym import EvalConfig, get_task
    from perfgym.machine import machine_info
    from perfgym.train.grpo import task_prompt
    _, data = batch
    expected = task_prompt(get_task(TASK), "improve", None, machine_info(), EvalConfig())
    assert data.non_tensor_batch["raw_prompt"][0][0]["content"] == expected


def test_verl_reward_loop_scores_like_perfgym_eval(batch, model_path, tmp_path):
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    _, data = batch
    config = OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": model_path, "tokenizer_path": None}},
        "reward": {"custom_reward_function": {"path": "pkg://perfgym.integrations.verl",
                                              "name": "compute_score",
                                              "reward_kwargs": {"reward": "tiered"}},
                   "reward_manager": {"source": "register", "name": "naive"},
                   "reward_model": {"enable": False}}})
    expected = [eval_reward(n, tmp_path) for n in NAMES]
    fresh_digest()
    worker = RewardLoopWorker(config)
    # on the loop the worker took at its start, as its Ray actor runs it
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    assert [o["reward_score"] for o in outputs] == expected
    assert [o["reward_extra_info"]["ok"] for o in outputs] == [1.0, 0.0, 0.0, 0.0]


def test_verl_batch_manager_scores_like_perfgym_eval(batch, tmp_path):
    from verl.workers.reward_manager import BatchRewardManager

    from perfgym.integrations.verl import compute_score_batch
    tokenizer, data = batch
    expected = [eval_reward(n, tmp_path, "log_speedup") for n in NAMES]
    fresh_digest()
    manager = BatchRewardManager(tokenizer, num_examine=0, compute_score=compute_score_batch,
                                 reward="log_speedup")
    out = manager(data, return_dict=True)
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:].sum(dim=1)
    got = [out["reward_tensor"][i, lengths[i] - 1].item() for i in range(len(NAMES))]
    assert got == pytest.approx(expected, rel=1e-6)  # the tensor holds float32


def test_group_normalized_needs_the_batched_form():
    from perfgym.integrations.verl import compute_score
    with pytest.raises(ValueError, match="compute_score_batch"):
        compute_score(f"perfgym/{TASK}", ANSWERS["naive"], LABEL, {}, reward="group_normalized")


@pytest.mark.parametrize("args,fragment", [
    (["--task", "nope"], "no built-in task"),
    (["--task", "dot", "--sizes", "0"], "size"),
    (["--op", "fix"], "--op"),
    (["--stage", "9"], "stage"),
    (["--task", " , "], "--task is empty"),
])
def test_export_errors_are_one_line(tmp_path, args, fragment):
    out = subprocess.run([sys.executable, "-m", "perfgym.cli", "export", "verl", "-o",
                          str(tmp_path / "t.parquet"), *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert fragment in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr


def test_ray_address_judges_on_a_benchmark_node(tmp_path, monkeypatch, local_ray):
    """reward_kwargs.ray_address: "auto" joins the Ray cluster the reward runs in (a verl
    reward worker's) and judges on its benchmark node; the reward is still perfgym eval's."""
    ray = local_ray
    import uuid

    from answers import answer

    import perfgym.integrations
    from perfgym.integrations import Label, executor_for, score_answers
    from perfgym.integrations.verl import compute_score
    monkeypatch.setattr(perfgym.integrations, "_executors", {})  # none outlives this cluster
    ray.init(num_cpus=1, resources={"bench_node": 1}, include_dashboard=False,
             log_to_driver=False)
    try:
        var = f"s{uuid.uuid4().hex[:8]}"  # an answer no cache has seen
        text = answer(f"    double {var} = 0.0;\n    for (int i = 0; i < N; i++)\n"
                      f"        {var} += x[i] * y[i];\n    out[0] = {var};\n")
        (scored,) = score_answers([(Label.parse(LABEL), text)], executor=executor_for("auto"))
        assert scored.outcome.config.get("node")  # timed on the benchmark node
        got = compute_score(f"perfgym/{TASK}", text, LABEL, {}, ray_address="auto")["score"]
    finally:
        ray.shutdown()
    (tmp_path / "ray.md").write_text(text)
    out = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", str(tmp_path / "ray.md"),
                          "--task", TASK, "--size", SIZE, "--json"], capture_output=True,
                         text=True, timeout=600)
    assert got == json.loads(out.stdout)["reward"] == scored.reward
