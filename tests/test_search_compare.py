"""The search comparison at the no-flag budget (benchmarks/search_compare.py): its cells'
flags, plan, imports, records and statistics, with synthetic records; and the engine's
candidate cap and best-of-n's rounds under a deadline, which it relies on. No model runs and
no kernel is timed."""
import dataclasses
import importlib.util
import json
import math
import types
from pathlib import Path

import pytest

from perfgym.cli.search_flags import SearchFlags
from perfgym.cli.search_plan import NO_FLAG_RESTARTS, plan_search
from perfgym.search import BestOfN, Engine
from perfgym.search.engine import Step
from perfgym.store import RunStore
from perfgym.tasks import get_task

spec = importlib.util.spec_from_file_location(
    "search_compare", Path(__file__).parent.parent / "benchmarks" / "search_compare.py")
sc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sc)

AMD = {"cpu": "AMD EPYC", "isa": ["sse4_2", "avx", "avx2", "fma"], "cores": 2}
XEON = {"cpu": "Intel Xeon", "isa": ["avx2", "avx512f", "avx512_vnni"], "cores": 2}
FAST = 200  # bootstrap resamples in these tests


def cell(task, seed, algo, speedup, machine=AMD, wall=800.0, **more):
    return {"task": task, "seed": seed, "algo": algo, "best_speedup": speedup,
            "machine": machine,
            "kind": sc.machine_kind(machine["cpu"], machine["isa"], machine.get("family")),
            "wall_seconds": wall, "date": "2026-11-29", "commit": "abc", **more}


def cells_of(records):
    return {sc.key(c["task"], c["seed"], c["algo"]): c for c in records}


TASKS = sc.TASKS.split(",")


def full_grid(best="evolve", tasks=TASKS, seeds=(1, 2, 3), machine=AMD):
    """Every algorithm on every task and seed: `best` 3x naive, the others 2x, seed-wise
    a little apart."""
    return [cell(t, s, a, (3.0 if a == best else 2.0) * (1 + s / 100), machine)
            for t in tasks for s in seeds for a in sc.ALGOS]


# -- the cells' flags: the no-flag search but the algorithm ------------------------------------

@pytest.fixture
def coder(monkeypatch):
    monkeypatch.setenv("PERFGYM_SEARCH_MODEL", "coder")  # (the suite's default is smollm2)


def test_every_algorithm_runs_with_the_no_flag_searchs_model_sampler_sizes_and_budget(coder):
    dgemm = get_task("dgemm")
    no_flag = plan_search(SearchFlags(), dgemm, "openvino")
    assert no_flag.algo == "climb" and sc.flags("climb") == {}  # the no-flag command itself
    same_budget = plan_search(SearchFlags(algo="climb", budget_minutes=sc.budget_minutes()),
                              dgemm, "openvino")
    assert same_budget.config == no_flag.config
    options = {f.name: f.metadata["option"] for f in dataclasses.fields(SearchFlags)}
    for algo in sc.ALGOS + sc.OPTIONAL:
        fields = sc.flags(algo)
        p = plan_search(SearchFlags(**fields), dgemm, "openvino")
        assert p.algo == algo and p.sizes == "train" and p.size_set == dgemm.sizes("train")
        assert p.budget_minutes == no_flag.budget_minutes == 12
        for same in ("policy", "model_path", "sampling", "answer_start", "templates"):
            assert getattr(p, same) == getattr(no_flag, same), (algo, same)
        # the command line spells each field as perfgym search's option does
        for name in fields:
            assert not options[name].param_decls
        assert sc.cli_args(fields) == [w for k, v in fields.items()
                                       for w in (f"--{k.replace('_', '-')}", str(v))]
    sqd = plan_search(SearchFlags(**sc.flags("sqd")), dgemm, "openvino")
    assert sqd.restarts == NO_FLAG_RESTARTS and sqd.ratios[2] == 0  # the no-flag SQD


# -- the plan -----------------------------------------------------------------------------------

