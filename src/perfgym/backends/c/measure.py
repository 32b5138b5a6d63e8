"""The C backend's timed half: run the harness (a check call, then the whole protocol),
verify its four answers, cross-check its clock against the parent's and turn the samples into
numbers (GFLOP/s, roofline position)."""
from __future__ import annotations

import math
import secrets
import threading
from pathlib import Path

import numpy as np

from ... import machine
from ...config import EvalConfig
from ...lane import LANE
from ...outcome import CHECK_ONLY, Outcome, Status, Timing
from ...tasks import Task, format_size
from ...verify import compare, reference_outputs, sample_points
from .. import Prepared
from . import build as cbackend
from . import neighbours, replay
from .prestart import PrestartedRun
from .build import EXCEPTION_ESCAPED, VECTOR_RESIZED

IMPLAUSIBLE_PEAK_FACTOR = 1.5  # a kernel above 1.5x the measured FMA peak did not do the work
# (Strassen-like kernels do fewer FLOPs than the formula counts, so not 1.0)

# The harness's times come from inside the kernel's process; the parent times the same calls by
# when the harness's markers arrive (see cross_check). A reported median below the parent's by
# more than both of these is tampering. Honest kernels on a loaded 2-core machine stayed well
# inside: the parent's median at most 1.39x the harness's, and at most 0.34 ms above it for
# calls under 5 ms (README, "The hostile suite").
TAMPER_FACTOR = 2.0
TAMPER_MARGIN = 1e-3  # seconds
# How far the reported calls, added up, may run ahead of the parent's clock: by as much as the
# parent read "@t 0" late. Generous: without real-time priority for the reader that reached
# 15 ms under load.
AHEAD_EPSILON = 50e-3  # seconds
# Calls that took this long together, all announced in one read, went unseen by the parent: it
# was kept from its CPU. (Microsecond calls can all arrive in one read of a prompt parent.)
BLIND_AFTER = 10e-3  # seconds
# What the harness's CPU time over the timed calls may exceed its bound by (_cpu_witness): it
# is read as the parent reads "@t 0" and the last marker, each maybe late, the last one after
# some of the harness's closing work.
CPU_EPSILON = 20e-3  # seconds
# The most a single reported call counts for in that bound, as a multiple of the median call.
CAP_OVER_MEDIAN = 2.0
# The probe calls (inputs drawn anew: build.fresh_inputs) may take this many times the other
# calls' median, and this much more, before the kernel is taken to reuse its earlier calls'
# work (reuse_problem): both probes must, so one call slowed by another program is not enough.
REUSE_FACTOR = 2.0
REUSE_MARGIN = 100e-6  # seconds
# ... and a run that says so is run once more, on other inputs and other probes: beside a
# trainer on both cores a threaded dgemm's calls took 8-25x their median now and then (one call
# in three, one run), and both probes among them read as reuse. A kernel that reuses work is
# slow on every pair of probes; two runs of stragglers on both are rarer by that chance again.
REUSE_RUNS = 2
# A timed run that other programs disturbed (neighbours.py) is run again this many times; if
# every run was disturbed the Outcome says so (`disturbed`) and it is not cached.
DISTURBED_REPEATS = 2
# The reference may take this many times the candidate's whole timed run (config.timeout), at
# least REFERENCE_MIN_SECONDS; beyond that the size is too large for the task's reference.
REFERENCE_TIMEOUT_FACTOR = 4.0
REFERENCE_MIN_SECONDS = 1.0
INPUT_SETS = ("the first input set", "the second input set")  # labels in verdicts and `refs`


def measure(p: Prepared, outcome) -> Outcome:
    """`outcome(status, message, details="", **fields)` makes the Outcome (evaluate fills in
    the fields every outcome has). The candidate is run, verified and timed in `p.processes`
    processes (evaluate.measure asks for more than one where its baseline's processes
    disagreed), each on fresh inputs and checked in full; the first that is not OK is the
    verdict, else the fastest is kept, with every process's median. A process whose probes
    say reuse is run again on other inputs (REUSE_RUNS in all) before that is its verdict."""
    runs = []
    for n in range(max(1, p.processes)):
        if n:  # the last process's files: none may pass for this one's
            _forget_run(p.workdir)
        run = _measure_once(p, outcome)
        for again in range(1, REUSE_RUNS):
            if not _reused(run):
                break
            _forget_run(p.workdir)
            run = _measure_once(p, outcome, again)
        if run.status is not Status.OK or run.timing is None:
            return run
        runs.append(run)
    if len(runs) == 1:
        return runs[0]
    runs.sort(key=lambda o: o.timing.median)
    kept = runs[0]
    kept.timing.process_medians = [o.timing.median for o in runs]
    # the figure is no better than the worst of the runs it was chosen among
    kept.disturbed = next((o.disturbed for o in runs if o.disturbed), None)
    return kept


def _reused(run: Outcome) -> bool:
    return run.status is Status.WRONG_ANSWER and (run.message or "").startswith("reuse: ")


def _forget_run(workdir: Path) -> None:
    """Remove what a harness run wrote (its report, outputs and snapshots) from `workdir`."""
    for stale in ["result.txt", *(f.name for f in workdir.glob("out[12]_*.bin")),
                  *(f.name for f in workdir.glob("snap_*.bin")),
                  *(f.name for f in workdir.glob("late_*.bin"))]:
        (workdir / stale).unlink(missing_ok=True)


