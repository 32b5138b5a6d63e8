"""The learning-speed experiment's plan, records, data selection, statistics and goal check
(benchmarks/learning_speed.py; no model, no kernel timed: outcomes are made here)."""
import hashlib
import importlib.util
import json
import math
import sys
import types
from pathlib import Path

import pytest

from perfgym.multisize import aggregate
from perfgym.opening import answer_start
from perfgym.outcome import Outcome, Status
from perfgym.tasks import builtin_names, get_task
from perfgym.train.pairs import Pair
from perfgym.train.sft_data import opened_body

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
RESULTS = BENCHMARKS / "results"
sys.path.insert(0, str(BENCHMARKS))
spec = importlib.util.spec_from_file_location("learning_speed", BENCHMARKS / "learning_speed.py")
ls = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ls)

FAST_DOT = """    double s0 = 0.0, s1 = 0.0;
    int i = 0;
    for (; i + 1 < N; i += 2) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
    }
    for (; i < N; i++)
        s0 += x[i] * y[i];
    out[0] = s0 + s1;
}"""


def opened(task: str, body: str) -> str:
    return answer_start(get_task(task)) + body + "\n```"


def naive_opened(task: str) -> str:
    t = get_task(task)
    return opened(task, opened_body(t, t.baseline.read_text()))


def folded(speedups, status=Status.OK, flags=(), low=None) -> Outcome:
    """An Outcome folded as multisize.aggregate folds one, from per-size speedups."""
    parts = [Outcome(status=status if i == 0 else Status.OK, task="dot", sizes={"N": n},
                     speedup=s, gflops=1.0, flags=list(flags), speedup_low=low)
             for i, (n, s) in enumerate(zip((4000000, 3999971, 100003), speedups))]
    return aggregate(parts)


# --- tasks and plan ---------------------------------------------------------------------------

def test_tasks_split_the_builtin_cpu_suite_and_the_teacher_holds_out_the_same():
    import teacher_data
    assert set(ls.TRAIN_TASKS) | set(ls.HELDOUT_TASKS) == set(builtin_names())
    assert not set(ls.TRAIN_TASKS) & set(ls.HELDOUT_TASKS)
    assert set(teacher_data.HELDOUT_TASKS) == set(ls.HELDOUT_TASKS) == {
        "histogram", "jacobi2d", "stencil3d"}
    assert teacher_data.teacher_tasks()[-3:] == list(ls.HELDOUT_TASKS)  # run last
    for name in ls.TASKS:  # the plan's arithmetic counts 3 sizes a split
        task = get_task(name)
        assert len(task.train_sizes) == len(task.heldout_sizes) == ls.SIZES_PER_SPLIT


def test_plan_fits_four_hours_and_takes_the_most_answers_that_fit():
    plan = ls.plan_budget(3)  # at the Zen 4's costs, 11 training tasks
    assert plan["per_cell"] == 5 and plan["samples_per_arm"] == 5 * 3 * len(ls.TRAIN_TASKS)
    assert plan["estimated_total_seconds"] <= ls.BUDGET_SECONDS
    # every stage is in it, the confirmation and the baselines too
    assert {"pilot", "data", "baselines", "sft", "grpo", "eval_teacher", "confirm",
            "eval_students"} == set(plan["estimated_seconds"])
    assert plan["estimated_seconds"]["confirm"] == ls.CONFIRM_SECONDS
    # one more answer per cell would not fit
    bigger = dict(ls.COST, eval_s=ls.COST["eval_s"] * 11 / 10)
    assert ls.plan_budget(3, cost=bigger)["per_cell"] < 11
    assert ls.plan_budget(3, steps=8)["per_cell"] < plan["per_cell"]  # GRPO steps cost answers
    assert ls.plan_budget(6)["per_cell"] == 0  # six seeds' SFT and GRPO alone do not fit
    assert ls.sft_steps(500) == 32 and ls.sft_steps(10) == 7  # a cap, or two passes


def test_the_plan_scales_the_judging_stages_by_the_pilot_s_rate_on_this_machine():
    """A figure holds on the machine it was measured on: a pilot as fast as COST's reproduces
    COST; one 2.3x faster (a Zen 5's) scales the stages that generate and judge answers, not
    SFT's or GRPO's, and leaves room for more answers a cell; a slower one, fewer."""
    same = ls.machine_cost(ls.COST["pilot_s"] * 240, 240)
    assert same == pytest.approx(ls.COST)
    fast = ls.machine_cost(293.0, 240)
    for k, v in ls.COST.items():
        scaled = k in ls.JUDGING
        assert fast[k] == pytest.approx(v * 293.0 / 240 / ls.COST["pilot_s"] if scaled else v)
    assert ls.plan_budget(3, cost=fast)["per_cell"] > ls.plan_budget(3)["per_cell"]
    slow = ls.machine_cost(2 * 678.7, 240)
    assert ls.plan_budget(3, cost=slow)["per_cell"] < ls.plan_budget(3)["per_cell"]
    for cost in (fast, ls.COST, slow):
        assert ls.plan_budget(3, cost=cost)["estimated_total_seconds"] <= ls.BUDGET_SECONDS


def test_grpo_settings_train_on_the_speed_reward_folded_over_train_sizes():
    import ast

    import perfgym
    # GRPOSettings' fields, read from its source (importing perfgym.train.grpo takes seconds)
    tree = ast.parse((Path(perfgym.__file__).parent / "train" / "grpo.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GRPOSettings")
    fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    assert set(ls.GRPO) <= fields and {"steps", "model_path", "seed", "output_dir"} <= fields
    assert (ls.GRPO["sizes"], ls.GRPO["reward"]) == ("train", "speed")
    assert set(ls.GRPO["task"].split(",")) == set(ls.TRAIN_TASKS)


def test_grpo_weights_bring_a_task_again_in_the_cycle_and_bind_the_run(tmp_path):
    assert ls.grpo_cycle({}) == list(ls.TRAIN_TASKS)
    cycle = ls.grpo_cycle(ls.parse_weights("dot=3,prefix_sum=2"))
    assert cycle[:len(ls.TRAIN_TASKS)] == list(ls.TRAIN_TASKS)
    assert cycle[len(ls.TRAIN_TASKS):] == ["dot", "prefix_sum", "dot"]
    # a run keeps the weights it began with: its seeds' GRPO meet the tasks alike
    ls.same_weights(tmp_path, {"dot": 3})
    ls.same_weights(tmp_path, {"dot": 3})
    with pytest.raises(ls.InputError, match="began with --grpo-weights dot=3"):
        ls.same_weights(tmp_path, {})
    assert "grpo_weights.json" in ls.KEPT


def test_the_grpo_guide_is_each_tasks_fastest_sft_answer_and_reaches_grpo(tmp_path,
                                                                          monkeypatch):
    rows = [("dot", 1.0, "copy"), ("dot", 1.58, "reduction"), ("dot", 1.54, "simd"),
            ("prefix_sum", 1.0, "scan copy"), ("dgemm", 9.0, "tiles")]
    (tmp_path / "sft_data.jsonl").write_text("".join(json.dumps(
        {"task": t, "speedup": x, "answer_form": "edits",
         "completion": [{"role": "assistant", "content": c}]}) + "\n" for t, x, c in rows))
    assert ls.guide_answers(tmp_path / "sft_data.jsonl", ls.parse_guide("dot,prefix_sum")) == {
        "dot": "reduction", "prefix_sum": "scan copy"}
    with pytest.raises(ls.InputError, match="holds no answer to sgemm"):
        ls.guide_answers(tmp_path / "sft_data.jsonl", ["sgemm"])
    ls.same_weights(tmp_path, ["dot"], "--grpo-guide")
    with pytest.raises(ls.InputError, match="began with --grpo-guide dot"):
        ls.same_weights(tmp_path, [], "--grpo-guide")
    assert "grpo_guide.json" in ls.KEPT
    pytest.importorskip("trl", reason="the train extra is not installed: pip install "
                                      "'perfgym[train]'")
    import perfgym.train.grpo as grpo
    import perfgym.train.recipes as recipes
    trained = {}
    monkeypatch.setattr(grpo, "train", lambda settings, resume: trained.update(
        guides=settings.guides, beta=settings.beta))
    monkeypatch.setattr(recipes, "_settings", lambda cls, values, kind: types.SimpleNamespace(
        **values))
    (tmp_path / "seed1").mkdir()
    ls.run_grpo(tmp_path, 1, 2, form="edits", guide=["dot"])
    assert trained == {"guides": {"dot": "reduction"}, "beta": 0.0}
    ls.run_grpo(tmp_path, 1, 2, form="edits", beta=0.1)  # --grpo-beta reaches TRL's config
    assert trained == {"guides": {}, "beta": 0.1}


def test_sft_weights_repeat_a_tasks_records_in_place_and_bind_the_run(tmp_path):
    lines = [json.dumps({"task": t, "completion": c})
             for t, c in (("dgemm", "a"), ("dot", "b"), ("prefix_sum", "c"), ("dot", "d"))]
    weighted = ls.weighted_records(lines, ls.parse_weights("dot=3", "--sft-weights"))
    assert [json.loads(x)["completion"] for x in weighted] == list("abbbcddd")
    assert ls.weighted_records(lines, {}) == lines
    # the steps are the records' own: weights change what a step sees, not how many
    ls.same_weights(tmp_path, {"dot": 3}, "--sft-weights")
    assert json.loads((tmp_path / "sft_weights.json").read_text()) == {"dot": 3}
    assert not (tmp_path / "grpo_weights.json").exists()
    with pytest.raises(ls.InputError, match="began with --sft-weights dot=3"):
        ls.same_weights(tmp_path, {"dot": 2}, "--sft-weights")
    assert "sft_weights.json" in ls.KEPT


def test_sft_line_twins_anchor_the_same_kernel_on_the_loop_line_and_bind_the_run(tmp_path):
    from perfgym.edits import apply_edits
    from perfgym.train.grpo import prompt_kernel
    naive = {t: prompt_kernel(get_task(t), ls.eval_config()) for t in ("dot", "prefix_sum")}
    reduced = naive["dot"].replace("    for (int i", "    #pragma omp parallel for "
                                   "reduction(+:sum) if(N > 16)\n    for (int i", 1)
    body = {"dot": ls.edit_answer("dot", reduced, body="leaf")[0],
            "prefix_sum": ls.edit_answer("prefix_sum", naive["prefix_sum"], hand_back=True,
                                         at_loop=True, body="leaf")[0]}
    assert "sum += x[i] * y[i];" in body["dot"].split("=======")[0]  # anchored through the body
    lines = [json.dumps({"task": t, "answer_form": "edits", "source": "x",
                         "completion": [{"role": "assistant", "content": c}]})
             for t, c in (("dot", body["dot"]), ("prefix_sum", body["prefix_sum"]),
                          ("dgemm", "<<<<<<< SEARCH\nany\n=======\nany\n>>>>>>> REPLACE"))]
    twinned = [json.loads(x) for x in ls.twinned_records(lines, ["dot", "prefix_sum"])]
    assert [(r["task"], r.get("anchor")) for r in twinned] == [
        ("dot", None), ("dot", "line"), ("prefix_sum", None), ("prefix_sum", "line"),
        ("dgemm", None)]
    for r in twinned:
        if r.get("anchor") == "line":
            twin = r["completion"][0]["content"]
            search = twin.split("=======")[0]
            # the loop line alone in SEARCH, and the same kernel as the record it twins
            assert search.count("\n") == 2 and "for (int i = 0; i < N; i++)" in search
            want = reduced if r["task"] == "dot" else naive["prefix_sum"]
            assert apply_edits(naive[r["task"]], twin).splitlines() == want.splitlines()
    # only the tasks named; an answer already on the loop line has no twin
    assert ls.twinned_records(lines, ["dot"])[2:] == lines[1:]
    assert ls.twinned_records([json.dumps(twinned[1])], ["dot"]) == [json.dumps(twinned[1])]
    ls.same_weights(tmp_path, ["dot"], "--sft-line-twins")
    with pytest.raises(ls.InputError, match="began with --sft-line-twins dot"):
        ls.same_weights(tmp_path, [], "--sft-line-twins")
    assert "sft_line_twins.json" in ls.KEPT


def test_sft_passes_scale_the_steps_and_bind_the_run(tmp_path):
    assert ls.sft_steps(38, passes=4) == 51 and ls.sft_steps(38) == 26  # 4 passes, 2
    assert ls.sft_steps(500, passes=4) == 2 * ls.sft_steps(500)  # the cap scales too
    assert ls.plan_budget(3, 8, sft_passes=4)["per_cell"] <= ls.plan_budget(3, 8)["per_cell"]
    ls.same_passes(tmp_path, 4)
    with pytest.raises(ls.InputError, match="began with --sft-passes 4"):
        ls.same_passes(tmp_path, 2)
    old = tmp_path / "old"  # a run from before the option trained with 2 passes
    (old / "sft_seed1").mkdir(parents=True)
    (old / "sft_seed1" / "done").write_text("ok\n")
    with pytest.raises(ls.InputError, match="began with --sft-passes 2"):
        ls.same_passes(old, 4)
    assert "sft_passes.json" in ls.KEPT
    ls.same_beta(tmp_path, 0.1)
    assert json.loads((tmp_path / "grpo_beta.json").read_text()) == {"value": 0.1}
    with pytest.raises(ls.InputError, match="began with --grpo-beta 0.1"):
        ls.same_beta(tmp_path, 0.0)
    (old / "seed1").mkdir()
    (old / "seed1" / "done").write_text("ok\n")
    with pytest.raises(ls.InputError, match="began with --grpo-beta 0.0"):
        ls.same_beta(old, 0.1)
    assert "grpo_beta.json" in ls.KEPT
    with pytest.raises(ls.InputError, match="--sft-line-twins takes training tasks"):
        ls.parse_guide("stencil3d", "--sft-line-twins")


def test_the_budget_check_counts_the_records_the_data_stage_made(tmp_path, capsys):
    """Before the data stage the check assumes SFT_SEQUENCES a seed; after it, the steps its
    records make: 3 passes over 38 records fit 3 seeds where 3 passes of the cap do not."""
    assert ls.data_records(tmp_path) is None
    assert ls.plan_budget(3, 8, sft_passes=3)["per_cell"] == 0
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "sft_data.jsonl").write_text("{}\n" * 38)
    assert ls.data_records(tmp_path, kept) == 38  # a new machine: the kept copy counts
    fits = ls.plan_budget(3, 8, sft_passes=3, sft_records=38)
    assert fits["per_cell"] >= 1
    assert fits["estimated_seconds"]["sft"] == round(3 * 38 * 3 * ls.COST["sft_s"])
    # more records than the cap: the cap's steps, as before
    assert (ls.plan_budget(3, 8, sft_records=500)["estimated_seconds"]
            == ls.plan_budget(3, 8)["estimated_seconds"])
    (tmp_path / "sft_data.jsonl").write_text("{}\n" * 2000)  # passes 4 over many: too long
    with pytest.raises(SystemExit) as stopped:
        ls.main(["--out", str(tmp_path), "--seeds", "1,2,3", "--steps", "8",
                 "--sft-passes", "4", "--report-only"])
    assert stopped.value.code == 2 and "do not fit in 4 hours" in capsys.readouterr().err


