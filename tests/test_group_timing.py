"""Group timing (perfgym.group_timing): a group's correct kernels and the baseline are timed in
interleaved rounds in the exclusive lane; a wrong answer is left as it was judged and the
others are still timed; a copy of the baseline stays 1x; a clearly faster kernel is faster by
the rounds' bound."""
from contextlib import contextmanager

from perfgym import EvalConfig, evaluate, get_task
from perfgym.group_timing import retime_group
from perfgym.lane import LANE
from perfgym.outcome import Status
from perfgym.train.pairs import VARIANTS_DIR

CONFIG = EvalConfig(use_cache=False, timeout=3.0, max_time=0.5, max_samples=30, min_samples=3)


def test_interleaved_rounds_in_the_lanes_order_a_wrong_answer_left_out(monkeypatch):
    task = get_task("dgemm")
    naive = task.baseline.read_text()
    ikj = (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()
    wrong = naive.replace("C[i * N + j] = sum;", "C[i * N + j] = sum * 1.01;")
    texts = [ikj, wrong, "/* a copy */\n" + naive]
    alone = [evaluate(task, t, None, CONFIG) for t in texts]
    assert [o.status for o in alone] == [Status.OK, Status.WRONG_ANSWER, Status.OK]

    # what held the exclusive lane, in order: the lane's own record, by kernel source
    from perfgym.backends.c import CBackend
    entered, current = [], {"code": None}
    original_lane, original_measure = LANE.exclusive, CBackend.measure

    @contextmanager
    def recording():
        entered.append(current["code"])
        with original_lane():
            yield

    def measure(self, p, outcome):
        current["code"] = p.code
        return original_measure(self, p, outcome)
    monkeypatch.setattr(LANE, "exclusive", recording)
    monkeypatch.setattr(CBackend, "measure", measure)

    order = []
    judged = retime_group(task, texts, alone, CONFIG, rounds=5, order=order)
    assert order == ["baseline", "0", "2"] * 5
    source = {"baseline": naive, "0": texts[0], "2": texts[2]}
    # (a timed run that a neighbour disturbed is run again at once: one kernel, twice in a row)
    runs = [code for k, code in enumerate(entered) if k == 0 or entered[k - 1] != code]
    assert runs == [source[label] for label in order], \
        "the timer's order is not the order the lane was taken in"

    assert judged[1] is alone[1]  # the wrong answer: as it was judged alone
    fast, copy = judged[0], judged[2]
    assert fast.ok and "group_timed" in fast.flags and fast.speedup > 2
    assert fast.speedup_low is not None and fast.speedup_low > 1.0
    assert copy.ok and copy.speedup == 1.0 and "baseline_copy" in copy.flags
    assert "timed in 5 rounds with its group" in fast.message


def test_a_group_with_fewer_than_two_correct_answers_is_returned_as_it_was():
    task = get_task("dot")
    texts = ["no code here", task.expert.read_text()]
    alone = [evaluate(task, t, None, CONFIG) for t in texts]
    assert [o.status for o in alone] == [Status.FORMAT_ERROR, Status.OK]
    judged = retime_group(task, texts, alone, CONFIG)
    assert judged == alone and "group_timed" not in judged[1].flags


def test_a_search_with_group_timing_ranks_its_children_by_their_rounds(tmp_path):
    import json

    from perfgym.policies.replay import ReplayPolicy
    from perfgym.search import SQD, Engine, SQDConfig
    from perfgym.store import RunStore
    task = get_task("dgemm")
    ikj = (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()
    wrong = task.baseline.read_text().replace("C[i * N + j] = sum;", "C[i * N + j] = -sum;")
    replay = tmp_path / "answers.jsonl"
    replay.write_text("".join(json.dumps({"completion": f"```c\n{a}\n```"}) + "\n"
                              for a in (ikj, wrong, task.baseline.read_text())))
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay), task, CONFIG, "tiered", group_timing=True)
    SQD(engine, SQDConfig(iterations=1, G=3, stages=(6,))).run()
    children = [c for c in store.candidates() if c.iteration == 1]
    assert sorted(c.status for c in children) == ["OK", "OK", "WRONG_ANSWER"]
    fast = max((c for c in children if c.ok), key=lambda c: c.gflops)
    assert "group_timed" in fast.outcome["flags"] and fast.outcome["speedup_low"] > 1.0
    # rewarded after its rounds (a timing that other programs disturbed is refused: NaN)
    assert fast.reward == fast.outcome["gflops"] or fast.outcome["disturbed"]


def test_an_answer_written_twice_is_timed_once_a_round_and_both_copies_are_paid_alike():
    task = get_task("dgemm")
    ikj = (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()
    texts = [ikj, task.baseline.read_text().replace("for (int i", "for (int i", 1) + "\n", ikj]
    alone = [evaluate(task, t, None, CONFIG) for t in texts]
    assert all(o.ok for o in alone)
    order = []
    judged = retime_group(task, texts, alone, CONFIG, rounds=5, order=order)
    assert order == ["baseline", "0", "1"] * 5  # the second copy of ikj is not run again
    first, copy = judged[0], judged[2]
    assert first is not copy and "group_timed" in copy.flags
    assert copy.speedup == first.speedup and copy.speedup_low == first.speedup_low
    assert first.speedup > 2


def test_a_kernel_wrong_in_the_rounds_is_judged_by_the_rounds():
    """A member that passed alone and is wrong when timed again is judged by the rounds: here
    a wrong kernel handed to group timing as if it had passed. Both ways of running a round
    (with the check call, the default, and without it, group_timing_cost.py's other way)
    catch it."""
    from perfgym import group_timing
    task = get_task("dot")
    naive = task.baseline.read_text()
    wrong = naive.replace("out[0] = sum;", "out[0] = sum * 1.01;")
    assert wrong != naive
    texts = [task.expert.read_text(), wrong]
    alone = [evaluate(task, t, None, CONFIG) for t in texts]
    assert [o.status for o in alone] == [Status.OK, Status.WRONG_ANSWER]
    for check_call in (True, False):
        group_timing.CHECK_CALL_IN_ROUNDS = check_call
        try:
            judged = retime_group(task, texts, [alone[0], alone[0]], CONFIG)
        finally:
            group_timing.CHECK_CALL_IN_ROUNDS = True
        assert judged[0].ok and "group_timed" in judged[0].flags
        assert judged[1].status is Status.WRONG_ANSWER, judged[1].message