def _measure_once(p: Prepared, outcome, again: int = 0) -> Outcome:
    """One process's run: the check call, then the timed run, verified and cross-checked. Only
    the timed run takes the exclusive lane (the check call shares it with builds); the
    reference takes none: it is bounded in time (_verify) and a timing it disturbs elsewhere is
    seen and repeated (neighbours.py)."""
    task, size, config = p.task, p.size, p.config

    # (a run again after a reuse verdict draws other inputs and probes from a seed of its own)
    seed = config.seed + again if config.seed is not None else secrets.randbits(63)
    rng = np.random.default_rng(seed)
    untimed = config.extra.get(CHECK_ONLY)  # judged up to the check call, which uses set 1 only
    inputs = cbackend.InputSets([cbackend.make_inputs(task, size, rng)
                                 for _ in range(1 if untimed else 2)])
    harness_seed = int(rng.integers(1, 2**62))  # (its change stream: replay.py)
    cbackend.write_manifest(task, size, inputs, config, p.workdir, harness_seed)
    order = cbackend.pointer_order(task)

    # Check before timing: one call on the first input set, verified, so a wrong kernel costs
    # one call and not the timing loop. The full run below repeats and verifies that call too.
    # (extra["check_first"] = False turns it off, for benchmarks only: eval_throughput.py and
    # group_timing_cost.py.)
    refs: dict[str, dict] = {}  # reference outputs by input set, computed once
    prestarted = None
    try:
        if config.extra.get("check_first", True):
            # the input sets' references are computed while the check call runs (never during
            # the timed run: joined before it), and the timed run's harness starts beside it
            ahead = _ReferencesAhead(task, size, config, inputs, refs)
            with LANE.shared():  # (untimed: no timed run to start beside it)
                prestarted = None if untimed else PrestartedRun(p)
                ran = _run_harness(p, order, outcome, check_only=True)
                if prestarted is not None:  # its start-up is over before another kernel is timed
                    prestarted.wait_ready()
            ahead.join()
            if isinstance(ran, Outcome):
                return ran
            first = [(INPUT_SETS[0], inputs.sets[0],
                      _outputs(task, size, order, p.workdir, 1))]
            verdict_msg, max_error = _verify(task, size, config, first, rng, refs)
            if verdict_msg:
                return outcome(Status.WRONG_ANSWER, *verdict_msg, max_error=max_error)
            if untimed:  # timed next, in its group's rounds
                return outcome(Status.OK, "right on the check call (timed in its group's "
                               "rounds)", max_error=max_error, flags=[CHECK_ONLY])
            for stale in ["result.txt", *(f.name for f in p.workdir.glob("out1_*.bin"))]:
                (p.workdir / stale).unlink(missing_ok=True)
        ran, load, rundir = _timed_run(p, order, outcome, prestarted)
        if isinstance(ran, Outcome):
            return ran
        result, report = ran
        two_probes = len(report.get("probes", ())) == 2  # (the second one's snapshot kept)
        verdict_msg, max_error = _verify_all(task, size, config, inputs, order, rundir, rng,
                                             refs, probe_snapshot=two_probes)
        if not verdict_msg:
            verdict_msg, late_error = _verify_late(task, size, config, inputs, order, rundir,
                                                   rng, harness_seed, report,
                                                   _resumes(result.markers)[2])
            max_error = max(max_error, late_error)
    finally:
        if prestarted is not None:
            prestarted.close()  # (ended if never told to go; its directory removed)
    if verdict_msg:
        return outcome(Status.WRONG_ANSWER, *verdict_msg, max_error=max_error)

    probes = report.get("probes", [])
    problem, seen = cross_check(report["samples"], result.markers, result.marker_cpu,
                                _threads(p), result.marker_floor, probes)
    if problem and load["disturbed"] and (seen.get("parent_slower") or seen.get("parent_blind")):
        # under foreign load the parent reads the markers late: no evidence of tampering (and
        # where the harness's CPU time shows no hidden work, _timed_run called the run
        # disturbed). The calls are charged the parent's figures below, so a faked timer gains
        # nothing.
        load["disturbed"] += f"; the parent's clock disagreed: {problem}"
    elif problem:
        return outcome(Status.WRONG_ANSWER, f"tampering: {problem}", _seen_summary(seen),
                       parent_check=seen)
    # Each call costs what the harness reported or what the parent saw, whichever is more:
    # work hidden from the harness's clock but inside the slack is still paid for.
    pairs = list(zip(report["samples"], seen["parent_samples"]))
    samples = [max(r, p) for r, p in pairs]
    # The probes are judged on those charged times: the harness's own are the candidate's to
    # rewrite, and two calls lowered do not move the medians the parent's clock is compared
    # on. Under foreign load the parent's figures carry other programs' waits, and one of them
    # on each probe would read as reuse: the harness's figures then (the run is disturbed).
    judged = report["samples"] if load["disturbed"] else samples
    if reused := reuse_problem(judged, probes):
        return outcome(Status.WRONG_ANSWER, f"reuse: {reused}", parent_check=seen)
    seen["charged"] = sum(p > r for r, p in pairs)  # calls that cost the parent's figure
    seen["load"] = load  # the conditions the timing was taken in (cached with it)
    seen["late"] = report["late"]  # the late calls whose answers were checked
    return _timed_outcome(p, outcome, samples, report, result.wall, seen, max_error)


