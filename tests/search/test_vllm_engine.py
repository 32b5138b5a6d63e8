"""vLLM's CPU build as the coder's engine where it is installed (engine/vllm_engine.py).

The probe measures it beside OpenVINO's settings and the search takes it only where it is
faster by the margin; a vLLM that fails is a row with its error, not a failed search. The
worker process is held to bounds: a start, a request and a stop each have one, and a worker
that dies or writes garbage is one clear error. vLLM is not in CI's environment, so the bounds
are tested with scripted workers (the test is the plumbing, not vLLM), the choice with fake
timings (the test is the choice), and the real worker where $PERFGYM_VLLM_PYTHON is set.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap
import time

import pytest

from perfgym.engine import probe, vllm_engine
from perfgym.engine.openvino import EngineUnavailable


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(vllm_engine.PYTHON_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # no default vLLM there
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


@pytest.fixture
def with_vllm(tmp_path, monkeypatch):
    python = tmp_path / "vllm-env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setenv(vllm_engine.PYTHON_ENV, str(python))
    return python


def fake(rates: dict[str, float], calls: list, fails: set[str] = frozenset(),
         beats: list | None = None):
    def measure(path, props, **kw):
        name = "vllm_int8" if props.get("engine") == "vllm" else next(
            n for n, p in probe.CANDIDATES.items() if p == props)
        calls.append(name)
        if beats is not None and name == "vllm_int8":
            beats.append(kw["beat"])
        if name in fails:
            raise EngineUnavailable(f"{name} would not start")
        return rates[name]
    return measure


RATES = {"engine": 20.0, "exact": 17.0, "kv_f16": 19.0}


def test_without_vllm_it_is_no_candidate(gguf):
    calls = []
    chosen = probe.engine_settings(gguf, fake({**RATES, "vllm_int8": 99.0}, calls))
    assert sorted(calls) == sorted(probe.CANDIDATES) and chosen["name"] == "engine"


def test_vllm_is_measured_and_taken_where_faster_by_the_margin(gguf, with_vllm):
    calls = []
    chosen = probe.engine_settings(gguf, fake({**RATES, "vllm_int8": 41.0}, calls))
    assert chosen["name"] == probe.VLLM and chosen["properties"] == {"engine": "vllm"}
    assert "vllm_int8" in calls and len(calls) == len(probe.CANDIDATES) + 1
    again = probe.engine_settings(gguf, fake({}, calls))  # stored: nothing measured
    assert again["name"] == probe.VLLM and len(calls) == len(probe.CANDIDATES) + 1


def test_vllm_within_the_margin_is_not_taken(gguf, with_vllm):
    rates = {**RATES, "vllm_int8": RATES["engine"] * probe.MARGIN * 0.98}
    assert probe.engine_settings(gguf, fake(rates, []))["name"] == "engine"


def test_a_vllm_that_fails_is_a_row_with_its_error_and_openvino_is_taken(gguf, with_vllm):
    chosen = probe.engine_settings(gguf, fake(RATES, [], fails={"vllm_int8"}))
    assert chosen["name"] == "engine"
    row = next(r for r in chosen["rows"] if r["name"] == "vllm_int8")
    assert row["tok_s"] == 0.0 and "would not start" in row["error"]


def test_vllm_is_measured_last_and_told_the_rate_it_must_beat(gguf, with_vllm, tmp_path,
                                                              monkeypatch):
    calls, beats = [], []
    probe.engine_settings(gguf, fake({**RATES, "vllm_int8": 5.0}, calls, beats=beats))
    assert calls[-1] == "vllm_int8"
    assert beats == [pytest.approx(RATES["engine"] * probe.MARGIN)]  # the default's by margin
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "cache2"))  # measure again
    beats.clear()
    probe.engine_settings(gguf, fake({**RATES, "exact": 31.0, "vllm_int8": 5.0}, [], beats=beats))
    assert beats == [31.0]  # a faster OpenVINO setting past the margin: that one


def test_an_openvino_setting_that_fails_still_fails_the_probe(gguf, with_vllm):
    with pytest.raises(EngineUnavailable):
        probe.engine_settings(gguf, fake({**RATES, "vllm_int8": 50.0}, [], fails={"exact"}))


def test_installing_or_removing_vllm_measures_again(gguf, tmp_path, monkeypatch):
    calls = []
    probe.engine_settings(gguf, fake({**RATES, "vllm_int8": 50.0}, calls))
    assert "vllm_int8" not in calls
    python = tmp_path / "xdg" / "perfgym" / "vllm" / "bin" / "python"  # the default place
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert probe.engine_settings(gguf, fake({**RATES, "vllm_int8": 50.0}, calls))["name"] \
        == probe.VLLM
    assert calls.count("vllm_int8") == 1
    python.unlink()  # gone again: the choice made without it stands, vLLM is not asked for
    assert probe.engine_settings(gguf, fake({}, calls))["name"] == "engine"
    assert calls.count("vllm_int8") == 1


def test_an_int8_checkpoint_that_cannot_be_written_is_vllm_unavailable(gguf, tmp_path,
                                                                       monkeypatch):
    from perfgym.engine import int8_checkpoint as writer

    def disk_full(source, out):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writer, "write_int8_checkpoint", disk_full)
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path / "models"))
    with pytest.raises(EngineUnavailable, match="cannot write model.gguf .*No space left"):
        vllm_engine.int8_checkpoint(gguf)


def test_a_named_vllm_python_that_is_not_there_is_a_clear_error(gguf, tmp_path, monkeypatch):
    monkeypatch.setenv(vllm_engine.PYTHON_ENV, str(tmp_path / "nowhere" / "python"))
    with pytest.raises(EngineUnavailable, match=r"PERFGYM_VLLM_PYTHON .* not a file"):
        probe.engine_settings(gguf, fake(RATES, []))


def test_openvino_behind_vllm_is_chosen_by_the_same_rule():
    rows = [{"name": "engine", "tok_s": 20.0}, {"name": "exact", "tok_s": 24.0},
            {"name": "kv_f16", "tok_s": 21.0}, {"name": "vllm_int8", "tok_s": 60.0}]
    assert probe.openvino_choice(rows) == "exact"  # 1.2x the default: past the margin
    rows[1]["tok_s"] = 22.0
    assert probe.openvino_choice(rows) == "engine"
    assert probe.openvino_choice([{"name": "vllm_int8", "tok_s": 9.0}]) == probe.DEFAULT


# --- the worker's bounds, with scripted workers ------------------------------------------

def worker(tmp_path, body: str):
    path = tmp_path / "worker.py"
    path.write_text("import json, os, subprocess, sys, time\n" + textwrap.dedent(body))
    return path


def start(tmp_path, body: str, **kw):
    return vllm_engine.VLLMEngine(tmp_path / "ckpt", sys.executable,
                                  worker=worker(tmp_path, body), **kw)


ECHO = """
print(json.dumps({"ready": True, "dtype": "float32"}), flush=True)
for line in sys.stdin:
    r = json.loads(line)
    ids = [[[7] * min(3, r["max_tokens"]) for _ in range(r["n"])] for _ in r["prompts"]]
    print(json.dumps({"ids": ids, "finish": [["length"] * r["n"] for _ in r["prompts"]]}),
          flush=True)