# --- records ----------------------------------------------------------------------------------

def test_per_sample_records_fold_every_train_size_and_keep_the_kernel():
    fast = opened("dot", FAST_DOT)
    cases = [  # (answer, outcome, faster)
        (fast, folded([1.5, 1.4, 1.3]), True),
        (fast, folded([2.0, 2.0, 0.25]), False),  # fast at two sizes, geomean 1.0
        (fast, folded([1.5, 1.5, 1.5], low=0.98), False),  # the evaluator's bound says no
        (fast, folded([1.05, 1.05, 1.05]), False),  # inside the noise band
        (fast, folded([1.5, 1.5, 1.5], flags=["baseline_copy"]), False),  # the gym's flag
        (naive_opened("dot"), folded([1.2, 1.2, 1.2]), False),  # an opened copy, unflagged
        (fast, folded([None, 1.5, 1.5], status=Status.WRONG_ANSWER), False),
        ("no code here", Outcome(status=Status.FORMAT_ERROR, task="dot", sizes={}), False),
    ]
    rows = [ls.record("grpo", 2, "train", "dot", a, o) for a, o, _ in cases]
    required = {"arm", "seed", "split", "task", "status", "speedup", "faster", "code",
                "answer_sha256"}
    for r, (answer, o, faster) in zip(rows, cases):
        assert required <= set(r)
        assert (r["arm"], r["seed"], r["split"], r["task"]) == ("grpo", 2, "train", "dot")
        assert r["faster"] is faster
        assert r["answer_sha256"] == hashlib.sha256(answer.encode()).hexdigest()
        assert r["status"] == o.status.value
    assert rows[0]["speedup"] == pytest.approx((1.5 * 1.4 * 1.3) ** (1 / 3))
    assert rows[0]["sizes"] == "N=4000000+N=3999971+N=100003"
    assert "s0 + s1" in rows[0]["code"] and "```" not in rows[0]["code"]
    assert rows[5]["naive_copy"] and not rows[0]["naive_copy"]
    assert rows[6]["log_speedup"] == math.log(0.1) and rows[6]["speedup"] is None
    assert rows[7]["code"] == "no code here"


def test_the_report_counts_copies_by_its_own_copy_check(tmp_path):
    """A record an earlier copy check let through (the naive dot loop with braces around its
    body, judged 1.126x) is counted as the naive kernel when the run reports; a real change
    and a failure stay as they were."""
    braced = ("void dot_optimized(double *x, double *y, double *out, int N) {\n"
              "    double sum = 0.0;\n    for (int i = 0; i < N; i++) {\n"
              "        sum += x[i] * y[i];\n    }\n    out[0] = sum;\n}")
    base = {"arm": "base", "seed": 1, "split": "train", "task": "dot", "status": "OK",
            "speedup": 1.126, "faster": True, "naive_copy": False, "log_speedup": 0.119}
    rows = [{**base, "code": braced}, {**base, "code": FAST_DOT},
            {**base, "code": braced, "status": "WRONG_ANSWER", "faster": False}]
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "base_seed1.json").write_text(json.dumps({"records": rows}))
    copy, fast, failed = ls.per_sample(tmp_path)
    assert copy["naive_copy"] and not copy["faster"] and copy["recounted"]
    assert copy["speedup"] == 1.0 and copy["log_speedup"] == 0.0
    assert fast == rows[1] and failed == rows[2]


# --- the SFT data -----------------------------------------------------------------------------

def pair(task: str, fast: str, run: str = "r1") -> Pair:
    return Pair("k", f"{task}/{run}#{fast[:12]}", "d", "slow", fast, "c", task, 1.5,
                {"run": run})


def test_held_out_tasks_never_reach_the_sft_data(tmp_path, monkeypatch):
    dot = get_task("dot")
    fast_code = answer_start(dot).removeprefix("```c\n") + FAST_DOT
    pairs = [pair("histogram", "void histogram_optimized() {}"), pair("dot", fast_code),
             pair("jacobi2d", "void jacobi2d_optimized() {}"), pair("dot", fast_code, "r2"),
             pair(None, "void f() {}")]
    pairs_file = tmp_path / "pairs.jsonl"
    pairs_file.write_text("".join(json.dumps(p.__dict__) + "\n" for p in pairs))
    long_dot = "    /* " + "two sums, " * 12 + "*/\n" + FAST_DOT
    short_dot = "    double s = 0.0;\n    int i = 0;\n    while (i < N) { s += x[i] * y[i]; i++; }\n" \
        "    out[0] = s;\n}"  # naive speed, not the naive kernel
    pilot = [dict(ls.record("pilot", 999, "train", t, opened(t, body), folded([1.0, 1.0, 1.0])),
                  answer="")
             for t, body in (("dot", long_dot), ("dot", short_dot),
                             ("histogram", "    return;\n}"), ("stencil3d", "    return;\n}"))]
    (tmp_path / "pilot.json").write_text(json.dumps({"records": pilot}))
    judged = []
    monkeypatch.setattr(ls, "improve_prompts", lambda tasks, templates=None: {
        t: f"improve {t}" for t in tasks})
    monkeypatch.setattr(ls, "token_counts", lambda records: [
        len(r["completion"][0]["content"]) // 3 for r in records])
    monkeypatch.setitem(ls.SFT, "max_length", 130)  # the long pilot answer does not fit
    monkeypatch.setattr(ls, "judge", lambda items, which, timeouts: judged.extend(items) or [
        folded([1.5, 1.5, 1.5]) for _ in items])
    ls.make_data(tmp_path, pairs_file, [])
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert {t for t, _ in judged} == {r["task"] for r in records} == {"dot"}
    assert [r["source"] for r in records] == ["pair", "mix_base"]  # one pair: a duplicate
    assert records[0]["prompt"][0]["content"] == "improve dot"
    assert records[0]["completion"][0]["content"].endswith("out[0] = s0 + s1;\n}\n```")
    data = json.loads((tmp_path / "data.json").read_text())
    assert data["mix_per_task"]["dot"] == {"base": 1, "teacher": 0, "copy": 0,
                                            "naive": 0}
    assert data["pairs_file"] == {"path": str(pairs_file), "pairs": 5, "sha256": hashlib.sha256(
        pairs_file.read_bytes()).hexdigest()}  # which teacher data the run used
    assert set(data["mix_per_task"]) == set(ls.TRAIN_TASKS)  # every training task, 0 or not
    assert data["skipped"]["histogram/r1#void histogr"] == "a held-out task"
    assert "past SFT's max_length 130" in data["skipped"]["dot/pilot#0"]
    assert "s += x[i] * y[i];" in records[1]["completion"][0]["content"]
    assert len(judged) == 2  # the long answer was never judged


def test_rewrite_pairs_join_the_sft_data_judged_as_pairs_the_fastest_kept(tmp_path, monkeypatch):
    dot = get_task("dot")
    fast_code = answer_start(dot).removeprefix("```c\n") + FAST_DOT
    slower = fast_code.replace("s0 + s1", "s1 + s0")
    not_faster = fast_code.replace("s0 + s1", "s1 + (s0)")
    monkeypatch.setattr(ls, "rewrite_pairs", lambda form="printed": [
        ("dot", slower, "dot/rewrite:a"), ("dot", fast_code, "dot/rewrite:b"),
        ("dot", not_faster, "dot/rewrite:c")])
    pairs_file = tmp_path / "pairs.jsonl"
    pairs_file.write_text(json.dumps(pair("dot", fast_code.replace("s0", "t0")).__dict__) + "\n")
    (tmp_path / "pilot.json").write_text(json.dumps({"records": []}))
    monkeypatch.setattr(ls, "improve_prompts", lambda tasks, templates=None: {
        t: f"improve {t}" + (f" from {templates.name}" if templates else "") for t in tasks})
    monkeypatch.setattr(ls, "token_counts", lambda records: [10 for _ in records])
    speed = {"s1 + s0": 2.0, "s1 + (s0)": 1.0}
    monkeypatch.setattr(ls, "judge", lambda items, which, timeouts: [folded(
        [next((v for k, v in speed.items() if k in text), 3.0)] * 3) for _, text in items])
    ls.make_data(tmp_path, pairs_file, [], rewrites_per_task=1)
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert [(r["source"], r["kernel"]) for r in records] == [
        ("pair", "dot/r1#" + fast_code.replace("s0", "t0")[:12]), ("rewrite", "dot/rewrite:b")]
    data = json.loads((tmp_path / "data.json").read_text())
    assert data["rewrite_pairs"] == 1 and data["rewrite_pairs_per_task"] == {"dot": 1}
    assert data["skipped"]["dot/rewrite:a"] == "past 1 rewrite pairs of dot"
    assert "1.00x naive" in data["skipped"]["dot/rewrite:c"]  # judged as a pair: not faster
    ls.make_data(tmp_path, pairs_file, [])  # the default: none
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records] == ["pair"]


def test_the_mix_takes_correct_answers_at_about_naive_speed_but_no_copy():
    def rec(task, status, speedup, copy=False, code="k"):
        return {"task": task, "status": status, "speedup": speedup, "naive_copy": copy,
                "code": code}
    records = [rec("dot", "OK", 1.0, code="a"), rec("dot", "OK", 1.0, code="a "),  # same kernel
               rec("dot", "OK", 0.5, code="b"), rec("dot", "OK", 1.0, copy=True, code="c"),
               rec("dot", "WRONG_ANSWER", None, code="d"), rec("spmv", "OK", 0.95, code="e"),
               rec("histogram", "OK", 1.0, code="f")]
    assert ls.mix_from_pilot(records) == {"dot": ["a"], "spmv": ["e"]}


def test_a_kept_sft_data_gives_the_teacher_mix_its_run_stores_gave():
    """--runs FILE: a machine without the search run stores a run read takes the same teacher
    answers from that run's kept sft_data.jsonl, in order, up to what each task still needs."""
    kept = RESULTS / "learning_copies_run" / "sft_data.jsonl"
    records = [json.loads(line) for line in kept.read_text().splitlines()]
    teacher = [r for r in records if r["source"] == "mix_teacher"]
    assert teacher, "the copies run's kept data has teacher answers"
    found = ls.mix_from_runs([kept], {"dgemm": len(teacher), "dot": 3})
    assert [t for t, _ in found] == [r["task"] for r in teacher]
    for (_, code), r in zip(found, teacher):
        assert code.strip() in r["completion"][-1]["content"]
    assert len(ls.mix_from_runs([kept], {"dgemm": 2})) == 2
    assert ls.mix_from_runs([kept], {"dot": 5}) == []


def test_mix_copies_take_the_base_models_correct_copies_up_to_the_cap():
    def rec(task, code, status="OK", copy=True):
        return {"task": task, "status": status, "speedup": 1.0, "naive_copy": copy,
                "code": code}
    records = [rec("dot", "a"), rec("dot", "a"), rec("dot", "b"), rec("dot", "c"),
               rec("dot", "d", copy=False), rec("prefix_sum", "e", status="WRONG_ANSWER"),
               rec("prefix_sum", "f"), rec("histogram", "g")]  # held out: never
    assert ls.copies_from_pilot(records, 2) == {"dot": ["a", "a"], "prefix_sum": ["f"]}
    assert ls.copies_from_pilot(records, 9)["dot"] == ["a", "a", "b", "c"]
    assert ls.copies_from_pilot(records, 0) == {}


def test_mix_copies_join_the_sft_data_as_mix_copy(tmp_path, monkeypatch):
    dot = get_task("dot")
    naive = dot.baseline.read_text()
    pairs_file = tmp_path / "pairs.jsonl"
    fast_code = answer_start(dot).removeprefix("```c\n") + FAST_DOT
    pairs_file.write_text(json.dumps(pair("dot", fast_code).__dict__) + "\n")
    pilot = [{"task": "dot", "status": "OK", "speedup": 1.0, "naive_copy": True, "code": naive}]
    (tmp_path / "pilot.json").write_text(json.dumps({"records": pilot}))
    monkeypatch.setattr(ls, "improve_prompts", lambda tasks, templates=None: {
        t: f"improve {t}" for t in tasks})
    monkeypatch.setattr(ls, "token_counts", lambda records: [10 for _ in records])
    monkeypatch.setattr(ls, "judge", lambda items, which, timeouts: [
        folded([1.0 if "s0" not in text else 2.0] * 3) for _, text in items])
    ls.make_data(tmp_path, pairs_file, [], copies_per_task=1)
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records] == ["pair", "mix_copy"]
    data = json.loads((tmp_path / "data.json").read_text())
    assert data["mix_per_task"]["dot"] == {"base": 0, "teacher": 0, "copy": 1,
                                            "naive": 0}
    assert data["copies_per_task"] == 1
    ls.make_data(tmp_path, pairs_file, [])  # the default: none
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records] == ["pair"]


