"""The parent's clock against the C harness's: the harness announces every timed call on stdout,
the sandbox timestamps each marker line as it arrives, and evaluate.cross_check compares. The
hostile kernels that rewrite the harness's timing statics are candidates/timer_*.c; got_hook.c
tries to hook its imports."""
import shutil
import subprocess
from pathlib import Path

import pytest

from perfgym import Status, evaluate
from perfgym import sandbox
from perfgym.backends.c import build as cbackend
from perfgym.backends.c.measure import TAMPER_MARGIN, cross_check

CANDIDATES = Path(__file__).parent / "candidates"


def markers(calls, work=2e-3, dry=3, stand_in=1e-3):
    """Marker lines with arrival times as the sandbox records them: `dry` rounds where a wait of
    `stand_in` seconds stood in for the kernel, then timed calls of these lengths; the harness's
    own work takes `work` seconds a round."""
    t = 1000.0
    out = [(t, "@c 0")]
    for d in range(1, dry + 1):
        t += stand_in + work
        out.append((t, f"@c {d} {stand_in:.9f}"))
    t += 0.05  # the first call and the warm-ups
    out.append((t, "@t 0"))
    for k, length in enumerate(calls, 1):
        t += length + work
        out.append((t, f"@t {k}"))
    return out


# ---- the sandbox records markers --------------------------------------------------------------

@pytest.fixture
def workdir():
    d = sandbox.make_workdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_marker_lines_are_timestamped_as_they_arrive(workdir):
    r = sandbox.run(["sh", "-c", "echo '@a 1'; sleep 0.3; echo plain; echo '@b 2'"], workdir)
    assert [line for _, line in r.markers] == ["@a 1", "@b 2"]
    assert r.markers[1][0] - r.markers[0][0] >= 0.25
    assert "plain" in r.stdout and "@a 1" in r.stdout  # stdout is unchanged


def test_markers_read_after_the_command_ended_keep_their_cpu_readings(workdir):
    """A reader kept waiting (a starved parent) reads "@b 2" after the command has ended: the
    command is not reaped before the readers are done, so its CPU clock still reads. Reaped
    first, the reading failed, and the CPU witness, missing it, called an honest scan beside a
    hog "tampering" (a CI run: 3.4 ms reported, 16 ms seen, no witness)."""
    import time

    def slow_reader(line):
        if line == "@a 1":
            time.sleep(0.5)  # the command writes "@b 2" and exits meanwhile

    r = sandbox.run(["sh", "-c", "echo '@a 1'; sleep 0.1; echo '@b 2'"], workdir,
                    on_marker=slow_reader)
    assert r.returncode == 0
    assert [line for _, line in r.markers] == ["@a 1", "@b 2"]
    assert set(r.marker_cpu) == {"@a 1", "@b 2"}, r.marker_cpu
    assert r.marker_cpu["@b 2"] >= r.marker_cpu["@a 1"]


def test_each_marker_has_a_floor_before_it_was_written(workdir):
    """A marker's floor is when the parent asked for the read before the one that brought it:
    before "@b 2" was written (after the sleep), and before "@a 1" arrived, not at that
    arrival, which a starved parent can take late."""
    r = sandbox.run(["sh", "-c", "echo '@a 1'; sleep 0.3; echo '@b 2'"], workdir)
    (a_arrived, _), (b_arrived, _) = r.markers
    a_floor, b_floor = r.marker_floor["@a 1"], r.marker_floor["@b 2"]
    assert a_floor <= b_floor < a_arrived <= b_arrived - 0.25


def test_a_marker_flood_still_hits_the_output_cap(workdir):
    r = sandbox.run(["sh", "-c", "while :; do echo '@t 1'; done"], workdir,
                    sandbox.Limits(output_bytes=4096, wall_seconds=5))
    assert r.output_overflow and not r.timed_out
    assert len(r.markers) <= 4096 // len("@t 1\n")


