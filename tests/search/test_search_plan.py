"""`perfgym search`'s plan, resolved from its flags (cli/search_plan.py): the no-flag defaults,
the checks of bad flags, and resuming as started. Pure: no model loads, no file is read."""
import dataclasses

import pytest

from perfgym.cli.common import UserError
from perfgym.cli.search_flags import SearchFlags, command_signature
from perfgym.cli.search_plan import (NO_FLAG_BUDGET_MINUTES, NO_FLAG_RATIOS, plan_search,
                                     resumed)
from perfgym.tasks import get_task


@pytest.fixture(autouse=True)
def coder_is_the_default(monkeypatch):
    # the suite's default model is the 135M one (conftest); the plan is the coder's. Nothing
    # here loads it.
    monkeypatch.setenv("PERFGYM_SEARCH_MODEL", "coder")


@pytest.fixture(scope="module")
def dgemm():
    return get_task("dgemm")


@pytest.fixture(scope="module")
def torch_task():
    return get_task("relu")


def plan(task, policy="openvino", **flags):
    return plan_search(SearchFlags(**flags), task, policy)


def test_the_no_flag_search_of_a_c_task_climbs_the_coder_at_the_train_sizes(dgemm):
    p = plan(dgemm)
    assert p.algo == "climb" and p.local_default and str(p.model_path) == "coder"
    assert p.budget_minutes == NO_FLAG_BUDGET_MINUTES and p.sizes == "train"
    assert p.size_set == dgemm.sizes("train") and p.answer_start
    assert p.climb.samples == 4 and p.config["climb"]["budget_minutes"] == p.budget_minutes
    assert p.config["model"] and "restarts" not in p.config  # the climb has no draws
    # a climb's answers follow their parent's length; --max-tokens, when given, bounds them
    assert p.climb.max_answer_tokens is None
    assert plan(dgemm, max_tokens=500).climb.max_answer_tokens == 500


def test_the_no_flag_search_of_a_pytorch_task_is_sqd_drawing_within_its_budget(torch_task):
    p = plan(torch_task)
    assert p.algo == "sqd" and p.restarts > 1 and p.budget_minutes == NO_FLAG_BUDGET_MINUTES
    assert p.config["ratios"] == [float(x) for x in NO_FLAG_RATIOS.split(",")]
    assert p.config["restarts"] == p.restarts


def test_a_flag_that_sets_the_run_makes_it_an_ordinary_search(dgemm):
    p = plan(dgemm, iterations=2)
    assert p.algo == "sqd" and p.restarts == 1 and p.budget_minutes is None
    assert p.sizes is None and "sizes" not in p.config
    assert plan(dgemm, algo="sqd").restarts > 1  # no-flag SQD: it draws again


def test_a_server_or_a_model_name_picks_the_openai_policy(dgemm):
    assert plan_search(SearchFlags(), dgemm, "openvino", server_in_env=True).policy == "openai"
    p = plan(dgemm, model="m")
    assert p.policy == "openai" and not p.local and p.model_path is None
    assert p.algo == "sqd" and p.sampling["max_tokens"] == 2048 and not p.answer_start


@pytest.mark.parametrize("flags, says", [
    ({"algo": "nope"}, "is not one of"),
    ({"algo": "refine", "budget_minutes": 0.0}, "--budget-minutes above 0"),
    ({"algo": "climb", "restarts": 2}, "--restarts are SQD's"),
    ({"algo": "sqd", "restarts": 0}, "at least 1"),
    ({"top_p": 0.0}, "--top-p"),
    ({"max_tokens": 0}, "--max-tokens"),
    ({"n": 0}, "at least 1"),
    ({"reward": "nope"}, "reward scheme"),
    ({"stages": "1,x"}, "comma-separated"),
    ({"sizes": "heldout", "algo": "sqd"}, "held-out"),
    ({"threads": 0}, "--threads"),
    ({"max_candidates": 0}, "--max-candidates"),
    ({"memory_k": 0, "memory": "m"}, "--memory-k"),
    ({"transforms": "loop_order,nope"}, "transforms are among"),
    ({"grammar": True, "policy": "hf"}, "--grammar"),
    ({"group_timing": True, "sizes": "train", "algo": "sqd"}, "--group-timing"),
])
def test_a_bad_flag_is_one_line_naming_it(dgemm, flags, says):
    with pytest.raises(UserError, match=says if says[0] != "-" else "\\" + says):
        plan(dgemm, **flags)


def test_every_algorithm_takes_a_time_budget(dgemm):
    for algo in ("refine", "best-of-n", "evolve"):
        p = plan(dgemm, algo=algo, budget_minutes=5.0)
        assert p.budget_seconds == 300 and p.config["budget_minutes"] == 5.0
    assert "budget_minutes" not in plan(dgemm, algo="evolve").config  # (runs from before)


def test_a_climb_of_a_pytorch_task_is_refused(torch_task):
    with pytest.raises(UserError, match="PyTorch problem"):
        plan(torch_task, algo="climb")


def test_a_resumed_no_flag_sqd_keeps_the_settings_it_was_started_with(torch_task):
    p = plan(torch_task)
    started = {**p.config, "restarts": 3, "budget_minutes": 20.0, "ratios": [0.4, 0.3, 0.3]}
    r = resumed(p, started)
    assert (r.restarts, r.budget_minutes, r.ratios) == (3, 20.0, (0.4, 0.3, 0.3))
    assert r.config == started


def test_a_resumed_run_with_other_settings_is_refused(dgemm):
    p = plan(dgemm)
    with pytest.raises(UserError, match="started with other settings"):
        resumed(p, {**p.config, "G": 8})
    with pytest.raises(UserError, match="started with other settings"):
        resumed(p, {})  # a store without this run's settings
    assert resumed(p, None) is p and resumed(p, dict(p.config)).config == p.config
    # a given flag is not taken back from the run: --restarts 2 against a run of 3
    q = plan(dgemm, algo="sqd", restarts=2)
    with pytest.raises(UserError, match="started with other settings"):
        resumed(q, {**q.config, "restarts": 3})


def test_the_signature_typer_reads_is_the_flags():
    names = [p.name for p in command_signature().parameters.values()]
    assert names == [f.name for f in dataclasses.fields(SearchFlags)]
    assert command_signature().parameters["task"].default.param_decls == ("--task", "-t")