def test_plan_is_round_robin_and_balanced_when_cut():
    cells = sc.plan(["dgemm", "dot"], [1, 2, 3])
    assert len(cells) == 2 * 3 * len(sc.ALGOS) == len(set(cells))
    per_group = len(sc.ALGOS)
    # every prefix that ends at a group's end gives every algorithm the same (task, seed)s
    for end in range(per_group, len(cells) + 1, per_group):
        groups = {algo: {(t, s) for s, t, a in cells[:end] if a == algo} for algo in sc.ALGOS}
        assert len({frozenset(g) for g in groups.values()}) == 1
    # seed 1 everywhere before seed 2
    assert [s for s, _, _ in cells] == sorted(s for s, _, _ in cells)
    # the algorithms take turns at going first
    firsts = [cells[i][2] for i in range(0, len(cells), per_group)]
    assert set(firsts[:len(sc.ALGOS)]) == set(sc.ALGOS)


def test_missing_cells_skip_those_held_and_the_plan_says_how_long():
    held = cells_of([cell("dgemm", 1, "climb", 10.0, wall=600.0),
                     cell("dgemm", 2, "climb", 10.0, wall=900.0),
                     cell("sgemm", 1, "climb", 20.0, wall=750.0)])  # not planned
    todo = sc.missing(held, ["dgemm", "dot"], [1, 2])
    assert len(todo) == 2 * 2 * len(sc.ALGOS) - 2
    assert (1, "dgemm", "climb") not in todo and (2, "dgemm", "climb") not in todo
    assert todo == [c for c in sc.plan(["dgemm", "dot"], [1, 2]) if c in todo]  # plan order
    assert sc.cell_seconds(held) == 750.0 and sc.cell_seconds({}) == sc.CELL_MINUTES * 60
    # by algorithm: climb's own cells; an algorithm with none here, the default
    assert sc.cell_seconds(held, "climb") == 750.0
    assert sc.cell_seconds(held, "sqd") == sc.CELL_MINUTES * 60
    seconds = [750.0 if algo == "climb" else sc.CELL_MINUTES * 60 for _, _, algo in todo]
    assert sc.todo_seconds(held, todo) == sum(seconds)
    doc = {"model": "m", "cells": {"AMD EPYC | avx2": held}}
    text = sc.plan_text(doc, "AMD EPYC | avx2", ["dgemm", "dot"], [1, 2], sc.ALGOS).splitlines()
    assert text[0] == "machine kind: AMD EPYC | avx2 (this machine); model m"
    assert f"{len(todo)} to run" in text[1] and "2 of them planned" in text[1]
    assert f"{len(todo)} cells, {sum(seconds) / 3600:.1f} h" in text[2]
    assert "cannot declare one" in text[3]  # 2 tasks, 2 seeds: never a default
    assert len(text) == 4 + len(todo)
    assert text[-1].endswith(f"ends at {sum(seconds) / 3600:.1f} h)")
    other = sc.plan_text(doc, "Intel Xeon | avx2 avx512f", sc.TASKS.split(","), [1, 2, 3],
                         sc.ALGOS).splitlines()
    assert "holds 0 cells" in other[1] and "none measured on it" in other[2]
    assert len(other) == 3 + 60


def test_a_session_starts_a_cell_only_when_it_should_end_within_its_hours():
    now, ran = [0.0], []

    def run_one(seed, task, algo):
        ran.append((seed, task, algo))
        now[0] += 900  # each cell takes 15 minutes

    todo = sc.plan(["dgemm"], [1, 2])
    assert sc.runnable(todo, 1.0, run_one, lambda algo: 900, clock=lambda: now[0]) == 4
    assert ran == todo[:4]  # the fifth would end at 1.25 h
    ran.clear()
    assert sc.runnable(todo, 0, run_one, lambda algo: 900, clock=lambda: now[0]) == 0 and not ran
    assert sc.runnable(todo, None, run_one, lambda algo: 900,
                       clock=lambda: now[0]) == len(todo)