def _timed_outcome(p: Prepared, outcome, samples: list[float], report: dict, wall: float,
                   seen: dict, max_error) -> Outcome:
    """The verdict of a run that verified and passed the cross-checks: its timing from the
    charged `samples`, its rates and roofline, unless the harness's figures are implausible."""
    task, size, config = p.task, p.size, p.config
    load = seen["load"]
    timing = Timing.from_samples(samples, report["warmups"], config.median_precision)
    flops, nbytes = task.flop_count(size), task.byte_count(size)
    gflops = flops / timing.median / 1e9 if timing.median > 0 else math.inf
    gbps = nbytes / timing.median / 1e9 if timing.median > 0 else math.inf
    peak = _peak_for(task, p.machine)
    # the harness's own figures against the run's wall time: the charged ones take the larger of
    # two clocks call by call, and a parent that read in bunches saw some calls long, others 0
    if why := implausible(report["samples"], wall, gflops if flops else None,
                          _rate_bound(task, p.machine)):
        return outcome(Status.WRONG_ANSWER, f"timing implausible: {why}")
    # the bandwidth roof for this working set: a cache-resident one streams faster than DRAM
    bandwidth = machine.bandwidth_for(p.machine, task.total_bytes(size))
    roof = roofline(flops, nbytes, peak, bandwidth)
    return outcome(Status.OK, "", timing=timing, gflops=gflops if flops else None,
                   gbps=gbps, fraction_of_peak=gflops / peak if (peak and flops) else None,
                   fraction_of_roofline=(gflops if flops else gbps) / roof[0] if roof else None,
                   bound=roof[1] if roof else None, max_error=max_error, parent_check=seen,
                   disturbed=load["disturbed"])


class _ReferencesAhead(threading.Thread):
    """The two input sets' reference outputs, computed into `refs` in a thread. A fault of
    the reference is left for _verify, where it is reported: a broken one is computed again
    and fails again; one too slow at this size fails there at once (verify._TOO_SLOW keeps
    it), so the bound is waited for once, not once here and once there."""

    def __init__(self, task, size, config, inputs, refs: dict) -> None:
        super().__init__(daemon=True, name="perfgym-references")
        self.args = task, size, config, inputs, refs
        self.start()

    def run(self) -> None:
        task, size, config, inputs, refs = self.args
        limit = max(REFERENCE_MIN_SECONDS, REFERENCE_TIMEOUT_FACTOR * config.timeout)
        for label, given in zip(INPUT_SETS, inputs.sets):
            try:
                refs[label] = reference_outputs(task, given, size, limit)
            except Exception:
                return


def _timed_run(p: Prepared, order: list[str], outcome, prestarted=None):
    """The timed harness run in the exclusive lane, run again when other programs took the
    CPU (up to DISTURBED_REPEATS times); the first one is `prestarted`'s when it is waiting.
    Returns (what _run_harness returned, the conditions of the last run:
    neighbours.conditions plus "disturbed", the reason or None, and "attempts"; the directory
    that holds the run's files)."""
    threads = _threads(p)
    for attempt in range(1, DISTURBED_REPEATS + 2):
        # the last run's files (an earlier attempt's, an earlier round's of group timing): none
        # may pass for this run's, and a late call's answer is named by its call alone
        _forget_run(p.workdir)
        with LANE.exclusive():  # nothing else of ours runs while a kernel is timed
            before = neighbours.snapshot()
            if attempt == 1 and prestarted is not None and prestarted.go():
                rundir = prestarted.workdir
                ran = _read_run(p, prestarted.wait(), order, outcome, False, rundir)
            else:
                rundir = p.workdir
                ran = _run_harness(p, order, outcome)
            load = neighbours.conditions(before, neighbours.snapshot(), threads)
        load.update(disturbed=neighbours.disturbed(load) or _parent_late(ran, threads),
                    attempts=attempt)
        if isinstance(ran, Outcome) or not load["disturbed"]:
            break
    if load["disturbed"]:
        load["disturbed"] += f" (in each of {load['attempts']} runs)"
    return ran, load, rundir


def _threads(p: Prepared) -> int:
    return p.config.n_threads if "openmp" in p.techniques else 1


def _parent_late(ran, threads: int) -> str | None:
    """Why a finished run's timing is disturbed though no other program held the harness's
    CPU: the parent saw the calls slower than the rule allows, and the harness's CPU time says
    it did not work for that time (cross_check's second witness), so the parent, or the
    harness between its calls, waited for a CPU: a parent starved beside a trainer at nice 19
    (4.04 ms per call reported, 9.94 ms seen). Such a run is run again as a disturbed one is;
    hidden work, which is CPU time, is still tampering."""
    if isinstance(ran, Outcome):
        return None
    result, report = ran
    problem, seen = cross_check(report["samples"], result.markers, result.marker_cpu, threads,
                                result.marker_floor, report.get("probes", []))
    if problem and seen.get("parent_blind"):
        return problem + " (it waited for a CPU)"
    if not (problem and seen.get("parent_late")):
        return None
    return (f"the parent saw the calls slower than the harness ({_ms(seen['parent_median'])} "
            f"against {_ms(seen['reported_median'])}, medians), but the harness used "
            f"{_ms(seen['harness_cpu'])} of CPU over them (at most {_ms(seen['harness_cpu_allowed'])}"
            " by the rule): the parent waited for a CPU")


def _run_harness(p: Prepared, order: list[str], outcome, check_only: bool = False):
    """Run the harness (the whole protocol, or the check call) and read its report. Returns
    (the run, the report), or the Outcome of a run that did not end well."""
    result = cbackend.run(p.task, p.size, p.config, p.workdir, check_only=check_only)
    return _read_run(p, result, order, outcome, check_only, p.workdir)