# ---- the rule ---------------------------------------------------------------------------------

def test_honest_figures_pass():
    problem, seen = cross_check([0.010, 0.011, 0.010], markers([0.0101, 0.0109, 0.0102]))
    assert problem is None
    assert seen["overhead"] == pytest.approx(2e-3)  # the dry rounds beyond their stand-in
    assert seen["parent_median"] == pytest.approx(0.0102)


def test_deflated_times_are_tampering():
    problem, _ = cross_check([1e-5] * 5, markers([0.040] * 5))
    assert problem == "the harness reported 0.01 ms per call but the parent saw 40 ms (medians)"


def test_deflation_inside_the_slack_passes_and_is_charged_later():
    problem, seen = cross_check([0.006] * 5, markers([0.010] * 5))
    assert problem is None and seen["parent_median"] > seen["reported_median"]
    # small kernels get an absolute margin rather than the factor
    assert cross_check([1e-5] * 5, markers([TAMPER_MARGIN / 2] * 5))[0] is None


def test_a_count_mismatch_is_tampering():
    problem, _ = cross_check([0.01] * 3, markers([0.01] * 2))
    assert problem == "the harness reported 3 timed calls but announced 2 to the parent"


def test_missing_or_shuffled_markers_are_tampering():
    ms = markers([0.01] * 3)
    no_stand_in = [(ms[1][0], "@c 1")]
    for broken in (ms[:2] + ms[3:], ms[:-2] + ms[-1:] + ms[-2:-1], ms[:1] + no_stand_in + ms[2:],
                   ms[4:], [], markers([])):
        problem, _ = cross_check([0.01] * 3, broken)
        assert problem and "missing or out of order" in problem


def with_probe_work(ms, probes, work):
    """`ms` with the harness's own `work` seconds on each probe p between "@t p" and "@s p"
    (its inputs drawn anew) and between "@t p+1" and "@s p+1" (its answer checked, copied)."""
    out, late = [], 0.0
    for t, line in ms:
        out.append((t + late, line))
        f = line.split()
        if f[0] == "@t" and any(int(f[1]) in (p, p + 1) for p in probes) and \
                int(f[1]) < sum(x.startswith("@t") for _, x in ms) - 1:
            late += work
            out.append((t + late, f"@s {f[1]}"))
    return out


def test_a_probes_own_work_is_left_out_of_the_parents_times():
    """The harness's work around a probe (its inputs drawn anew, its answer checked and copied)
    is between "@t k" and "@s k": an honest kernel's probes cost the parent what the calls
    around them do, so the reuse check can judge them on the parent's clock."""
    calls = [0.002] * 8
    ms = with_probe_work(markers(calls), [2, 5], work=0.010)
    problem, seen = cross_check(calls, ms, probes=[2, 5])
    assert problem is None
    assert seen["parent_samples"] == pytest.approx(calls)
    # counted from "@t k" instead, the probes and the calls after them took 6x the others
    plain = [(t, line) for t, line in ms if not line.startswith("@s")]
    _, seen = cross_check(calls, plain)
    assert [round(x / 0.002) for x in seen["parent_samples"]] == [1, 1, 6, 6, 1, 6, 6, 1]


def test_a_probe_at_the_last_call_has_no_mark_after_it():
    calls = [0.002] * 6
    problem, seen = cross_check(calls, with_probe_work(markers(calls), [1, 5], 0.01),
                                probes=[1, 5])
    assert problem is None and seen["parent_samples"] == pytest.approx(calls)


@pytest.mark.parametrize("forge", ["other call", "twice", "not after its @t", "missing",
                                   "no probes reported"])
