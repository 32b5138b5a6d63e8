"""Multi-turn credit (perfgym.train.turns): the return each scheme defines, and no return that
a trajectory can raise by stalling or by spoiling an early turn on purpose."""
import itertools

import pytest

from perfgym.train.turns import RETURNS, Turn, stop_early, trajectory_return

FAIL = Turn(None, "COMPILE_ERROR", -40.0)  # tiered: a compile error
GOOD = Turn("good kernel", "OK", 12.0)      # tiered: GFLOP/s
WORSE = Turn("worse kernel", "OK", 8.0)


def test_a_second_turn_that_fixes_a_compile_error_gets_the_scheme_s_return():
    fixed = [FAIL, GOOD]
    assert trajectory_return(fixed, "best") == 12.0
    assert trajectory_return(fixed, "last") == 12.0
    assert trajectory_return(fixed, "discounted", gamma=0.5) == pytest.approx(
        (-40.0 + 0.5 * 12.0) / 1.5)


@pytest.mark.parametrize("kind", RETURNS)
def test_stalling_adds_nothing(kind):
    """Repeating a kernel (any number of times, after any turn) leaves the return as it was."""
    for base in ([GOOD], [FAIL, GOOD], [WORSE, GOOD], [GOOD, WORSE]):
        alone = trajectory_return(base, kind)
        for repeat in base:
            if repeat.kernel is None:
                continue
            for at in range(1, len(base) + 1):
                stalled = base[:at] + [repeat] + base[at:]
                assert trajectory_return(stalled, kind) == pytest.approx(alone), (base, at)


@pytest.mark.parametrize("kind", RETURNS)
def test_spoiling_an_early_turn_does_not_pay(kind):
    """A broken first turn, or a worse correct one, then the good kernel, never beats the good
    kernel written at once and left alone (or repeated)."""
    at_once = trajectory_return([GOOD, GOOD, GOOD], kind)
    for first, second in itertools.product([FAIL, WORSE, Turn(None, "FORMAT_ERROR", -100.0)],
                                           [FAIL, WORSE]):
        for spoiled in ([first, GOOD], [first, second, GOOD], [first, GOOD, GOOD]):
            assert trajectory_return(spoiled, kind, gamma=0.4) <= at_once + 1e-12, spoiled


def test_the_plain_discounted_sum_would_pay_a_worse_first_kernel():
    """Why the discounted return is a weighted mean: the sum pays sandbagging."""
    g = 0.4
    assert WORSE.score + g * GOOD.score > GOOD.score  # the sum's loophole
    assert trajectory_return([WORSE, GOOD], "discounted", g) < trajectory_return([GOOD], "discounted", g)


def test_two_failed_answers_without_a_kernel_are_not_repeats():
    no_kernel = Turn(None, "FORMAT_ERROR", -100.0)
    assert trajectory_return([no_kernel, no_kernel, GOOD], "last") == 12.0
    assert trajectory_return([no_kernel, no_kernel], "discounted", 0.5) == -100.0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="not one of"):
        trajectory_return([GOOD], "mean")
    with pytest.raises(ValueError, match="at least one turn"):
        trajectory_return([], "best")
    with pytest.raises(ValueError, match="gamma"):
        trajectory_return([GOOD], "discounted", gamma=1.5)


def test_a_trajectory_stops_at_the_expert_s_speed():
    assert stop_early(3.1, 3.0) and stop_early(3.0, 3.0)
    assert not stop_early(2.9, 3.0) and not stop_early(None, 3.0) and not stop_early(5.0, None)


def test_the_report_draws_per_turn_curves_from_the_run_store(tmp_path):
    from perfgym.report.plots import turn_table, write_plots
    from perfgym.store import RunStore
    store = RunStore(tmp_path / "run")
    rows = [("grpo:mt:0:0:0", "COMPILE_ERROR", None), ("grpo:mt:0:0:1", "OK", 5.0),
            ("grpo:mt:0:1:0", "OK", 2.0), ("grpo:mt:0:1:1", "OK", 7.5)]
    for slot, status, gflops in rows:
        cid = store.add_pending(slot, 0, None, None, "generate", "grpo", "", "")
        store.complete(cid, {"status": status, "gflops": gflops}, gflops or -40.0)
    table = turn_table(store.candidates())
    assert table == {1: {"turns": 2, "ok": 0.5, "best_gflops": 2.0},
                     2: {"turns": 2, "ok": 1.0, "best_gflops": 7.5}}
    assert (tmp_path / "report" / "turns.png") in write_plots(store, tmp_path / "report")