"""


def test_a_worker_answers_as_the_engine_does_and_stops_with_its_input(tmp_path):
    engine = start(tmp_path, ECHO)
    groups = engine.generate([[1, 2], [3]], 2, max_tokens=5, seed=4, eos_ids=(9,))
    assert [[s.ids for s in g] for g in groups] == [[[7, 7, 7]] * 2] * 2
    assert all(s.finish == "length" for g in groups for s in g)
    engine.close()
    assert engine.proc.poll() == 0  # it ended by itself when its input closed
    assert not engine.log.exists()  # and its log went with it


def test_a_worker_that_never_loads_is_stopped_at_the_start_bound(tmp_path):
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match="did not load the model within 2 s"):
        start(tmp_path, "time.sleep(600)\n", start_seconds=2)
    assert time.monotonic() - started < 30


def test_a_worker_that_dies_says_why_from_its_log(tmp_path):
    with pytest.raises(EngineUnavailable, match=r"exit 3.*no module named vllm, say"):
        start(tmp_path, "print('no module named vllm, say', file=sys.stderr); sys.exit(3)\n")


def test_a_request_that_hangs_is_stopped_at_its_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_engine, "request_seconds", lambda *a: 2.0)
    engine = start(tmp_path, """
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
        time.sleep(600)
        """)
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match="did not answer within 2 s"):
        engine.generate([[1]], 1, max_tokens=4)
    assert time.monotonic() - started < 30 and engine.proc.poll() is not None


@pytest.mark.parametrize("line", ["loading weights 50%", "[1, 2]", "7"])
def test_garbage_where_a_reply_is_due_is_an_error(tmp_path, line):
    with pytest.raises(EngineUnavailable, match="where a reply was due"):
        start(tmp_path, f"print({line!r}, flush=True); time.sleep(600)\n", start_seconds=20)


def test_a_refused_request_is_an_error_and_the_worker_goes_on(tmp_path):
    engine = start(tmp_path, """
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            r = json.loads(line)
            if r["grammar"]:
                print(json.dumps({"error": "ValueError: bad grammar"}), flush=True)
            else:
                print(json.dumps({"ids": [[[5]]], "finish": [["stop"]]}), flush=True)
        """)
    with pytest.raises(EngineUnavailable, match="bad grammar"):
        engine.generate([[1]], 1, grammar="root ::= x")
    assert engine.generate([[1]], 1)[0][0].ids == [5]
    engine.close()


def test_close_stops_the_worker_and_what_it_started(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_engine, "STOP_SECONDS", 1)
    pid_file = tmp_path / "child.pid"
    engine = start(tmp_path, f"""
        child = subprocess.Popen(["sleep", "600"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print(json.dumps({{"ready": True}}), flush=True)
        time.sleep(600)  # deaf to its input closing
        """)
    child = int(pid_file.read_text())
    engine.close()
    assert engine.proc.poll() is not None
    for _ in range(50):  # the grandchild is killed with the group; reaped by init
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the worker's child outlived close()")


def gone(pid: int, seconds: float = 10) -> bool:
    for _ in range(int(seconds * 10)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("leader", [True, False])
def test_a_worker_whose_search_is_killed_ends_mid_request(tmp_path, leader):
    # the worker leads its own session (as perfgym starts it: close() kills the group), so a
    # kill of the search's group misses it; it must not decode on for minutes after a kill -9
    import subprocess
    worker_py = vllm_engine.__file__.replace("vllm_engine.py", "vllm_worker.py")
    pids = tmp_path / "pids"
    busy = textwrap.dedent(f"""
        import importlib.util, os, subprocess, sys, time
        spec = importlib.util.spec_from_file_location("w", {worker_py!r})
        w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
        w.die_with_parent(poll=0.1)
        child = subprocess.Popen(["sleep", "600"])  # what vLLM might start
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        while True:
            pass  # decoding: deaf to stdin
        """)
    search = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {busy!r}], stdin=subprocess.PIPE,
                         start_new_session={leader})
        time.sleep(600)
        """)])
    for _ in range(200):
        if pids.exists() and len(pids.read_text().split()) == 2:
            break
        time.sleep(0.05)
    worker, child = map(int, pids.read_text().split())
    search.kill()  # kill -9 of the search
    search.wait()
    assert gone(worker), "the worker outlived its search"
    if leader:  # its group: what it started goes with it
        assert gone(child), "the worker's child outlived the search"
    else:
        os.kill(child, 9)


