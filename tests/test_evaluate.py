"""The pipeline end to end on the real compiler, harness and sandbox."""
import json

import pytest

from perfgym import EvalConfig, Status, evaluate
from perfgym.cache import OutcomeCache
from perfgym.executors import Request, evaluate_many
from perfgym.machine import machine_info


def test_naive_and_expert_are_ok_and_expert_is_faster(dgemm, fast):
    cfg = fast.replace(compare_baseline=True, use_cache=False)
    naive = evaluate(dgemm, dgemm.baseline.read_text(), None, cfg)
    expert = evaluate(dgemm, dgemm.expert.read_text(), None, cfg)
    assert naive.ok and expert.ok, (naive.message, expert.message)
    assert expert.gflops > 2 * naive.gflops
    assert expert.speedup > 2
    assert 0 < expert.fraction_of_peak < 1.5
    assert expert.machine["id"] and expert.machine["peak_gflops"] > 0
    assert "openmp" in expert.techniques
    t = expert.timing
    assert t.minimum <= t.median and len(t.samples) >= 3 and t.warmups >= 1


def test_expert_is_correct_at_every_size(dgemm, fast):
    for size in dgemm.sizes("all"):
        o = evaluate(dgemm, dgemm.expert.read_text(), size, fast)
        assert o.ok, (size, o.message)


def test_model_answer_with_fenced_block(dgemm, fast):
    answer = f"Sure! Here is a faster kernel.\n\n```c\n{dgemm.baseline.read_text()}```\nEnjoy."
    assert evaluate(dgemm, answer, {"M": 16, "N": 8, "K": 4}, fast).ok


def test_compile_error_keeps_diagnostics(dgemm, fast):
    o = evaluate(dgemm, dgemm.baseline.read_text().replace("sum +=", "sum += undefined_var +"),
                 None, fast)
    assert o.status is Status.COMPILE_ERROR
    assert "undefined_var" in o.message and "candidate.c" in o.details
    assert "/var/lib" not in o.details and "/tmp/" not in o.details


def test_wrong_answer_says_where(dgemm, fast):
    code = dgemm.baseline.read_text().replace("C[i * N + j] = sum;",
                                              "C[i * N + j] = (i == 3 && j == 7) ? 0.0 : sum;")
    o = evaluate(dgemm, code, None, fast)
    assert o.status is Status.WRONG_ANSWER and "C[3, 7]" in o.message


def test_c_plus_equals_fails(dgemm, fast):
    """The task is C = A x B: a kernel that accumulates into C (assuming zeros) is wrong."""
    code = dgemm.baseline.read_text().replace("C[i * N + j] = sum", "C[i * N + j] += sum")
    assert evaluate(dgemm, code, None, fast).status is Status.WRONG_ANSWER


def test_sampled_verification_mode(dgemm, fast):
    o = evaluate(dgemm, dgemm.baseline.read_text(), None, fast.replace(verify="sampled"))
    assert o.ok and o.config["verify"] == "sampled"


def test_opt_levels_change_speed(dgemm, fast):
    o0 = evaluate(dgemm, dgemm.baseline.read_text(), {"M": 128, "N": 128, "K": 128},
                  fast.replace(opt="O0"))
    o3 = evaluate(dgemm, dgemm.baseline.read_text(), {"M": 128, "N": 128, "K": 128},
                  fast.replace(opt="O3"))
    assert o0.ok and o3.ok and o3.gflops > o0.gflops


def test_stage_violation(dgemm, fast):
    o = evaluate(dgemm, dgemm.expert.read_text(), None, fast.replace(stage=3))
    assert o.status is Status.STAGE_VIOLATION and "OpenMP" in o.message
    assert evaluate(dgemm, dgemm.expert.read_text(), None, fast.replace(stage=4)).ok


def test_cache_answers_identical_code(dgemm, fast, tmp_path, monkeypatch):
    import sys
    ev = sys.modules["perfgym.evaluate"]  # the package exports a function of the same name
    monkeypatch.setattr(ev, "_cache", OutcomeCache(tmp_path / "c.sqlite"))
    cfg = fast.replace(use_cache=True)
    first = evaluate(dgemm, dgemm.baseline.read_text(), None, cfg)
    # Same code, other comments and whitespace: a cache hit.
    again = evaluate(dgemm, "/* hello */\n" + dgemm.baseline.read_text() + "\n\n", None, cfg)
    assert not first.cached and again.cached and again.gflops == first.gflops
    # Other flags: not a hit.
    assert not evaluate(dgemm, dgemm.baseline.read_text(), None, cfg.replace(opt="O1")).cached
    assert not evaluate(dgemm, dgemm.baseline.read_text(), None,
                        cfg.replace(use_cache=False)).cached
    # Other evaluator rules (an upgrade): a verdict given under the old ones is not served.
    import perfgym.cache
    monkeypatch.setattr(perfgym.cache, "evaluator_digest", lambda: "rules-of-another-version")
    assert not evaluate(dgemm, dgemm.baseline.read_text(), None, cfg).cached


def test_outcome_round_trips_json(dgemm, fast):
    from perfgym.outcome import Outcome
    o = evaluate(dgemm, dgemm.baseline.read_text(), {"M": 8, "N": 8, "K": 8}, fast)
    back = Outcome.from_dict(json.loads(json.dumps(o.to_dict())))
    assert back.status is o.status and back.timing.median == o.timing.median


def test_evaluate_many_keeps_order(dgemm, fast):
    naive = dgemm.baseline.read_text()
    texts = [naive, "not code", naive.replace("sum +=", "sum -="), dgemm.expert.read_text()]
    seen = []
    outs = evaluate_many([Request(dgemm, t, None, fast) for t in texts],
                         on_result=lambda i, o: seen.append(i))
    assert [o.status for o in outs] == [Status.OK, Status.FORMAT_ERROR, Status.WRONG_ANSWER,
                                        Status.OK]
    assert sorted(seen) == [0, 1, 2, 3]


def test_config_rejects_bad_values():
    for bad in ({"opt": "O9"}, {"stage": 9}, {"verify": "some"}, {"threads": 0}):
        with pytest.raises(ValueError):
            EvalConfig(**bad)


def test_machine_info_is_cached_and_complete():
    info = machine_info()
    assert info["peak_gflops"] >= info["peak_gflops_1core"] > 0
    assert info["bandwidth_gbs"] > 0 and info["isa_bound_gflops"] >= info["peak_gflops"]
    assert info["fingerprint"]["cores"] >= 1
    assert machine_info() == info