def test_each_cell_is_estimated_by_its_own_algorithm():
    """A climb that ends in a minute does not make a 15-minute cell look short, nor the
    reverse: the next cell starts only if its own algorithm's estimate fits."""
    now, ran = [0.0], []
    takes = {"climb": 60, "sqd": 900, "evolve": 900, "best-of-n": 900}

    def run_one(seed, task, algo):
        ran.append(algo)
        now[0] += takes[algo]

    todo = [(1, "dgemm", a) for a in ("sqd", "climb", "evolve", "climb", "best-of-n")]
    # 0.55 h = 1,980 s: sqd (900), climb (960), then evolve would end at 1,860 (fits) and the
    # climb at 1,920; best-of-n would end at 2,820: not started
    assert sc.runnable(todo, 0.55, run_one, lambda algo: takes[algo],
                       clock=lambda: now[0]) == 4
    assert ran == ["sqd", "climb", "evolve", "climb"]
    held = cells_of([cell("dgemm", 1, "climb", 10.0, wall=60.0),
                     cell("dgemm", 1, "sqd", 2.0, wall=900.0)])
    assert (sc.cell_seconds(held, "climb"), sc.cell_seconds(held, "sqd")) == (60.0, 900.0)


# -- first_search.json's draws --------------------------------------------------------------------

def draw(task, seed, flags="", machine=AMD, speedup=10.0, **more):
    return {"task": task, "seed": seed, "machine": machine, "commit": "c0ffee",
            "date": "2026-11-28", "wall_seconds": 800.0, "answers": 23,
            "command": f"perfgym search --task {task} --seed {seed} --run-dir runs/x --json"
                       + flags,
            "train_geomean_speedup": speedup, "heldout_geomean_speedup": 3.3,
            "heldout_all_ok": True, "confirmed": {"speedup": 20.0, "low": 13.0}, **more}


def test_first_search_no_flag_draws_are_climb_cells_and_its_sqd_draws_sqd_cells():
    doc = {"draws": [draw("dgemm", 1), draw("dgemm", 2, machine=XEON, speedup=0.9),
                     draw("dgemm", 3, " --templates t")],  # another search: not a cell
           "tasks": [draw("dot", 1, disturbed="shared the cores")],
           "sqd_before_climb": {"command": "perfgym search", "best_speedup": 3.0},
           "sqd_same_budget": {"draws": [draw("dgemm", 1, " --algo sqd", speedup=1.13)]}}
    cells = sc.first_search_cells(doc)
    assert [(c["task"], c["seed"], c["algo"]) for c in cells] == [
        ("dgemm", 1, "climb"), ("dgemm", 2, "climb"), ("dot", 1, "climb"), ("dgemm", 1, "sqd")]
    assert {c["source"] for c in cells} == {"first_search.json"}
    assert [c["kind"] for c in cells[:2]] == ["AMD EPYC | avx2", "Intel Xeon | avx2 avx512f"]
    assert cells[1]["best_speedup"] == 1.0 and cells[1]["train_geomean_speedup"] == 0.9
    first = cells[0]
    assert first["machine"] == {**AMD, "family": None}  # a draw that recorded no generation
    assert first["commit"] == "c0ffee" and first["answers"] == 23
    assert first["heldout_geomean_speedup"] == 3.3 and first["heldout_all_ok"] is True
    assert first["wall_seconds"] == 800.0 and first["curve"] is None
    assert cells[2]["disturbed"] == "shared the cores"
    # imported once: a second import and a cell already measured add nothing
    results = sc.new_doc("m")
    assert sc.add_cells(results, cells) == 4 and sc.add_cells(results, cells) == 0
    assert set(results["cells"]) == {"AMD EPYC | avx2", "Intel Xeon | avx2 avx512f"}


def test_the_committed_first_search_file_gives_climb_cells_on_its_kind():
    doc = json.loads(sc.FIRST_SEARCH.read_text())
    cells = sc.first_search_cells(doc)
    assert {c["algo"] for c in cells} == {"climb", "sqd"}
    # each cell under the kind of the machine its draw ran on (the file holds two kinds)
    assert all(c["kind"] == sc.machine_kind(c["machine"]["cpu"], c["machine"]["isa"],
                                            c["machine"].get("family")) for c in cells)
    assert {"AMD EPYC | avx2", "AMD EPYC | avx2 avx512f avx512_bf16"} <= {c["kind"] for c in cells}
    assert sum(c["task"] == "dgemm" and c["algo"] == "climb" for c in cells) == len(doc["draws"])


# -- statistics ---------------------------------------------------------------------------------