def _read_run(p: Prepared, result, order: list[str], outcome, check_only: bool,
              workdir: Path):
    """_run_harness's reading of a finished run (its files in `workdir`)."""
    p.seconds["check" if check_only else "run"] = result.wall
    if failed := _run_failure(result, p.config, p.size, outcome):
        return failed
    report = _read_report(workdir / "result.txt", check=check_only)
    if report is None:
        return outcome(Status.RUNTIME_ERROR, "the run ended without a result (the kernel ended "
                       "the process)", result.stderr[-2000:])
    if report["violation"] != "none":
        return outcome(Status.WRONG_ANSWER, _violation_message(report["violation"], order))
    return result, report


def _run_failure(result, config: EvalConfig, size: dict, outcome) -> Outcome | None:
    """The outcome of a harness run that did not end normally, or None."""
    if result.timed_out:
        return outcome(Status.TIMEOUT, f"did not finish within {config.timeout:g} s "
                       f"({format_size(size)}; stopped after {result.wall:.1f} s with the "
                       "harness's own work on the arrays)", result.stderr[-2000:])
    if result.output_overflow:
        printed = [ln for ln in result.stdout.splitlines() if not ln.startswith("@")]
        return outcome(Status.RUNTIME_ERROR, "printed more output than allowed; kernels must not "
                       "print", "\n".join(printed)[:500])
    if result.killed_by and EXCEPTION_ESCAPED in result.stderr:  # the C++ shim's words
        return outcome(Status.RUNTIME_ERROR, EXCEPTION_ESCAPED + " (a kernel must handle its own "
                       "exceptions)", result.stderr[-2000:])
    if result.killed_by and VECTOR_RESIZED in result.stderr:
        return outcome(Status.RUNTIME_ERROR, VECTOR_RESIZED + " (outputs come sized: write "
                       "their elements, do not resize them)", result.stderr[-2000:])
    if result.killed_by:
        return outcome(Status.RUNTIME_ERROR, _signal_message(result.killed_by, config),
                       result.stderr[-2000:])
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or [""])[-1]
        return outcome(Status.RUNTIME_ERROR, f"exited with status {result.returncode}"
                       + (f": {detail}" if detail else ""), result.stderr[-2000:])
    return None


def probe_times(samples: list[float], probes: list[int]) -> list[tuple[float, float]]:
    """Each probe call's time (`probes`: indices into `samples`, the harness's own times of the
    calls) beside the median of the calls around it: two on each side that are no probe (the
    calls just after the warm-up still speed up, 2.0 ms to 1.4 ms for a threaded dgemm, so not
    the median of all)."""
    probes = [i for i in probes if 0 <= i < len(samples)]
    rest = [x for i, x in enumerate(samples) if i not in probes]
    if not rest:
        return []
    times = []
    for i in probes:
        near = [samples[j] for j in (i - 2, i - 1, i + 1, i + 2)
                if 0 <= j < len(samples) and j not in probes] or rest
        times.append((samples[i], _median(near)))
    return times


def reuse_problem(samples: list[float], probes: list[int]) -> str | None:
    """Why the calls on inputs drawn anew say the kernel reuses its earlier calls' work, or
    None: each probe took more than REUSE_FACTOR times the calls around it (probe_times) and
    REUSE_MARGIN more. An honest kernel does the same work on any inputs of the task's
    distribution; one that corrects its saved answer for the element that changed since its
    last call does the whole work only on the probes."""
    times = probe_times(samples, probes)
    if not times or any(took <= max(REUSE_FACTOR * near, near + REUSE_MARGIN)
                        for took, near in times):
        return None
    took, near = min(times, key=lambda t: t[0] / t[1])
    return (f"its calls on inputs drawn anew took {took / near:.1f}x the calls around them on "
            f"inputs one element from the last ({_ms(took)} against {_ms(near)}): it reuses "
            "earlier calls' work")