def stub_data_stage(tmp_path, monkeypatch, task_name: str, body: str, speedup) -> list:
    """One pair of `task_name` whose fast side is `body` opened, an empty pilot, and the
    prompts, token counts and judge made up (`speedup(text)`); the texts judged."""
    pairs_file = tmp_path / "pairs.jsonl"
    fast_code = answer_start(get_task(task_name)).removeprefix("```c\n") + body
    pairs_file.write_text(json.dumps(pair(task_name, fast_code).__dict__) + "\n")
    (tmp_path / "pilot.json").write_text(json.dumps({"records": []}))
    monkeypatch.setattr(ls, "improve_prompts", lambda tasks, templates=None: {
        t: f"improve {t}" + (f" from {templates.name}" if templates else "") for t in tasks})
    monkeypatch.setattr(ls, "token_counts", lambda records: [10 for _ in records])
    judged = []
    monkeypatch.setattr(ls, "judge", lambda items, which, timeouts: [
        judged.append(text) or folded([speedup(text)] * 3) for _, text in items])
    return judged


def first_sft_answer(tmp_path, **settings) -> str:
    """The data stage over `stub_data_stage`'s pair with `settings`: its first answer."""
    ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], **settings)
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    return records[0]["completion"][0]["content"]


def test_mix_naive_adds_each_training_tasks_naive_kernel_and_no_held_out_one(tmp_path,
                                                                             monkeypatch):
    judged = stub_data_stage(tmp_path, monkeypatch, "dot", FAST_DOT,
                             lambda text: 1.0 if "s0" not in text else 2.0)
    ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], naive_per_task=2)
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    naive = [r for r in records if r["source"] == "mix_naive"]
    assert sorted({r["task"] for r in naive}) == sorted(ls.TRAIN_TASKS)
    assert len(naive) == 2 * len(ls.TRAIN_TASKS)
    for r in naive:  # the answer is the task's naive kernel, as the copy check sees it
        code = r["completion"][0]["content"].removesuffix("\n```")
        assert ls.naive_copy(r["task"], ls.kernel_code(r["task"], code))
    data = json.loads((tmp_path / "data.json").read_text())
    assert data["naive_per_task"] == 2 and data["mix_per_task"]["trsm"]["naive"] == 2
    assert len(judged) == 1 + 2 * len(ls.TRAIN_TASKS)  # judged like every mixed-in answer


DGEMV_REDUCTION = """void dgemv_optimized(double *A, double *x, double *y, int M, int N) {
    #pragma omp parallel for
    for (int i = 0; i < M; i++) {
        double sum = 0.0, summary = 1.0;
        #pragma omp simd reduction(+:sum)
        for (int j = 0; j < N; j++)
            sum += A[(long)i * N + j] * x[j];
        y[i] = sum * summary;
    }
}"""


def test_renamed_accumulators_rename_the_reductions_scalar_everywhere_and_nothing_else():
    import re
    renamed = ls.renamed_accumulators("dgemv", DGEMV_REDUCTION, "dgemv/r1#a")
    assert not re.search(r"\bsum\b", renamed)
    name = re.search(r"reduction\(\+:(\w+)\)", renamed).group(1)
    assert name in ls.ACCUMULATOR_NAMES
    assert f"double {name} = 0.0, summary = 1.0;" in renamed  # a longer name is left alone
    assert f"{name} += A[" in renamed and f"y[i] = {name} * summary;" in renamed
    assert renamed == ls.renamed_accumulators("dgemv", DGEMV_REDUCTION, "dgemv/r1#a")
    names = {re.search(r"reduction\(\+:(\w+)\)",
                       ls.renamed_accumulators("dgemv", DGEMV_REDUCTION, f"id{i}")).group(1)
             for i in range(40)}
    assert len(names) >= 3  # the name varies with the record, so no one name is the clause's


def test_renamed_accumulators_take_no_name_the_code_has_and_no_parameter():
    import re
    taken = DGEMV_REDUCTION.replace("summary", "acc").replace("#pragma omp parallel for",
                                                              "int total = 0, s = 0;")
    for i in range(40):
        renamed = ls.renamed_accumulators("dgemv", taken, f"id{i}")
        name = re.search(r"reduction\(\+:(\w+)\)", renamed).group(1)
        assert name not in ("acc", "total", "s", "sum")
        assert "int total = 0, s = 0;" in renamed and "* acc;" in renamed
    # a parameter named in a clause, and an array section, are not the kernel's own scalar
    clause = "#pragma omp parallel for reduction(+:N) reduction(+:y[:M])"
    odd = DGEMV_REDUCTION.replace("#pragma omp parallel for", clause)
    renamed = ls.renamed_accumulators("dgemv", odd, "id0")
    assert clause in renamed and "int M, int N)" in renamed
    assert ls.renamed_accumulators("dot", FAST_DOT, "id0") == FAST_DOT  # no clause: as it was


def test_rename_accumulators_judges_and_keeps_the_renamed_answer(tmp_path, monkeypatch):
    import re
    body = DGEMV_REDUCTION.split("{", 1)[1].rsplit("}", 1)[0] + "}"
    judged = stub_data_stage(tmp_path, monkeypatch, "dgemv", body, lambda text: 2.0)
    answer = first_sft_answer(tmp_path, rename_accumulators=True)
    assert "reduction(+:" in answer and not re.search(r"\bsum\b", answer)
    assert judged and all(not re.search(r"\bsum\b", text) for text in judged)  # judged renamed
    assert json.loads((tmp_path / "data.json").read_text())["rename_accumulators"] is True
    # the default: the answer as the teacher wrote it
    assert "reduction(+:sum)" in first_sft_answer(tmp_path)
    assert json.loads((tmp_path / "data.json").read_text())["rename_accumulators"] is False


DGEMV_CASTS = """void dgemv_optimized(double *A, double *x, double *y, int M, int N) {
    if (((long) M) * N > 32768) {
        #pragma omp parallel for
        for (int i = 0; i < M; i++) {
            double sum = 0.0;
            for (int j = 0; j < N; j++)
                sum += A[((long)i) * N + j] * x[(( long ) j )];
            y[i] = sum;
        }
    } else {
        for (int i = 0; i < M; i++) {
            double sum = 0.0;
            for (int j = 0; j < N; j++)
                sum += A[(long)(i) * N + j] * x[j];
            y[(long) i] = sum;
        }
    }
}"""


def test_plain_casts_unwrap_each_parenthesized_cast_of_one_name_and_nothing_else():
    plain = ls.plain_casts(DGEMV_CASTS)
    assert "if ((long) M * N > 32768) {" in plain
    assert "sum += A[(long) i * N + j] * x[(long) j];" in plain
    assert "A[(long)(i) * N + j]" in plain and "y[(long) i] = sum;" in plain  # other forms kept
    assert ls.PARENTHESIZED_CAST.search(plain) is None
    assert ls.plain_casts(plain) == plain
    stencil = (get_task("stencil3d").baseline).read_text()  # the naive kernels' own form
    assert ls.plain_casts(stencil) == stencil
    kept = "long k = ((long) i + 1) * N; unsigned long u = ((unsigned long) i) * N;"
    assert ls.plain_casts(kept) == kept  # a sum in the parentheses, another type


def test_a_plain_cast_widens_before_the_product_as_the_parenthesized_one(tmp_path):
    """The rewrite keeps the arithmetic: at 70,000 x 70,000 (past int) both forms give the
    long product, where the cast dropped would overflow. (gcc is the gym's own compiler, not
    an optional extra: no skip.)"""
    import subprocess
    line = "long a = ((long) i) * n + j, b = %s; printf(\"%%ld %%ld\\n\", a, b);"
    src = tmp_path / "casts.c"
    src.write_text("#include <stdio.h>\nint main(void) { int i = 70000, n = 70000, j = 3; "
                   + line % ls.plain_casts("((long) i) * n + j") + " return 0; }\n")
    subprocess.run(["gcc", "-O2", "-fwrapv", "-o", str(tmp_path / "casts"), str(src)],
                   check=True)
    a, b = subprocess.run([str(tmp_path / "casts")], capture_output=True, text=True,
                          check=True).stdout.split()
    assert a == b == str(70000 * 70000 + 3)


