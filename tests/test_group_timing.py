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
    lane_runs = _lane_runs(monkeypatch)

    order = []
    judged = retime_group(task, texts, alone, CONFIG, rounds=5, order=order)
    assert order == ["baseline", "0", "2"] * 5
    source = {"baseline": naive, "0": texts[0], "2": texts[2]}
    assert lane_runs() == [source[label] for label in order], \
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


def _judge_with(tasks, texts):
    """judge(indices, configs) as GRPO's reward gives it: one batch, the local executor."""
    from perfgym.executors import Request, evaluate_many

    def judge(indices, configs):
        return evaluate_many([Request(tasks[i], texts[i], None, c)
                              for i, c in zip(indices, configs)])
    return judge


def _lane_runs(monkeypatch):
    """The kernel sources that held the exclusive lane, in order (a run a neighbour disturbed
    and ran again at once counted once)."""
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
    return lambda: [c for k, c in enumerate(entered) if k == 0 or entered[k - 1] != c]


def test_judged_in_groups_a_kernel_the_rounds_time_is_not_timed_alone(monkeypatch):
    """judge_in_groups: a group of two correct answers and a wrong one, and a group with one
    correct answer. The first group's correct answers take the lane only in their rounds; the
    lone correct answer is judged alone, in full; nothing comes back untimed."""
    from perfgym.group_timing import judge_in_groups
    from perfgym.outcome import CHECK_ONLY
    task = get_task("dgemm")
    naive = task.baseline.read_text()
    ikj = (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()
    wrong = naive.replace("C[i * N + j] = sum;", "C[i * N + j] = sum * 1.01;")
    texts = [ikj, wrong, "/* a copy */\n" + naive, "no code", ikj + "\n/* alone */\n", wrong]
    tasks = [task] * len(texts)
    runs = _lane_runs(monkeypatch)
    judged = judge_in_groups(tasks, texts, [CONFIG] * len(texts), 3, _judge_with(tasks, texts))
    assert [o.status for o in judged] == [Status.OK, Status.WRONG_ANSWER, Status.OK,
                                          Status.FORMAT_ERROR, Status.OK, Status.WRONG_ANSWER]
    assert not any(CHECK_ONLY in o.flags for o in judged)
    assert "group_timed" in judged[0].flags and "group_timed" in judged[2].flags
    lone = judged[4]
    assert "group_timed" not in lone.flags and lone.timing and lone.speedup > 2
    # the lane: the first group's rounds (five of the baseline, ikj and the copy), then the
    # lone answer's timed run, after the baseline's for its speedup unless one was timed in the
    # last seconds (evaluate.recent_baseline); ikj and the copy are never timed alone
    lane = runs()
    assert lane[:15] == [naive, ikj, "/* a copy */\n" + naive] * 5
    assert lane[15:] in ([naive, texts[4]], [texts[4]])


def test_judged_in_groups_a_kernel_right_only_on_its_first_call_is_caught():
    """The first pass stops after the check call, so a kernel right on its first call only
    passes it. The full protocol that follows catches it: the rounds in a group of two,
    the full evaluation alone."""
    from perfgym.group_timing import judge_in_groups
    task = get_task("dot")
    naive = task.baseline.read_text()
    first_call_only = naive.replace("out[0] = sum;",
                                    "static int calls = 0;\n    out[0] = calls++ ? 0.0 : sum;")
    assert first_call_only != naive
    texts = [task.expert.read_text(), first_call_only, "no code", first_call_only + "\n"]
    tasks = [task] * len(texts)
    judged = judge_in_groups(tasks, texts, [CONFIG] * len(texts), 2, _judge_with(tasks, texts))
    assert judged[0].ok and "group_timed" in judged[0].flags
    assert judged[1].status is Status.WRONG_ANSWER, judged[1].message
    assert judged[3].status is Status.WRONG_ANSWER, judged[3].message


def test_an_untimed_verdict_is_never_cached_and_never_a_baseline(tmp_path, monkeypatch):
    """A CHECK_ONLY evaluation under the outcome cache stores nothing, and a baseline asked
    for with such a config is timed in full."""
    import importlib

    from perfgym.cache import OutcomeCache
    from perfgym.group_timing import check_only
    from perfgym.outcome import CHECK_ONLY
    evaluate_module = importlib.import_module("perfgym.evaluate")
    monkeypatch.setattr(evaluate_module, "_cache", OutcomeCache(tmp_path / "outcomes.sqlite"))
    task = get_task("dot")
    cached = CONFIG.replace(use_cache=True)
    untimed = evaluate(task, task.expert.read_text(), None, check_only(cached))
    assert untimed.ok and CHECK_ONLY in untimed.flags and untimed.timing is None
    full = evaluate(task, task.expert.read_text(), None, cached)  # not the untimed verdict
    assert full.ok and full.timing and CHECK_ONLY not in full.flags
    base = evaluate_module.baseline(task, task.default_size, check_only(CONFIG))
    assert base.ok and base.timing and CHECK_ONLY not in base.flags
