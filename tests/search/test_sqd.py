"""SQD end to end through the replay policy, and the run store it leaves."""
from collections import Counter

from perfgym import EvalConfig
from perfgym.policies.replay import ReplayPolicy
from perfgym.search import SQD, Engine, SQDConfig, select
from perfgym.store import RunStore

FAST = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)


def run_sqd(tmp_path, replay_file, dgemm, iterations=2):
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay_file), dgemm, FAST, "tiered")
    seen = []
    sqd = SQD(engine, SQDConfig(iterations=iterations, G=4),
              on_iteration=lambda t, children: seen.append((t, len(children))))
    return store, sqd.run(), seen


def test_sqd_two_iterations(tmp_path, replay_file, dgemm):
    store, best, seen = run_sqd(tmp_path, replay_file, dgemm)
    cands = store.candidates()
    by_iter = {t: [c for c in cands if c.iteration == t] for t in (0, 1, 2)}

    # iteration 0: the seed (the task's naive kernel) at stage 1
    (seed,) = by_iter[0]
    assert seed.op == "seed" and seed.ok and seed.stage == 1

    # iteration 1: P = {seed (improve, stage 1)} + top of Pool(0) = {seed (deepen, stage 2)}
    it1 = by_iter[1]
    assert len(it1) == 8
    assert Counter((c.op, c.stage) for c in it1) == {("improve", 1): 4, ("deepen", 2): 4}
    assert all(c.parent_id == seed.id for c in it1)
    # each group of G=4 got one good, one wrong, one broken, one OpenMP kernel
    assert Counter(c.status for c in it1 if c.stage == 1) == {
        "OK": 1, "WRONG_ANSWER": 1, "COMPILE_ERROR": 1, "STAGE_VIOLATION": 1}

    # iteration 2: per stage pool of 4 (1 OK, 3 failed): top 40% -> the OK one deepens,
    # no middle left, the best failure (the wrong answer) is repaired; plus the seed again
    it2 = by_iter[2]
    ok1 = next(c for c in it1 if c.stage == 1 and c.ok)
    ok2 = next(c for c in it1 if c.stage == 2 and c.ok)
    wrong1 = next(c for c in it1 if c.stage == 1 and c.status == "WRONG_ANSWER")
    wrong2 = next(c for c in it1 if c.stage == 2 and c.status == "WRONG_ANSWER")
    expect = {(seed.id, "improve", 1): 4, (ok1.id, "deepen", 2): 4, (wrong1.id, "repair", 1): 4,
              (ok2.id, "deepen", 3): 4, (wrong2.id, "repair", 2): 4}
    assert Counter((c.parent_id, c.op, c.stage) for c in it2) == expect

    # the store holds every candidate with its outcome and reward
    assert len(cands) == 1 + 8 + 20 and not any(c.pending for c in cands)
    assert all(c.outcome and c.outcome["status"] == c.status for c in cands)
    assert all(c.reward == (c.gflops if c.ok else {"WRONG_ANSWER": -10, "COMPILE_ERROR": -40,
                                                   "STAGE_VIOLATION": -100}[c.status])
               for c in cands if c.op != "seed")
    assert all(c.prompt_hash for c in cands if c.op != "seed")
    assert seen == [(1, 8), (2, 20)]
    assert best is not None and best.ok and best.gflops == max(c.gflops for c in cands if c.ok)
    assert [d["iteration"] for _, _, d in store.events("iteration_done")] == [1, 2]


def test_running_again_changes_nothing(tmp_path, replay_file, dgemm):
    store, _, _ = run_sqd(tmp_path, replay_file, dgemm)
    before = [(c.id, c.status, c.reward) for c in store.candidates()]
    store2, _, seen = run_sqd(tmp_path, replay_file, dgemm)
    assert [(c.id, c.status, c.reward) for c in store2.candidates()] == before
    assert seen == []  # every iteration was already done


def test_select_ratios():
    from perfgym.store import Candidate

    def cand(i, status, gflops=None):
        return Candidate(i, f"s{i}", 1, 1, None, "improve", "p", None, "", status, 0.0, gflops,
                         {"status": status})
    pool = [cand(1, "OK", 5.0), cand(2, "OK", 9.0), cand(3, "OK", 1.0), cand(4, "OK", 3.0),
            cand(5, "COMPILE_ERROR"), cand(6, "WRONG_ANSWER"), cand(7, "OK", 2.0),
            cand(8, "TIMEOUT"), cand(9, "OK", 4.0), cand(10, "FORMAT_ERROR")]
    top, mid, err = select(pool, (0.4, 0.3, 0.3))
    assert [c.id for c in top] == [2, 1, 9, 4]  # 40% of 10, best first
    assert [c.id for c in mid] == [7, 3]  # the next 30%, as far as working kernels go
    assert [c.id for c in err] == [6, 8, 5]  # 30%, closest to working first


def test_a_single_stage_expands_the_seed_once(tmp_path, replay_file, dgemm):
    """With one stage the seed is both P's node and Pool(0)'s top node, with the same op and
    stage: its children are planned once (their slots repeated before, and the run store
    refused the second)."""
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay_file), dgemm, FAST, "tiered")
    SQD(engine, SQDConfig(iterations=1, G=3, stages=(6,))).run()
    it1 = [c for c in store.candidates() if c.iteration == 1]
    assert len(it1) == 3 and {(c.op, c.stage) for c in it1} == {("improve", 6)}


