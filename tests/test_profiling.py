"""Profiling feedback (perfgym.profiling): real builds in the sandbox, real gcc reports, real
objdump, real valgrind; the facts differ between the naive and the expert dgemm, the chain says
which provider ran, prompts carry the lines, and the lines stay bounded whatever tools print."""
import json
import platform
import re
import shutil
import subprocess
import sys

import pytest

from perfgym import profiling
from perfgym.evaluate import evaluate, prepare
from perfgym.outcome import Outcome, Status
from perfgym.profiling import Context, collect, instructions, perf, vectorization
from perfgym.prompts import expand_prompt

SMALL = {"M": 48, "N": 40, "K": 56}
BROKEN = ("void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) "
          "{ C[0] = A[0] +; }")


def wrong(code: str) -> str:
    """The kernel one off: it fails its check call, before any timed run (fast to evaluate)."""
    assert "C[i * N + j] = sum;" in code
    return code.replace("C[i * N + j] = sum;", "C[i * N + j] = sum + 1.0;")


def _static(task, code, config, providers):
    """Build `code` as an evaluation does (sandboxed compile, audit, link), then profile the
    build without timing it: the static providers need only the build directory."""
    config = config.replace(profile=providers)
    p = prepare(task, code, SMALL, config)
    assert not isinstance(p, Outcome), p.message
    try:
        outcome = Outcome(Status.OK, task.name, SMALL, machine=p.machine,
                          techniques=p.techniques)
        return collect(Context(task, p.code, SMALL, config, outcome, p.workdir), providers)
    finally:
        shutil.rmtree(p.workdir, ignore_errors=True)


def _mix(line: str) -> dict[str, int]:
    """The numbers of an instructions line: packed, scalar, FMA and each register width."""
    out = {k: int(v) for v, k in re.findall(r"(\d+) (packed|scalar|FMA)", line)}
    out.update({k: int(v) for v, k in re.findall(r"(\d+) ([xyz]mm)", line)})
    return out


def _cpu_widest(isa) -> str:
    return "zmm" if "avx512f" in isa else "ymm" if "avx" in isa or "avx2" in isa else "xmm"


x86 = pytest.mark.skipif(platform.machine() != "x86_64", reason="reads x86-64 instructions")


@x86
@pytest.mark.parametrize("march", ["native", "x86-64-v3"])
def test_naive_and_expert_dgemm_get_different_correct_facts(dgemm, fast, march):
    """On this CPU as it is (AVX-512 here, maybe AVX2 elsewhere), and built for AVX2 (where the
    expert's micro-kernel is plain C that gcc vectorizes)."""
    isa = _machine_isa(dgemm, fast)
    if march == "x86-64-v3" and not {"avx2", "fma"} <= set(isa):
        pytest.skip("this CPU cannot build for x86-64-v3")
    providers = ("vectorization", "instructions")
    fast = fast.replace(march=march)
    naive = _static(dgemm, dgemm.baseline.read_text(), fast, providers)
    expert = _static(dgemm, dgemm.expert.read_text(), fast, providers)
    assert naive["ran"].startswith("ran: vectorization, instructions")

    # gcc 12 -O3: the i and j loops of the triple loop (lines 3 and 4) do not vectorize; its
    # innermost k loop (line 6) does, but only as a strided dot product
    vec = naive["vectorization"].splitlines()
    assert any(ln.startswith("the loop at line 3 did not vectorize") for ln in vec), vec
    assert any(ln.startswith("the loop at line 6 vectorized") for ln in vec), vec
    # the expert's packing of B (line 35) vectorizes, whichever micro-kernel it compiled
    assert "the loop at line 35 vectorized" in expert["vectorization"]

    n_whole, n_hot = [_mix(ln) for ln in naive["instructions"].splitlines()[:2]]
    e_whole, e_hot = [_mix(ln) for ln in expert["instructions"].splitlines()[:2]]
    assert "hot loop" in naive["instructions"] and "hot loop" in expert["instructions"]
    # naive: no FMA in its hot loop, scalar FP there, a scalar load, nothing wider than xmm
    assert n_hot["FMA"] == 0 and n_hot["scalar"] > 0
    assert "scalar loads in the hot loop" in naive["instructions"]
    assert n_whole.get("ymm", 0) + n_whole.get("zmm", 0) == 0
    # expert: packed FMA only, in the CPU's widest registers (whatever this CPU is)
    widest = _cpu_widest(isa) if march == "native" else "ymm"
    assert e_hot["FMA"] > 0 and e_hot["scalar"] == 0 and e_hot["packed"] == e_hot["FMA"]
    assert e_hot.get(widest, 0) == e_hot["packed"], expert["instructions"]
    assert e_whole["FMA"] > n_whole["FMA"]
    assert "scalar loads in the hot loop" not in expert["instructions"]
    if march != "native":  # the CPU's wider registers are not the kernel's to use
        assert "this CPU has" not in naive["instructions"]