def test_a_forged_or_missing_resume_mark_is_out_of_order(forge):
    """A kernel that writes "@s k" itself, late in its own call, would start the parent's
    interval for that call late: only the probes' marks may come, each once, right after its
    "@t"."""
    calls = [0.002] * 8
    ms = with_probe_work(markers(calls), [2, 5], work=0.010)
    at = next(i for i, (_, line) in enumerate(ms) if line == "@t 4")
    probes = [2, 5]
    if forge == "other call":  # written at the end of call 3 (it ends at "@t 4")
        ms.insert(at, (ms[at][0] - 1e-5, "@s 3"))
    elif forge == "twice":
        i = next(i for i, (_, line) in enumerate(ms) if line == "@s 2")
        ms.insert(i + 1, (ms[i][0] + 1e-3, "@s 2"))
    elif forge == "not after its @t":
        i = next(i for i, (_, line) in enumerate(ms) if line == "@s 5")
        ms[i], ms[i - 1] = (ms[i - 1][0], "@s 5"), ms[i]
    elif forge == "missing":
        ms = [m for m in ms if m[1] != "@s 6"]
    else:
        probes = []
    problem, _ = cross_check(calls, ms, probes=probes)
    assert problem and "missing or out of order" in problem


def with_late_work(ms, late, work):
    """`ms` with a late call's answer kept after each call k in `late`: "@l k" right after
    "@t k+1", then `work` seconds of writing, then "@s k+1"."""
    for k in late:
        i = next(i for i, (_, line) in enumerate(ms) if line == f"@t {k + 1}")
        ms = ms[:i + 1] + [(ms[i][0], f"@l {k}"), (ms[i][0] + work, f"@s {k + 1}")] + \
            [(t + work, line) for t, line in ms[i + 1:]]
    return ms


def test_a_late_calls_written_answer_is_left_out_of_the_next_call():
    """After late call k the harness writes its answer out between "@l k" and "@s k+1": that
    work is in neither call's interval, and the parent learns which calls were kept."""
    calls = [0.002] * 8
    problem, seen = cross_check(calls, with_late_work(markers(calls), [3, 5], 0.010))
    assert problem is None and seen["parent_samples"] == pytest.approx(calls)
    assert seen["late_kept"] == [3, 5]


@pytest.mark.parametrize("forge", ["@s without @l", "@l twice", "@l not after its @t",
                                   "@l after the wrong @t"])
def test_a_forged_late_mark_is_out_of_order(forge):
    calls = [0.002] * 8
    ms = with_late_work(markers(calls), [3], 0.010)
    i = next(i for i, (_, line) in enumerate(ms) if line == "@l 3")
    if forge == "@s without @l":
        del ms[i]
    elif forge == "@l twice":
        ms.insert(i + 1, (ms[i][0], "@l 3"))
    elif forge == "@l not after its @t":
        ms[i - 1], ms[i] = (ms[i - 1][0], "@l 3"), (ms[i][0], ms[i - 1][1])
    else:
        ms[i] = (ms[i][0], "@l 4")
    problem, _ = cross_check(calls, ms)
    assert problem and "missing or out of order" in problem


def test_reported_calls_cannot_outrun_the_parents_clock():
    problem, _ = cross_check([0.010, 0.200, 0.010], markers([0.010] * 3))
    assert problem == ("the harness reported 210 ms for the first 2 timed calls but the parent "
                       "saw only 24 ms pass")



def floors_of(ms, asked_after=1e-4):
    """Each marker's floor as the sandbox records it when each came in a read of its own, asked
    for `asked_after` seconds after the one before had arrived."""
    times = [ms[0][0] - 0.01] + [t for t, _ in ms]
    return {line: times[i] + (asked_after if i else 0) for i, (_, line) in enumerate(ms)}