# --- the real worker, where vLLM's CPU build is installed ------------------------------

def real_vllm():
    try:
        return vllm_engine.vllm_python()
    except EngineUnavailable:
        return None


needs_vllm = pytest.mark.skipif(real_vllm() is None, reason="vLLM's CPU build is not installed "
                                "here: set PERFGYM_VLLM_PYTHON (docs/models/coder.md)")


@pytest.fixture
def tiny_gguf(request):
    """The tiny qwen2 GGUF (conftest's `tiny_qwen2`), skipping first where the local extra
    that writes and reads it is not installed."""
    for module in ("gguf", "transformers", "openvino_genai"):
        pytest.importorskip(module, reason="the local extra is not installed: "
                            "pip install 'perfgym[local]'")
    return request.getfixturevalue("tiny_qwen2")


@pytest.fixture
def tiny_int8(tiny_gguf, tmp_path):
    from perfgym.engine.int8_checkpoint import write_int8_checkpoint
    return write_int8_checkpoint(tiny_gguf, tmp_path / "tiny-int8")


@pytest.mark.slow
@needs_vllm
def test_the_real_worker_samples_by_seed_and_ends_with_its_input(tiny_int8):
    engine = vllm_engine.VLLMEngine(tiny_int8, real_vllm())
    try:
        first = engine.generate([[1, 2, 3], [1, 2, 3]], 3, max_tokens=6, temperature=1.0,
                                seed=11, ignore_eos=True)
        again = engine.generate([[1, 2, 3], [1, 2, 3]], 3, max_tokens=6, temperature=1.0,
                                seed=11, ignore_eos=True)
        assert [[s.ids for s in g] for g in first] == [[s.ids for s in g] for g in again]
        assert all(len(s.ids) == 6 and s.finish == "length" for g in first for s in g)
        # two equal prompts in one request are sampled apart (each prompt its own seed)
        assert [s.ids for s in first[0]] != [s.ids for s in first[1]]
        # the tiny model's context is 512 tokens: a prompt past it gets empty answers cut at
        # the length, one near its end answers up to it, and the rest of the batch as asked
        past, near, short = engine.generate([[1] * 600, [1] * 508, [1, 2]], 2, max_tokens=8,
                                            temperature=1.0, seed=3, ignore_eos=True)
        assert [(s.ids, s.finish) for s in past] == [([], "length")] * 2
        assert all(len(s.ids) == 4 and s.finish == "length" for s in near)
        assert all(len(s.ids) == 8 for s in short)
    finally:
        engine.close()
    assert engine.proc.poll() == 0