def _machine_isa(task, config):
    from perfgym import machine
    return machine.summary(machine.machine_info(config.compiler))["isa"]


def test_evaluate_stores_the_profile_and_the_chain_says_what_ran(dgemm, fast):
    config = fast.replace(profile=("perf", "roofline"), threads=1)
    o = evaluate(dgemm, dgemm.baseline.read_text(), SMALL, config)
    assert o.ok, o.message
    ran = o.profile["ran"]
    if perf.counters_problem():  # this VM: perf stat answers "<not supported>"
        assert "perf unavailable" in ran and "fell back to instructions" in ran
        assert ran.startswith("ran: instructions, roofline")
        assert "perf" not in o.profile and "0 FMA" in o.profile["instructions"]
    else:
        assert ran.startswith("ran: perf") and "instructions per cycle" in o.profile["perf"]
    assert "% of the compute roof" in o.profile["roofline"]
    # stored with the candidate: the run store and the cache keep Outcome.to_dict as JSON
    again = Outcome.from_dict(json.loads(json.dumps(o.to_dict())))
    assert again.profile == o.profile


def test_no_profile_asked_no_report_made(dgemm, fast):
    p = prepare(dgemm, dgemm.baseline.read_text(), SMALL, fast)
    try:
        assert not (p.workdir / vectorization.REPORT).exists()  # the build had no -fopt-info
    finally:
        shutil.rmtree(p.workdir, ignore_errors=True)
    o = evaluate(dgemm, wrong(dgemm.baseline.read_text()), SMALL, fast)
    assert o.status is Status.WRONG_ANSWER and o.profile is None


def test_perf_detection_reads_perf_stat_itself():
    problem = perf.counters_problem()
    if shutil.which("perf") is None:
        assert problem == "perf is not installed"
        return
    r = subprocess.run(["perf", "stat", "-x", ",", "-e", "cycles", "true"], capture_output=True,
                       text=True)
    assert (problem is not None) == ("<not" in r.stderr or r.returncode != 0)


def _stub(name, lines=None, why=None, error=None):
    class Stub:
        NAME = name

        @staticmethod
        def unavailable(ctx):
            return why

        @staticmethod
        def run(ctx):
            if error:
                raise error
            return lines
    return Stub


def test_chain_falls_back_and_reports_failures(monkeypatch):
    monkeypatch.setattr(profiling, "PROVIDERS", {
        "perf": _stub("perf", why="no counters"),
        "cachegrind": _stub("cachegrind", error=OSError("valgrind exploded")),
        "instructions": _stub("instructions", ["mix"]),
        "roofline": _stub("roofline", ["roof"])})
    ctx = Context(None, "", {}, None, None, None)
    got = collect(ctx, ("perf", "cachegrind", "roofline"))
    assert got["instructions"] == "mix" and got["roofline"] == "roof"
    ran = got["ran"].splitlines()
    assert ran[0] == "ran: instructions, roofline"  # the stand-in ran once, in perf's place
    assert ran[1] == "perf unavailable (no counters), fell back to instructions"
    assert ran[2].startswith("cachegrind unavailable (failed: OSError: valgrind exploded)")
    assert "perf" not in got and "cachegrind" not in got


def test_parse_names_and_refuses_unknown_providers():
    assert profiling.parse("default") == profiling.DEFAULT
    assert profiling.parse("scaling, default") == ("scaling", *profiling.DEFAULT)
    assert profiling.parse("roofline,roofline") == ("roofline",)
    with pytest.raises(ValueError, match="no provider 'perff'"):
        profiling.parse("perf,perff")