def test_a_parent_that_timed_its_read_of_t0_late_counts_from_the_floor():
    """The CI failure beside a hog at nice 19: "@t 0" came in a read of its own, but the parent
    took its clock for it 85 ms later ("the harness reported 91 ms for the first 14 timed calls
    but the parent saw only 5.72 ms pass"). The calls began after the floor of "@t 0"."""
    calls = [0.0065] * 20
    ms = markers(calls, work=0.7e-3)
    floors = floors_of(ms)
    t0 = [line for _, line in ms].index("@t 0")
    late = ms[:t0] + [(ms[t0 + 14][0] - 0.0057, "@t 0")] + ms[t0 + 1:]
    problem, _ = cross_check(calls, late)  # by the arrival times alone: tampering
    assert problem and "saw only" in problem, problem
    problem, seen = cross_check(calls, late, floors=floors)
    assert problem is None, problem


def test_reported_calls_cannot_outrun_the_parents_clock_from_the_floor_either():
    calls = [0.002] * 10
    for late in (0.0, 0.085):  # "@t 0" timed on time, and late
        ms = markers(calls)
        t0 = [line for _, line in ms].index("@t 0")
        ms[t0] = (ms[t0][0] + late, "@t 0")
        reported = calls[:5] + [0.3] + calls[6:]  # more than passed since the floor of "@t 0"
        problem, _ = cross_check(reported, ms, floors=floors_of(markers(calls)))
        assert problem and "saw only" in problem, problem


def read_at_once(ms, late=0.002):
    """The same markers as a starved parent reads them: every timed one in one read, `late`
    seconds after the last was written."""
    n_dry = sum(line.startswith("@c ") for _, line in ms) - 1
    last = ms[-1][0] + late
    return ms[:n_dry + 1] + [(last, line) for _, line in ms[n_dry + 1:]]


def test_a_parent_that_read_every_timed_marker_at_once_saw_time_pass_since_its_last_read():
    """Honest calls, read in one go (28 calls at nice 19 beside a hog: "the harness reported
    58.8 ms for the first 28 timed calls but the parent saw only 0 ms pass"): "@t 0" was
    written after the parent's read before, which is where the calls' time starts."""
    problem, seen = cross_check([0.0021] * 28, read_at_once(markers([0.0021] * 28)))
    assert "pass" not in problem, problem
    assert seen["parent_blind"]  # (it saw the calls' total, not one of them: disturbed)


def test_reported_calls_cannot_outrun_the_parents_clock_read_at_once_either():
    calls = [0.002] * 10
    reported = calls[:5] + [0.5] + calls[6:]  # more than passed since the parent's read before
    problem, _ = cross_check(reported, read_at_once(markers(calls)))
    assert problem and "pass" in problem, problem


def test_a_parent_that_read_the_whole_run_at_once_is_blind_and_the_run_disturbed():
    """Every marker, dry ones too, in one read (25 calls at nice 19 beside a hog: "51.2 ms for
    the first 25 timed calls but the parent saw only 0 ms pass"): the parent's clock saw none
    of the calls, which is no evidence of tampering, nor of the harness's figures. The run is
    disturbed, run again, and refused by the rewards if it stays so."""
    from perfgym.backends.c.measure import _parent_late
    from perfgym.sandbox import RunResult
    ms = markers([0.0021] * 25)
    blind = [(ms[-1][0] + 0.003, line) for _, line in ms]
    problem, seen = cross_check([0.0021] * 25, blind)
    assert seen.get("parent_blind") and "saw none" in problem, problem
    ran = (RunResult(returncode=0, stdout="", stderr="", wall=1.0, markers=blind),
           {"samples": [0.0021] * 25})
    assert "saw none" in _parent_late(ran, threads=1)


def test_microsecond_calls_read_at_once_are_not_blind():
    """A prompt parent can read a whole run of tiny calls in one go: nothing was hidden."""
    ms = markers([2e-6] * 25, work=1e-6)
    problem, seen = cross_check([2e-6] * 25, [(ms[-1][0], line) for _, line in ms])
    assert problem is None and not seen.get("parent_blind"), (problem, seen)


def test_a_parent_that_saw_some_calls_is_not_blind():
    ms = markers([0.0021] * 25)
    half = [(t if i < len(ms) - 10 else ms[-1][0], line) for i, (t, line) in enumerate(ms)]
    problem, seen = cross_check([0.0021] * 25, half)
    assert not seen.get("parent_blind"), (problem, seen)