def test_plain_casts_judges_and_keeps_the_rewritten_answer(tmp_path, monkeypatch):
    body = DGEMV_CASTS.split("{", 1)[1].rsplit("}", 1)[0] + "}"
    judged = stub_data_stage(tmp_path, monkeypatch, "dgemv", body, lambda text: 2.0)
    answer = first_sft_answer(tmp_path, plain_index_casts=True)
    assert "A[(long) i * N + j]" in answer and not ls.PARENTHESIZED_CAST.search(answer)
    assert judged and not any(ls.PARENTHESIZED_CAST.search(text) for text in judged)
    assert json.loads((tmp_path / "data.json").read_text())["plain_casts"] is True
    # the default: the answer as the teacher wrote it
    assert "A[((long)i) * N + j]" in first_sft_answer(tmp_path)
    assert json.loads((tmp_path / "data.json").read_text())["plain_casts"] is False


def test_heldout_forms_count_each_levers_form_in_held_out_answers_only():
    hist_section = ("#pragma omp parallel for reduction(+:counts[:BINS])\n"
                    "for (int i = 0; i < N; i++) counts[data[i]]++;")
    stencil_cast = "long c = ((long)x) * (NY) + y) * (NZ) + z;"
    rows = [{"arm": "grpo", "split": "heldout_task", "task": "histogram", "status": "OK",
             "code": hist_section},
            {"arm": "grpo", "split": "heldout_task", "task": "stencil3d",
             "status": "COMPILE_ERROR", "code": stencil_cast},
            {"arm": "grpo", "split": "heldout_task", "task": "jacobi2d", "status": "OK",
             "code": "#pragma omp parallel for reduction(+:sum)\n"},  # a scalar: no section
            {"arm": "grpo", "split": "train", "task": "dgemv", "status": "OK",
             "code": DGEMV_CASTS},  # a training task: not counted
            {"arm": "base", "split": "heldout_task", "task": "stencil3d", "status": "OK",
             "code": get_task("stencil3d").baseline.read_text()}]
    forms = ls.heldout_forms(rows)
    assert forms["grpo"]["answers"] == 3 and forms["base"]["answers"] == 1
    assert forms["grpo"]["section_reduction"] == {
        "answers": 1, "correct": 1, "by_task": {"histogram": 1, "jacobi2d": 0, "stencil3d": 0}}
    assert forms["grpo"]["parenthesized_cast"] == {
        "answers": 1, "correct": 0, "by_task": {"histogram": 0, "jacobi2d": 0, "stencil3d": 1}}
    assert forms["base"]["parenthesized_cast"]["answers"] == 0  # the naive kernel's own form


def test_pairs_are_capped_per_task_round_robin_over_runs(monkeypatch):
    monkeypatch.setattr(ls, "MAX_PAIRS_PER_TASK", 3)
    pairs = [pair("dot", f"void f{i}() {{}}", "r1") for i in range(4)] + \
        [pair("dot", f"void g{i}() {{}}", "r2") for i in range(2)] + \
        [pair("dot", "void f0() {}", "r2")]  # r1's first kernel again
    kept = ls.usable_pairs(pairs, skipped := {})
    assert [p.fast for p in kept] == ["void f0() {}", "void g0() {}", "void f1() {}"]
    assert sorted(skipped.values()) == ["past 3 pairs of dot"] * 3 + [
        "the same fast kernel as an earlier pair"]


# --- statistics -------------------------------------------------------------------------------

def width(cells, reps=400):
    _, low, high = ls.clustered_interval(cells, reps=reps)
    return high - low


def test_clustered_bootstrap_is_wider_when_samples_cluster_by_task_or_seed():
    tasks, seeds = [f"t{i}" for i in range(6)], [1, 2, 3]
    half = [1.0] * 5 + [0.0] * 5
    iid = {(s, t): half for s in seeds for t in tasks}  # every cell the same mix
    by_task = {(s, t): [1.0 if i < 3 else 0.0] * 10 for s in seeds for i, t in enumerate(tasks)}
    by_seed = {(s, t): [1.0 if s == 1 else 0.0] * 15 for s in seeds for t in tasks}
    for cells in (iid, by_task):
        assert ls.clustered_interval(cells, reps=50)[0] == 0.5
    assert width(by_task) > 3 * width(iid)  # the same 180 samples and share, not independent
    assert width(by_seed) > 3 * width(iid)
    assert width({k: [1.0] * 4 for k in iid}) == 0.0
    draws = ls.clustered_bootstrap([by_task, by_task], reps=50)
    assert (draws[0] == draws[1]).all()  # arms are drawn together: paired by task and seed


def rows_for(arm, tasks, seeds, faster=lambda t, s, i: False, ok=lambda t, s, i: True,
             split="train", n=4):
    return [{"arm": arm, "seed": s, "split": split, "task": t, "faster": faster(t, s, i),
             "status": "OK" if ok(t, s, i) else "WRONG_ANSWER", "code": f"{t}{s}{i}",
             "log_speedup": 0.0} for t in tasks for s in seeds for i in range(n)]


def goal_rows(fast_tasks=4, held_faster=True, dot_ok=4):
    train = list(ls.TRAIN_TASKS)
    rows = rows_for("base", train, [1, 2, 3]) + rows_for("base", ls.HELDOUT_TASKS, [1, 2, 3],
                                                         split="heldout_task")
    rows += rows_for("grpo", train, [1, 2, 3],
                     faster=lambda t, s, i: train.index(t) < fast_tasks and s < 3 and i == 0,
                     ok=lambda t, s, i: t != "dot" or i < dot_ok)
    rows += rows_for("grpo", ls.HELDOUT_TASKS, [1, 2, 3], split="heldout_task",
                     faster=lambda t, s, i: held_faster and t == "jacobi2d" and i == 0)
    return rows


def check(rows, ci=None, seeds=(1, 2, 3), wall=10000.0):
    ci = ci or {"grpo": {"faster": 0.3, "faster_low": 0.12, "faster_high": 0.5},
                "base": {"faster": 0.0}}
    correct = ls.correctness(rows)
    return [p for p, _ in ls.goal_check(rows, ci, correct, ls.forgetting(correct),
                                        list(seeds), wall)]


def test_goal_check_passes_and_fails_each_line_on_its_own_figure():
    assert check(goal_rows()) == [True] * 6
    low = {"grpo": {"faster": 0.3, "faster_low": 0.0, "faster_high": 0.5},
           "base": {"faster": 0.0}}
    assert check(goal_rows(), ci=low) == [False] + [True] * 5
    few = {"grpo": {"faster": 0.15, "faster_low": 0.1, "faster_high": 0.3},
           "base": {"faster": 0.0}}
    assert check(goal_rows(), ci=few)[0] is False
    assert check(goal_rows(fast_tasks=3)) == [True, False] + [True] * 4
    assert check(goal_rows(held_faster=False)) == [True, True, False] + [True] * 3
    # dot correct in 3 of 4 where the base model had 4 of 4: 25 points below
    assert check(goal_rows(dot_ok=3)) == [True] * 3 + [False] + [True] * 2
    assert check(goal_rows(), seeds=(1, 2)) == [True] * 4 + [False, True]
    assert check(goal_rows(), wall=15000.0) == [True] * 5 + [False]


def test_forgetting_is_more_than_ten_points_below_the_base_model():
    correct = {"base": {"dot": 1.0, "spmv": 0.5, "jacobi2d": 0.2},
               "control": {"dot": 0.9, "spmv": 0.39, "jacobi2d": 0.0},
               "grpo": {"dot": 0.85, "spmv": 0.6}}
    assert [(f["arm"], f["task"]) for f in ls.forgetting(correct)] == [
        ("control", "spmv"), ("control", "jacobi2d"), ("grpo", "dot")]


def test_correctness_of_changed_answers_leaves_out_the_naive_kernel_handed_back():
    """The base model's 100% on dot was 36 copies of the naive kernel: the second figure
    counts correct answers that changed it, and a forgetting row carries both."""
    def row(arm, ok, copy):
        return {"arm": arm, "task": "dot", "split": "train", "status": "OK" if ok else
                "COMPILE_ERROR", "naive_copy": copy}
    rows = [row("base", True, True)] * 4 + [row("control", True, False),
                                            row("control", False, False)] * 2
    assert ls.correctness(rows) == {"base": {"dot": 1.0}, "control": {"dot": 0.5}}
    changed = ls.correctness(rows, changed_only=True)
    assert changed == {"base": {"dot": 0.0}, "control": {"dot": 0.5}}
    [fell] = ls.forgetting(ls.correctness(rows), ("control",), changed)
    assert (fell["correct"], fell["base"]) == (0.5, 1.0)
    assert (fell["correct_changed"], fell["base_changed"]) == (0.5, 0.0)


def test_report_writes_the_results_schema_and_prints_pass_or_fail(tmp_path):
    rows = goal_rows()
    for arm in ("base", "grpo"):
        for s in (1, 2, 3):
            mine = [r for r in rows if r["arm"] == arm and r["seed"] == s]
            for r in mine:
                r.update(speedup=1.0, answer_sha256="x")
            ls.write_json(tmp_path / "eval" / f"{arm}_seed{s}.json", {"records": mine})
    out = tmp_path / "result.json"
    text = ls.report(tmp_path, [1, 2, 3], {"per_cell": 4}, {"sft": 10.0},
                     {"sft_seed1": 900.0, "eval_grpo_seed1": 1200.0, "eval_base_seed1": 800.0},
                     out, reps=20)
    goal = text.split("Goal (issue 52):\n")[1].splitlines()
    assert len(goal) == 6 and all(line[:4] in ("PASS", "FAIL") for line in goal)
    result = json.loads(out.read_text())
    assert result["settings"]["sft_seeds"] == [1, 2, 3]
    assert result["settings"]["heldout_tasks"] == list(ls.HELDOUT_TASKS)
    assert {"faster", "faster_low", "faster_high"} <= set(result["ci_clustered"]["grpo"])
    assert result["peak_rss_mb"] == {"base": 800.0, "control": 900.0, "grpo": 1200.0}
    assert result["forgetting"] == [] and result["correctness"]["base"]["dot"] == 1.0
    assert result["per_sample"][0]["code"]
    assert "faster_examples" in result and (tmp_path / "examples.md").is_file()


# --- the driver -------------------------------------------------------------------------------