def test_prompts_carry_the_profile_lines(dgemm):
    profile = {"vectorization": "the loop at line 6 did not vectorize: complicated access "
                                "pattern",
               "instructions": "whole kernel: 0 packed FP ops (none), 312 scalar, 0 FMA",
               "ran": "ran: vectorization, instructions\nperf unavailable (no counters)"}
    ok = {"status": "OK", "message": "1.0 GFLOP/s", "profile": profile}
    improve = expand_prompt(dgemm, "improve", dgemm.baseline.read_text(), ok)
    assert "[vectorization] the loop at line 6 did not vectorize: complicated access" in improve
    assert "[instructions] whole kernel: 0 packed FP ops (none), 312 scalar, 0 FMA" in improve
    assert "perf unavailable" not in improve  # which tools ran is for people, not the model
    wrong = {"status": "WRONG_ANSWER", "message": "C[3,4] differs", "profile": profile}
    repair = expand_prompt(dgemm, "repair", dgemm.baseline.read_text(), wrong)
    assert "C[3,4] differs" in repair and "312 scalar" in repair
    plain = expand_prompt(dgemm, "improve", dgemm.baseline.read_text(), {"status": "OK"})
    assert "Profile of this version" not in plain
    # a multi-size outcome: the profile of the size that failed
    folded = {"status": "WRONG_ANSWER", "message": "1/2 sizes OK", "per_size": [
        {"status": "OK", "profile": {"roofline": "at the OK size"}},
        {"status": "WRONG_ANSWER", "profile": {"roofline": "at the failed size"}}]}
    text = expand_prompt(dgemm, "repair", dgemm.baseline.read_text(), folded)
    assert "[roofline] at the failed size" in text and "at the OK size" not in text


def test_lines_are_bounded_whatever_the_compiler_prints(dgemm):
    # 500 loops, each with a reason thousands of characters long, and noise between them
    report = "\n".join(
        f"candidate.c:{n}:5: missed: couldn't vectorize loop\n"
        f"candidate.c:{n}:9: missed: not vectorized: {'x' * 5000}\n"
        f"/usr/include/stdio.h:{n}:1: note: {'y' * 3000}\n"
        f"candidate.c:{n + 1000}:3: optimized: loop vectorized using 32 byte vectors"
        for n in range(1, 501)) + "\n" + "garbage \x00\x1b[31m" * 1000
    lines = profiling.bounded(vectorization.condense(report))
    assert 1 < len(lines) <= profiling.MAX_LINES
    assert all(len(ln) <= profiling.MAX_CHARS and "\n" not in ln for ln in lines)
    assert lines[0].startswith("1000 loops: 500 vectorized, 500 not")

    class Huge:
        NAME = "vectorization"
        unavailable = staticmethod(lambda ctx: None)
        run = staticmethod(lambda ctx: ["z" * 10**7] * 10**5 + ["a\nb" * 1000])
    ctx = Context(dgemm, "", {}, None, None, None)
    import perfgym.profiling as p
    saved = dict(p.PROVIDERS)
    try:
        p.PROVIDERS["vectorization"] = Huge
        got = collect(ctx, ("vectorization",))
    finally:
        p.PROVIDERS.clear()
        p.PROVIDERS.update(saved)
    assert len(got["vectorization"].splitlines()) == profiling.MAX_LINES
    assert max(map(len, got["vectorization"].splitlines())) <= profiling.MAX_CHARS


def test_vectorization_report_reasons_in_plain_words():
    report = """candidate.c:3:23: missed: couldn't vectorize loop
candidate.c:3:23: missed: not vectorized: multiple nested loops.
candidate.c:12:5: missed: couldn't vectorize loop
/usr/lib/gcc/x86_64-linux-gnu/12/include/avx512fintrin.h:381:10: missed: not vectorized: no vectype for stmt: _107 = MEM[(__m512d * {ref-all})_4];
 scalar_type: __m512d
candidate.c:20:7: missed: couldn't vectorize loop
candidate.c:22:9: missed: statement clobbers memory: helper (a_1, b_2);
candidate.c:30:3: missed: couldn't vectorize loop
candidate.c:30:3: missed: not vectorized: complicated access pattern.
candidate.c:40:3: optimized: loop vectorized using 64 byte vectors
candidate.c:40:3: optimized: loop vectorized using 32 byte vectors
other.c:50:3: optimized: loop vectorized using 64 byte vectors
"""
    assert vectorization.condense(report) == [
        "the loop at line 3 did not vectorize: it holds another loop (gcc vectorizes innermost "
        "loops)",
        "the loop at line 12 did not vectorize: a statement has no vector form (a vector "
        "intrinsic or an unsupported type)",
        "the loop at line 20 did not vectorize: it calls helper()",
        "the loop at line 30 did not vectorize: complicated access pattern",
        "the loop at line 40 vectorized (64/32-byte vectors)"]
    assert "no loops" in vectorization.condense("")[0]