@pytest.mark.slow
@needs_vllm
def test_the_policy_runs_on_vllm_where_the_probe_chose_it(tiny_gguf, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path / "models"))
    path = probe.choice_path(tiny_gguf)  # the probe's stored choice: vLLM
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": probe.VLLM, "rows": []}))
    from perfgym.policies.openvino import OpenVINOPolicy
    policy = OpenVINOPolicy(model_path=str(tiny_gguf))
    try:
        assert policy.name == "vllm"
        # seeded, as a search's are, and more prompt tokens than vLLM prefills in one step
        # (4,096 on a CPU), so one prefill is split: vLLM 0.32's own seeded sampling fails there
        prompts = [f"loop {i}: " + "write a loop " * 120 for i in range(12)]
        answers = policy.generate(prompts, 2, max_tokens=8, temperature=0.8)
        assert policy.name == "vllm"  # no fallback: vLLM answered
        assert len(answers) == 12 and all(len(a) == 2 for a in answers)
        assert all(isinstance(a, str) for a in answers[0])
    finally:
        policy.engine.close()


# --- vLLM failing under a search: OpenVINO GenAI goes on --------------------------------

ONCE = """
print(json.dumps({"ready": True}), flush=True)
r = json.loads(sys.stdin.readline())
print(json.dumps({"ids": [[[7, 7, 7]] * r["n"] for _ in r["prompts"]],
                  "finish": [["stop"] * r["n"] for _ in r["prompts"]]}), flush=True)
sys.exit(9)  # then it dies, as a worker killed for memory would
"""


@pytest.fixture
def chose_vllm(tiny_gguf, tmp_path, monkeypatch, with_vllm):
    """The probe's stored choice for the tiny GGUF: vLLM, with OpenVINO's rows behind it."""
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path / "models"))
    path = probe.choice_path(tiny_gguf)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": probe.VLLM, "rows": [
        {"name": "engine", "tok_s": 10.0}, {"name": "exact", "tok_s": 8.0},
        {"name": "kv_f16", "tok_s": 10.5}, {"name": probe.VLLM, "tok_s": 30.0}]}))
    return tiny_gguf


def test_a_vllm_worker_that_dies_mid_search_hands_over_to_openvino(chose_vllm, tmp_path,
                                                                    monkeypatch, capsys):
    from perfgym.engine.openvino import OpenVINOEngine
    from perfgym.policies import openvino as policy_mod
    monkeypatch.setattr(policy_mod, "_vllm_engine", lambda gguf: start(tmp_path, ONCE))
    policy = policy_mod.OpenVINOPolicy(model_path=str(chose_vllm))
    assert policy.name == "vllm"
    first = policy.generate(["Write a dot product."], 2, max_tokens=6, temperature=0.7)
    assert first == [[policy.tokenizer.decode([7, 7, 7], skip_special_tokens=True)] * 2]
    second = policy.generate(["Write a dot product."], 2, max_tokens=6, temperature=0.7)
    assert policy.name == "openvino" and isinstance(policy.engine, OpenVINOEngine)
    assert len(second[0]) == 2 and all(isinstance(t, str) for t in second[0])
    assert policy.engine.properties == probe.CANDIDATES["engine"]  # kv_f16 is within the margin
    assert "vLLM failed (vLLM's worker ended (exit 9)" in capsys.readouterr().err


