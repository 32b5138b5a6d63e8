"""Opened SFT data (sft_data.opened_examples): the answer a model would give after perfgym's
opening, for kernels that verify in that form and beat the naive kernel."""
from perfgym.config import EvalConfig
from perfgym.opening import answer_start
from perfgym.tasks import get_task
from perfgym.train.sft_data import opened_body, opened_examples


def test_the_body_is_what_follows_the_opening_and_ends_at_the_entry_s_brace():
    dot = get_task("dot")
    naive = dot.baseline.read_text()
    body = opened_body(dot, naive)
    assert body is not None and body.endswith("\n}") and body.count("\n}") == 1
    assert answer_start(dot).endswith("{") and dot.entry not in body
    # another entry, or a "}" at a line's start inside the body (where generation stops): no
    assert opened_body(dot, naive.replace("dot_optimized", "dot_other")) is None
    inner = naive.replace("out[0] = sum;", "if (N) {\n    out[0] = sum;\n}\n    out[0] = sum;")
    assert inner != naive and opened_body(dot, inner) is None


def test_examples_keep_only_faster_kernels_that_verify_opened(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path))
    records, skipped = opened_examples([get_task("dot"), get_task("transpose")], None,
                                       EvalConfig(threads=1))
    kept = {(r["task"], r["kernel"]) for r in records}
    assert ("dot", "naive") not in kept and ("transpose", "naive") not in kept
    # the dot expert and the blocked transpose verify opened and are faster
    assert kept, f"no kernel kept; why each was left out: {skipped}"
    for r in records:
        answer = r["completion"][0]["content"]
        assert answer.startswith(answer_start(get_task(r["task"]))) and answer.endswith("```")
        assert r["speedup"] >= 1.1
        assert r["prompt"][0]["content"].startswith("Make this C kernel faster.")
    # every other kernel is accounted for, with its reason
    assert set(skipped) | {f"{t}:{k}" for t, k in kept} == {
        "dot:expert", "transpose:expert", "transpose:blocked_serial"}