# ---- end to end -------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["baseline", "expert"])
def test_honest_kernels_pass_with_both_figures_stored(dgemm, fast, which):
    outcome = evaluate(dgemm, getattr(dgemm, which).read_text(), {"M": 128, "N": 128, "K": 128},
                       fast)
    assert outcome.status is Status.OK, outcome.message
    seen = outcome.parent_check
    reported, parent = seen["reported_samples"], seen["parent_samples"]
    assert len(reported) == len(parent) == len(outcome.timing.samples)
    assert outcome.timing.samples == [max(r, p) for r, p in zip(reported, parent)]
    assert seen["parent_median"] <= 2 * seen["reported_median"] + TAMPER_MARGIN
    assert 0 <= seen["charged"] <= len(reported) and seen["overhead"] >= 0


def test_hidden_work_inside_the_slack_is_charged(dgemm, fast):
    """timer_start_nudged.c reports ~0.65x of its real time: not tampering by the rule, but the
    Outcome's timing holds what the parent saw."""
    code = (CANDIDATES / "timer_start_nudged.c").read_text()
    outcome = evaluate(dgemm, code, {"M": 160, "N": 160, "K": 160}, fast)
    if outcome.status is Status.WRONG_ANSWER and outcome.message.startswith(
            ("tampering", "wrong answer on a late timed call")):
        # The nudge is 0.35x the first timed call. On a busy machine that call can straggle,
        # and the nudge then outgrows a later call (a reported call of 0): refused outright.
        # Or the value it takes for the call's start is the state of the harness's change
        # stream (a static next to the samples, 1 run in 6 here): the inputs then differ
        # from the parent's (replay.py), and a late call's answer is wrong for them.
        return
    assert outcome.status is Status.OK, outcome.message
    seen = outcome.parent_check
    assert seen["charged"] >= len(seen["reported_samples"]) // 2
    # 1.25x on a quiet machine; where the first call was short of the later ones (load) the
    # nudge is less of each call, and 1.1x is still far above the noise of two clocks
    assert outcome.timing.median > 1.1 * seen["reported_median"]


def test_the_harness_gets_a_read_only_got(dgemm, fast, workdir):
    """Full RELRO: the GOT cannot be pointed at a hook of clock_gettime or write (got_hook.c)."""
    build = cbackend.build(dgemm, dgemm.baseline.read_text(), fast, workdir)
    assert build.ok, build.message
    dynamic = subprocess.run(["readelf", "-d", str(workdir / "run")], capture_output=True,
                             text=True, check=True).stdout
    assert "BIND_NOW" in dynamic


# ---- a starved parent: the harness's CPU time is the second witness ---------------------------

def cpu_readings(ms, calls_cpu, work_cpu=2e-3, stand_in=1e-3):
    """What the sandbox records beside `ms` (from markers()): the harness's CPU seconds as each
    marker arrived, where its own work takes `work_cpu` a round, a dry round's stand-in
    `stand_in` and timed call k `calls_cpu[k]` of CPU."""
    lines = [line for _, line in ms]
    n_dry = sum(line.startswith("@c ") for line in lines) - 1
    used, out = 5.0, {}
    for i, line in enumerate(lines):
        if 1 <= i <= n_dry:
            used += stand_in + work_cpu
        elif i == n_dry + 1:
            used += 0.03  # the first call and the warm-ups
        elif i > n_dry + 1:
            used += calls_cpu[i - n_dry - 2] + work_cpu
        out[line] = used
    return out


