"""Where an evaluation's time goes: each phase of one C candidate, measured, not estimated.

    python benchmarks/eval_phases.py [--repeats 3] [--json [OUT]]

For the naive and the expert dgemm-256 kernel (distinct variants, cache off, one at a time on a
quiet machine), every phase of `perfgym.evaluate` is timed by wrapping the function that does
it for the length of the run (nothing in perfgym changes): the machine probe's lookup, the
cache key, extraction and the source audit, the work directory, the harness objects, the
sandboxed compile and link, the object and preprocessed-source audits, inputs and manifest,
the check call (sandboxed) and its verification, the lane wait and the timed run (sandboxed),
the neighbour reads, the verification of both input sets, the clock cross-check, the cleanup.
The timed run is split further by the harness's own report: the kernel's calls (warm-ups and
samples) against the rest of the run (process and sandbox start, loading inputs, writing
outputs). What no wrapper covers is "other". The first variant also times the naive kernel for
its speedup, which the next ones share for 30 s (evaluate.recent_baseline), as a stream of
candidates does: the medians over 3 or more variants are the steady state. The floor
(benchmarks/eval_throughput.py): plain gcc of the same file with a bare driver, run once for as
many calls as perfgym made.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import phase_timer  # noqa: E402
from results_by_machine import json_flag, record  # noqa: E402

# (module, attribute, phase): a phase is the time spent inside the attribute while it is
# called from perfgym's own modules (each patched where the caller looks it up)
WRAPPED = [
    # with the cache off, finish() times the naive kernel again for the speedup (a baseline
    # timed on a busy machine must not outlive the load): its own phases are not split
    ("perfgym.evaluate", "baseline", "baseline: the naive kernel evaluated again"),
    ("perfgym.evaluate", "cache_key", "cache key"),
    ("perfgym.machine", "machine_info", "machine probe lookup"),
    ("perfgym.backends.c", "extract_code", "extract"),
    ("perfgym.backends.c", "check_source", "source audit"),
    ("perfgym.backends.c", "detect_techniques", "technique detection"),
    ("perfgym.sandbox", "make_workdir", "work directory"),
    ("perfgym.backends.c.build", "harness_objects", "build: harness objects (cached)"),
    ("perfgym.backends.c.build", "inspect_object", "build: object inspection (objdump)"),
    ("perfgym.backends.c.build", "audit_preprocessed", "build: preprocessed-source audit"),
    ("perfgym.backends.c.build._PreprocessedAudit", "verdict",
     "build: waiting for the preprocessed-source audit"),
    # the timed run's process is started beside the check call and told to go in the lane:
    # from the word to its end is the timed run
    ("perfgym.backends.c.prestart.PrestartedRun", "wait", "timed run (sandboxed)"),
    ("perfgym.backends.c.build", "audit_object", "build: object audit"),
    ("perfgym.backends.c.build", "make_inputs", "inputs"),
    ("perfgym.backends.c.build", "write_manifest", "manifest"),
    ("perfgym.backends.c.measure", "_verify", "verification (reference and compare)"),
    ("perfgym.backends.c.neighbours", "snapshot", "neighbour reads"),
    ("perfgym.backends.c.measure", "cross_check", "clock cross-check"),
    ("perfgym.backends.c.CBackend", "cleanup", "cleanup"),
]
# Phases that run in a thread of their own beside another phase (the audit of the .i runs while
# gcc compiles): shown, but not part of the sum; the wait for their result is a phase.
STARTED_BESIDE = "timed run's process, started beside the check call until told to go"
BESIDE = {"build: preprocessed-source audit", STARTED_BESIDE}
# perfgym.sandbox.run is split by what it runs
SANDBOX_RUNS = {"sh": "build: compile and link (sandboxed)", "check": "check call (sandboxed)",
                "go": STARTED_BESIDE, "run": "timed run (sandboxed)"}


class Phases(phase_timer.Phases):
    def wrap_sandbox(self, fn):
        """perfgym.sandbox.run, its phase named by what it runs."""
        def timed(argv, *args, **kwargs):
            label = (SANDBOX_RUNS["sh"] if argv[0] == "sh" else
                     SANDBOX_RUNS["check"] if "check" in argv else
                     SANDBOX_RUNS["go"] if "go" in argv else SANDBOX_RUNS["run"])
            return self.wrap(fn, label)(argv, *args, **kwargs)
        return timed


@contextmanager
def recording(phases: Phases):
    import perfgym.sandbox as sandbox
    from perfgym.lane import LANE
    with ExitStack() as undo:
        patch = phase_timer.patcher(undo)
        phase_timer.wrap_each(phases, patch, WRAPPED)
        patch(sandbox, "run", phases.wrap_sandbox(sandbox.run))
        # the lane's exclusive wait: the timed run's total minus what ran inside it
        exclusive = LANE.exclusive

        @contextmanager
        def timed_exclusive():
            start, outer = time.perf_counter(), phases.depth == 0
            with exclusive():
                if outer:  # (not the baseline's own wait, inside its phase)
                    phases.seconds["lane wait"] += time.perf_counter() - start
                yield
        patch(LANE, "exclusive", timed_exclusive)
        yield


def breakdown(task, text: str, config) -> tuple[dict[str, float], float, object]:
    """(seconds per phase, total seconds, outcome) of one evaluation."""
    from perfgym import evaluate
    phases = Phases()
    with recording(phases):
        start = time.perf_counter()
        outcome = evaluate(task, text, None, config)
        total = time.perf_counter() - start
    seconds = dict(phases.seconds)
    if outcome.ok and outcome.timing:  # the kernel's own calls inside the timed run
        t = outcome.timing
        kernel = sum(t.samples) + t.warmups * t.median  # (warm-ups are not timed one by one)
        run = seconds.get(SANDBOX_RUNS["run"], 0.0)
        seconds["timed run: the kernel's calls"] = kernel
        seconds["timed run: the rest (start, inputs, outputs)"] = max(run - kernel, 0.0)
        seconds.pop(SANDBOX_RUNS["run"], None)
    seconds["other"] = max(total - sum(v for k, v in seconds.items() if k not in BESIDE), 0.0)
    return seconds, total, outcome


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="variants per kernel (medians)")
    json_flag(ap, "eval_phases")
    args = ap.parse_args()

    from eval_throughput import floor_seconds, variants

    from perfgym import EvalConfig, evaluate, get_task
    task = get_task("dgemm")
    cfg = EvalConfig(use_cache=False)
    n = task.default_size["M"]
    evaluate(task, task.baseline.read_text(), None, cfg.replace(use_cache=True))  # machine once
    result = {}
    for name, code in (("naive", task.baseline.read_text()), ("expert", task.expert.read_text())):
        runs, totals, floors = [], [], []
        for text in variants(code, args.repeats):
            seconds, total, o = breakdown(task, text, cfg)
            assert o.ok, o.message
            runs.append(seconds)
            totals.append(total)
            floors.append(floor_seconds(text, n, 3 + o.timing.warmups + len(o.timing.samples)))
        labels = list(dict.fromkeys(k for r in runs for k in r))
        med = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in labels}
        result[name] = {"total_s": statistics.median(totals), "floor_s": statistics.median(floors),
                        "phases_s": med}
    if args.json:
        record("eval_phases", result, summary(result), args.json)
    for name, r in result.items():
        print(f"\n{name} dgemm-256: perfgym {r['total_s']:.3f} s, floor {r['floor_s']:.3f} s "
              f"({r['total_s'] / r['floor_s']:.2f}x); median of {args.repeats} variants")
        for label, s in sorted(r["phases_s"].items(), key=lambda kv: -kv[1]):
            beside = " (beside other phases: not in the total)" if label in BESIDE else ""
            print(f"  {s * 1e3:8.1f} ms  {s / r['total_s']:6.1%}  {label}{beside}")


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    return {f"{name}: total (over the floor)":
            f"{r['total_s'] * 1e3:.0f} ms ({r['total_s'] / r['floor_s']:.2f}x)"
            for name, r in result.items()}


if __name__ == "__main__":
    main()
