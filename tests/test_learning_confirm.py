"""The learning report's "faster" confirmed beside the naive kernel (benchmarks/
learning_confirm.py): hostile kernels an evaluation could count faster against a slow draw of
the baseline's time are timed again in interleaved rounds at every size and refuted; a kernel
really faster stays faster. The first tests time real kernels (dgemm at its train sizes);
the rest make their timings."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from perfgym import EvalConfig
from perfgym.tasks import get_task
from perfgym.train.pairs import VARIANTS_DIR

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
spec = importlib.util.spec_from_file_location("learning_confirm",
                                              BENCHMARKS / "learning_confirm.py")
lc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lc)

CONFIG = EvalConfig(use_cache=False, timeout=3.0, max_time=0.5, max_samples=30, min_samples=3)
DGEMM = get_task("dgemm")
NAIVE = DGEMM.baseline.read_text()
IKJ = (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()
IKJ_BODY = IKJ[IKJ.index("{") + 1:IKJ.rindex("}")]
NAIVE_BODY = NAIVE[NAIVE.index("{") + 1:NAIVE.rindex("}")]
SIGNATURE = "void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {"

# the naive loop with a cast in the index: not the naive text, the naive kernel's speed
NEAR_COPY = NAIVE.replace("sum += A[i * K + k]", "sum += A[(long)i * K + k]")
# fast at the first train size (i-k-j: about 20x there), ten times the naive work at the
# others: the geometric mean over the three is about 0.6x
SIZE_GAMED = (f"{SIGNATURE}\n if (M == 256) {{ {IKJ_BODY} return; }}\n"
              f" for (int rep = 0; rep < 10; rep++) {{ {NAIVE_BODY} }}\n}}\n")
# fast everywhere, wrong at one train size
WRONG_AT_ONE_SIZE = IKJ.replace("C[i * N + j] += a * B[k * N + j];",
                                "C[i * N + j] += (M == 128 ? 1.01 : 1.0) * a * B[k * N + j];")
NO_BUILD = IKJ.replace("double a =", "double a = undefined_name +")
RENAMED_COPY = NAIVE.replace("sum", "acc")


def faster_row(code: str, arm: str = "grpo", split: str = "train", task: str = "dgemm") -> dict:
    """A record an evaluation counted faster (as against a slow draw of the baseline)."""
    return {"arm": arm, "seed": 1, "split": split, "task": task, "code": code,
            "faster": True, "speedup": 1.4, "status": "OK"}


def test_hostile_kernels_counted_faster_are_refuted_and_a_faster_one_kept(tmp_path):
    assert NEAR_COPY != NAIVE and WRONG_AT_ONE_SIZE != IKJ
    codes = [IKJ, NEAR_COPY, SIZE_GAMED, WRONG_AT_ONE_SIZE, NO_BUILD, RENAMED_COPY]
    done = lc.confirm([faster_row(c) for c in codes], tmp_path / "confirm.json",
                      lambda name: CONFIG, log=lambda m: None)
    by = {code: done[lc.key("dgemm", "train", code)] for code in codes}
    assert by[IKJ]["confirmed"] and by[IKJ]["speedup"] > 2 and by[IKJ]["low"] > 1.5
    assert [p["size"] for p in by[IKJ]["per_size"]] == [
        "M=256,N=256,K=256", "M=128,N=96,K=200", "M=255,N=257,K=253"]
    near = by[NEAR_COPY]
    assert not near["confirmed"] and near["status"] == "OK" and 0.7 < near["speedup"] < 1.1
    gamed = by[SIZE_GAMED]
    assert gamed["per_size"][0]["status"] == "OK", gamed  # (a flake once: said how, here)
    assert not gamed["confirmed"] and gamed["per_size"][0]["speedup"] > 2, gamed
    assert gamed["speedup"] < 1.1
    assert not by[WRONG_AT_ONE_SIZE]["confirmed"]
    assert by[WRONG_AT_ONE_SIZE]["status"] == "WRONG_ANSWER"
    assert [p["status"] for p in by[WRONG_AT_ONE_SIZE]["per_size"]][1] == "WRONG_ANSWER"
    assert not by[NO_BUILD]["confirmed"] and by[NO_BUILD]["status"] == "COMPILE_ERROR"
    copy = by[RENAMED_COPY]
    assert not copy["confirmed"] and copy["naive_copy"] and copy["speedup"] == 1.0


def test_held_out_sizes_are_confirmed_at_the_held_out_sizes():
    rows = lc.time_group(DGEMM, [IKJ], DGEMM.heldout_sizes[0], CONFIG)
    assert rows[0]["size"] == "M=97,N=131,K=61" and rows[0]["status"] == "OK"
    assert [lc.split_sizes(DGEMM, s) for s in ("heldout_sizes", "train", "heldout_task")] == \
        [DGEMM.heldout_sizes, DGEMM.train_sizes, DGEMM.train_sizes]


def test_a_naive_kernel_that_fails_its_rounds_leaves_the_answer_not_timed_with_the_reason(
        tmp_path):
    """The rounds' naive kernel is the gym's: its failure is retried, then recorded as the
    reason the answer was not timed, and the answer is counted neither kept nor refuted."""
    import dataclasses
    crashing = tmp_path / "naive.c"
    crashing.write_text(NAIVE.replace("for (int i = 0;", "__builtin_trap();\n    for (int i = 0;",
                                      1))
    broken_naive = dataclasses.replace(DGEMM, baseline=crashing)
    attempts = []

    def retime(*args, **kwargs):
        attempts.append(1)
        from perfgym.group_timing import retime_group
        return retime_group(*args, **kwargs)
    size = DGEMM.heldout_sizes[0]
    row, = lc.time_group(broken_naive, [IKJ], size, CONFIG, retime=retime)
    assert row["status"] == "NOT_TIMED" and row["speedup"] is None
    assert len(attempts) == lc.BASELINE_ATTEMPTS
    assert "the naive kernel failed the rounds 3 times, last: RUNTIME_ERROR" in row["reason"], row
    folded = {**lc.fold([row]), "per_size": [row]}
    judged = lc.apply([faster_row(IKJ)], {lc.row_key(faster_row(IKJ)): folded})
    assert not judged[0]["faster"] and judged[0]["not_timed"]
    assert lc.summary(judged) == {"train": {"kept": 0, "refuted": 0, "unconfirmed": 0,
                                            "not_timed": 1}}


def test_rounds_whose_naive_kernel_failed_once_run_again():
    from perfgym.outcome import Outcome, Status
    calls = []

    def flaky(task, codes, told_ok, config, size, min_members, baseline_failure):
        calls.append(size)
        if len(calls) == 1:  # the first time the naive kernel fails; the answers keep theirs
            baseline_failure.append(Outcome(status=Status.TIMEOUT, task="dgemm", sizes=size,
                                            message="did not finish"))
            return told_ok
        return [Outcome(status=Status.OK, task="dgemm", sizes=size, speedup=3.0,
                        speedup_low=2.5, flags=["group_timed"]) for _ in codes]
    row, = lc.time_group(DGEMM, [IKJ], DGEMM.train_sizes[0], CONFIG, retime=flaky)
    assert len(calls) == 2 and row["status"] == "OK" and row["speedup"] == 3.0
    assert "reason" not in row


# --- made timings -----------------------------------------------------------------------------

def made_timer(speedups: dict, calls: list):
    """A timer that gives each code the speedup (and a bound 0.9 of it) `speedups` names."""
    def timer(task, codes, size, config):
        calls.append((task.name, tuple(codes), tuple(sorted(size.items()))))
        return [{"size": str(size), "status": "OK", "speedup": speedups[c],
                 "low": 0.9 * speedups[c], "naive_copy": False} for c in codes]
    return timer


def test_every_arm_shares_one_confirmation_of_a_kernel_and_a_rerun_times_nothing(tmp_path):
    rows = [faster_row("a"), faster_row("a", arm="control"), faster_row("b"),
            {**faster_row("c"), "faster": False}, faster_row("a", split="heldout_sizes")]
    calls = []
    timer = made_timer({"a": 2.0, "b": 1.05}, calls)
    path = tmp_path / "confirm.json"
    done = lc.confirm(rows, path, lambda n: CONFIG, log=lambda m: None, timer=timer)
    # a and b together at the 3 train sizes; a alone at the 3 held-out sizes; c never
    assert [c[1] for c in calls] == [("a", "b")] * 3 + [("a",)] * 3
    assert json.loads(path.read_text()) == done and len(done) == 3
    calls.clear()
    assert lc.confirm(rows, path, lambda n: CONFIG, log=lambda m: None, timer=timer) == done
    assert calls == []
    judged = lc.apply(rows, done)
    assert [r["faster"] for r in judged] == [True, True, False, False, True]
    assert judged[2]["faster_first"] and judged[2]["confirmed_speedup"] == 1.05
    assert "faster_first" not in judged[3]
    assert lc.summary(judged) == {
        "train": {"kept": 2, "refuted": 1, "unconfirmed": 0, "not_timed": 0},
        "heldout_sizes": {"kept": 1, "refuted": 0, "unconfirmed": 0, "not_timed": 0}}


def test_a_killed_confirmation_goes_on_from_the_last_group_written(tmp_path):
    rows = [faster_row(c) for c in "abcdef"]
    calls = []
    timer = made_timer(dict.fromkeys("abcdef", 2.0), calls)

    def dies_in_second_group(task, codes, size, config):
        if "e" in codes:
            raise KeyboardInterrupt
        return timer(task, codes, size, config)

    path = tmp_path / "confirm.json"
    with pytest.raises(KeyboardInterrupt):
        lc.confirm(rows, path, lambda n: CONFIG, log=lambda m: None, group=4,
                   timer=dies_in_second_group)
    assert len(json.loads(path.read_text())) == 4
    calls.clear()
    lc.confirm(rows, path, lambda n: CONFIG, log=lambda m: None, group=4, timer=timer)
    assert {c[1] for c in calls} == {("e", "f")}


@pytest.mark.parametrize("per_size, confirmed", [
    ([(2.0, 1.5), (2.0, 1.5), (2.0, 1.5)], True),
    ([(1.12, 1.01), (1.12, 1.01), (1.12, 1.01)], True),
    ([(1.09, 1.05), (1.09, 1.05), (1.09, 1.05)], False),  # under the 1.1 band
    ([(1.3, 0.98), (1.3, 0.99), (1.3, 1.0)], False),  # the bound does not clear 1
    ([(8.0, 7.0), (0.3, 0.25), (0.3, 0.25)], False),  # fast at one size only
    ([(2.0, 1.5), (2.0, 0.0), (2.0, 1.5)], False),  # one size's rounds bound nothing
])
def test_the_fold_is_the_measures_over_every_size(per_size, confirmed):
    rows = [{"size": str(i), "status": "OK", "speedup": s, "low": lo, "naive_copy": False}
            for i, (s, lo) in enumerate(per_size)]
    assert lc.fold(rows)["confirmed"] is confirmed


def test_a_failure_or_a_copy_at_any_size_is_not_faster():
    ok = {"size": "1", "status": "OK", "speedup": 3.0, "low": 2.5, "naive_copy": False}
    assert lc.fold([ok, {**ok, "status": "TIMEOUT", "speedup": None, "low": None}]) == {
        "confirmed": False, "status": "TIMEOUT", "speedup": None, "low": None}
    assert not lc.fold([ok, {**ok, "naive_copy": True}])["confirmed"]
    assert not lc.fold([ok, {**ok, "status": "NOT_TIMED"}])["confirmed"]
    assert not lc.fold([])["confirmed"]


def test_a_faster_record_without_a_confirmation_is_not_faster_and_an_old_run_is_as_it_was():
    rows = [faster_row("a"), faster_row("b")]
    judged = lc.apply(rows, {lc.row_key(rows[0]): {"confirmed": True, "speedup": 2.0,
                                                   "low": 1.8}})
    assert judged[0]["faster"] and not judged[1]["faster"] and judged[1]["unconfirmed"]
    assert lc.apply(rows, None) == rows