def cross_check(reported: list[float], markers: list[tuple[float, str]],
                cpu: dict[str, float] | None = None, threads: int = 1,
                floors: dict[str, float] | None = None, probes: list[int] = ()
                ) -> tuple[str | None, dict]:
    """Check the harness's per-call times against the parent's clock. `markers` are the
    harness's progress lines with their arrival times: "@c 0", then "@c d SECONDS" after dry
    round d, where a busy wait of SECONDS stood in for the kernel (before any kernel code ran);
    then "@t 0" and "@t k" after timed call k; and around each probe p (result.txt's
    `probes`), "@s p" right after "@t p" (its inputs drawn anew) and "@s p+1" right after
    "@t p+1" (its answer checked and copied): the harness's own work on a probe is between
    the two; and for each late call k whose answer was kept (harness.c's late_keep) "@l k"
    right after "@t k+1", then "@s k+1" (the answer written out is between the two marks and
    "@s"). The parent's time of call k is the interval that ends at "@t k+1" and begins at
    "@s k" where there is one, else at "@t k", less the harness's own work per call: the
    median over the dry rounds of the interval beyond the stand-in. An "@s" anywhere else, or
    twice (a kernel that wrote one to start its own interval late), is out of order. Returns
    (what disagreed, or None; the figures).

    `cpu` (RunResult.marker_cpu: the harness's CPU seconds as each marker arrived) is the
    second witness when the parent saw the calls slower: work hidden from the harness's clock
    is CPU time of the harness, a parent (or harness) kept waiting for a CPU by other programs
    is not. When the harness's CPU time over the timed calls, less its own work per call (from
    the dry rounds, by CPU time too), stays within what the same rule allows its reported
    calls on `threads` threads, seen["parent_late"] says so (_cpu_witness).

    `floors` (RunResult.marker_floor: the earliest each marker can have been written) bound
    from below when the timed calls began, where "@t 0"'s arrival time may be late."""
    markers, resumed, kept = _resumes(markers)
    fields = [line.split() for _, line in markers]
    labels = [" ".join(f[:2]) for f in fields]
    n_dry = sum(label.startswith("@c ") for label in labels) - 1
    n_timed = sum(label.startswith("@t ") for label in labels) - 1
    expected = [f"@c {d}" for d in range(n_dry + 1)] + [f"@t {k}" for k in range(n_timed + 1)]
    try:
        stand_ins = [float(f[2]) for f in fields[1:n_dry + 1]]
    except (IndexError, ValueError):
        stand_ins = []
    if labels != expected or n_dry < 1 or n_timed < 1 or len(stand_ins) != n_dry or \
            resumed is None or set(resumed) != {k for p in probes for k in (p, p + 1)
                                                if k < n_timed} | {k + 1 for k in kept
                                                                   if k + 1 < n_timed}:
        return ("the harness's progress markers to the parent are missing or out of order",
                {"markers": len(labels), "reported_samples": list(reported)})
    times = np.array([t for t, _ in markers])
    overhead = max(0.0, _median(np.diff(times[:n_dry + 1]) - stand_ins))
    timed = times[n_dry + 1:]
    starts = [resumed.get(k, timed[k]) for k in range(n_timed)]
    parent = [max(0.0, float(end - begin) - overhead) for begin, end in zip(starts, timed[1:])]
    seen = {"late_kept": sorted(kept), "overhead": overhead,
            "reported_median": _median(reported),
            "parent_median": _median(parent), "reported_samples": list(reported),
            "parent_samples": parent}
    if n_timed != len(reported):
        return (f"the harness reported {len(reported)} timed calls but announced {n_timed} to "
                "the parent", seen)
    # Call by call, the reported times cannot add up to more than the parent saw pass from
    # the start of the calls to "@t k": they ran one after another in between. The calls began
    # after "@t 0" was written, which was after the parent asked for the read before the one
    # that brought it (its floor). Not when "@t 0" arrived: a starved parent can take its
    # clock long after its read returned (85 ms late once beside a hog at nice 19: "reported
    # 91 ms for the first 14 timed calls but the parent saw only 5.72 ms pass"), or read it
    # with "@t 1" (28 calls' markers at once: "0 ms pass"). Without floors (figures made by
    # hand), a parent that read "@t 0" with "@t 1" counts from the arrival of its read before.
    # If it read every timed marker at once, its clock saw none of them: the run is disturbed
    # (_parent_late), as a parent that saw the calls slow is, and its calls cost the harness's
    # figures.
    start = timed[0]
    if floors and "@t 0" in floors:
        start = min(start, floors["@t 0"])
    elif timed[1] == start:
        start = max((t for t in times[:n_dry + 1] if t < start), default=-np.inf)
    ahead = np.cumsum(reported) - (timed[1:] - start)
    k = int(np.argmax(ahead))
    if ahead[k] > AHEAD_EPSILON:
        return (f"the harness reported {_ms(sum(reported[:k + 1]))} for the first {k + 1} timed "
                f"calls but the parent saw only {_ms(timed[k + 1] - start)} pass", seen)
    if len(set(timed.tolist())) == 1 and sum(reported) > BLIND_AFTER:
        seen["parent_blind"] = True
        return (f"the parent read all {n_timed} timed calls' markers at once: its clock saw "
                "none of them", seen)
    rep, par = seen["reported_median"], seen["parent_median"]
    if par > max(TAMPER_FACTOR * rep, rep + TAMPER_MARGIN):
        seen["parent_slower"] = True  # (what a parent starved by foreign load also sees)
        if witness := _cpu_witness(reported, [line for _, line in markers], n_dry, stand_ins,
                                   cpu or {}, threads, sorted(resumed)):
            seen.update(witness)
        return (f"the harness reported {_ms(rep)} per call but the parent saw {_ms(par)} "
                "(medians)", seen)
    return None, seen


def _resumes(markers: list[tuple[float, str]]
             ) -> tuple[list[tuple[float, str]], dict[int, float] | None, set[int]]:
    """(`markers` without the "@s k" and "@l k" ones, {k: when "@s k" arrived}, the late calls
    k whose answers the harness kept: "@l k"). The dict is None where an "@s k" does not come
    right after "@t k" (or after "@t k" and "@l k-1"), or comes twice, or an "@l k" does not
    come right after "@t k+1"."""
    kept: list[tuple[float, str]] = []
    resumed: dict[int, float] | None = {}
    late: set[int] = set()
    previous = ""  # the last marker line, of any kind
    for arrived, line in markers:
        f = line.split()
        k = int(f[1]) if len(f) == 2 and f[1].isdigit() else -1
        if f[:1] == ["@l"]:
            if k in late or previous != f"@t {k + 1}":
                resumed = None
            late.add(k)
        elif f[:1] == ["@s"]:
            after = kept[-1][1] if kept else ""
            if resumed is None or k in resumed or after != f"@t {k}" or \
                    previous not in (f"@t {k}", f"@l {k - 1}"):
                resumed = None
            else:
                resumed[k] = arrived
        else:
            kept.append((arrived, line))
        previous = line
    return kept, resumed, late