def test_a_parent_that_saw_waiting_not_work_is_late_not_tampered_with():
    """The issue's figures: 4.04 ms calls, the parent saw about 10 ms a round (the harness, or
    the parent, waited for a CPU between the calls), the harness's CPU time says 4 ms a round."""
    ms = markers([0.0099] * 20, work=2e-3)
    problem, seen = cross_check([0.00404] * 20, ms, cpu_readings(ms, [0.004] * 20), threads=1)
    assert problem == "the harness reported 4.04 ms per call but the parent saw 9.9 ms (medians)"
    assert seen["parent_slower"] and seen["parent_late"]
    assert seen["harness_cpu"] == pytest.approx(19 * 0.004)  # the last call's round left out


def test_hidden_work_is_tampering_whatever_the_parent_saw():
    """The same parent's view, but the CPU time shows the work: 9.9 ms a round, 4.04 reported."""
    ms = markers([0.0099] * 20, work=2e-3)
    problem, seen = cross_check([0.00404] * 20, ms, cpu_readings(ms, [0.0099] * 20), threads=1)
    assert problem and seen["parent_slower"] and not seen["parent_late"]


def test_hidden_work_cannot_hide_in_a_parent_that_reads_in_bunches():
    """A parent that reads three markers at once sees rounds of 0, 0 and 3 calls' CPU: their
    median says nothing, the sum does."""
    ms = markers([0.0099] * 21, work=2e-3)
    cpu = cpu_readings(ms, [0.0099] * 21)
    lines = [line for _, line in ms]
    for k in range(len(lines) - 21, len(lines)):  # each read with the next two
        cpu[lines[k]] = cpu[lines[min(k + 2 - (k - len(lines) + 21) % 3, len(lines) - 1)]]
    problem, seen = cross_check([0.00404] * 21, ms, cpu, threads=1)
    assert problem and not seen["parent_late"], seen
    assert seen["harness_cpu"] > seen["harness_cpu_allowed"]


