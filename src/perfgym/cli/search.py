"""`perfgym search`: a model in the loop, every candidate in the run store. The flags are
declared in search_flags.py and resolved into a plan in search_plan.py; here the plan runs."""
from __future__ import annotations

import json
import sys

from rich.table import Table

from .. import machine as machine_mod
from .. import sandbox
from ..config import EvalConfig
from ..tasks import format_size, get_task
from .common import UserError, _guard, app, console, err_console
from .memory import _open_memory
from .search_flags import SearchFlags, command_signature
from .search_plan import SearchPlan, plan_search, resumed


class _LiveView:
    """Iteration (a climb's round), candidates evaluated, best GFLOP/s so far and its speedup
    over naive, the time spent and the status mix, kept current."""

    def __init__(self, enabled: bool) -> None:
        import time

        from rich.live import Live
        self.counts: dict[str, int] = {}
        self.best: float | None = None
        self.best_speedup: float | None = None
        self.iteration = 0
        self.started = time.monotonic()
        self.live = Live(self._render(), console=err_console, refresh_per_second=4,
                         transient=False) if enabled else None

    def _render(self):
        import time
        table = Table("iteration", "evaluated", "best GFLOP/s", "x naive", "minutes",
                      "status mix")
        table.add_row(str(self.iteration), str(sum(self.counts.values())),
                      f"{self.best:.2f}" if self.best else "-",
                      f"{self.best_speedup:.2f}" if self.best_speedup else "-",
                      f"{(time.monotonic() - self.started) / 60:.1f}",
                      " ".join(f"{k}:{v}" for k, v in sorted(self.counts.items())))
        return table

    def update(self, candidate) -> None:
        self.iteration = candidate.iteration
        self.counts[candidate.status] = self.counts.get(candidate.status, 0) + 1
        if candidate.ok and candidate.gflops and (self.best is None or candidate.gflops > self.best):
            self.best = candidate.gflops
            self.best_speedup = (candidate.outcome or {}).get("speedup")
        if self.live:
            self.live.update(self._render())

    def __enter__(self):
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.live.stop()


def search_cmd(**given) -> None:
    """Search for fast kernels with a model in the loop; every candidate goes to the run store."""
    import os
    from ..policies import default_local_policy
    sandbox.sweep_stale()  # what killed drivers left behind (a --resume after a kill too)
    flags = SearchFlags(**given)
    plan = plan_search(flags, get_task(flags.task), default_local_policy(),
                       server_in_env=bool(os.environ.get("OPENAI_BASE_URL")))
    plan, kernel_memory = _prepare(plan)
    pol = _make_policy(plan)
    store, best, fastest, confirmed = _run(plan, pol, kernel_memory)
    _print_result(plan, store, best, fastest, confirmed)


search_cmd.__signature__ = command_signature()  # typer reads the options from SearchFlags
app.command("search")(_guard(search_cmd))


def _prepare(plan: SearchPlan) -> tuple[SearchPlan, object]:
    """What the plan needs from this machine, checked before anything runs: the model's
    identity, the run directory (a new one, or the run to resume with the same settings), the
    prompt templates and the kernel memory."""
    from ..models import ModelUnavailable, model_identity
    from ..store import RunStore
    f = plan.flags
    if plan.local:  # which weights, exactly: name, size and SHA-256
        try:
            plan.config["model_id"] = model_identity(plan.model_path)
        except (ModelUnavailable, OSError) as exc:
            raise UserError(str(exc)) from None
    if f.run_dir.exists() and not f.run_dir.is_dir():
        raise UserError(f"--run-dir {f.run_dir} is a file: give a directory (new or a run's)")
    if RunStore.exists(f.run_dir) and not f.resume:
        raise UserError(f"{f.run_dir} already holds a run: pass --resume to continue it or "
                        "choose another --run-dir")
    if f.templates is not None and not f.templates.is_dir():
        raise UserError(f"--templates {f.templates} is not a directory")
    if plan.policy == "replay" and f.replay is None:
        raise UserError("the replay policy needs --replay FILE")
    kernel_memory = _open_memory(f.memory) if f.memory is not None else None
    if f.resume and RunStore.exists(f.run_dir):
        previous = RunStore(f.run_dir)
        started_with = previous.config()
        previous.close()
        plan = resumed(plan, started_with)
    return plan, kernel_memory