def _cpu_witness(reported: list[float], lines: list[str], n_dry: int, stand_ins: list[float],
                 cpu: dict[str, float], threads: int, resumed: list[int] = ()) -> dict | None:
    """The harness's CPU time over the timed calls against what it reported (see cross_check),
    or None without the readings. The rule the parent's clock answers to, applied to the CPU
    time the harness used over all the timed calls, less its own work a round: within it,
    "parent_late": what the parent saw beyond the calls was waiting, not work.

    Over all the calls, not round by round: another process's CPU clock is read stale while it
    runs (Linux adds a running thread's time at the scheduler tick, 4 ms here) and a starved
    parent reads markers in bunches, so a single round reads 0, a tick or two rounds' worth.
    A median of rounds called honest scans tampering (1 run in 4 of the frozen scan; 5 of 200
    beside a hog, their rounds read 4 to 8 ms for 2 ms calls). The allowance is the reported
    calls' sum with each call counted at most CAP_OVER_MEDIAN x their median, so that one call
    reported long buys no room for work hidden in the others."""
    at = [cpu.get(line) for line in lines]
    if None in at:
        return None
    own = _own_cpu(at[:n_dry + 1], stand_ins)  # CPU seconds of the harness's own work a round
    # The last call's round is left out, with every round whose marker came in the same read:
    # the last marker is the last line the harness writes, and a starved parent reads the CPU
    # clock for it late, after the harness's closing work (an honest scan was once 1.98 ms
    # reported, 4.2 ms seen, over the bound by that work alone; and, its last two markers read
    # together, 49 ms of CPU for 5 calls of 2 ms).
    end = len(at) - 1
    while end > n_dry + 1 and at[end - 1] == at[-1]:
        end -= 1
    kept = end - n_dry - 2  # rounds left
    if kept < 1:
        return None
    at, reported = at[:end], reported[:kept]
    n, rep = len(reported), _median(reported)
    total = float(sum(min(r, CAP_OVER_MEDIAN * rep) for r in reported))
    used = at[-1] - at[n_dry + 1] - n * own
    # the harness's work between "@t k" and "@s k" (a probe's inputs and check, a late call's
    # answer written out) is its own, not the calls': left out as the parent's clock leaves it
    used -= sum(max(0.0, cpu.get(f"@s {k}", 0.0) - cpu.get(f"@t {k}", 0.0))
                for k in resumed if k < kept)
    total_bound = threads * max(TAMPER_FACTOR * total, total + n * TAMPER_MARGIN) + CPU_EPSILON
    return {"own_cpu": own, "harness_cpu": used, "harness_cpu_allowed": total_bound,
            "parent_late": used <= total_bound}


def _own_cpu(at: list[float], stand_ins: list[float]) -> float:
    """The harness's CPU seconds a dry round beyond its stand-in, from the readings as the dry
    markers arrived: over all rounds but the first (the cold one), from their ends. Not the
    median of single rounds, which stale readings made 0 for a harness that spent 2 ms a round
    of its own; the ends are off by a tick at most, shared by the rounds."""
    if len(stand_ins) > 1:
        at, stand_ins = at[1:], stand_ins[1:]
    return max(0.0, (at[-1] - at[0] - sum(stand_ins)) / len(stand_ins))


def _median(xs) -> float:
    return float(np.median(xs)) if len(xs) else 0.0


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _seen_summary(seen: dict) -> str:
    if "overhead" not in seen:
        return f"markers seen: {seen['markers']}"
    return (f"harness: median {_ms(seen['reported_median'])} over "
            f"{len(seen['reported_samples'])} calls; parent: median {_ms(seen['parent_median'])} "
            f"over {len(seen['parent_samples'])} calls (each less {_ms(seen['overhead'])} of "
            "harness work)")


def implausible(samples: list[float], run_wall: float, gflops: float | None,
                bound: float | None) -> str | None:
    """Why measured times cannot be true, or None. The last guard behind the harness's own:
    samples that are not positive or add up to more than the whole run took, or a rate above
    `bound`, which no correct kernel reaches on this machine (see `_rate_bound`)."""
    if not samples or min(samples) <= 0:
        return "a timed call took no time (the timer was tampered with)"
    if sum(samples) > run_wall:
        return "the timed calls add up to more than the whole run took (the timer was tampered with)"
    if bound and gflops is not None and gflops > bound:
        return (f"{gflops:.1f} GFLOP/s is above what this machine can reach ({bound:.1f}); the "
                "kernel cannot have done the work in that time")
    return None


def _is_fp32(task: Task) -> bool:
    outs = [task.arrays[n].dtype for n in task.outputs]
    return bool(outs) and outs[0] == "float32"


def _peak_for(task: Task, machine_summary: dict) -> float | None:
    """The measured FMA peak in the task's precision (float32 kernels get the FP32 peak)."""
    return machine_summary.get("peak_gflops_fp32" if _is_fp32(task) else "peak_gflops")


def _rate_bound(task: Task, machine_summary: dict) -> float | None:
    """A rate no correct kernel reaches: the larger of IMPLAUSIBLE_PEAK_FACTOR x the measured
    peak and the ISA's theoretical peak. The second cannot be too low, so a peak measured while
    a neighbour held the CPU never fails a correct kernel."""
    peak = _peak_for(task, machine_summary)
    isa = machine_summary.get("isa_bound_gflops_fp32" if _is_fp32(task) else "isa_bound_gflops")
    bounds = [b for b in (peak and IMPLAUSIBLE_PEAK_FACTOR * peak, isa) if b]
    return max(bounds) if bounds else None