def test_the_bootstrap_is_clustered_by_task():
    lo, hi = sc.bootstrap_ci({"a": [1.0, 1.0], "b": [3.0, 3.0]}, n=FAST)
    assert lo == 1.0 and hi == 3.0  # which tasks were drawn is part of the spread
    assert sc.bootstrap_ci({"a": [2.0, 2.0], "b": [2.0]}, n=FAST) == (2.0, 2.0)
    by_task = {"a": [0.0, 1.0, 2.0], "b": [10.0, 10.0, 10.0]}
    lo, hi = sc.bootstrap_ci(by_task, n=2000)
    assert lo < sc.task_mean(by_task) == 5.5 < hi
    assert sc.bootstrap_ci(by_task, n=2000) == (lo, hi)  # seeded: reproducible
    assert sc.summarize({"dgemm": [0.0, math.log(4)]}, n=FAST)["geomean"] == 2.0


def test_the_default_is_the_winner_once_every_algorithm_has_3_seeds_on_5_tasks():
    tasks = sc.TASKS.split(",")
    s = sc.kind_summary(cells_of(full_grid("evolve")), tasks, [1, 2, 3], n=FAST)
    assert s["default"] == "evolve" and s["missing"] == [] and len(s["tasks"]) == 5
    assert all(c["runs"] == 15 and c["tasks"] == 5 for c in s["ci"].values())
    assert math.isclose(s["comparisons"]["climb / evolve"]["ratio"], 2 / 3)
    assert s["comparisons"]["climb / evolve"]["pairs"] == 15
    # one cell short: no default, and the cell is named
    short = cells_of(full_grid("evolve"))
    del short[sc.key("dot", 3, "sqd")]
    s = sc.kind_summary(short, tasks, [1, 2, 3], n=FAST)
    assert s["default"] is None and s["missing"] == ["dot/seed3/sqd"]
    assert s["tasks_with_3_seeds"] == [t for t in sorted(tasks) if t != "dot"]
    assert s["hours_to_run"] == round(800 / 3600, 1)


def test_geomeans_weigh_tasks_alike_and_ratios_pair_only_complete_groups():
    records = [cell(t, s, a, (2.0 if a == "sqd" else 1.0) * (1 + s + (t == "dot")))
               for t in ("dgemm", "dot") for s in (1, 2) for a in sc.ALGOS]
    records.append(cell("dgemm", 3, "climb", 100.0))  # a seed no other algorithm has
    records.append(cell("sgemm", 1, "climb", 50.0))   # a task no other algorithm has
    s = sc.kind_summary(cells_of(records), ["dgemm", "dot"], [1, 2], n=FAST)
    assert s["tasks"] == ["dgemm", "dot"] and s["groups"] == [
        ["dgemm", 1], ["dgemm", 2], ["dot", 1], ["dot", 2]]
    pair = s["comparisons"]["sqd / best-of-n"]
    assert math.isclose(pair["ratio"], 2.0) and all(math.isclose(x, 2.0) for x in pair["ci95"])
    # climb's dgemm is its 3 seeds' mean of logs, dot's its 2; sgemm is left out
    want = math.exp((math.log(2) + math.log(3) + math.log(100)) / 3 / 2
                    + (math.log(3) + math.log(4)) / 2 / 2)
    assert math.isclose(s["ci"]["climb"]["geomean"], want) and s["ci"]["climb"]["runs"] == 5
    assert s["draws"]["climb"] == {"dgemm": 3, "dot": 2, "sgemm": 1}
    assert s["default"] is None  # 2 tasks


def test_machine_kinds_are_never_pooled():
    doc = sc.new_doc("m")
    sc.add_cells(doc, full_grid("climb") + full_grid("sqd", seeds=(1,), machine=XEON))
    machines = sc.summaries(doc, sc.TASKS.split(","), [1, 2, 3], sc.ALGOS, n=FAST)
    amd, xeon = machines["AMD EPYC | avx2"], machines["Intel Xeon | avx2 avx512f"]
    assert amd["default"] == "climb" and amd["cells"] == 60 and amd["cpu"] == "AMD EPYC"
    assert xeon["default"] is None and xeon["cells"] == 20 and len(xeon["missing"]) == 40
    assert xeon["ci"]["sqd"]["runs"] == 5 and amd["ci"]["sqd"]["runs"] == 15
    assert amd["summary"]["default"] == "climb"
    assert xeon["summary"]["default"].startswith("none yet: 40 cells to run")
    assert xeon["summary"]["sqd: best speedup"].startswith("3.03x")