def _make_policy(plan: SearchPlan):
    """The model, loaded before the run store is made: one that cannot load leaves no
    half-made run behind."""
    import os
    from ..policies import PolicyError, make_policy
    f = plan.flags
    if f.seed is not None and plan.policy == "openai":  # its requests' seeds come from `random`
        import random
        random.seed(f.seed)
    try:
        return make_policy(plan.policy, model=f.model, base_url=f.base_url,
                           api_key=os.environ.get(f.api_key_env), model_path=plan.model_path,
                           path=f.replay, concurrency=f.concurrency,
                           **({"seed": f.seed} if f.seed is not None else {}))
    except (PolicyError, ValueError) as exc:
        raise UserError(str(exc)) from None


def _algorithm(plan: SearchPlan, engine):
    """The search the plan names, over `engine`."""
    from ..search import SQD, BestOfN, Climb, Evolve, Refine, SQDConfig
    f = plan.flags
    if plan.algo == "sqd":
        return SQD(engine, SQDConfig(plan.iterations, f.g, plan.ratios, plan.stages,
                                     restarts=plan.restarts,
                                     budget_seconds=plan.budget_seconds))
    if plan.algo == "climb":
        return Climb(engine, plan.climb)
    if plan.algo == "refine":
        return Refine(engine, f.turns, f.chains, f.stage)
    if plan.algo == "evolve":
        return Evolve(engine, plan.evolve)
    return BestOfN(engine, f.n, f.stage)


def _run(plan: SearchPlan, pol, kernel_memory):
    """Run the search into a new (or resumed) run store, then judge its best: right at the
    train sizes, at the held-out sizes, and timed again against naive. Returns the store, the
    best, the fastest (which may be wrong elsewhere) and the confirmation."""
    from ..policies import PolicyError
    from ..search import Engine
    from ..search.climb import SeedFailed
    from ..search.general import general_best
    from ..store import RunStore
    f = plan.flags
    store = RunStore(f.run_dir)
    store.set_config(plan.config)
    with _LiveView(not f.as_json and sys.stderr.isatty()) as view:
        engine = Engine(store, pol, plan.task,
                        EvalConfig(opt=f.opt, profile=plan.profilers, threads=f.threads),
                        f.reward, plan.sampling, machine_mod.machine_info(),
                        on_result=view.update, templates=plan.templates, sizes=plan.size_set,
                        answer_start=plan.answer_start, group_timing=f.group_timing,
                        max_candidates=f.max_candidates)
        if kernel_memory is not None:
            engine.memory, engine.memory_k = kernel_memory, f.memory_k
        if f.ray_address:
            from ..executors.ray_executor import RayExecutor
            engine.executor = RayExecutor(f.ray_address).evaluate_many
        if plan.algo in ("refine", "best-of-n", "evolve") and plan.budget_seconds:
            import time  # (SQD and the climb fit their draws and rounds to it themselves)
            engine.deadline = time.monotonic() + plan.budget_seconds
        try:
            best = _algorithm(plan, engine).run()
        except PolicyError as exc:
            raise UserError(f"{exc} (the run is saved; rerun with --resume)") from None
        except SeedFailed as exc:
            raise UserError(f"{exc}; check the task with perfgym eval --sizes train") from None
        fastest = best
        with err_console.status("checking the fastest kernels at the task's train sizes"):
            best = general_best(engine, best)  # the result: right at other sizes too
        if f.heldout:
            from ..search.heldout import judge_heldout
            judge_heldout(engine, best)
        confirmed = _confirm_best(engine, best, remote=bool(f.ray_address))
    store.event("search_done")
    return store, best, fastest, confirmed


