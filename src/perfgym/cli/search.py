"""`perfgym search`: a model in the loop, every candidate in the run store."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .. import machine as machine_mod
from .. import sandbox
from ..config import EvalConfig
from ..rewards import SCHEMES
from ..tasks import format_size, get_task
from .common import PROFILERS_HELP, PROFILE_HELP, UserError, _guard, app, console, err_console
from .eval_cmd import _profile
from .memory import _open_memory
from ..search.climb import TRANSFORMS, ClimbConfig, SeedFailed, climbs

ALGOS = ("climb", "sqd", "refine", "best-of-n", "evolve")

# The no-flag search's SQD draws (restarts) and the time they may take: the goal is a result
# within 15 minutes, and the held-out sizes and the confirmation take about a minute more. The
# budget, not the count, ends the draws: a draw that finds nothing is the short one.
NO_FLAG_RESTARTS = 12
NO_FLAG_BUDGET_MINUTES = 12.0
# SQD's shares (deepen, improve, repair). The no-flag search repairs nothing: the coder's
# repairs fixed 0 of 64 wrong kernels, and a draw that finds nothing is then 16 answers, not
# 36, so the budget holds more draws, each with its 12 improves of the seed, where its fast
# kernels come from (docs/models/coder.md)
RATIOS = "0.4,0.3,0.3"
NO_FLAG_RATIOS = "0.4,0.3,0"
# Every answer of the no-flag search is judged at the task's train sizes (odd, prime and
# non-multiple sizes), so a kernel right at one size alone is no parent: every correct kernel
# of three searches judged at dgemm-256 alone ran past the arrays at other sizes
NO_FLAG_SIZES = "train"


# The config keys the no-flag search sets ("ratios" is in every config, the others only where
# they are set)
NO_FLAG_KEYS = ("ratios", "restarts", "budget_minutes", "sizes")


def sqd_defaults(no_flag: bool, ratios: str | None, restarts: int | None,
                 budget_minutes: float | None) -> tuple[str, int, float | None]:
    """SQD's ratios, restarts and budget where no flag set them: the no-flag search's own
    (above) when `no_flag`, else one draw with repairs."""
    if ratios is None:
        ratios = NO_FLAG_RATIOS if no_flag else RATIOS
    if restarts is None:
        restarts = NO_FLAG_RESTARTS if no_flag else 1
        if no_flag and budget_minutes is None:
            budget_minutes = NO_FLAG_BUDGET_MINUTES
    return ratios, restarts, budget_minutes


def as_started(config: dict, started_with: dict) -> dict:
    """`config` with the no-flag settings a resumed no-flag run was started with, whatever the
    no-flag defaults are now (a run from before restarts has none: one draw)."""
    kept = {k: v for k, v in config.items() if k not in NO_FLAG_KEYS}
    kept.update({k: started_with[k] for k in NO_FLAG_KEYS if k in started_with})
    return kept


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


@app.command("search")
@_guard
def search_cmd(
    task: str = typer.Option("dgemm", "--task", "-t", help="built-in task name or task directory"),
    algo: Optional[str] = typer.Option(None, help="climb, sqd, refine, best-of-n or evolve "
                                       "(default: climb for the no-flag search of a C or "
                                       "C++ task, else sqd)"),
    policy: Optional[str] = typer.Option(None, help="openai, hf, openvino or replay (default: "
                                         "openai when --model, --base-url or $OPENAI_BASE_URL "
                                         "is set, replay with --replay, else the local model: "
                                         "openvino, the fast CPU engine, when installed, "
                                         "else hf)"),
    model: Optional[str] = typer.Option(None, help="model name (openai policy)"),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible server URL "
                                           "(default: $OPENAI_BASE_URL)"),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="environment variable with the key"),
    model_path: Optional[Path] = typer.Option(None, help="hf/openvino policy: a model name "
                                              "(coder, smollm2), a model or adapter directory "
                                              "or a .gguf (default: coder, Qwen2.5-Coder-1.5B-"
                                              "Instruct, fetched once: 1.1 GB)"),
    replay: Optional[Path] = typer.Option(None, help="JSONL of completions (replay policy)"),
    run_dir: Path = typer.Option(Path("runs/latest"), help="where the run store lives"),
    resume: bool = typer.Option(False, help="continue the run in --run-dir"),
    iterations: Optional[int] = typer.Option(None, help="SQD iterations (default 3; 1 with "
                                             "the local default model, a short first run); "
                                             "climb: rounds at most"),
    g: int = typer.Option(4, "--G", help="children per node (SQD); answers per transform "
                          "per round (climb)"),
    transforms: str = typer.Option(",".join(TRANSFORMS), help="climb: the textbook "
                                   "transforms a round asks for"),
    restarts: Optional[int] = typer.Option(None, help="SQD: run the iterations again from the "
                                           "seed up to this many times, a new draw each; the "
                                           "best of all is the result (default 1; as many "
                                           "as --budget-minutes 12 holds when no flag sets "
                                           "the model, --iterations or --max-candidates)"),
    budget_minutes: Optional[float] = typer.Option(None, help="SQD: start a restart only while "
                                                   "the time spent plus the longest restart "
                                                   "yet fits this many minutes; climb: the "
                                                   "same for its rounds (default 12 in the "
                                                   "no-flag search)"),
    ratios: Optional[str] = typer.Option(None, help=f"SQD top,middle,error shares (default "
                                         f"{RATIOS}; {NO_FLAG_RATIOS} when no flag sets the "
                                         "model, --iterations or --max-candidates)"),
    stages: str = typer.Option("1,2,3,4,5,6", help="SQD stages"),
    n: int = typer.Option(8, help="samples (best-of-n)"),
    turns: int = typer.Option(4, help="turns per chain (refine)"),
    chains: int = typer.Option(1, help="parallel chains (refine)"),
    stage: Optional[int] = typer.Option(None, help="stage rules for refine / best-of-n / "
                                        "evolve"),
    sizes: Optional[str] = typer.Option(None, help="judge every candidate on a size set of "
                                        "the task: default or train (folded: the worst status, "
                                        "geometric-mean rates; default: the default size)"),
    heldout: bool = typer.Option(True, help="at the end, judge the best kernels on the task's "
                                 "held-out sizes (for the report)"),
    islands: int = typer.Option(2, help="islands (evolve)"),
    generations: int = typer.Option(4, help="generations (evolve)"),
    children: int = typer.Option(4, help="children per island per generation (evolve)"),
    migrate_every: int = typer.Option(2, help="generations between migrations (evolve; 0: "
                                      "never)"),
    migrants: int = typer.Option(1, help="elites each island sends the next (evolve)"),
    features: str = typer.Option("techniques,roofline", help="archive axes (evolve): "
                                 "techniques, roofline, code_size"),
    crossover: float = typer.Option(0.25, help="share of children with two parents (evolve)"),
    exploit: float = typer.Option(0.7, help="share of parents that are the island's best, "
                                  "not a random elite (evolve)"),
    reward: str = typer.Option("tiered", help=f"reward scheme: {', '.join(SCHEMES)}"),
    opt: str = typer.Option("O3", help="optimization level of the benchmark"),
    group_timing: bool = typer.Option(False, "--group-timing", help="time each group's "
                                      "correct children against each other and the baseline "
                                      "in interleaved rounds (5) before ranking them"),
    threads: Optional[int] = typer.Option(None, help="OpenMP threads each kernel runs with "
                                          "(default: every core; 1 judges single-thread "
                                          "speed, steadier on a busy machine)"),
    temperature: Optional[float] = typer.Option(None, help="sampling temperature (default "
                                                "1.0; the local default model: measured, "
                                                "see the docs)"),
    top_k: Optional[int] = typer.Option(None, help="sample from the k likeliest tokens (0: "
                                        "off; default 40)"),
    top_p: Optional[float] = typer.Option(None, help="nucleus sampling (1: off; default 0.95)"),
    min_p: Optional[float] = typer.Option(None, help="drop tokens below this share of the "
                                          "likeliest (0: off; default 0.05)"),
    repetition_penalty: float = typer.Option(1.0, help="penalize repeating generated tokens "
                                             "(the prompt is spared; 1: off)"),
    max_tokens: Optional[int] = typer.Option(None, help="tokens per completion (default 2048; "
                                             "the local default model: 256)"),
    answer_start: Optional[bool] = typer.Option(
        None, "--answer-start/--no-answer-start", help="perfgym writes the start of each "
        "answer (fence, includes, the entry's signature) and the model writes the body "
        "(default: on for the local default model)"),
    grammar: Optional[bool] = typer.Option(
        None, "--grammar/--no-grammar", help="constrain an opened answer's body to balanced "
        "braces ending at the entry's brace (openvino policy; default: measured for the "
        "default model)"),
    concurrency: int = typer.Option(8, help="requests in flight (openai policy)"),
    templates: Optional[Path] = typer.Option(None, help="directory of prompt templates "
                                             "(generate.txt, improve.txt, ...) overriding ours"),
    ray_address: Optional[str] = typer.Option(None, help="evaluate on this Ray cluster's "
                                              "benchmark nodes"),
    memory: Optional[Path] = typer.Option(None, help="a kernel memory (`perfgym memory`): "
                                          "prompts show its kernels of similar tasks"),
    memory_k: int = typer.Option(3, help="how many memory kernels a prompt shows"),
    as_json: bool = typer.Option(False, "--json", help="print the best candidate as JSON"),
    profile: bool = typer.Option(False, "--profile", help=PROFILE_HELP + "; improve and "
                                 "repair prompts carry the lines"),
    profilers: Optional[str] = typer.Option(None, help=PROFILERS_HELP),
    seed: Optional[int] = typer.Option(None, help="seed of the sampler (local policies; "
                                       "openai: the requests' seeds) and of evolve's plan: "
                                       "the same seed repeats a run as far as the sampler does "
                                       "(default: 0 locally, random requests' seeds on a "
                                       "server)"),
    max_candidates: Optional[int] = typer.Option(None, help="stop after this many candidates "
                                                 "besides the seed, whatever the algorithm "
                                                 "plans (equal-budget comparisons)"),
) -> None:
    """Search for fast kernels with a model in the loop; every candidate goes to the run store."""
    import os
    from ..policies import PolicyError, default_local_policy, make_policy
    from ..search import SQD, BestOfN, Climb, Engine, Evolve, EvolveConfig, Refine, SQDConfig
    from ..store import RunStore

    sandbox.sweep_stale()  # what killed drivers left behind (a --resume after a kill too)
    if algo not in (None, *ALGOS):
        raise UserError(f"algorithm {algo!r} is not one of {', '.join(ALGOS)}")
    try:
        evolve_config = EvolveConfig(generations, islands, children, migrate_every, migrants,
                                     tuple(f.strip() for f in features.split(",")),
                                     exploit=exploit, crossover=crossover, stage=stage,
                                     seed=seed or 0)
    except ValueError as exc:
        raise UserError(f"evolve options: {exc}") from None
    if policy is None:
        policy = ("replay" if replay else "openai" if model or base_url or
                  os.environ.get("OPENAI_BASE_URL") else default_local_policy())
    from ..models import (ModelUnavailable, default_sampling, is_named, model_identity,
                          model_title, prompt_templates, search_default_model)
    local = policy in ("hf", "openvino")
    if local and model_path is None:  # no flag names a model: the measured choice
        model_path = Path(search_default_model())
    # a named local model (none given: the default) samples and opens as measured for it
    local_default = local and is_named(model_path)
    measured = default_sampling(model_path) if local_default else None
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
             "max_tokens": max_tokens}
    chosen = {**(measured if local_default else
                 {"temperature": 1.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                  "max_tokens": 2048}),
              **{k: v for k, v in given.items() if v is not None}}
    temperature, top_k, top_p, min_p, max_tokens = (
        chosen["temperature"], chosen["top_k"], chosen["top_p"], chosen["min_p"],
        chosen["max_tokens"])
    if answer_start is None:
        answer_start = local_default
    if grammar is None:
        grammar = bool(local_default and policy == "openvino" and measured["grammar"])
    if grammar and not (answer_start and policy == "openvino"):
        raise UserError("--grammar constrains opened answers on the openvino policy: add "
                        "--answer-start and --policy openvino, or drop --grammar")
    if answer_start and policy == "replay":
        raise UserError("--answer-start: replayed answers are whole answers already; drop it")
    # the no-flag search: a search's best is one draw with a wide spread (1.00-4.75x over
    # seeds on dgemm), so SQD draws again from the seed while its time budget has room
    # (docs/models/coder.md)
    no_flag = (local_default and str(model_path) != "smollm2" and iterations is None
               and max_candidates is None)
    t = get_task(task)
    if algo is None:  # the no-flag search climbs (docs/commands/search.md)
        algo = "climb" if no_flag and climbs(t) else "sqd"
    if algo == "climb" and not climbs(t):
        raise UserError(f"--algo climb asks for loop transforms of a C or C++ kernel; task "
                        f"{t.name} is a PyTorch problem: use --algo sqd")
    no_flag_sqd = no_flag and algo == "sqd"
    if algo == "climb" and budget_minutes is None and no_flag:
        budget_minutes = NO_FLAG_BUDGET_MINUTES
    restarts_by_default = restarts is None and budget_minutes is None
    ratios_by_default = ratios is None
    ratios, restarts, budget_minutes = sqd_defaults(no_flag_sqd, ratios, restarts,
                                                    budget_minutes)
    if algo != "sqd" and restarts != 1:
        raise UserError("--restarts are SQD's: add --algo sqd or drop them")
    if algo not in ("sqd", "climb") and budget_minutes is not None:
        raise UserError("--budget-minutes is SQD's and climb's: add --algo climb or drop it")
    if restarts < 1 or (budget_minutes is not None and budget_minutes <= 0):
        raise UserError("--restarts is at least 1 and --budget-minutes above 0")
    if iterations is None:  # the 135M model: a short first run; a climb: its budget ends it
        iterations = (ClimbConfig.rounds if algo == "climb" else
                      1 if local_default and str(model_path) == "smollm2" else 3)
    if not (0 < top_p <= 1 and 0 <= min_p < 1 and top_k >= 0 and repetition_penalty > 0):
        raise UserError("--top-p is in (0, 1], --min-p in [0, 1), --top-k >= 0 and "
                        "--repetition-penalty > 0")
    if not (temperature >= 0 and max_tokens >= 1 and concurrency >= 1):
        raise UserError("--temperature is at least 0, --max-tokens and --concurrency at least 1")
    if min(n, turns, chains) < 1:
        raise UserError("--n, --turns and --chains are at least 1")
    sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
                "repetition_penalty": repetition_penalty, "max_tokens": max_tokens}
    if grammar:  # (absent otherwise: runs from before the option resume as they were)
        sampling["grammar"] = True
    if reward not in SCHEMES:
        raise UserError(f"reward scheme {reward!r} is not one of {', '.join(SCHEMES)}")
    sizes_by_default = sizes is None
    # a climb keeps a step only when it holds at every train size; so does the no-flag SQD
    if (sizes is None and (no_flag_sqd or algo == "climb") and not group_timing
            and not ray_address
            and len(t.sizes("train")) > 1):
        sizes = NO_FLAG_SIZES
    try:
        ratio_values = tuple(float(x) for x in ratios.split(","))
        stage_values = tuple(int(x) for x in stages.split(","))
    except ValueError:
        raise UserError("--ratios takes three numbers and --stages integers, comma-separated")
    size_set = _search_sizes(t, sizes)
    # the model's name, for the report: the default model when no model was given
    model_name = model or (model_title(model_path) if local else None)
    config = {"task": t.name, "algo": algo, "policy": policy, "model": model_name,
              "iterations": iterations, "G": g, "ratios": list(ratio_values),
              "stages": list(stage_values), "n": n, "turns": turns, "chains": chains,
              "stage": stage, "reward": reward, "opt": opt, "sampling": sampling}
    profilers = _profile(profile, profilers)
    if profilers:  # (a run without profiling keeps the config it was started with)
        config["profile"] = list(profilers)
    if sizes is not None:  # (absent otherwise: runs from before the option resume as they were)
        config["sizes"] = sizes
    if group_timing:  # (likewise)
        if ray_address or sizes is not None:
            raise UserError("--group-timing times groups on this machine at the default size: "
                            "drop --ray-address and --sizes, or --group-timing")
        config["group_timing"] = True
    if threads is not None:  # (likewise)
        if threads < 1:
            raise UserError(f"--threads is at least 1, not {threads}")
        config["threads"] = threads
    if answer_start:
        config["answer_start"] = True
    if local:  # which weights, exactly: name, size and SHA-256
        try:
            config["model_id"] = model_identity(model_path)
        except (ModelUnavailable, OSError) as exc:
            raise UserError(str(exc)) from None
    if seed is not None:  # (absent otherwise: runs from before the option resume as they were)
        config["seed"] = seed
    if algo == "sqd" and (restarts > 1 or budget_minutes is not None):  # (likewise)
        config.update(restarts=restarts, budget_minutes=budget_minutes)
    if algo == "climb":
        try:
            climb_config = ClimbConfig(tuple(x.strip() for x in transforms.split(",")),
                                       samples=g, rounds=iterations,
                                       budget_seconds=(budget_minutes * 60
                                                       if budget_minutes else None))
        except ValueError as exc:
            raise UserError(f"climb options: {exc}") from None
        config["climb"] = {"transforms": list(climb_config.transforms),
                           "budget_minutes": budget_minutes}
    if max_candidates is not None:  # (likewise)
        if max_candidates < 1:
            raise UserError(f"--max-candidates is at least 1, not {max_candidates}")
        config["max_candidates"] = max_candidates
    if algo == "evolve":  # (a run started before evolve existed keeps its config as it was)
        config["evolve"] = {"islands": islands, "generations": generations,
                            "children": children, "migrate_every": migrate_every,
                            "migrants": migrants, "features": list(evolve_config.features),
                            "crossover": crossover, "exploit": exploit}
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--run-dir {run_dir} is a file: give a directory (new or a run's)")
    if RunStore.exists(run_dir) and not resume:
        raise UserError(f"{run_dir} already holds a run: pass --resume to continue it or choose "
                        "another --run-dir")
    if templates is not None and not templates.is_dir():
        raise UserError(f"--templates {templates} is not a directory")
    if templates is None and local_default:  # a named model's own prompts (models.py)
        templates = prompt_templates(model_path)
    if policy == "replay" and replay is None:
        raise UserError("the replay policy needs --replay FILE")
    if memory is not None:
        if memory_k < 1:
            raise UserError(f"--memory-k is how many kernels a prompt shows, at least 1, "
                            f"not {memory_k}")
        config.update(memory=str(memory), memory_k=memory_k)
        kernel_memory = _open_memory(memory)
    if resume and RunStore.exists(run_dir):
        previous = RunStore(run_dir)
        started_with = previous.config()
        previous.close()
        if started_with and local_default and started_with.get("model") is None:
            started_with["model"] = model_name  # (runs from before the name was recorded)
        if started_with and "model_id" in config and "model_id" not in started_with:
            started_with["model_id"] = config["model_id"]  # (runs from before it was)
        if (started_with and no_flag_sqd and restarts_by_default and ratios_by_default
                and sizes_by_default):
            config = as_started(config, started_with)
            restarts, budget_minutes = config.get("restarts", 1), config.get("budget_minutes")
            ratio_values = tuple(config["ratios"])
            size_set = _search_sizes(t, config.get("sizes"))
        if started_with not in (None, config):
            raise UserError(f"{run_dir} was started with other settings; resume with the "
                            "same options (see `perfgym report`)")
    if seed is not None and policy == "openai":  # its requests' seeds come from `random`
        import random
        random.seed(seed)
    try:  # before the run store: a model that cannot load leaves no half-made run behind
        pol = make_policy(policy, model=model, base_url=base_url,
                          api_key=os.environ.get(api_key_env), model_path=model_path,
                          path=replay, concurrency=concurrency,
                          **({"seed": seed} if seed is not None else {}))
    except (PolicyError, ValueError) as exc:
        raise UserError(str(exc)) from None
    store = RunStore(run_dir)
    store.set_config(config)
    info = machine_mod.machine_info()
    with _LiveView(not as_json and sys.stderr.isatty()) as view:
        engine = Engine(store, pol, t, EvalConfig(opt=opt, profile=profilers, threads=threads),
                        reward, sampling,
                        info, on_result=view.update, templates=templates, sizes=size_set,
                        answer_start=answer_start, group_timing=group_timing,
                        max_candidates=max_candidates)
        if memory is not None:
            engine.memory, engine.memory_k = kernel_memory, memory_k
        if ray_address:
            from ..executors.ray_executor import RayExecutor
            engine.executor = RayExecutor(ray_address).evaluate_many
        try:
            if algo == "sqd":
                best = SQD(engine, SQDConfig(
                    iterations, g, ratio_values, stage_values, restarts=restarts,
                    budget_seconds=budget_minutes * 60 if budget_minutes else None)).run()
            elif algo == "climb":
                best = Climb(engine, climb_config).run()
            elif algo == "refine":
                best = Refine(engine, turns, chains, stage).run()
            elif algo == "evolve":
                best = Evolve(engine, evolve_config).run()
            else:
                best = BestOfN(engine, n, stage).run()
        except PolicyError as exc:
            raise UserError(f"{exc} (the run is saved; rerun with --resume)") from None
        except SeedFailed as exc:
            raise UserError(f"{exc}; check the task with perfgym eval --sizes train") from None
        from ..search.general import general_best
        fastest = best
        with err_console.status("checking the fastest kernels at the task's train sizes"):
            best = general_best(engine, best)  # the result: right at other sizes too
        if heldout:
            from ..search.heldout import judge_heldout
            judge_heldout(engine, best)
        confirmed = _confirm_best(engine, best, remote=bool(ray_address))
    store.event("search_done")
    from ..report import write_plots, write_summary
    report = write_summary(store, run_dir / "report", write_plots(store, run_dir / "report"))
    counts = answer_counts(store, t)
    from ..report.causes import lines as cause_lines, next_step, run_causes
    causes = run_causes(store)
    from ..search.general import passed_over
    over = passed_over(store)
    if as_json:
        print(json.dumps({"run_dir": str(run_dir), "best": best.outcome if best else None,
                          "best_id": best.id if best else None, "confirmed": confirmed,
                          "passed_over": over,
                          "fastest": ({"id": fastest.id, **fastest.outcome}
                                      if fastest is not None
                                      and (best is None or fastest.id != best.id)
                                      else None),
                          "answers": counts,
                          "failure_causes": dict(causes.most_common()),
                          "next_step": next_step(causes) if not counts["passed"] else None},
                         indent=2))
        return
    console.print(f"answers: {counts['answers']}; {counts['parsed']} parsed, {counts['compiled']}"
                  f" compiled, {counts['passed']} passed", highlight=False)
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


def _search_sizes(task, label: str | None) -> list[dict[str, int]] | None:
    """The size set a search judges on. Held-out sizes are refused: they judge the result."""
    if label is None:
        return None
    if label not in ("default", "train"):
        raise UserError(f"--sizes {label!r}: a search judges on default or train (held-out "
                        "sizes are kept for judging what it found: perfgym eval --sizes heldout)")
    if not hasattr(task, "sizes"):
        raise UserError(f"--sizes: task {task.name}'s sizes are fixed in its problem file")
    return task.sizes(label)