def test_two_generations_behind_one_model_name_are_two_kinds_never_pooled():
    """A VM showed 'AMD EPYC' with the same ISA flags for a Zen 5 and a Zen 4 (2.3x apart in
    FP64 peak): the generation (x86 family and model) keeps them apart, and cells that
    recorded none (before it was recorded) stay a kind of their own."""
    zen5 = {**AMD, "family": "family 26 model 2"}
    zen4 = {**AMD, "family": "family 25 model 17"}
    doc = sc.new_doc("m")
    sc.add_cells(doc, full_grid("climb", machine=zen5) + full_grid("sqd", seeds=(1,),
                                                                   machine=zen4)
                 + [cell("dgemm", 1, "evolve", 2.0)])
    machines = sc.summaries(doc, sc.TASKS.split(","), [1, 2, 3], sc.ALGOS, n=FAST)
    assert set(machines) == {"AMD EPYC (family 26 model 2) | avx2",
                             "AMD EPYC (family 25 model 17) | avx2", "AMD EPYC | avx2"}
    assert machines["AMD EPYC (family 26 model 2) | avx2"]["cells"] == 60
    assert machines["AMD EPYC (family 26 model 2) | avx2"]["default"] == "climb"
    assert machines["AMD EPYC (family 25 model 17) | avx2"]["cells"] == 20
    assert machines["AMD EPYC (family 25 model 17) | avx2"]["family"] == "family 25 model 17"
    assert machines["AMD EPYC | avx2"]["cells"] == 1
    drawn = sc.first_search_cells({"draws": [draw("dgemm", 1, machine=zen4)]})
    assert drawn[0]["kind"] == "AMD EPYC (family 25 model 17) | avx2"


def pooled(records, n=FAST):
    doc = sc.new_doc("m")
    sc.add_cells(doc, records)
    machines = sc.summaries(doc, TASKS, [1, 2, 3], sc.ALGOS, n=n)
    return machines, sc.across_kinds(doc, machines, sc.ALGOS, n=n)


def test_the_default_across_kinds_needs_3_draws_of_each_algorithm_on_5_tasks_from_any_kinds():
    """Seed 1 on three kinds: no kind has a default of its own, the kinds together have."""
    zen4 = {**AMD, "family": "family 25 model 17"}
    records = (full_grid("climb", seeds=(1,)) + full_grid("climb", seeds=(1,), machine=XEON)
               + full_grid("climb", seeds=(1,), machine=zen4))
    machines, both = pooled(records)
    assert all(m["default"] is None for m in machines.values()) and len(machines) == 3
    assert both["default"] == "climb" and both["short"] == [] and len(both["kinds"]) == 3
    assert both["ci"]["climb"]["runs"] == 15 and both["tasks_with_3_draws"] == sorted(TASKS)
    assert both["leader_by_kind"] == {k: "climb" for k in machines}
    # one kind's cell short: no default, and what is short is named
    _, short = pooled([c for c in records
                       if (c["task"], c["algo"], c["machine"]) != ("dot", "sqd", XEON)])
    assert short["default"] is None and short["short"] == ["sqd on dot: 2 of 3 draws"]


def test_ratios_across_kinds_pair_cells_of_one_kind_only():
    """Seed 1 on two kinds 4x apart: a pair across kinds would mix the machines' speed into
    the algorithms' ratio."""
    records = [cell(t, 1, a, (2.0 if a == "evolve" else 1.0) * 4, machine=XEON)
               for t in TASKS for a in sc.ALGOS]
    records += [cell(t, 1, a, 2.0 if a == "evolve" else 1.0) for t in TASKS
                for a in sc.ALGOS if (t, a) != ("dot", "evolve")]
    _, both = pooled(records)
    pair = both["comparisons"]["sqd / evolve"]
    assert math.isclose(pair["ratio"], 0.5) and pair["pairs"] == 9
    assert all(math.isclose(x, 0.5) for x in pair["ci95"])
    assert both["draws"]["evolve"]["dot"] == 1 and both["draws"]["sqd"]["dot"] == 2