def test_a_child_stage_reports_its_own_peak_rss():
    ballast = bytearray(b"1") * 200_000_000  # this process large: a fork starts at its RSS
    hold = "import time; x = bytearray(b'1') * 120_000_000; time.sleep(0.3)"
    big = ls.run_child([sys.executable, "-c", hold])
    small = ls.run_child([sys.executable, "-c", "import time; time.sleep(0.3)"])
    del ballast
    # its 114 MiB; and the child after it has its own peak, not the largest child's so far
    # (RUSAGE_CHILDREN's) nor this process's at the fork (ru_maxrss's)
    assert 114 < big < 114 + 60 and small < 60
    with pytest.raises(SystemExit, match="exit 3"):
        ls.run_child([sys.executable, "-c", "raise SystemExit(3)"])


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1,x"], "--seeds takes comma-separated integers"),
    (["--seeds", "1,1,2"], "--seeds takes distinct integers"),
    (["--steps", "0"], "--steps is at least 1"),
    (["--seeds", "1,2,3,4,5,6"], "do not fit in 4 hours"),
    (["--pairs", "/nonexistent/pairs.jsonl"], "no pairs at /nonexistent/pairs.jsonl"),
    (["--report-only"], "nothing to report"),
    (["--confirm-only"], "nothing to report"),
    (["--mix-naive", "-1"], "--mix-naive is 0 or more"),
    (["--hand-back-at-loop"], "give --answer-form edits"),
    (["--anchor-body"], "give --answer-form edits"),
    (["--grpo-weights", "dot=0"], "--grpo-weights takes TRAIN_TASK=K pairs"),
    (["--grpo-weights", "histogram=3"], "got 'histogram=3'"),  # held out: never trained on
    (["--grpo-weights", "dot"], "--grpo-weights takes TRAIN_TASK=K pairs"),
    (["--sft-weights", "dot=x"], "--sft-weights takes TRAIN_TASK=K pairs"),
    (["--grpo-guide", "jacobi2d"], "--grpo-guide takes training tasks"),
    (["--sft-line-twins", "jacobi2d"], "--sft-line-twins takes training tasks"),
    (["--sft-passes", "0"], "--sft-passes is at least 1"),
    (["--grpo-beta", "-1"], "--grpo-beta is in [0, 10)"),
    (["--sft-line-twins", "dot", "--answer-form", "edits"], "give --anchor-body too"),
    (["--grpo-guide", "dot"], "give --answer-form edits"),
    (["--sft-weights", "stencil3d=2"], "got 'stencil3d=2'"),  # held out: never trained on
    (["--pairs", "TMP/held.jsonl"], "holds no pair of a training task"),
    (["--pairs", "TMP/bad.jsonl"], "bad.jsonl:1: not a pair record"),
    (["--pairs", "TMP/good.jsonl", "--runs", "TMP"], "holds no search run"),
    (["--pairs", "TMP/good.jsonl", "--runs", "TMP/bad.jsonl"], "nor a kept sft_data.jsonl"),
    (["--pairs", "TMP/good.jsonl", "--runs", "TMP/good.jsonl"], "holds no teacher answer"),
    (["--pairs", "TMP/good.jsonl", "--prompts", "TMP/none"], "is not a directory"),
    (["--pairs", "TMP/good.jsonl", "--prompts", "TMP/misnamed"], "overrides no template"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys, monkeypatch):
    def no_stage(*args, **kwargs):  # a check that lets bad input through must not run a stage
        raise AssertionError("bad input reached the stages")
    monkeypatch.setattr(ls, "stages", no_stage)
    (tmp_path / "held.jsonl").write_text(json.dumps(pair("jacobi2d", "k").__dict__) + "\n")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    (tmp_path / "good.jsonl").write_text(json.dumps(pair("dot", "k").__dict__) + "\n")
    (tmp_path / "misnamed").mkdir()
    (tmp_path / "misnamed" / "omp_hint.txt").write_text("no template has this name\n")
    argv = [a.replace("TMP", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exc:
        ls.main(["--out", str(tmp_path / "run"), "--keep", "", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def fake_children(tmp_path, ran: list, killed_at: str | None = None):
    """A run_child that records each stage and writes its done file; the stage `killed_at`
    dies before writing it (as kill -9 leaves a stage), once."""
    done_by = {"--pilot": lambda s: tmp_path / "pilot.json",
               "--sft": lambda s: tmp_path / f"sft_seed{s}" / "done",
               "--grpo": lambda s: tmp_path / f"seed{s}" / "done",
               "--baselines": lambda s: tmp_path / "baselines.json"}
    kill = [killed_at]

    def child(argv):
        flag, rest = argv[8], argv[9:]
        ran.append(" ".join([flag, *rest]))
        if ran[-1] == kill[0]:
            kill[0] = None
            raise SystemExit(f"{ran[-1]} failed (exit -9)")
        path = (tmp_path / "eval" / f"{rest[0]}_seed{rest[1]}.json" if flag == "--eval"
                else done_by[flag](rest[0] if rest else None))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text({"--eval": '{"records": []}', "--pilot": '{"per_cell": 4}'}
                        .get(flag, "{}"))
        return 100.0
    return child


CHAIN = ["--eval base {s}", "--sft {s}", "--eval control {s}", "--grpo {s}", "--eval grpo {s}"]


def test_stages_run_in_order_once_and_a_rerun_skips_what_is_done(tmp_path, monkeypatch):
    """Per seed one chain runs to its end before the next: a session that ends finishes
    chains, and a chain's arms share one machine."""
    ran = []
    monkeypatch.setattr(ls, "run_child", fake_children(tmp_path, ran, killed_at="--grpo 2"))
    monkeypatch.setattr(ls, "make_data", lambda out, pairs, runs, **settings: (
        ran.append("data"), (out / "sft_data.jsonl").write_text("{}\n")))
    args = ls.parse_args(["--out", str(tmp_path), "--seeds", "1,2"])
    wall, rss = {}, {}
    with pytest.raises(SystemExit):
        ls.stages(args, tmp_path, [1, 2], wall, rss)
    chain = [c.format(s=s) for s in (1, 2) for c in CHAIN]
    assert ran == ["--pilot", "data", "--baselines", *chain[:chain.index("--grpo 2") + 1]]
    ran.clear()
    ls.stages(args, tmp_path, [1, 2], wall, rss)
    assert ran == ["--grpo 2", "--eval grpo 2", "--eval teacher 1"]  # from where it died
    assert set(wall) == {"pilot", "data", "sft", "baselines", "eval_base", "eval_control",
                         "grpo", "eval_grpo", "eval_teacher"}
    assert rss["grpo_seed2"] == 100.0 and json.loads((tmp_path / "rss.json").read_text()) == rss
    ran.clear()
    ls.stages(args, tmp_path, [1, 2], wall, rss)
    assert ran == []


def test_the_grpo_child_gets_the_weights_and_trains_on_their_cycle(tmp_path, monkeypatch):
    argvs = []
    monkeypatch.setattr(ls, "run_child", lambda argv: argvs.append(argv) or 1.0)
    monkeypatch.setattr(ls, "make_data", lambda out, pairs, runs, **settings: None)
    args = ls.parse_args(["--out", str(tmp_path), "--seeds", "1", "--grpo-weights", "dot=3"])
    ls.stages(args, tmp_path, [1], {}, {})
    grpo_argv = next(a for a in argvs if "--grpo" in a)
    assert grpo_argv[grpo_argv.index("--grpo-weights") + 1] == "dot=3"
    trained = {}
    pytest.importorskip("trl", reason="the train extra is not installed: pip install "
                                      "'perfgym[train]'")
    import perfgym.train.grpo as grpo
    import perfgym.train.recipes as recipes
    monkeypatch.setattr(grpo, "train", lambda settings, resume: trained.update(
        task=settings.task, fixed_prompts=settings.fixed_prompts))
    monkeypatch.setattr(recipes, "_settings", lambda cls, values, kind: types.SimpleNamespace(
        **values))
    (tmp_path / "seed1").mkdir()
    ls.run_grpo(tmp_path, 1, 2, weights=ls.parse_weights("dot=3"))
    assert trained["task"].split(",") == [*ls.TRAIN_TASKS, "dot", "dot"]
    assert trained["fixed_prompts"] == len(ls.TRAIN_TASKS) + 2


def test_the_sft_child_gets_the_weights_and_trains_on_the_repeated_records(tmp_path,
                                                                           monkeypatch):
    argvs = []
    monkeypatch.setattr(ls, "run_child", lambda argv: argvs.append(argv) or 1.0)
    monkeypatch.setattr(ls, "make_data", lambda out, pairs, runs, **settings: None)
    args = ls.parse_args(["--out", str(tmp_path), "--seeds", "1", "--sft-weights", "dot=2"])
    ls.stages(args, tmp_path, [1], {}, {})
    sft_argv = next(a for a in argvs if "--sft" in a)
    assert sft_argv[sft_argv.index("--sft-weights") + 1] == "dot=2"
    pytest.importorskip("trl", reason="the train extra is not installed: pip install "
                                      "'perfgym[train]'")
    import perfgym.train.sft as sft
    trained = {}
    monkeypatch.setattr(sft, "train", lambda settings: trained.update(
        tasks=[json.loads(x)["task"] for x in Path(settings.pairs).read_text().splitlines()],
        steps=settings.max_steps))
    (tmp_path / "sft_data.jsonl").write_text("".join(
        json.dumps({"task": t}) + "\n" for t in ("dgemm", "dot", "sgemm")))
    (tmp_path / "sft_seed1").mkdir()
    ls.run_sft(tmp_path, 1, ls.parse_weights("dot=2", "--sft-weights"))
    assert trained == {"tasks": ["dgemm", "dot", "dot", "sgemm"], "steps": ls.sft_steps(3)}
    # twins come before the weights repeat them, and add no step either
    args = ls.parse_args(["--out", str(tmp_path), "--seeds", "1", "--sft-line-twins", "dot",
                          "--answer-form", "edits", "--anchor-body", "leaf"])
    (tmp_path / "sft_seed1" / "done").unlink(missing_ok=True)
    argvs.clear()
    ls.stages(args, tmp_path, [1], {}, {})
    sft_argv = next(a for a in argvs if "--sft" in a)
    assert sft_argv[sft_argv.index("--sft-line-twins") + 1] == "dot"
    monkeypatch.setattr(ls, "line_twin", lambda r: {**r, "twin": True}
                        if r["task"] == "dot" else None)
    monkeypatch.setattr(sft, "train", lambda settings: trained.update(
        tasks=[(r["task"], r.get("twin", False)) for r in
               map(json.loads, Path(settings.pairs).read_text().splitlines())],
        steps=settings.max_steps))
    ls.run_sft(tmp_path, 1, {"dot": 2}, ["dot"])
    assert trained == {"tasks": [("dgemm", False), ("dot", False), ("dot", False),
                                 ("dot", True), ("dot", True), ("sgemm", False)],
                       "steps": ls.sft_steps(3)}
    ls.run_sft(tmp_path, 1, passes=4)
    assert trained["steps"] == ls.sft_steps(3, passes=4) == 4
    argvs.clear()
    (tmp_path / "sft_seed1" / "done").unlink()
    ls.stages(ls.parse_args(["--out", str(tmp_path), "--seeds", "1", "--sft-passes", "4"]),
              tmp_path, [1], {}, {})
    sft_argv = next(a for a in argvs if "--sft" in a)
    assert sft_argv[sft_argv.index("--sft-passes") + 1] == "4"


def test_a_new_machine_goes_on_from_the_kept_files(tmp_path, monkeypatch):
    """The session's machine is gone with the run directory: what was kept (committed) is
    restored, finished chains are not run again, and a chain whose SFT is gone after its
    control was evaluated runs again from its SFT, its old control evaluation dropped."""
    kept, first, second = tmp_path / "kept", tmp_path / "first", tmp_path / "second"
    ran = []
    monkeypatch.setattr(ls, "run_child", fake_children(first, ran, killed_at="--grpo 2"))
    monkeypatch.setattr(ls, "make_data", lambda out, pairs, runs, **settings: (
        ran.append("data"), (out / "sft_data.jsonl").write_text("{}\n")))
    args = ls.parse_args(["--out", str(first), "--seeds", "1,2,3"])
    with pytest.raises(SystemExit):
        ls.stages(args, first, [1, 2, 3], {}, {}, kept)
    assert {p.name for p in (kept / "eval").glob("*.json")} == {
        "base_seed1.json", "control_seed1.json", "grpo_seed1.json", "base_seed2.json",
        "control_seed2.json"}
    assert (kept / "sft_data.jsonl").is_file() and (kept / "pilot.json").is_file()
    assert not (kept / "sft_seed2").exists()  # adapters are not kept

    assert ls.restore(second, kept) == len(ls.kept_files(kept))
    assert ls.chain_lost(second, 2) and not ls.chain_lost(second, 1)
    ran.clear()
    monkeypatch.setattr(ls, "run_child", fake_children(second, ran))
    ls.stages(ls.parse_args(["--out", str(second), "--seeds", "1,2,3"]), second, [1, 2, 3],
              {}, {}, kept)
    assert ran == [c.format(s=s) for s in (2, 3) for c in CHAIN if c != "--eval base {s}"
                   or s == 3] + ["--eval teacher 1"]
    assert ls.restore(second, kept) == 0  # nothing left to restore: all is there


def test_the_driver_restores_and_keeps_by_default_and_not_with_an_empty_keep(tmp_path,
                                                                             monkeypatch):
    kept = tmp_path / "kept"
    (kept / "eval").mkdir(parents=True)
    (kept / "pilot.json").write_text('{"per_cell": 4}')
    (kept / "eval" / "base_seed1.json").write_text('{"records": []}')
    monkeypatch.setattr(ls, "stages", lambda *a: None)
    monkeypatch.setattr(ls, "report", lambda *a: "report")
    ls.main(["--out", str(tmp_path / "a"), "--keep", str(kept), "--report-only"])
    assert (tmp_path / "a" / "eval" / "base_seed1.json").is_file()
    with pytest.raises(SystemExit) as exc:
        ls.main(["--out", str(tmp_path / "b"), "--keep", "", "--report-only"])
    assert exc.value.code == 2 and not (tmp_path / "b" / "pilot.json").exists()


def test_another_runs_kept_files_are_neither_restored_nor_written_over(tmp_path, monkeypatch,
                                                                         capsys):
    """A run given another run's --keep (the default, in a report of a new run) stops with one
    line before it copies a file either way."""
    kept = tmp_path / "kept"
    (kept / "eval").mkdir(parents=True)
    (kept / "pilot.json").write_text('{"per_cell": 4}')
    (kept / "eval" / "teacher_seed1.json").write_text('{"records": []}')
    (kept / "confirm.json").write_text("{}")
    out = tmp_path / "new"
    out.mkdir()
    (out / "pilot.json").write_text('{"per_cell": 7}')
    monkeypatch.setattr(ls, "stages", lambda *a: (_ for _ in ()).throw(AssertionError("ran")))
    monkeypatch.setattr(ls, "report", lambda *a: "report")
    for extra in (["--report-only"], ["--confirm-only"], []):
        with pytest.raises(SystemExit) as exc:
            ls.main(["--out", str(out), "--keep", str(kept), *extra])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "keeps another run" in err and "--keep" in err
    assert sorted(p.name for p in out.rglob("*")) == ["pilot.json"]  # nothing restored
    assert (kept / "pilot.json").read_text() == '{"per_cell": 4}'  # nothing written over
    (out / "pilot.json").write_text('{"per_cell": 4}')  # the same run: restored as before
    ls.main(["--out", str(out), "--keep", str(kept), "--report-only"])
    assert (out / "eval" / "teacher_seed1.json").is_file()


def test_each_stage_records_its_cpu_and_a_run_over_two_kinds_is_flagged(tmp_path, monkeypatch):
    def child(argv):
        flag, rest = argv[8], argv[9:]
        path = {"--pilot": tmp_path / "pilot.json",
                "--sft": tmp_path / f"sft_seed{rest[0]}" / "done" if rest else None,
                "--grpo": tmp_path / f"seed{rest[0]}" / "done" if rest else None,
                "--baselines": tmp_path / "baselines.json",
                }.get(flag) or tmp_path / "eval" / f"{rest[0]}_seed{rest[1]}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text({"--eval": '{"records": []}', "--baselines": '{"baselines": []}'}
                        .get(flag, "{}"))
        return 100.0

    monkeypatch.setattr(ls, "run_child", child)
    monkeypatch.setattr(ls, "make_data", lambda out, pairs, runs, **settings: (
        (out / "sft_data.jsonl").write_text("{}\n")))
    amd = {"cpu": "AMD EPYC", "isa": ["avx2"], "cores": 2}
    monkeypatch.setattr(ls, "this_machine", lambda: amd)
    args = ls.parse_args(["--out", str(tmp_path), "--seeds", "1"])
    ls.stages(args, tmp_path, [1], {}, {})
    assert ls.stage_machines(tmp_path)["kinds"] == 1
    assert ls.stage_machines(tmp_path)["by_stage"]["sft_seed1"] == amd
    machines = json.loads((tmp_path / "machines.json").read_text())  # as recorded before 72d2d7e
    machines["pilot"] = {**amd, "isa": ["sse4_2", "avx", "avx2", "fma"]}
    (tmp_path / "machines.json").write_text(json.dumps(machines))
    assert ls.stage_machines(tmp_path)["kinds"] == 1
    (tmp_path / "eval" / "grpo_seed1.json").unlink()  # resumed in a session on another CPU
    monkeypatch.setattr(ls, "this_machine", lambda: {**amd, "cpu": "Intel Xeon"})
    ls.stages(args, tmp_path, [1], {}, {})
    machines = ls.stage_machines(tmp_path)
    assert machines["kinds"] == 2 and machines["by_stage"]["eval_grpo_seed1"]["cpu"] == "Intel Xeon"
    assert machines["by_stage"]["pilot"]["cpu"] == "AMD EPYC"
    text = ls.report(tmp_path, [1], {"per_cell": 4}, {}, {}, None, reps=5)
    assert "2 CPU kinds" in text


def test_two_generations_behind_one_model_name_are_two_kinds(tmp_path):
    """The same 'AMD EPYC' and flags on a Zen 5 and a Zen 4 are two kinds (their timings
    differ 2x); a stage that recorded no generation is a kind of its own."""
    zen = {"cpu": "AMD EPYC", "isa": ["avx2", "avx512f"], "cores": 2}

    def kinds(*families):
        by_stage = {f"stage{i}": {**zen, **({"family": f} if f else {})}
                    for i, f in enumerate(families)}
        (tmp_path / "machines.json").write_text(json.dumps(by_stage))
        return ls.stage_machines(tmp_path)["kinds"]
    assert kinds("family 25 model 17", "family 25 model 17") == 1
    assert kinds("family 25 model 17", "family 26 model 2") == 2
    assert kinds(None, "family 25 model 17") == 2
    assert kinds(None, None) == 1


def test_the_confirm_stage_runs_last_while_faster_answers_wait_and_the_report_applies_it(
        tmp_path, monkeypatch):
    """The confirmation (learning_confirm) runs after every evaluation, only while some
    faster answer has none (a seed evaluated later brings new ones); --confirm-only runs it
    alone; the report counts faster only what it confirmed."""
    ran = []
    made = fake_children(tmp_path, ran)
    records = {"grpo": [{"arm": "grpo", "seed": 1, "split": "train", "task": "dot",
                         "code": "fast", "faster": True, "status": "OK", "speedup": 1.5,
                         "log_speedup": 0.4, "answer_sha256": "x"},
                        {"arm": "grpo", "seed": 1, "split": "train", "task": "dot",
                         "code": "noise", "faster": True, "status": "OK", "speedup": 1.3,
                         "log_speedup": 0.3, "answer_sha256": "y"}]}

    def child(argv):
        flag, rest = argv[8], argv[9:]
        if flag == "--confirm":
            ran.append(flag)
            rows = ls.per_sample(tmp_path)
            ls.write_json(tmp_path / "confirm.json", {
                ls.learning_confirm.row_key(r): {"confirmed": r["code"] == "fast",
                                                 "speedup": 1.0, "low": 0.9}
                for r in rows if r["faster"]})
            return 100.0
        made(argv)
        if flag == "--eval" and rest[0] in records:
            ls.write_json(tmp_path / "eval" / f"{rest[0]}_seed{rest[1]}.json",
                          {"records": records[rest[0]]})
        return 100.0

    monkeypatch.setattr(ls, "run_child", child)
    monkeypatch.setattr(ls, "naive_copy", lambda task, code: False)
    monkeypatch.setattr(ls, "make_data", lambda out, pairs, runs, **settings: (
        (out / "sft_data.jsonl").write_text("{}\n")))
    args = ls.parse_args(["--out", str(tmp_path), "--seeds", "1"])
    ls.stages(args, tmp_path, [1], {}, {})
    assert ran[-2:] == ["--eval teacher 1", "--confirm"]
    ran.clear()
    ls.stages(args, tmp_path, [1], {}, {})
    assert ran == []  # nothing waits
    extra = {**records["grpo"][0], "seed": 2, "code": "new"}
    ls.write_json(tmp_path / "eval" / "grpo_seed2.json", {"records": [extra]})
    ls.stages(ls.parse_args(["--out", str(tmp_path), "--seeds", "1", "--confirm-only"]),
              tmp_path, [1], {}, {})
    assert ran == ["--confirm"]
    (tmp_path / "baselines.json").unlink()  # the stand-in's, not the stage's schema
    result = ls.summarize(tmp_path, [1, 2], {"per_cell": 4}, {}, {}, reps=5)
    faster = {r["code"]: r["faster"] for r in result["per_sample"] if r["arm"] == "grpo"}
    assert faster == {"fast": True, "noise": False, "new": False}
    assert result["confirmation"]["by_split"] == {
        "train": {"kept": 1, "refuted": 2, "unconfirmed": 0, "not_timed": 0}}
    assert result["confirmation"]["done"]
    # grpo: every answer faster before; after, 1 of seed 1's 2 and 0 of seed 2's 1
    assert result["confirmation"]["before"]["grpo"]["train"]["faster"] == 1.0
    assert result["ci_clustered"]["grpo"]["train"]["faster"] == 0.25
    # a report of seed 1 alone counts seed 1's answers alone (seed 2's file is on disk)
    seed1 = ls.summarize(tmp_path, [1], {"per_cell": 4}, {}, {}, reps=5)
    assert {r["code"] for r in seed1["per_sample"] if r["arm"] == "grpo"} == {"fast", "noise"}
    assert seed1["ci_clustered"]["grpo"]["train"]["faster"] == 0.5


def test_a_report_without_confirmations_says_so(tmp_path):
    ls.write_json(tmp_path / "eval" / "base_seed1.json", {"records": []})
    text = ls.report(tmp_path, [1], {"per_cell": 4}, {}, {}, None, reps=5)
    assert "no confirm.json" in text
    ls.write_json(tmp_path / "confirm.json", {})
    assert "no confirm.json" not in ls.report(tmp_path, [1], {"per_cell": 4}, {}, {}, None,
                                              reps=5)


def test_the_example_per_task_is_the_faster_kernel_written_most_often():
    def row(task, code, speedup, seed, faster=True, split="train", arm="grpo"):
        return {"arm": arm, "seed": seed, "split": split, "task": task, "code": code,
                "speedup": speedup, "faster": faster}
    common, lucky = "void f(double *s) { s[0] = 1.0; }", "void f(double *s) { s[0] = 2.0; }"
    rows = [row("dot", common, 1.3, 1), row("dot", common.replace(" ", "  "), 1.4, 2),
            row("dot", lucky, 3.0, 1),  # the fastest, but written once
            row("dot", "slow", 0.5, 3, faster=False),
            row("dgemv", lucky, 9.0, 1, split="heldout_sizes"),  # not a train-size figure
            row("jacobi2d", common, 1.2, 2, split="heldout_task"),
            row("transpose", common, 5.0, 1, arm="control")]
    examples = ls.faster_examples(rows)
    assert set(examples) == {"dot", "jacobi2d"}
    assert examples["dot"]["samples"] == 2 and examples["dot"]["seeds"] == [1, 2]
    assert examples["dot"]["speedup"] == 1.4 and "= 1.0" in examples["dot"]["code"]
    text = ls.examples_markdown(examples)
    assert "**jacobi2d** (held out)" in text and text.count("```c") == 2
    assert ls.examples_markdown({}) == "No faster kernel from the grpo arm."


def test_the_measure_gives_a_task_whose_naive_kernel_needs_it_the_default_timeout(monkeypatch):
    assert ls.eval_config(measure=True).timeout == 3.0
    assert ls.eval_config(measure=True, timeout=8.0).timeout == 8.0
    assert ls.eval_config(measure=True, timeout=8.0).max_time == 0.5
    assert ls.eval_config().timeout == 8.0  # the gym's own, for sampling prompts
    seen = []

    def folded(task, items, sizes, executor):
        seen.append((task.name, sizes == task.sizes("heldout"), items[0][1].timeout))
        slow = task.name == "transpose" and items[0][1].timeout < 8  # its naive kernel, 4096^2
        return [folded_outcome(Status.TIMEOUT if slow else Status.OK)] * len(items)

    def folded_outcome(status):
        return Outcome(status=status, task="x", sizes={})
    monkeypatch.setattr("perfgym.multisize.evaluate_folded", folded)
    timeouts = ls.naive_timeouts(["dot", "transpose", "jacobi2d"])
    assert timeouts == {"transpose": 8.0}
    # training tasks at their train and held-out sizes, a held-out task at its train sizes,
    # each asked to finish in half the measure's timeout (a judgment is one draw of a spread)
    assert sorted(seen) == [("dot", False, 1.5), ("dot", True, 1.5), ("jacobi2d", False, 1.5),
                            ("transpose", False, 1.5), ("transpose", True, 1.5)]
    seen.clear()
    ls.judge([("dot", "a"), ("transpose", "b"), ("dot", "c")], "train", timeouts=timeouts)
    assert seen == [("dot", False, 3.0), ("transpose", False, 8.0)]


@pytest.mark.parametrize("task_name", ls.TRAIN_TASKS)
def test_the_aa_variant_is_the_naive_kernels_machine_code_but_no_copy(task_name, tmp_path):
    """benchmarks/naive_aa.py judges the naive kernel at naive speed in a form the copy check
    does not catch: its object code must be the naive kernel's, byte for byte."""
    import subprocess
    spec_aa = importlib.util.spec_from_file_location("naive_aa", BENCHMARKS / "naive_aa.py")
    aa = importlib.util.module_from_spec(spec_aa)
    spec_aa.loader.exec_module(aa)
    task = get_task(task_name)
    variant = aa.same_code_variant(task_name, 12345)
    assert variant != task.baseline.read_text() and not ls.naive_copy(task_name, variant)
    texts = []
    for name, code in (("naive", task.baseline.read_text()), ("variant", variant)):
        (tmp_path / f"{name}.c").write_text(code)
        subprocess.run(["gcc", "-O2", "-fopenmp", "-c", f"{name}.c", "-o", f"{name}.o"],
                       cwd=tmp_path, check=True)
        dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"{name}.o"],
                              cwd=tmp_path, check=True, capture_output=True, text=True).stdout
        texts.append(dump.split("Disassembly of section", 1)[1])
    assert texts[0] == texts[1]


def test_rewrite_pairs_are_edits_of_the_naive_kernel_by_rule():
    """--rewrite-pairs: each training task's naive kernel under chains of the textbook
    rewrites, distinct, never the naive kernel itself and never a held-out task's."""
    from perfgym.extract import normalize
    from perfgym.tasks import get_task
    found = ls.rewrite_pairs()
    tasks = {t for t, _, _ in found}
    assert tasks <= set(ls.TRAIN_TASKS) and "dgemm" in tasks
    assert len({(t, normalize(c)) for t, c, _ in found}) == len(found)
    for task, code, ident in found:
        assert normalize(code) != normalize(get_task(task).baseline.read_text())
        assert ident.startswith(f"{task}/rewrite:")
    dgemm = {ident.split(":")[1] for t, _, ident in found if t == "dgemm"}
    assert "sink_sum+omp_outer+simd_inner" in dgemm and "omp_outer" in dgemm
    assert "#pragma omp parallel for" in dict((i, c) for _, c, i in found)[
        "dgemm/rewrite:sink_sum+omp_outer"]
    assert ls.rewrite_pairs(["stencil3d"]) == []  # (no rule applies to its nest)


def test_rewrite_pairs_in_edit_form_add_pragma_lines_to_the_naive_text_and_nothing_else():
    """--rewrite-form edit: each kernel is the naive kernel's own text with one or more
    `#pragma omp` lines added (no line re-printed, no work bound copying the nest)."""
    from perfgym.tasks import get_task
    found = ls.rewrite_pairs(form="edit")
    assert {t for t, _, _ in found} <= set(ls.TRAIN_TASKS) and len(found) > 10
    for task, code, ident in found:
        naive = get_task(task).baseline.read_text()
        added = [ln for ln in code.splitlines() if ln.strip().startswith("#pragma omp")]
        kept = [ln for ln in code.splitlines() if not ln.strip().startswith("#pragma omp")]
        assert kept == naive.splitlines() and 1 <= len(added) <= 3, ident
        assert ident.startswith(f"{task}/edit:") and "sink_sum" not in ident
        assert "32768" not in code and code.count("for (") == naive.count("for (")
    edits = {i: c for _, c, i in found}
    assert "    #pragma omp parallel for reduction(+:sum)\n    for (int i = 0; i < N; i++)" \
        in edits["dot/edit:omp_outer"]
    bounded = {i: c for _, c, i in ls.rewrite_pairs(["dot", "jacobi2d"], form="edit-if")}
    assert "#pragma omp parallel for reduction(+:sum) if((long)(N) > 32768)\n" \
        in bounded["dot/edit-if:omp_outer"]
    assert "#pragma omp simd reduction(+:sum)\n" in bounded["dot/edit-if:simd_inner"]
    assert bounded["jacobi2d/edit-if:omp_inner"].count(" if((long)(N - 1 - 1) * (M - 1 - 1)") == 2
    with pytest.raises(ValueError, match="rewrite form"):
        ls.rewrite_pairs(form="reprinted")
    args = ls.parse_args(["--rewrite-pairs", "4", "--rewrite-form", "edit"])
    assert (args.rewrite_pairs, args.rewrite_form) == (4, "edit")
    assert ls.parse_args([]).rewrite_form == "printed"


def test_best_rewrites_keeps_the_fastest_few_a_task_and_every_other_record():
    records = [{"task": "dot", "source": "rewrite", "kernel": f"dot/rewrite:{k}",
                "speedup": v} for k, v in (("a", 1.5), ("b", 3.0), ("c", 2.0))]
    records += [{"task": "dot", "source": "pair", "kernel": "p", "speedup": 1.2}]
    skipped = {}
    kept = ls.best_rewrites(records, 2, skipped)
    assert [r["kernel"] for r in kept] == ["dot/rewrite:b", "dot/rewrite:c", "p"]
    assert list(skipped) == ["dot/rewrite:a"]
    assert ls.best_rewrites(records, 0, {}) == records[3:]


def test_the_prompts_fingerprint_covers_every_prompt_text_by_name_and_content(tmp_path):
    import shutil
    from importlib import resources
    shipped = Path(str(resources.files("perfgym.prompts")))
    root = tmp_path / "prompts"
    shutil.copytree(shipped, root)
    assert ls.prompts_sha256(root=root) == ls.prompts_sha256()  # the default is the package's
    hint = root / "templates" / "openmp.txt"
    hint.write_text(hint.read_text().replace("counts[:n]", "bins[:nbins]"))
    changed = ls.prompts_sha256(root=root)
    assert changed != ls.prompts_sha256()
    worked = root / "worked_example" / "openmp.txt"
    worked.write_text(worked.read_text() + " ")
    spaced = ls.prompts_sha256(root=root)
    assert spaced != changed
    worked.rename(root / "worked_example" / "openmp2.txt")  # same bytes, another name
    assert ls.prompts_sha256(root=root) != spaced


def test_the_pilot_records_its_prompts(tmp_path, monkeypatch):
    monkeypatch.setattr(ls, "naive_timeouts", lambda tasks: {})
    monkeypatch.setattr(ls.learning, "sample", lambda model, tasks, n, seed, **kw: [("dot", "a")])
    monkeypatch.setattr(ls, "judge", lambda answers, which, **kw: [None])
    monkeypatch.setattr(ls, "record", lambda *a: {"faster": False})
    ls.run_pilot(tmp_path, [1], 2)
    assert json.loads((tmp_path / "pilot.json").read_text())["prompts_sha256"] == \
        ls.prompts_sha256()


@pytest.mark.parametrize("began, refused", [("0" * 64, True), (None, False), ("NOW", False)])
def test_a_run_goes_on_only_under_the_prompts_it_began_with(began, refused, tmp_path,
                                                             monkeypatch, capsys):
    """A run that began under other prompts is refused before any stage, in one line; the
    kept base evaluations would otherwise pair with answers to another prompt."""
    run = tmp_path / "run"
    run.mkdir()
    pilot = {"per_cell": 4, **({"prompts_sha256": ls.prompts_sha256() if began == "NOW"
                                else began} if began else {})}
    (run / "pilot.json").write_text(json.dumps(pilot))
    (tmp_path / "good.jsonl").write_text(json.dumps(pair("dot", "k").__dict__) + "\n")
    ran = []
    monkeypatch.setattr(ls, "stages", lambda *a, **kw: ran.append("stages"))
    monkeypatch.setattr(ls, "report", lambda *a, **kw: "")
    argv = ["--out", str(run), "--keep", "", "--pairs", str(tmp_path / "good.jsonl")]
    if refused:
        with pytest.raises(SystemExit) as exc:
            ls.main(argv)
        assert exc.value.code == 2 and ran == []
        err = capsys.readouterr().err.strip()
        assert "began under other prompts" in err and len(err.splitlines()) == 1
        ls.main(argv[:4] + ["--report-only"])  # a report asks the model nothing
    else:
        ls.main(argv)
    assert ran == ([] if refused else ["stages"])


def test_prompts_reach_the_base_model_and_student_at_every_stage_but_not_the_teacher(
        tmp_path, monkeypatch):
    """--prompts: the SFT data's prompts, the pilot's and the evaluations' sampler, GRPO's
    settings and the fingerprint all take the directory; the teacher keeps the coder's own."""
    from perfgym.models import prompt_templates
    mine = tmp_path / "prompts"
    mine.mkdir()
    (mine / "openmp.txt").write_text("MARKER: name the kernel's own variable.\n")
    import perfgym.machine
    monkeypatch.setattr(perfgym.machine, "machine_info", lambda: {})  # no probe: prompts only
    assert "MARKER" in ls.improve_prompts(["dot"], mine)["dot"]
    assert "MARKER" not in ls.improve_prompts(["dot"])["dot"]
    assert ls.prompts_sha256(mine) != ls.prompts_sha256()
    asked = []
    monkeypatch.setattr(ls.learning, "sample", lambda model, tasks, n, seed, sampling=None,
                        templates=None, **kw: asked.append(templates) or [("dot", "a")])
    monkeypatch.setattr(ls, "judge", lambda items, which, **kw: [None] * len(items))
    monkeypatch.setattr(ls, "record", lambda *a: {"faster": False})
    monkeypatch.setattr(ls, "naive_timeouts", lambda tasks: {})
    ls.run_pilot(tmp_path, [1], 2, mine)
    for arm in ("base", "control", "grpo", "teacher"):
        ls.run_eval(tmp_path, arm, 1, {"per_cell": 1}, mine)
    assert asked == [mine] * 4 + [prompt_templates("coder")]
    plan = json.loads((tmp_path / "pilot.json").read_text())
    assert plan["prompts_dir"] == str(mine) and plan["prompts_sha256"] == ls.prompts_sha256(mine)
    from perfgym.train import grpo
    trained = []
    monkeypatch.setattr(grpo, "train", lambda settings, resume: trained.append(settings))
    (tmp_path / "seed1").mkdir()
    ls.run_grpo(tmp_path, 1, 2, mine)
    assert trained[0].templates == str(mine)


def test_the_driver_hands_prompts_to_every_stage(tmp_path, monkeypatch):
    mine = tmp_path / "prompts"
    mine.mkdir()
    (mine / "openmp.txt").write_text("a hint\n")
    argvs = []

    def child(argv):
        argvs.append(argv)
        raise SystemExit("stop after the first stage")
    monkeypatch.setattr(ls, "run_child", child)
    args = ls.parse_args(["--out", str(tmp_path), "--prompts", str(mine)])
    with pytest.raises(SystemExit):
        ls.stages(args, tmp_path, [1], {}, {})
    assert argvs[0][argvs[0].index("--prompts") + 1] == str(mine) and "--pilot" in argvs[0]


def test_the_sft_data_is_asked_with_the_prompts_given(tmp_path, monkeypatch):
    stub_data_stage(tmp_path, monkeypatch, "dot", FAST_DOT, lambda text: 2.0)
    ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], templates=tmp_path / "mine")
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert records and {r["prompt"][0]["content"] for r in records} == {"improve dot from mine"}