def test_restarts_draw_again_from_the_seed_and_keep_the_best(tmp_path, replay_file, dgemm):
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay_file), dgemm, FAST, "tiered")
    best = SQD(engine, SQDConfig(iterations=1, G=4, restarts=2)).run()
    cands = store.candidates()
    seed = next(c for c in cands if c.op == "seed")
    # each restart's first iteration grows from the seed alone, as the search's first does
    for t in (1, 2):
        assert Counter((c.parent_id, c.op, c.stage) for c in cands if c.iteration == t) == {
            (seed.id, "improve", 1): 4, (seed.id, "deepen", 2): 4}
    assert [d["restart"] for _, _, d in store.events("restart")] == [2]
    assert [(d["iteration"], d["restart"]) for _, _, d in store.events("iteration_done")] == \
        [(1, 1), (2, 2)]
    assert best.gflops == max(c.gflops for c in cands if c.ok)
    # run again: nothing is drawn twice
    before = [(c.id, c.status) for c in cands]
    SQD(engine, SQDConfig(iterations=1, G=4, restarts=2)).run()
    assert [(c.id, c.status) for c in store.candidates()] == before


def test_a_restart_starts_only_while_the_budget_has_room_and_a_resume_keeps_that(
        tmp_path, replay_file, dgemm):
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay_file), dgemm, FAST, "tiered")
    # the first draw took longer than this budget: no second one
    SQD(engine, SQDConfig(iterations=1, G=4, restarts=3, budget_seconds=0.01)).run()
    assert {c.iteration for c in store.candidates()} == {0, 1}
    assert [d["restarts"] for _, _, d in store.events("restarts_stopped")] == [1]
    # resumed with a budget that would have had room, the decision stands
    SQD(engine, SQDConfig(iterations=1, G=4, restarts=3, budget_seconds=3600)).run()
    assert {c.iteration for c in store.candidates()} == {0, 1}
    assert len(list(store.events("restarts_stopped"))) == 1


def test_a_budget_with_room_runs_every_restart(tmp_path, replay_file, dgemm):
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay_file), dgemm, FAST, "tiered")
    SQD(engine, SQDConfig(iterations=1, G=4, restarts=3, budget_seconds=3600)).run()
    assert {c.iteration for c in store.candidates()} == {0, 1, 2, 3}
    assert not list(store.events("restarts_stopped"))


class Clock:
    """SQD's budget clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_iteration_runs_only_the_children_that_fit_the_budget(
        tmp_path, replay_file, dgemm, monkeypatch):
    """Each answer takes 5 s of the clock. Iteration 1 (8 children) ends at 40 s of 100;
    iteration 2 plans 20 and 60 s hold 12, one child of each of its 5 nodes before any
    second; iteration 3 has no time left and is not begun (before, every iteration of a draw
    ran to its end: one ended 101 s past a 12-minute budget)."""
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay_file), dgemm, FAST, "tiered")
    clock = Clock()
    real = engine.run_steps

    def timed(steps):
        out = real(steps)
        clock.now += 5 * sum(1 for s in steps if s.op != "seed")
        return out

    monkeypatch.setattr(engine, "run_steps", timed)
    SQD(engine, SQDConfig(iterations=3, G=4, budget_seconds=100), clock=clock).run()
    by_iter = Counter(c.iteration for c in store.candidates())
    assert by_iter == {0: 1, 1: 8, 2: 12}
    assert clock.now - 1000.0 <= 100
    it2 = Counter(c.parent_id for c in store.candidates() if c.iteration == 2)
    assert sorted(it2.values()) == [2, 2, 2, 3, 3]  # 5 nodes, 5 parents
    assert [d["iteration"] for _, _, d in store.events("budget_spent")] == [3]
    # resumed past its budget, it keeps what it has and draws nothing more
    clock.now += 50
    SQD(engine, SQDConfig(iterations=3, G=4, budget_seconds=100), clock=clock).run()
    assert Counter(c.iteration for c in store.candidates()) == by_iter


def test_the_no_flag_search_repairs_nothing_and_draws_while_its_budget_lasts():
    from perfgym.cli.search_plan import (NO_FLAG_BUDGET_MINUTES, NO_FLAG_RATIOS, RATIOS,
                                    sqd_defaults)
    ratios, restarts, budget = sqd_defaults(True, None, None, None)
    assert ratios == NO_FLAG_RATIOS and float(ratios.split(",")[2]) == 0
    assert budget == NO_FLAG_BUDGET_MINUTES and restarts > 3  # the budget ends the draws
    assert sqd_defaults(False, None, None, None) == (RATIOS, 1, None)
    # a flag the user gave is kept, in the no-flag search too
    assert sqd_defaults(True, "0.5,0.2,0.3", 2, None) == ("0.5,0.2,0.3", 2, None)
    assert sqd_defaults(True, None, None, 5.0)[1:] == (restarts, 5.0)  # draws within 5 min


def test_a_no_flag_run_resumes_with_the_settings_it_was_started_with():
    from perfgym.cli.search_plan import as_started
    now = {"task": "dgemm", "ratios": [0.4, 0.3, 0.0], "restarts": 12, "budget_minutes": 12.0,
           "sizes": "train"}
    before_restarts = {"task": "dgemm", "ratios": [0.4, 0.3, 0.3]}
    assert as_started(now, before_restarts) == before_restarts
    three_draws = {**before_restarts, "restarts": 3, "budget_minutes": 12.0}
    assert as_started(now, three_draws) == three_draws  # judged at the default size alone
    assert as_started(now, now) == now
    # only the no-flag settings are taken from the run: any other difference stays one
    other_task = {**three_draws, "task": "dgemv"}
    assert as_started(now, other_task) != other_task
