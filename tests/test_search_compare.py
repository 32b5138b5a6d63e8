"""The search comparison's plan and statistics, and the engine's candidate cap it relies on
(no model, no kernel timed)."""
import importlib.util
import math
import types
from pathlib import Path

from perfgym.search import BestOfN, Engine
from perfgym.search.engine import Step
from perfgym.store import RunStore

spec = importlib.util.spec_from_file_location(
    "search_compare", Path(__file__).parent.parent / "benchmarks" / "search_compare.py")
sc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sc)


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


def test_bootstrap_ci_is_stratified_by_task():
    # constant runs: no spread at all
    lo, hi = sc.bootstrap_ci({"a": [1.0, 1.0], "b": [3.0, 3.0]}, n=200)
    assert lo == hi == 2.0
    # a task's spread moves the CI; the mean of task means sits inside it
    by_task = {"a": [0.0, 1.0, 2.0], "b": [10.0, 10.0, 10.0, 10.0, 10.0, 10.0]}
    lo, hi = sc.bootstrap_ci(by_task, n=2000)
    assert lo < sc.task_mean(by_task) == 5.5 < hi
    assert 5.0 <= lo and hi <= 6.0  # task b never moves; task a's mean stays in [0, 2]
    assert sc.bootstrap_ci(by_task, n=2000) == (lo, hi)  # seeded: reproducible


def record(task, seed, algo, speedup, error=None):
    r = {"task": task, "seed": seed, "algo": algo, "best_speedup": speedup,
         "naive_gflops": 1.0, "curve_gflops": [1.0, speedup]}
    if error:
        r["error"] = error
    return r


def test_aggregate_pairs_by_task_and_seed_and_skips_incomplete_groups():
    records = {}
    for task in ("dgemm", "dot"):
        for seed in (1, 2):
            for algo in sc.ALGOS:
                # sqd is exactly twice best-of-n in every pair; the others equal best-of-n
                base = 1.0 + seed + (task == "dot")
                records[sc.key(task, seed, algo)] = record(
                    task, seed, algo, base * (2 if algo == "sqd" else 1))
    # a failed evolve run drops its whole (task, seed) group from every algorithm
    records[sc.key("dot", 2, "evolve")] = record("dot", 2, "evolve", 1.0, error="boom")
    agg = sc.aggregate(records)
    assert agg["groups"] == [["dgemm", 1], ["dgemm", 2], ["dot", 1]]
    assert all(c["runs"] == 3 for c in agg["ci"].values())
    cmp = agg["comparisons"]["sqd / best-of-n"]
    assert math.isclose(cmp["ratio"], 2.0) and all(math.isclose(x, 2.0) for x in cmp["ci95"])
    assert math.isclose(agg["comparisons"]["evolve / best-of-n"]["ratio"], 1.0)
    # the geometric mean weighs tasks equally: dgemm (2, 3) and dot (3)
    want = math.exp((math.log(2) + math.log(3)) / 4 + math.log(3) / 2)
    assert math.isclose(agg["ci"]["best-of-n"]["geomean"], want)


def test_algorithm_flags_plan_at_least_the_budget():
    for evals in (4, 5, 32):
        for algo in sc.ALGOS:
            args = sc.algo_args(algo, evals, 4)
            assert args[-2:] == ["--max-candidates", str(evals)]


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