def test_a_kind_led_by_another_algorithm_is_named_beside_the_pooled_default():
    records = (full_grid("climb", seeds=(1, 2)) + full_grid("evolve", seeds=(1,), machine=XEON))
    machines, both = pooled(records)
    assert both["default"] == "climb"  # 3 draws each: climb leads 2 of them, evolve 1
    assert both["leader_by_kind"] == {"AMD EPYC | avx2": "climb",
                                      "Intel Xeon | avx2 avx512f": "evolve"}
    assert both["ci"]["climb"]["geomean"] > both["ci"]["evolve"]["geomean"]


# -- the results file and a cell's run directory ---------------------------------------------------

def args_for(path, tasks=("dgemm",), seeds=(1,)):
    return types.SimpleNamespace(json=path, tasks=list(tasks), seeds=list(seeds),
                                 algos=sc.ALGOS)


def test_writing_keeps_the_cells_another_session_wrote_meanwhile(tmp_path):
    path = tmp_path / "search_compare.json"
    mine, theirs = sc.new_doc("m"), sc.new_doc("m")
    sc.add_cells(theirs, [cell("dgemm", 1, "sqd", 2.0, XEON)])
    sc.write(path, theirs, args_for(path))
    sc.add_cells(mine, [cell("dgemm", 1, "climb", 5.0), cell("dgemm", 1, "sqd", 9.0, XEON)])
    sc.write(path, mine, args_for(path))
    doc = json.loads(path.read_text())
    assert doc["cells"]["Intel Xeon | avx2 avx512f"]["dgemm/seed1/sqd"]["best_speedup"] == 9.0
    assert set(doc["machines"]) == {"AMD EPYC | avx2", "Intel Xeon | avx2 avx512f"}
    assert doc["flags"]["climb"] == ["perfgym", "search", "--task", "T", "--seed", "S"]
    assert doc["flags"]["sqd"][-4:] == ["--budget-minutes", "12.0", "--sizes", "train"]
    assert not list(tmp_path.glob(".search_compare.json.*"))  # written whole, by rename
    with pytest.raises(sc.Refused, match="compares m's searches"):
        sc.load(path, "other")
    (tmp_path / "old.json").write_text('{"runs": {}}')
    with pytest.raises(sc.Refused, match="not an equal-time comparison"):
        sc.load(tmp_path / "old.json", "m")


def test_a_session_running_one_algorithm_keeps_the_whole_comparison_in_the_file(tmp_path):
    path = tmp_path / "search_compare.json"
    doc = sc.new_doc("m")
    sc.add_cells(doc, full_grid("climb"))
    one = types.SimpleNamespace(json=path, tasks=["dgemv"], seeds=[1], algos=("best-of-n",))
    sc.write(path, doc, one)
    written = json.loads(path.read_text())
    assert written["algorithms"] == list(sc.ALGOS) and written["tasks"] == TASKS
    assert written["seeds"] == [1, 2, 3] and set(written["flags"]) == set(sc.ALGOS)
    assert written["default"] == "climb" and written["across_kinds"]["default"] == "climb"
    amd = written["machines"]["AMD EPYC | avx2"]
    assert set(amd["ci"]) == set(sc.ALGOS) and amd["default"] == "climb"
    # an algorithm the command adds is compared too
    sc.write(path, doc, types.SimpleNamespace(json=path, tasks=["dgemv"], seeds=[4],
                                              algos=("refine",)))
    written = json.loads(path.read_text())
    assert written["algorithms"] == [*sc.ALGOS, "refine"] and written["seeds"] == [1, 2, 3, 4]
    assert written["machines"]["AMD EPYC | avx2"]["default"] is None  # refine has no cells


def test_a_killed_cell_starts_again_and_a_finished_unwritten_one_is_read(tmp_path):
    run_dir = tmp_path / "dgemm" / "seed1" / "sqd"
    assert sc.ready(run_dir) is False and run_dir.is_dir()
    (run_dir / "run.sqlite").write_text("half a run")
    assert sc.ready(run_dir) is False  # killed part way: moved aside, a new start
    assert (tmp_path / "dgemm" / "seed1" / "sqd.killed" / "run.sqlite").is_file()
    assert not list(run_dir.iterdir())
    (run_dir / "result.json").write_text("{}")
    (run_dir / "done").write_text("700.0\n")
    assert sc.ready(run_dir) is True and (run_dir / "result.json").is_file()