def _print_result(plan: SearchPlan, store, best, fastest, confirmed) -> None:
    """The result: as JSON with --json, else the answers' counts, why none passed, the best
    and its confirmation, and where the report is."""
    from ..report import write_plots, write_summary
    from ..report.causes import lines as cause_lines, next_step, run_causes
    from ..search.climb import stop_line
    from ..search.general import passed_over
    run_dir = plan.flags.run_dir
    stopped = stop_line(store)
    report = write_summary(store, run_dir / "report", write_plots(store, run_dir / "report"))
    counts = answer_counts(store, plan.task)
    causes = run_causes(store)
    over = passed_over(store)
    if plan.flags.as_json:
        print(json.dumps({"run_dir": str(run_dir), "best": best.outcome if best else None,
                          "best_id": best.id if best else None, "confirmed": confirmed,
                          "passed_over": over,
                          "fastest": ({"id": fastest.id, **fastest.outcome}
                                      if fastest is not None
                                      and (best is None or fastest.id != best.id)
                                      else None),
                          "answers": counts, "stopped_early": stopped,
                          "failure_causes": dict(causes.most_common()),
                          "next_step": next_step(causes) if not counts["passed"] else None},
                         indent=2))
        return
    console.print(f"answers: {counts['answers']}; {counts['parsed']} parsed, {counts['compiled']}"
                  f" compiled, {counts['passed']} passed", highlight=False)
    if stopped:
        console.print(stopped, highlight=False)
    if counts["answers"] and not counts["passed"]:  # say why, and what to try
        console.print("why none passed:", highlight=False)
        for line in cause_lines(causes):
            console.print("  " + line, highlight=False)
    for row in over:  # faster at the search's size, wrong at another
        console.print(f"passed over: #{row['candidate']}, wrong at the task's train sizes: "
                      f"{row['message']}", highlight=False)
    if best is None:
        console.print(f"no correct kernel yet; the run is in {run_dir}", highlight=False)
    else:
        console.print(f"best: #{best.id} (iteration {best.iteration}, stage {best.stage}) "
                      f"{best.outcome['message']}", highlight=False)
        if confirmed:
            console.print(_confirmed_line(confirmed), highlight=False)
    console.print(f"run store: {store.path}; report: {report}", style="dim", highlight=False)


def _confirm_best(engine, best, remote: bool) -> dict | None:
    """The best kernel timed again against the naive one, in interleaved runs on this machine
    (group_timing.confirm_against_baseline): the speedup the run reports as its result. None
    where it cannot be: no correct kernel, a cluster's run, a size set without the task's
    default size, a PyTorch task (whose reference is already timed beside it, call by call).
    It is timed at the task's default size, also when the search judged a size set."""
    from ..backends import backend_for
    from ..group_timing import ROUNDS, confirm_against_baseline
    from ..outcome import Outcome
    if best is None or best.outcome is None:
        return None
    if best.op == "seed":
        return {"seed": True}
    if remote or not backend_for(engine.task).separate_baseline:
        return None
    size = engine.task.default_size
    if engine.sizes is not None and size not in engine.sizes:
        return None  # (its speedups are at other sizes: another figure)
    with err_console.status("timing the best kernel against the naive one "
                            f"({ROUNDS} interleaved rounds)"):
        o = confirm_against_baseline(engine.task, best.completion,
                                     Outcome.from_dict(best.outcome),
                                     engine.eval_config.replace(stage=best.stage))
    if not o.ok:  # a kernel that passed once and fails again is judged by the failure
        result = {"status": o.status.value, "message": o.message}
    elif "group_timed" not in o.flags:  # (the baseline failed to run: nothing to pair with)
        return None
    else:
        result = {"speedup": o.speedup, "speedup_low": o.speedup_low, "rounds": ROUNDS,
                  "faster": bool(o.speedup_low and o.speedup_low > 1), "size": size}
    engine.store.event("best_confirmed", candidate=best.id, **result)
    return result


def _confirmed_line(confirmed: dict) -> str:
    if confirmed.get("seed"):
        return "the best is the seed, the naive kernel itself: no answer was faster"
    if "status" in confirmed:
        return f"timed again against the naive kernel, it failed: {confirmed['message']}"
    verdict = ("faster than naive" if confirmed["faster"] else
               "not shown faster than naive")
    at = f" at {format_size(confirmed['size'])}" if "size" in confirmed else ""
    return (f"timed again against the naive kernel{at} in {confirmed['rounds']} interleaved runs: "
            f"{confirmed['speedup']:.2f}x naive, at least {confirmed['speedup_low']:.2f}x at 95% "
            f"({verdict})")


def answer_counts(store, task) -> dict[str, int]:
    """How far the run's answers got: parsed (a kernel in them), compiled, passed (OK)."""
    from ..outcome import Status
    compiled = {s.value for s in (Status.TIMEOUT, Status.RUNTIME_ERROR, Status.WRONG_ANSWER,
                                  Status.OK)}
    counts = {"answers": 0, "parsed": 0, "compiled": 0, "passed": 0}
    for c in store.candidates():
        if c.outcome is None or c.op == "seed":  # the task's own kernel, not an answer
            continue
        status = c.outcome.get("status")
        counts["answers"] += 1
        counts["parsed"] += status != Status.FORMAT_ERROR.value
        counts["compiled"] += status in compiled
        counts["passed"] += status == Status.OK.value
    return counts