def test_a_vllm_that_does_not_start_leaves_openvino_running(chose_vllm, monkeypatch):
    from perfgym.engine.openvino import OpenVINOEngine
    from perfgym.policies import openvino as policy_mod

    def no_start(gguf):
        raise EngineUnavailable("vLLM's worker ended (exit 1) before it could load the model")
    monkeypatch.setattr(policy_mod, "_vllm_engine", no_start)
    policy = policy_mod.OpenVINOPolicy(model_path=str(chose_vllm))
    assert policy.name == "openvino" and isinstance(policy.engine, OpenVINOEngine)
    assert len(policy.generate(["Write a loop."], 1, max_tokens=4)[0]) == 1


class _Tokenizer:
    eos_token_id = None

    def __call__(self, text):
        return {"input_ids": [1, 2]}

    def decode(self, ids, **_):
        return "x" * len(ids)


def test_without_openvino_behind_it_a_failing_engine_is_a_policy_error(tmp_path):
    from perfgym.policies import PolicyError
    from perfgym.policies.openvino import OpenVINOPolicy
    policy = OpenVINOPolicy.__new__(OpenVINOPolicy)  # its engine and a stand-in tokenizer
    policy.engine, policy.seed, policy.tokenizer = start(tmp_path, ONCE), 0, _Tokenizer()
    policy.format = lambda prompt, opening=None: prompt
    assert policy.generate(["a"], 1) == [["xxx"]]
    with pytest.raises(PolicyError, match="worker ended"):
        policy.generate(["a"], 1)


# --- the probe's measurement of vLLM, bounded by the rate it must beat -----------------------

def speed(tmp_path, monkeypatch, body: str, beat: float | None, samples: str = "8"):
    monkeypatch.setattr(vllm_engine, "WORKER", worker(tmp_path, body))
    monkeypatch.setattr(vllm_engine, "int8_checkpoint", lambda gguf: tmp_path / "ckpt")
    return vllm_engine.speed_rows(tmp_path / "model.gguf", sys.executable, [1] * 100, samples,
                                  64, beat=beat)


def test_vllm_speed_rows_are_timed_around_the_workers_answers(tmp_path, monkeypatch):
    rows = speed(tmp_path, monkeypatch, ECHO, beat=None, samples="1,8")
    assert [r["samples"] for r in rows] == [1, 8]  # ECHO: 3 tokens a sample, at once
    assert all(r["tok_s"] > 3 * r["samples"] and r["dtype"] == "float32" for r in rows)


SLOW_PREFILL = """
print(json.dumps({"ready": True, "dtype": "float32"}), flush=True)
sys.stdin.readline()
time.sleep(600)  # the warm-up: the prompt's prefill, as oneDNN's reference GEMM ran it
"""


def test_a_vllm_too_slow_to_win_is_stopped_in_its_warm_up(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_engine, "SLACK_SECONDS", 1.0)
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match=r"the 100.0 tokens/s it had to beat: .*within 2 s"):
        speed(tmp_path, monkeypatch, SLOW_PREFILL, beat=100.0)  # 100 tokens at 100/s, +1 s
    assert time.monotonic() - started < 30


SLOW_DECODE = """
print(json.dumps({"ready": True, "dtype": "float32"}), flush=True)
line = sys.stdin.readline()
print(json.dumps({"ids": [[[7]]], "finish": [["length"]]}), flush=True)
sys.stdin.readline()
time.sleep(600)  # the timed request
"""


@pytest.mark.parametrize("beat", [256.0, 512.0])
def test_a_vllm_too_slow_to_win_is_stopped_in_its_timed_request(tmp_path, monkeypatch, beat):
    monkeypatch.setattr(vllm_engine, "SLACK_SECONDS", 1.0)
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match=f"within {1 + 8 * 64 / beat:.0f} s"):
        speed(tmp_path, monkeypatch, SLOW_DECODE, beat=beat)  # 8 x 64 tokens at `beat`, +1 s
    assert time.monotonic() - started < 30
