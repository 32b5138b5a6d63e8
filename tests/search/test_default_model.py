"""The real default model as a user meets it: `perfgym search` with no model flags, the model
command, the sampler's prompt-sparing repetition penalty, bad model paths."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers", reason="the local extra is not installed: "
                    "pip install 'perfgym[local]'")


def perfgym(*args, cwd=None, timeout=1200):
    return subprocess.run([sys.executable, "-m", "perfgym.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.slow
def test_search_with_no_model_flags_runs_the_default_model_and_writes_a_report(tmp_path):
    env_free = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL",)}
    done = subprocess.run([sys.executable, "-m", "perfgym.cli", "search", "--G", "2",
                           "--max-tokens", "32", "--run-dir", str(tmp_path / "run"), "--json"],
                          capture_output=True, text=True, timeout=1800, env=env_free)
    assert done.returncode == 0, done.stderr[-3000:]
    from perfgym.store import RunStore
    store = RunStore(tmp_path / "run")
    found = store.candidates()
    written = [c for c in found if c.policy != "seed"]  # the seed is the task's naive kernel
    from perfgym.policies import default_local_policy  # the fast engine when installed
    assert len(written) >= 2 and {c.policy for c in written} == {default_local_policy()}
    assert all(c.outcome is not None for c in found)
    from perfgym.models import DEFAULT_SAMPLING
    assert store.config()["sampling"]["temperature"] == DEFAULT_SAMPLING["temperature"]
    assert store.config()["answer_start"] is True  # the default model's answers are opened
    from perfgym.opening import answer_start
    from perfgym.tasks import get_task
    # each stored answer is the opening (of its stage: no <omp.h> where OpenMP is forbidden)
    # and the body the model wrote, or (no statement in it) the model's text alone
    assert all(c.completion.startswith(answer_start(get_task("dgemm"), c.stage))
               or ";" not in c.completion for c in written)
    summary = (tmp_path / "run" / "report" / "summary.md").read_text()
    from perfgym.models import DEFAULT_MODEL
    assert f"- model: `{DEFAULT_MODEL}`" in summary  # the default model is named, not None
    # one iteration: the progress figure draws each candidate (its bars), not two lone dots
    progress = (tmp_path / "run" / "report" / "progress.png")
    assert progress.stat().st_size > 5000
    report = json.loads(done.stdout)
    assert report["run_dir"] == str(tmp_path / "run")
    counts = report["answers"]
    assert counts["answers"] == len(written)
    assert counts["answers"] >= counts["parsed"] >= counts["compiled"] >= counts["passed"]
    assert counts["passed"] == sum(c.outcome["status"] == "OK" for c in written)


@pytest.mark.slow
def test_model_fetch_prints_a_loadable_directory():
    done = perfgym("model", "fetch")
    assert done.returncode == 0, done.stderr
    path = done.stdout.strip().splitlines()[-1]
    assert os.path.isfile(os.path.join(path, "config.json"))
    assert os.path.isfile(os.path.join(path, "tokenizer.json"))


def test_bad_model_paths_are_one_line_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "weights.bin").write_text("x")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": "relative/base/that/is/gone"}))
    for path, words in ((tmp_path / "nowhere", "neither a model directory"),
                        (tmp_path / "empty", "holds no model"),
                        (tmp_path / "weights.bin", "neither a model directory"),
                        (adapter, "names its base model")):
        done = perfgym("search", "--policy", "hf", "--model-path", str(path), "--run-dir",
                       str(tmp_path / f"run-{path.name}"))
        assert done.returncode == 2, (path, done.stderr[-2000:])
        assert words in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / f"run-{path.name}").exists()  # no half-made run to trip over


def test_repetition_penalty_spares_the_prompt():
    import torch

    from perfgym.policies.hf import CompletionRepetitionPenalty
    prompt_length = 3
    ids = torch.tensor([[5, 6, 7, 8]])  # tokens 5-7 are the prompt, 8 was generated
    scores = torch.tensor([[0.0, 0, 0, 0, 0, 2.0, 2.0, 2.0, 2.0, -2.0]])
    out = CompletionRepetitionPenalty(2.0, prompt_length)(ids, scores.clone())
    assert out[0, 8] == 1.0  # generated: penalized
    assert torch.equal(out[0, 5:8], scores[0, 5:8])  # the prompt's tokens: untouched
    ids = torch.tensor([[5, 6, 7, 9]])
    assert CompletionRepetitionPenalty(2.0, prompt_length)(ids, scores.clone())[0, 9] == -4.0