def test_the_committed_hint_without_names_overrides_the_openmp_hint(monkeypatch):
    import perfgym.machine
    monkeypatch.setattr(perfgym.machine, "machine_info", lambda: {})
    hint = BENCHMARKS / "prompts" / "openmp_no_names"
    ls.check_templates(str(hint))  # a directory the driver takes
    asked = ls.improve_prompts(["dot"], hint)["dot"]
    assert "this kernel itself declares" in asked
    assert "counts[:n]" not in asked and "reduction(+:sum)" not in asked
    assert "counts[:n]" in ls.improve_prompts(["dot"])["dot"]  # perfgym's own names it


# --- the edit form (--answer-form edits) ------------------------------------------------------

def threaded(task_name: str) -> str:
    """The task's naive kernel with `#pragma omp parallel for` before its first loop."""
    lines = get_task(task_name).baseline.read_text().splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip().startswith("for"))
    return "\n".join(lines[:i] + ["#pragma omp parallel for"] + lines[i:]) + "\n"


def test_the_edit_form_makes_sft_answers_of_edits_and_judges_the_kernels_they_make(
        tmp_path, monkeypatch):
    """A pair whose fast side is the naive kernel threaded becomes one SEARCH/REPLACE block
    (no fence, no kernel written out again); what is judged is the kernel the block makes. A
    pair that is the naive kernel has nothing to teach and is left out; a mixed-in naive
    kernel (--mix-naive) is handed back by an edit that changes nothing."""
    from perfgym.edits import SEARCH, apply_edits, no_change
    stub_data_stage(tmp_path, monkeypatch, "dot", "", lambda text: 2.0)
    naive = get_task("dot").baseline.read_text()
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(pair("dot", fast, run).__dict__)
                                                  + "\n" for fast, run in
                                                  ((threaded("dot"), "r1"), (naive, "r2"))))
    judged = []
    monkeypatch.setattr(ls, "judge", lambda items, which, timeouts: [
        judged.append(text) or folded([2.0] * 3) for _, text in items])
    ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], naive_per_task=1, answer_form="edits")
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records] == ["pair"] + ["mix_naive"] * len(ls.TRAIN_TASKS)
    answer = records[0]["completion"][0]["content"]
    assert answer.startswith(SEARCH) and "```" not in answer
    assert answer.count("#pragma omp parallel for") == 1 and len(answer) < len(threaded("dot"))
    assert records[0]["answer_form"] == "edits"
    (handed_back,) = [r for r in records if r["kernel"] == "dot/naive#0"]
    assert handed_back["completion"][0]["content"] == no_change(naive)
    assert judged[0] == threaded("dot") == apply_edits(naive, answer)
    assert apply_edits(naive, no_change(naive)) in judged
    data = json.loads((tmp_path / "data.json").read_text())
    assert data["answer_form"] == "edits"
    assert data["skipped"]["dot/r2#" + naive[:12]] == "the naive kernel: no edit"