def test_a_cell_is_measured_from_its_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    store = RunStore(run_dir)
    store.set_config({"model_id": {"name": "coder-q4"}, "sampling": {"temperature": 0.3}})
    (run_dir / "started").write_text(f"{__import__('time').time() - 5}\n")
    ids = [store.add_pending(f"s{i}", 0, None, None, "generate", "p", None, "x")
           for i in range(4)]
    store.complete(ids[0], {"status": "OK", "speedup": 1.0, "gflops": 1.0}, 0.1)
    store.complete(ids[1], {"status": "WRONG_ANSWER"}, 0.0)
    store.complete(ids[2], {"status": "OK", "speedup": 3.5, "gflops": 3.5}, 0.5)
    store.complete(ids[3], {"status": "OK", "speedup": 9.0, "copied_from": "memory:1"}, 0.0)
    store.event("heldout", rows=[{"candidate": ids[2], "status": "OK", "speedup": 2.5}])
    store.close()
    (run_dir / "result.json").write_text(json.dumps({
        "best": {"speedup": 3.5}, "best_id": ids[2], "confirmed": {"speedup": 3.1,
                                                                   "speedup_low": 2.9},
        "answers": {"answers": 4, "parsed": 4, "compiled": 4, "passed": 3}}))
    (run_dir / "done").write_text("720.0\n")
    r = sc.measure(run_dir, {"task": "dgemm", "seed": 1, "algo": "sqd"})
    assert r["best_speedup"] == r["train_geomean_speedup"] == 3.5 and r["answers"] == 4
    assert r["heldout_geomean_speedup"] == 2.5 and r["heldout_all_ok"] is True
    assert r["confirmed"] == {"speedup": 3.1, "low": 2.9} and r["model"] == "coder-q4"
    assert r["statuses"] == {"OK": 3, "WRONG_ANSWER": 1} and r["wall_seconds"] == 720.0
    # the copied memory kernel is not the search's: the curve ends at 3.5
    assert [s for _, s in r["curve"]] == [1.0, 3.5, 3.5] and r["curve"][-1][0] == 720.0
    assert 0 < r["curve"][1][0] < 720


def test_the_curve_is_the_best_so_far_over_wall_time():
    points = [(30.0, 1.2), (10.0, None), (50.0, 0.8), (20.0, 2.0), (90.0, 4.0)]
    assert sc.curve(points, 100.0) == [[0.0, 1.0], [20.0, 2.0], [90.0, 4.0], [100.0, 4.0]]
    assert sc.curve([(5.0, None)], 60.0) == [[0.0, 1.0], [60.0, 1.0]]


@pytest.mark.parametrize("argv, says", [
    (["--seeds", "1,x"], "--seeds takes integers"),
    (["--tasks", "dgemm,nope"], "nope is not a built-in task"),
    (["--algos", "climb,annealing"], "--algos takes some of"),
    (["--algos", "climb,climb"], "names each once"),
    (["--hours", "-1"], "--hours is 0 or more"),
    (["--plan", "--merge", "a.json"], "each run alone"),
])
def test_a_bad_option_is_one_line(argv, says):
    with pytest.raises(sc.Refused, match=says) as err:
        sc.parse(argv)
    assert "\n" not in str(err.value)


def test_engine_cap_cuts_steps_in_plan_order_and_keeps_the_seed(tmp_path):
    store = RunStore(tmp_path / "run")
    engine = Engine(store, policy=None, task=None, max_candidates=5)
    seed = Step("s:seed", 0, 1, None, "seed")
    first = [Step(f"a:{i}", 1, 1, None, "generate") for i in range(4)]
    assert engine.within_budget([seed, *first]) == [seed, *first]
    store.add_pending("s:seed", 0, 1, None, "seed", "seed", None, "x")
    for s in first:
        store.add_pending(s.slot, 1, 1, None, "generate", "p", "prompt", "x")
    second = [Step(f"b:{i}", 2, 1, None, "generate") for i in range(4)]
    assert engine.within_budget(second) == second[:1]
    # resumed with the first of them stored, the same step is kept
    store.add_pending("b:0", 2, 1, None, "generate", "p", "prompt", "x")
    assert engine.within_budget(second) == second[:1]
    assert engine.within_budget([Step("c:0", 3, 1, None, "generate")]) == []
    assert Engine(store, policy=None, task=None).within_budget(second) == second
    store.close()