def roofline(flops: float, nbytes: float, peak: float | None,
             bandwidth: float | None) -> tuple[float, str] | None:
    """(attainable rate, which roof): GFLOP/s = min(peak, intensity x bandwidth); for kernels
    that do no arithmetic, GB/s against the bandwidth."""
    if not bandwidth:
        return None
    if not flops:
        return bandwidth, "memory"
    if not peak:
        return None
    memory_roof = flops / nbytes * bandwidth if nbytes else math.inf
    return (memory_roof, "memory") if memory_roof < peak else (peak, "compute")


def _signal_message(name: str, config: EvalConfig) -> str:
    hints = {
        "SIGSEGV": "a memory access outside the arrays (arrays end at a guard page)",
        "SIGBUS": "a misaligned or invalid memory access",
        "SIGFPE": "an arithmetic fault such as integer division by zero",
        "SIGILL": "an instruction this CPU does not have; " + cbackend.isa_hint(config),
        "SIGABRT": "the kernel aborted (assert or abort)",
        "SIGXCPU": "the CPU-time limit was exceeded",
        "SIGXFSZ": "the file-size limit was exceeded",
        "SIGKILL": "killed (memory or process limit)",
    }
    return f"crashed with {name}: {hints.get(name, 'killed by a signal')}"


def _violation_message(violation: str, order: list[str]) -> str:
    # e.g. "timed call: array 0 input modified", or "warm-up: stack written"
    if violation.endswith("stack written"):
        phase = violation[: -len("stack written")].strip().rstrip(":")
        return (f"the kernel wrote into the harness's stack ({phase}): tampering with the "
                "timer is not allowed")
    phase, _, rest = violation.partition(" array ")
    idx, _, what = rest.partition(" ")
    name = order[int(idx)] if idx.isdigit() and int(idx) < len(order) else f"#{idx}"
    if what == "input modified":
        return f"the kernel modified its input {name} ({phase.rstrip(':')}); inputs are read-only"
    return f"the kernel wrote outside the bounds of {name} ({phase.rstrip(':')})"


def _read_report(path: Path, check: bool = False) -> dict | None:
    """result.txt of a full run (warm-ups, samples, violation) or, with `check`, of a check
    run (its first line "check", then the violation)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or lines[-1] != "done" or (lines[0] == "check") != check:
        return None
    report: dict = {}
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "warmups":
            report["warmups"] = int(rest)
        elif key == "samples":
            vals = rest.split()
            report["samples"] = [float(v) for v in vals[1:]]
        elif key == "violation":
            report["violation"] = rest
        elif key == "probes":  # the timed calls given inputs drawn anew (build.fresh_inputs)
            report["probe_order"] = [int(v) for v in rest.split()]  # (the chosen call first)
            report["probes"] = sorted(set(report["probe_order"]))
        elif key == "late_from":  # the first timed call a late check may keep
            report["late_from"] = int(rest)
    if "violation" not in report or (not check and not report.get("samples")):
        return None
    if not check:  # the late calls whose answers the harness wrote (late_K_I.bin)
        report["late"] = sorted({int(f.name.split("_")[1])
                                 for f in path.parent.glob("late_*_*.bin")})
    return report


def _load(workdir: Path, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A file the harness wrote, mapped copy-on-write: its pages are the page cache's, where a
    read into fresh memory first faulted in as many anonymous pages (on a VM that churns
    through files, 0.1-0.5 s for 128 MB, against 10 ms to map and read it all). The run is
    over and its uid's processes killed, so nothing changes the file under the mapping; a
    write to the array stays in this process. A file of any other length is refused, as a
    read of it would be."""
    path = workdir / name
    count = int(np.prod(shape))
    if path.stat().st_size != count * np.dtype(dtype).itemsize:
        raise ValueError(f"{name} holds {path.stat().st_size} bytes, not {count} of "
                         f"{np.dtype(dtype)}")
    if count == 0:
        return np.zeros(shape, dtype)  # (an empty file cannot be mapped)
    return np.memmap(path, dtype=dtype, mode="c", shape=shape)


def _outputs(task: Task, size: dict, order: list[str], workdir: Path, s: int) -> dict:
    """The outputs the harness saved for input set `s` (1 or 2)."""
    return {n: _load(workdir, f"out{s}_{order.index(n)}.bin", task.arrays[n].numpy,
                     task.shape(n, size))
            for n in order if n in task.outputs}


def _verify_all(task: Task, size: dict, config: EvalConfig, inputs: cbackend.InputSets,
                order: list[str], workdir: Path, rng: np.random.Generator,
                refs: dict, probe_snapshot: bool = False
                ) -> tuple[tuple[str, str] | None, float]:
    """Check the four answers the harness kept, and the second probe call's where it kept one
    (`probe_snapshot`: a fast wrong answer on inputs drawn anew must not pass as no reuse).
    Returns ((message, details) or None, max err)."""
    checks = [(INPUT_SETS[0], inputs.sets[0], _outputs(task, size, order, workdir, 1)),
              (INPUT_SETS[1], inputs.sets[1], _outputs(task, size, order, workdir, 2))]
    outputs = task.outputs
    snaps = [("chosen", "a timed call"), ("last", "the last timed call")]
    if probe_snapshot:
        snaps.append(("probe", "a timed call on inputs drawn anew"))
    for snap, label in snaps:
        arrs = {n: _load(workdir, f"snap_{snap}_{i}.bin", task.arrays[n].numpy,
                         task.shape(n, size))
                for i, n in enumerate(order)}
        given = {n: arrs[n] for n in order if n not in outputs}
        for i, n in enumerate(order):  # in place: the call was given what the harness kept
            if task.arrays[n].role == "inout":
                given[n] = _load(workdir, f"snap_{snap}_in_{i}.bin", task.arrays[n].numpy,
                                 task.shape(n, size))
        checks.append((label, given, {n: arrs[n] for n in outputs}))
    return _verify(task, size, config, checks, rng, refs)