def stale(cpu, tick=4e-3):
    """The readings as Linux gives another process's CPU clock while it runs: brought up to date
    at the scheduler tick, so each one is the time at the last tick."""
    return {line: (seconds // tick) * tick for line, seconds in cpu.items()}


@pytest.mark.parametrize("call", [0.0005, 0.0021, 0.004, 0.0061])
def test_an_honest_harness_read_at_tick_granularity_is_late_not_tampering(call):
    """Rounds read 0 or a whole tick: a median of single rounds said 0 for the dry rounds'
    own work and a tick for the calls (the frozen scan below failed 1 run in 4 that way)."""
    ms = markers([call + 0.01] * 20, work=0.7e-3, dry=9)
    cpu = stale(cpu_readings(ms, [call] * 20, work_cpu=0.7e-3))
    problem, seen = cross_check([call] * 20, ms, cpu, threads=1)
    assert problem and seen["parent_slower"] and seen["parent_late"], seen
    assert seen["own_cpu"] == pytest.approx(0.7e-3, abs=0.6e-3)


def test_markers_read_with_the_last_one_carry_no_weight():
    """The last markers, read together after the harness's closing work (its checks and the
    second input set: 40 ms here), counted that work as the calls' (49 ms of CPU for 5 calls
    of 2 ms, called tampering beside a hog)."""
    ms = markers([0.008] * 6, work=1.6e-3, dry=9)
    cpu = cpu_readings(ms, [0.002] * 6, work_cpu=1.6e-3)
    lines = [line for _, line in ms]
    cpu[lines[-1]] += 0.040
    cpu[lines[-2]] = cpu[lines[-1]]
    problem, seen = cross_check([0.002] * 6, ms, cpu, threads=1)
    assert problem and seen["parent_late"], seen


def test_hidden_work_with_one_call_made_to_look_long_is_tampering_even_read_in_bunches():
    """The total's bound grows with the reported calls: one call reported long (as much as the
    parent's clock allows) bought room for work hidden in all the others, and the median of
    single rounds missed it when the parent read the markers three at a time (rounds of 0, 0
    and three calls' CPU). The bound counts a call at most 2x the median."""
    ms = markers([0.0099] * 21, work=2e-3)
    cpu = cpu_readings(ms, [0.0099] * 21)
    lines = [line for _, line in ms]
    for k in range(len(lines) - 21, len(lines)):  # each read with the next two
        cpu[lines[k]] = cpu[lines[min(k + 2 - (k - len(lines) + 21) % 3, len(lines) - 1)]]
    reported = [0.00404] * 21
    reported[10] = 0.10  # within the parent's clock: 21 rounds of 11.9 ms
    problem, seen = cross_check(reported, ms, cpu, threads=1)
    assert problem and not seen["parent_late"], seen
    assert seen["harness_cpu"] > seen["harness_cpu_allowed"]


def test_one_heavy_honest_round_of_a_few_is_late_not_tampering():
    """The harness checks one secretly chosen call's answer in full and keeps a copy: an honest
    round several times the others, among as few as 5."""
    calls = [0.002] * 6
    ms = markers([c + 0.01 for c in calls], work=0.7e-3, dry=9)
    heavy = [0.002, 0.002, 0.012, 0.002, 0.002, 0.002]
    problem, seen = cross_check(calls, ms, cpu_readings(ms, heavy, work_cpu=0.7e-3), threads=1)
    assert problem and seen["parent_late"], seen


def test_without_cpu_readings_the_rule_is_the_parents():
    ms = markers([0.0099] * 20, work=2e-3)
    problem, seen = cross_check([0.00404] * 20, ms)
    assert problem and "parent_late" not in seen


# ---- the same, with real processes: the harness frozen between its calls ----------------------

def frozen_run(task, code, size, config, workdir, freeze):
    """The harness's whole protocol in the sandbox, stopped (SIGSTOP) for `freeze` seconds as
    each timed call's marker arrives: off its CPU between two calls, as a harness waiting
    behind a busier program is. Returns cross_check's verdict with the CPU readings."""
    import os
    import signal
    import time

    import numpy as np

    from perfgym.backends.c.measure import _read_report

    built = cbackend.build(task, code, config, workdir)
    assert built.ok, built.message
    rng = np.random.default_rng(7)
    inputs = cbackend.InputSets([cbackend.make_inputs(task, size, rng) for _ in range(2)])
    cbackend.write_manifest(task, size, inputs, config, workdir, 12345)
    procs = []

    def on_marker(line):
        if line.startswith("@t ") and procs:
            os.kill(procs[0].pid, signal.SIGSTOP)
            time.sleep(freeze)
            os.kill(procs[0].pid, signal.SIGCONT)

    result = cbackend.run(task, size, config, workdir, on_start=procs.append,
                          on_marker=on_marker)
    assert result.ok, result.stderr
    report = _read_report(workdir / "result.txt")
    return cross_check(report["samples"], result.markers, result.marker_cpu,
                       floors=result.marker_floor, probes=report.get("probes", []))


def test_a_harness_frozen_between_calls_is_late_not_tampering(fast, workdir):
    """The naive scan at 4M elements (2 ms calls; poisoning and checking its 32 MB arrays
    between the calls gives the freeze time to land there): the parent's clock alone calls it
    tampering, the CPU time does not."""
    from perfgym import get_task
    task = get_task("prefix_sum")
    problem, seen = frozen_run(task, task.baseline.read_text(), {"N": 4_000_000},
                               fast.replace(max_samples=12), workdir, freeze=0.010)
    assert problem and seen["parent_slower"], seen  # what the parent's clock alone said
    assert seen["parent_late"], seen
    # with room to spare: the harness's one-off work in a timed round (the chosen call's
    # snapshot, whose buffers it touches before the timed loop) is not charged to the calls.
    # Untouched, their first-touch faults put honest runs on a busy VM at 0.8-0.95 of the
    # allowance (5 of 10 over it); touched, 0.5-0.55
    assert seen["harness_cpu"] <= 0.75 * seen["harness_cpu_allowed"], seen