def test_instruction_mix_reads_widths_without_assuming_an_isa():
    # an AVX2 object on an AVX2 CPU: ymm is the widest, and nothing says zmm is missing
    asm = """Disassembly of section .text:

0000000000000000 <k>:
   0:	vxorpd %ymm0,%ymm0,%ymm0
   4:	vbroadcastsd (%rsi,%rax,8),%ymm1
   a:	vfmadd231pd (%rdi),%ymm1,%ymm0
   f:	vmovsd (%rdx),%xmm2
  13:	vmulsd %xmm2,%xmm2,%xmm2
  17:	add    $0x20,%rdi
  1b:	cmp    %rdi,%rcx
  1e:	jne    4 <k+0x4>
  20:	ret
"""
    lines = instructions.describe(instructions.parse(asm), ["avx", "avx2", "fma"])
    assert lines[0] == "whole kernel: 1 packed FP ops (1 ymm), 1 scalar, 1 FMA"
    assert lines[1].startswith("hot loop (innermost, most FP work; k at 0x4-0x1e): 1 packed")
    assert lines[2].startswith("1 scalar loads in the hot loop")
    # the same object on an AVX-512 CPU says the wider registers are there
    assert "this CPU has zmm" in instructions.describe(instructions.parse(asm), ["avx512f"])[0]


def test_scaling_single_threaded_kernel_needs_no_second_run(dgemm, fast):
    o = Outcome(Status.OK, "dgemm", SMALL, techniques=[])
    from perfgym.outcome import Timing
    o.timing = Timing.from_samples([1e-3] * 3, 1, 0.02)
    ctx = Context(dgemm, "not C at all", SMALL, fast.replace(threads=2), o, None)
    assert profiling.scaling.run(ctx) == ["single-threaded (no OpenMP): 1 of 2 cores idle"]
    assert "one thread" in profiling.scaling.unavailable(
        Context(dgemm, "", SMALL, fast.replace(threads=1), o, None))


def test_scaling_times_the_openmp_kernel_on_one_thread(dgemm, fast):
    config = fast.replace(threads=2, profile=("scaling",))
    o = evaluate(dgemm, dgemm.expert.read_text(), {"M": 96, "N": 96, "K": 96}, config)
    assert o.ok, o.message
    line = o.profile["scaling"].splitlines()[0]
    m = re.match(r"1 thread ([\d.]+) ms, 2 threads ([\d.]+) ms: ([\d.]+)x, parallel efficiency "
                 r"(\d+)%", line)
    assert m, line
    one, two, speedup = float(m[1]), float(m[2]), float(m[3])
    assert speedup == pytest.approx(one / two, rel=0.02)


@x86
@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed: apt-get install valgrind")
def test_cachegrind_sees_the_naive_kernel_miss_more(dgemm, fast):
    providers = ("cachegrind",)

    def misses(code):
        profile = _static(dgemm, code, fast, providers)
        assert profile["ran"].startswith("ran: cachegrind"), profile["ran"]
        m = re.search(r"L1 data misses [\d,]+ \(([\d.]+)% of accesses\)", profile["cachegrind"])
        assert m, profile["cachegrind"]
        return float(m[1]), profile["cachegrind"]

    naive, text = misses(dgemm.baseline.read_text())
    expert, expert_text = misses(dgemm.expert.read_text())
    assert "simulated one call at M=" in text
    assert naive > 4 * expert  # the strided column walk of B against packed panels
    if "avx512f" in _machine_isa(dgemm, fast):
        assert "-mno-avx512f" in expert_text


def _cli_eval(tmp_path, dgemm):
    # a wrong kernel: measured up to its failed check call, so no timed run; the static
    # providers still profile it (what a repair prompt shows), the roofline says why not
    kernel = tmp_path / "wrong.c"
    kernel.write_text(wrong(dgemm.baseline.read_text()))
    return [sys.executable, "-m", "perfgym.cli", "eval", str(kernel), "--size", "32",
            "--threads", "1", "--no-cache"]