def test_hand_back_at_loop_writes_each_copy_as_the_no_change_edit_of_its_loop_line(
        tmp_path, monkeypatch):
    """--hand-back-at-loop: a base model's copy (headers added) and a mixed-in naive kernel
    are answered where the student's pragma edits anchor, the loop line, for itself; without
    it the copy is the header edit it was. Both make the naive kernel."""
    from perfgym.edits import apply_edits, no_change, parse_edits
    stub_data_stage(tmp_path, monkeypatch, "dot", "", lambda text: 2.0)
    naive = get_task("dot").baseline.read_text()
    (tmp_path / "pairs.jsonl").write_text(json.dumps(pair("dot", threaded("dot")).__dict__)
                                          + "\n")
    copy = "#include <omp.h>\n" + naive
    pilot = [{"task": t, "status": "OK", "speedup": 1.0, "naive_copy": True, "code": c}
             for t, c in (("dot", copy), ("prefix_sum", get_task("prefix_sum").baseline
                                           .read_text()))]
    (tmp_path / "pilot.json").write_text(json.dumps({"records": pilot}))

    def handed_back(**settings) -> dict[str, str]:
        ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], copies_per_task=1,
                     naive_per_task=1, answer_form="edits", **settings)
        records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text()
                   .splitlines()]
        return {r["kernel"]: r["completion"][0]["content"] for r in records
                if r["source"] in ("mix_copy", "mix_naive")}

    at_loop = handed_back(hand_back_at_loop=True)
    loop = next(x for x in naive.splitlines() if x.lstrip().startswith("for"))
    assert at_loop["dot/pilot-copy#0"] == at_loop["dot/naive#0"] == no_change(naive, True)
    assert parse_edits(at_loop["dot/pilot-copy#0"]) == [([loop], [loop])]
    assert apply_edits(naive, at_loop["dot/pilot-copy#0"]).strip() == naive.strip()
    assert all(parse_edits(text)[0][0][0].lstrip().startswith("for")
               for text in at_loop.values())
    assert json.loads((tmp_path / "data.json").read_text())["hand_back_at_loop"] is True
    before = handed_back()
    assert "#include <omp.h>" in before["dot/pilot-copy#0"]  # the copy's own edit
    assert before["dot/naive#0"] == no_change(naive)
    assert json.loads((tmp_path / "data.json").read_text())["hand_back_at_loop"] is False