class _Store:
    def __init__(self):
        self.events = []

    def done_iterations(self):
        return set()

    def event(self, kind, **data):
        self.events.append((kind, data))

    def best(self):
        return None


class _Engine:
    """run_steps keeps `left` more steps, then none: a deadline reached part way."""

    def __init__(self, deadline, left):
        self.deadline, self.left, self.calls, self.store = deadline, left, [], _Store()

    def run_steps(self, steps):
        self.calls.append(len(steps))
        kept = steps[:max(0, self.left)]
        self.left -= len(kept)
        return [types.SimpleNamespace(status="OK", reward=0.5, ok=True, gflops=1.0)
                for _ in kept]


def test_best_of_n_under_a_budget_samples_in_rounds_until_the_deadline():
    from perfgym.search.best_of_n import ROUND
    engine = _Engine(deadline=1.0, left=2 * ROUND + 3)
    BestOfN(engine, n=100).run()
    # rounds of ROUND until one comes back short; no round asked for after it
    assert engine.calls == [ROUND, ROUND, ROUND]
    assert engine.store.events == [("iteration_done", {
        "iteration": 0, "children": 2 * ROUND + 3, "statuses": {"OK": 2 * ROUND + 3},
        "mean_reward": 0.5, "max_gflops": 1.0})]
    # without a budget: one step of n, as before
    engine = _Engine(deadline=None, left=1000)
    BestOfN(engine, n=100).run()
    assert engine.calls == [100]


def test_a_session_with_no_hours_imports_and_summarizes_and_merge_adds_cells(tmp_path, capsys):
    first = tmp_path / "first_search.json"
    first.write_text(json.dumps({"draws": [draw("dgemm", 1), draw("dgemm", 2)],
                                 "tasks": [draw("dot", 1, machine=XEON)]}))
    out = tmp_path / "out.json"
    common = ["--json", str(out), "--first-search", str(first), "--out", str(tmp_path / "runs")]
    sc.main(["--hours", "0", *common])  # runs no cell
    doc = json.loads(out.read_text())
    assert set(doc["cells"]["AMD EPYC | avx2"]) == {"dgemm/seed1/climb", "dgemm/seed2/climb"}
    amd = doc["machines"]["AMD EPYC | avx2"]
    assert amd["default"] is None and len(amd["missing"]) == 60 - 2
    assert "dgemm/seed1/climb" not in amd["missing"] and amd["draws"]["climb"] == {"dgemm": 2}
    # another machine's file, merged: its cells are added, the ones held stay
    other = tmp_path / "other.json"
    theirs = sc.new_doc(doc["model"])
    sc.add_cells(theirs, [cell("dgemm", 1, "climb", 99.0), cell("dgemm", 1, "sqd", 2.0)])
    other.write_text(json.dumps(theirs))
    sc.main(["--merge", str(other), *common])
    doc = json.loads(out.read_text())
    assert doc["cells"]["AMD EPYC | avx2"]["dgemm/seed1/climb"]["best_speedup"] == 10.0
    assert doc["cells"]["AMD EPYC | avx2"]["dgemm/seed1/sqd"]["best_speedup"] == 2.0
    with pytest.raises(sc.Refused, match="--merge: there is no"):
        sc.main(["--merge", str(tmp_path / "none.json"), *common])
    capsys.readouterr()
    sc.main(["--plan", *common])  # writes nothing
    assert json.loads(out.read_text()) == doc
    assert "holds" in capsys.readouterr().out


def test_two_sessions_on_one_out_are_refused(tmp_path):
    held, refused = sc.session_lock(tmp_path), pytest.raises(sc.Refused, match="another")
    with held, refused, sc.session_lock(tmp_path):
        pass
    with sc.session_lock(tmp_path):  # released
        pass