def test_cli_eval_profilers_json(tmp_path, dgemm):
    base = _cli_eval(tmp_path, dgemm)
    r = subprocess.run(base + ["--profilers", "vectorization,instructions", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "WRONG_ANSWER"
    assert "the loop at line 6 vectorized" in out["profile"]["vectorization"]
    assert out["profile"]["ran"] == "ran: vectorization, instructions"


def test_cli_eval_profile_prints_the_lines(tmp_path, dgemm):
    base = _cli_eval(tmp_path, dgemm)
    r = subprocess.run(base + ["--profile"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[vectorization] the loop at line 3 did not vectorize" in r.stdout
    assert "[instructions] hot loop" in r.stdout
    assert "[profile] roofline unavailable (no timing (WRONG_ANSWER))" in r.stdout


def test_cli_eval_unknown_provider_is_one_line(tmp_path, dgemm):
    base = _cli_eval(tmp_path, dgemm)
    bad = subprocess.run(base + ["--profilers", "vectorisation"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "no provider 'vectorisation'" in bad.stderr


def test_search_stores_profiles_and_the_next_prompt_carries_them(tmp_path, dgemm, fast):
    from perfgym.policies.replay import ReplayPolicy
    from perfgym.search import Engine, Refine
    from perfgym.store import RunStore

    # a wrong kernel first (profiled after its failed check call), then a broken one
    fence = "```c\n{}\n```"
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"completion": fence.format(code)}) + "\n" for code in
                              (wrong(dgemm.baseline.read_text()), BROKEN)))
    prompts = []

    class Recording(ReplayPolicy):
        def generate(self, batch, n, **sampling):
            prompts.extend(batch)
            return super().generate(batch, n, **sampling)

    store = RunStore(tmp_path / "run")
    config = fast.replace(profile=("vectorization", "instructions"), threads=1)
    Refine(Engine(store, Recording(replay), dgemm, config, "tiered"), turns=2).run()
    first, second = sorted(store.candidates(), key=lambda c: c.id)
    assert first.status == "WRONG_ANSWER" and second.op == "repair"
    stored = first.outcome["profile"]  # kept in the run store with the candidate
    assert "the loop at line 6 vectorized" in stored["vectorization"]
    assert second.status == "COMPILE_ERROR" and second.outcome.get("profile") is None
    repair = prompts[-1]
    assert "Fix this C kernel" in repair and "Profile of this version:" in repair
    assert "[instructions] hot loop" in repair
    assert all(f"[vectorization] {ln}" in repair for ln in stored["vectorization"].splitlines())


def test_perf_and_cachegrind_outputs_condense():
    # perf stat -x, on a machine with counters (the format perf writes to -o)
    text = ("# started on Tue Nov 24\n\n2000000,,cycles:u,1000,100.00,,\n"
            "3000000,,instructions:u,1000,100.00,1.50,insn per cycle\n"
            "50000,,cache-references:u,1000,100.00,,\n5000,,cache-misses:u,1000,100.00,,\n"
            "1200,,branch-misses:u,1000,100.00,,\n")
    assert perf.summarize(text) == [
        "1.50 instructions per cycle (2e+06 cycles, one call with the harness around it)",
        "cache misses 10.0% of cache references", "1.2e+03 branch misses"]
    assert perf.summarize("<not supported>,,cycles,0,100.00,,\n") == ["perf stat counted nothing"]
    from perfgym.profiling import cachegrind
    cg = ("events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\nfl=???\nfn=harness_main\n"
          "0 999 0 0 999 999 999 0 0 0\nfn=kernel\n0 1000 1 1 300 30 3 100 10 1\n"
          "fn=kernel._omp_fn.0\n0 500 0 0 100 10 0 0 0 0\n")
    assert cachegrind.summarize(cg, {"kernel", "kernel._omp_fn.0"}, "N=64") == [
        "simulated one call at N=64: 1,500 instructions, 500 data accesses",
        "L1 data misses 50 (10.00% of accesses), last-level misses 4 (0.800%)"]
    assert "none of the kernel's functions" in cachegrind.summarize(cg, {"other"}, "N=64")[0]