def test_anchor_body_writes_each_pragma_edit_and_hand_back_with_its_loop_body(
        tmp_path, monkeypatch):
    """--anchor-body: dot's threaded pair and its hand-back put `sum += x[i] * y[i];` in
    SEARCH, above the pragma the student writes; prefix_sum's hand-back holds the scan's
    store; every answer still makes its kernel. Without it, the loop line alone."""
    from perfgym.edits import apply_edits, parse_edits
    stub_data_stage(tmp_path, monkeypatch, "dot", "", lambda text: 2.0)
    naive = {t: get_task(t).baseline.read_text() for t in ("dot", "prefix_sum")}
    (tmp_path / "pairs.jsonl").write_text(json.dumps(pair("dot", threaded("dot")).__dict__)
                                          + "\n")

    def answers(**settings) -> dict[str, str]:
        ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], naive_per_task=1,
                     answer_form="edits", hand_back_at_loop=True, **settings)
        records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text()
                   .splitlines()]
        return {r["kernel"]: r["completion"][0]["content"] for r in records
                if r["task"] in naive}

    body = answers(anchor_body="loop")
    assert json.loads((tmp_path / "data.json").read_text())["anchor_body"] == "loop"
    pair_text = next(v for k, v in body.items() if "naive" not in k and "omp" in v)
    ((search, replace),) = parse_edits(pair_text)
    assert search[-1].strip() == "sum += x[i] * y[i];"
    assert replace == ["#pragma omp parallel for", *search]
    assert apply_edits(naive["dot"], pair_text) == threaded("dot").rstrip("\n") + "\n"
    for task in naive:
        ((search, replace),) = parse_edits(body[f"{task}/naive#0"])
        assert search == replace and search[0].lstrip().startswith("for")
        assert apply_edits(naive[task], body[f"{task}/naive#0"]).strip() == naive[task].strip()
    assert "y[i] = sum;" in body["prefix_sum/naive#0"]
    plain = answers()
    assert json.loads((tmp_path / "data.json").read_text())["anchor_body"] is None
    assert all(len(parse_edits(v)[0][0]) == 1 for v in plain.values())


def test_the_edit_form_leaves_out_a_rewrite_whose_edits_are_no_shorter_than_it(
        tmp_path, monkeypatch):
    """A teacher's rewrite of the whole kernel would be taught as a SEARCH of the whole naive
    kernel: the copying this form spares the student. It is left out, and data.json says so."""
    stub_data_stage(tmp_path, monkeypatch, "dot", FAST_DOT, lambda text: 2.0)
    for anchor_body in (None, "loop", "leaf"):  # (body-anchored blocks are longer)
        with pytest.raises(SystemExit, match="none of the 1 usable pairs"):
            ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], answer_form="edits",
                         anchor_body=anchor_body)
        (why,) = json.loads((tmp_path / "data.json").read_text())["skipped"].values()
        assert why.startswith("a rewrite, not an edit")
    ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [])  # the code form takes it
    # rewrite pairs alone are data enough
    monkeypatch.setattr(ls, "rewrite_pairs", lambda form="printed": [
        ("dot", threaded("dot"), "dot/edit:omp_outer")])
    ls.make_data(tmp_path, tmp_path / "pairs.jsonl", [], rewrites_per_task=1,
                 answer_form="edits")
    records = [json.loads(x) for x in (tmp_path / "sft_data.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records] == ["rewrite"]


def test_the_edit_form_samples_plain_answers_and_judges_what_their_edits_make(
        tmp_path, monkeypatch):
    """The trained arms are asked for edits (answers not opened) and judged on the kernel the
    edits make, an edit that does not apply kept with its reason; the base model is asked
    for whole kernels with perfgym's own prompts, and the teacher with its own."""
    from perfgym.edits import DIVIDER, REPLACE, SEARCH
    naive = get_task("dot").baseline.read_text()
    loop = next(x for x in naive.splitlines() if x.strip().startswith("for"))
    good = f"{SEARCH}\n{loop}\n{DIVIDER}\n#pragma omp simd\n{loop}\n{REPLACE}"
    bad = f"{SEARCH}\nfor (;;)\n{DIVIDER}\nx\n{REPLACE}"
    asked, judged = [], []
    monkeypatch.setattr(ls, "TASKS", ("dot",))
    monkeypatch.setattr(ls.learning, "sample", lambda model, tasks, n, seed, sampling=None,
                        templates=None, config=None, opened=True: asked.append(
                            (opened, templates)) or [("dot", good), ("dot", bad)])
    monkeypatch.setattr(ls, "judge", lambda items, which, **kw: judged.extend(items) or [
        folded([1.0] * 3) for _ in items])
    for arm in ("grpo", "base", "teacher"):
        ls.run_eval(tmp_path, arm, 1, {"per_cell": 2, "answer_form": "edits"}, ls.EDIT_PROMPTS)
    from perfgym.models import prompt_templates
    assert asked == [(False, ls.EDIT_PROMPTS), (True, None), (True, prompt_templates("coder"))]
    grpo = json.loads((tmp_path / "eval" / "grpo_seed1.json").read_text())["records"]
    train = [r for r in grpo if r["split"] == "train"]
    assert "#pragma omp simd" in train[0]["code"] and SEARCH not in train[0]["code"]
    assert "edit_error" not in train[0] and "not in the kernel" in train[1]["edit_error"]
    assert judged[0] == ("dot", naive.replace(loop, "#pragma omp simd\n" + loop))


def test_the_edit_form_reaches_every_stage_and_a_run_keeps_its_form(tmp_path, monkeypatch,
                                                                   capsys):
    from perfgym.train import grpo
    args = ls.parse_args(["--out", str(tmp_path), "--answer-form", "edits"])
    assert ls.templates_of(args) == ls.EDIT_PROMPTS
    assert "<<<<<<< SEARCH" in ls.improve_prompts(["dot"], ls.EDIT_PROMPTS)["dot"]
    argvs = []

    def child(argv):
        argvs.append(argv)
        raise SystemExit("stop after the first stage")
    monkeypatch.setattr(ls, "run_child", child)
    with pytest.raises(SystemExit):
        ls.stages(args, tmp_path, [1], {}, {})
    assert argvs[0][argvs[0].index("--answer-form") + 1] == "edits"
    trained = []
    monkeypatch.setattr(grpo, "train", lambda settings, resume: trained.append(settings))
    (tmp_path / "seed1").mkdir()
    ls.run_grpo(tmp_path, 1, 2, ls.EDIT_PROMPTS, "edits")
    assert trained[0].answer_form == "edits" and not trained[0].answer_start
    # the pilot is the base model's: whole kernels to perfgym's own prompts, the form kept
    asked = []
    monkeypatch.setattr(ls, "naive_timeouts", lambda tasks: {})
    monkeypatch.setattr(ls.learning, "sample", lambda model, tasks, n, seed, templates=None,
                        opened=True, **kw: asked.append((opened, templates)) or [("dot", "a")])
    monkeypatch.setattr(ls, "judge", lambda answers, which, **kw: [None])
    monkeypatch.setattr(ls, "record", lambda *a: {"faster": False})
    ls.run_pilot(tmp_path, [1], 2, ls.EDIT_PROMPTS, "edits")
    assert asked == [(True, None)]
    assert json.loads((tmp_path / "pilot.json").read_text())["answer_form"] == "edits"
    # a run begun in one form does not go on in the other
    (tmp_path / "pilot.json").write_text(json.dumps({"answer_form": "edits"}))
    ls.same_form(tmp_path, "edits")
    with pytest.raises(ls.InputError, match="began with --answer-form edits"):
        ls.same_form(tmp_path, "code")