def _late_missing(task: Task, size: dict, config: EvalConfig, report: dict,
                  announced: set[int]) -> str | None:
    """What is wrong with the late calls' answers the harness kept (harness.c's late_keep),
    or None. Of the m timed calls from `late_from` (at most min_samples: past the chosen call
    and the probes) to the one before the last, it keeps min(LATE_K, m) answers (as LATE_BYTES
    allows), each announced by an "@l" marker (`announced`), the first LATE_K always; none
    where late checks are off. A kernel that rewrote the harness's memory to skip them leaves
    a gap here."""
    late, n = report["late"], len(report["samples"])
    if not cbackend.late_checks(task, size):
        return (f"late calls' answers kept where none are asked for ({late})"
                if late or announced else None)
    start, probes = report.get("late_from"), report.get("probes")
    if start is None or not 0 < start <= max(config.min_samples, 1) or \
            (probes and start != max(probes) + 1):
        return (f"the late checks start at call {start} (past the probes {probes}, at most "
                f"{config.min_samples})")
    written = task.array_bytes(size, task.outputs)
    expect = min(cbackend.LATE_K, max(0, n - 1 - start), cbackend.LATE_BYTES // max(written, 1))
    if len(late) != expect or not set(late) <= announced or \
            not set(range(start, start + expect)) <= announced or \
            any(not start <= k < n - 1 for k in late):
        return (f"late calls' answers {late} (announced {sorted(announced)}), not {expect} "
                f"of calls {start}-{n - 2} as the harness keeps them")
    return None


def _verify_late(task: Task, size: dict, config: EvalConfig, inputs: cbackend.InputSets,
                 order: list[str], workdir: Path, rng: np.random.Generator, seed: int,
                 report: dict, announced: set[int]) -> tuple[tuple[str, str] | None, float]:
    """Check the late calls' answers (harness.c's late_keep) against the inputs the parent
    works out for them from `seed` (replay.py), not against anything the harness kept: from
    input set 1, or where probes drew inputs anew, from the last probe's snapshot. Returns
    ((message, details) or None, max err)."""
    late = report["late"]
    if why := _late_missing(task, size, config, report, announced):
        return (f"tampering: {why}", "the harness's late_K_I.bin files and result.txt"), 0.0
    if not late:
        return None, 0.0
    fresh = cbackend.fresh_inputs(task, size)
    changed = replay.changed_inputs(task, size, order, fresh)
    given_names = [n for n in order if task.arrays[n].role != "out"]
    probes = set(report.get("probes", [])) if fresh else set()
    after = max(probes) if probes else None  # (the late calls follow it: _late_missing)
    undo: list = []
    if after is None:  # set 1 itself, changed and put back after (a copy of a 128 MB matrix,
        # fresh memory on a VM, took longer than all of dgemv's late checks)
        base = {n: inputs.sets[0][n] for n in given_names}
    else:  # the last probe's inputs: every mode-3 element was drawn from the other stream
        snap = "chosen" if after == report["probe_order"][0] else "probe"
        base = {n: _load(workdir, f"snap_{snap}_in_{i}.bin" if task.arrays[n].role == "inout"
                         else f"snap_{snap}_{i}.bin", task.arrays[n].numpy, task.shape(n, size))
                for i, n in enumerate(order) if n in given_names}
    flat = {c.name: base[c.name].reshape(-1) for c in changed}
    max_error = 0.0
    try:
        for k in replay.late_call_inputs(seed, changed, flat, report["warmups"], probes, after,
                                         late, undo):
            got = {n: _load(workdir, f"late_{k}_{i}.bin", task.arrays[n].numpy,
                            task.shape(n, size))
                   for i, n in enumerate(order) if n in task.outputs}
            verdict, error = _verify(task, size, config,
                                     [(f"a late timed call ({k})", base, got)], rng, {})
            max_error = max(max_error, error)
            if verdict:
                return verdict, max_error
    finally:
        replay.undo_changes(undo)
    return None, max_error


_SCALE = {"element": "|expected|", "array": "max|expected|"}


def _verify(task: Task, size: dict, config: EvalConfig, checks: list,
            rng: np.random.Generator, refs: dict) -> tuple[tuple[str, str] | None, float]:
    """Compare each (label, inputs, outputs) with the reference. Returns ((message, details)
    or None, the largest error seen). `refs` keeps the input sets' reference outputs by label
    (the timed calls' perturbed inputs differ every time and are not kept)."""
    mode = config.verify or task.verify_mode
    limit = max(REFERENCE_MIN_SECONDS, REFERENCE_TIMEOUT_FACTOR * config.timeout)
    max_error = 0.0
    for label, ins, got in checks:
        if not label.endswith("input set"):
            ref = reference_outputs(task, ins, size, limit)
        else:
            if label not in refs:
                refs[label] = reference_outputs(task, ins, size, limit)
            ref = refs[label]
        for name, value in got.items():
            points = sample_points(value.shape, rng) if mode == "sampled" else None
            v = compare(name, value, ref[name], task.rtol, task.atol, points,
                        task.tolerance_scale)
            max_error = max(max_error, v.max_error)
            if not v.ok:
                return (f"wrong answer on {label}: {v.where}",
                        f"verification: {mode}; tolerance |got-expected| <= {task.atol:g} + "
                        f"{task.rtol:g}*{_SCALE[task.tolerance_scale]}"), max_error
    return None, max_error
