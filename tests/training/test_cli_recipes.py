"""The training commands as a user runs them: recipes in --smoke mode, pairs commands."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from importlib import resources

# the recipes shipped in the installed package, run by name as a user would
RECIPES = sorted(p.name.removesuffix(".toml") for p in resources.files("perfgym").joinpath(
    "recipes").iterdir() if p.name.endswith(".toml"))


def perfgym(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "perfgym.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200",
                                                   "TRL_EXPERIMENTAL_SILENCE": "1"})


def test_four_recipes_are_shipped():
    assert RECIPES == ["cpu_learning_curve", "kernelcompare_sft_then_grpo",
                       "online_rl_exp1_fixed", "online_rl_exp2_sqd"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_smoke(recipe, tmp_path):
    pytest.importorskip("trl", reason="the train extra is not installed: pip install 'perfgym[train]'")
    r = perfgym("train", "recipe", recipe, "--smoke", "--output-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["grpo"]["completions"] == 4  # 2 steps x 1 prompt x G=2
    store = tmp_path / "grpo" / "run.sqlite"
    assert store.is_file()
    if "data" in result:  # SFT examples: chat turns with verified kernels
        records = [json.loads(x) for x in Path(result["data"]).read_text().splitlines()]
        assert records and all(r["completion"][0]["content"].startswith("```c\n")
                               for r in records)
        assert (tmp_path / "sft" / "merged" / "config.json").is_file()
    if "pairs" in result:
        assert result["pairs"]["train"] + result["pairs"]["test"] == result["pairs"]["kept"]
        assert (tmp_path / "sft" / "merged" / "config.json").is_file()


def test_recipe_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[grpo]\nnot_a_field = 1\n")
    r = perfgym("train", "recipe", str(bad), "--smoke", "--output-dir", str(tmp_path / "o"))
    assert r.returncode == 2 and "not_a_field" in r.stderr and "Traceback" not in r.stderr
    r = perfgym("train", "recipe", RECIPES[0], "--output-dir", str(tmp_path / "o"),
                "--model-path", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "nowhere" in r.stderr and "Traceback" not in r.stderr
    r = perfgym("train", "recipe", "online_rl_exp1_fixed", "--sft-steps", "3", "--smoke",
                "--output-dir", str(tmp_path / "o2"))
    assert r.returncode == 2 and "no [sft] section" in r.stderr
    r = perfgym("train", "recipe", "no_such_recipe", "--smoke", "--output-dir", str(tmp_path))
    assert r.returncode == 2 and "online_rl_exp1_fixed" in r.stderr and "Traceback" not in r.stderr


def test_recipe_flags_override_the_recipe(tmp_path):
    pytest.importorskip("trl", reason="the train extra is not installed: "
                        "pip install 'perfgym[train]'")
    r = perfgym("train", "recipe", "online_rl_exp1_fixed", "--smoke", "--steps", "1", "--G", "3",
                "--output-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["grpo"]["completions"] == 3 and result["grpo"]["steps"] == 1


def test_pairs_commands(tmp_path):
    r = perfgym("pairs", "starter", "--out", str(tmp_path / "s.jsonl"), "--no-filter")
    assert r.returncode == 0, r.stderr
    n = len((tmp_path / "s.jsonl").read_text().splitlines())
    r = perfgym("pairs", "split", str(tmp_path / "s.jsonl"), "--out-dir", str(tmp_path / "sp"))
    assert r.returncode == 0
    train = (tmp_path / "sp" / "train.jsonl").read_text().splitlines()
    test = (tmp_path / "sp" / "test.jsonl").read_text().splitlines()
    assert len(train) + len(test) == n and len(test) == round(0.2 * n)
    r = perfgym("pairs", "split", str(tmp_path / "missing.jsonl"), "--out-dir", str(tmp_path))
    assert r.returncode == 2 and "missing.jsonl" in r.stderr
