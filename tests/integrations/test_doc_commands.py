"""Each integration page's command line, taken from the page and run as far as this machine
can: OpenRLHF's own argparse parser (abbreviations off, as a newer flag could make one
ambiguous), verl's own Hydra config with the page's overrides against the exported prompts'
token lengths, and the example reward's task and stage against the service's own checks."""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "integrations"


def command(page: str, program: str) -> list[str]:
    """The words of the page's first `program` command (continued lines joined), without the
    `...` that stands for the user's own flags."""
    text = (DOCS / page).read_text().replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.lstrip().startswith(program))
    return [w for w in shlex.split(line, comments=True) if w != "..."]


def openrlhf_parser() -> argparse.ArgumentParser:
    """train_ppo_ray's parser, built as its __main__ block builds it (importing the module
    would start on DeepSpeed and vLLM)."""
    spec = importlib.util.find_spec("openrlhf.cli.train_ppo_ray")
    tree = ast.parse(Path(spec.origin).read_text())
    main = next(n for n in tree.body if isinstance(n, ast.If)
                and "__main__" in ast.unparse(n.test))
    body = []
    for stmt in main.body:
        if "parse_args" in ast.unparse(stmt):
            break
        body.append(stmt)
    from datetime import datetime
    scope = {"argparse": argparse, "datetime": datetime, "os": __import__("os")}
    exec(compile(ast.Module(body=body, type_ignores=[]), spec.origin, "exec"), scope)
    parser = scope["parser"]
    parser.allow_abbrev = False
    return parser


def test_openrlhf_page_command_parses_with_full_flag_names():
    pytest.importorskip("openrlhf", reason="OpenRLHF is not installed: "
                        "pip install --no-deps openrlhf==0.11.2")
    words = command("openrlhf.md", "python -m openrlhf.cli.train_ppo_ray")[3:]
    args = openrlhf_parser().parse_args(words)
    assert vars(args)["data.prompt_dataset"] == "data/perfgym_train.parquet"
    assert vars(args)["data.input_key"] == "prompt" and vars(args)["data.label_key"] == "label"
    assert vars(args)["reward.remote_url"].endswith("/openrlhf?reward=tiered")
    # prompt and answer fit: the exported prompts are under 1,000 tokens
    assert vars(args)["data.max_len"] >= 2048


def test_openrlhf_page_names_only_serve_options_that_exist():
    from typer.testing import CliRunner

    from perfgym.cli import app
    help_text = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).output
    page = (DOCS / "openrlhf.md").read_text()
    assert "allowed task list" not in page
    pip = {"--no-build-isolation", "--no-deps"}  # (the install section's)
    for flag in set(re.findall(r"`(--[a-z-]+)`", page)) - pip:
        assert flag in help_text, f"the OpenRLHF page names {flag}, perfgym serve has none"


def exported_prompt_tokens() -> int:
    """The longest chat-templated prompt `perfgym export verl` writes, in the default model's
    tokens."""
    from transformers import AutoTokenizer

    from perfgym.integrations.dataset import rows
    from perfgym.models import resolve_model
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(quiet=True))
    longest = 0
    for row in rows(op="improve"):  # (improve shows the naive kernel: the longer prompt)
        text = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True,
                                             tokenize=False)
        longest = max(longest, len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return longest


def test_verl_page_command_composes_and_holds_the_exported_prompts():
    pytest.importorskip("verl", reason="verl is not installed: pip install --no-deps verl==0.9.1")
    pytest.importorskip("transformers", reason="the local extra is not installed: pip install 'perfgym[local]'")
    from hydra import compose, initialize_config_dir
    spec = importlib.util.find_spec("verl.trainer")
    words = command("verl.md", "python -m verl.trainer.main_ppo")[3:]
    with initialize_config_dir(config_dir=str(Path(spec.origin).parent / "config"),
                               version_base=None):
        config = compose("ppo_trainer", overrides=words)
    assert config.reward.custom_reward_function.path == "pkg://perfgym.integrations.verl"
    assert config.reward.custom_reward_function.name == "compute_score"
    longest = exported_prompt_tokens()
    assert 500 < longest <= config.data.max_prompt_length, longest


def test_the_example_reward_sends_a_task_and_stage_the_service_accepts(monkeypatch):
    pytest.importorskip("fastapi", reason="perfgym serve needs the serve extra: pip install 'perfgym[serve]'")
    from perfgym.integrations.dataset import rows
    from perfgym.serve import Candidate
    from perfgym.tasks import builtin_names
    spec = importlib.util.spec_from_file_location("verl_reward", ROOT / "examples" /
                                                  "verl_reward.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    sent = []
    monkeypatch.setattr(example.client, "evaluate",
                        lambda cands, reward="tiered": sent.extend(cands) or
                        [{"reward": 1.0, "outcome": {}}])
    for stage in (None, 3):
        row = rows(["dot"], stage=stage)[0]  # as verl hands a row of the export
        out = example.compute_score(row["data_source"], "answer",
                                    row["reward_model"]["ground_truth"], row["extra_info"])
        assert out["score"] == 1.0
        candidate = Candidate(**sent[-1])  # the service's own validation (stage 1-6 or null)
        assert candidate.task in builtin_names() and candidate.stage == stage
    assert json.loads(rows(["dot"])[0]["label"])["task"] == "dot"
