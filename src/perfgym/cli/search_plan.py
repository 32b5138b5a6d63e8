"""What `perfgym search` will do, resolved from its flags: the algorithm, the policy and model,
the sampler, the sizes, the budget and the run's config. Pure: it reads no run store, loads no
model and touches no file, so the no-flag defaults and resuming as started are tested here
(tests/search/test_search_plan.py); cli/search.py carries the plan out."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ..rewards import SCHEMES
from ..search.climb import ClimbConfig, climbs
from .common import UserError
from .eval_cmd import _profile
from .search_flags import NO_FLAG_RATIOS, RATIOS, SearchFlags

ALGOS = ("climb", "sqd", "refine", "best-of-n", "evolve")

# The no-flag search's SQD draws (restarts) and the time they may take: the goal is a result
# within 15 minutes, and the held-out sizes and the confirmation take about a minute more. The
# budget, not the count, ends the draws: a draw that finds nothing is the short one.
NO_FLAG_RESTARTS = 12
NO_FLAG_BUDGET_MINUTES = 12.0
# Every answer of the no-flag search is judged at the task's train sizes (odd, prime and
# non-multiple sizes), so a kernel right at one size alone is no parent: every correct kernel
# of three searches judged at dgemm-256 alone ran past the arrays at other sizes
NO_FLAG_SIZES = "train"

# The config keys the no-flag search sets ("ratios" is in every config, the others only where
# they are set)
NO_FLAG_KEYS = ("ratios", "restarts", "budget_minutes", "sizes")

# the sampler where neither a flag nor a named model's measured one sets it
GENERIC_SAMPLING = {"temperature": 1.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                    "max_tokens": 2048}


@dataclasses.dataclass
class SearchPlan:
    """The flags resolved: what the run does. `config` is what the run store records (a
    resumed run must match it); `model_path` is None for a model the policy names itself."""
    flags: SearchFlags
    task: object
    algo: str
    policy: str
    model_path: Path | None
    local: bool                 # the model runs here (hf, openvino)
    local_default: bool         # a named local model: its measured sampler and prompts
    sampling: dict
    answer_start: bool
    iterations: int
    restarts: int
    budget_minutes: float | None
    ratios: tuple[float, ...]
    stages: tuple[int, ...]
    sizes: str | None           # the size set's label (default, train), None: the default size
    size_set: list[dict[str, int]] | None
    profilers: tuple[str, ...]
    templates: Path | None
    climb: ClimbConfig | None
    evolve: object
    config: dict
    # the no-flag SQD with none of its settings given: a resumed run keeps those it started with
    no_flag_sqd_defaults: bool = False

    @property
    def budget_seconds(self) -> float | None:
        return self.budget_minutes * 60 if self.budget_minutes else None


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


def plan_search(flags: SearchFlags, task, default_policy: str,
                server_in_env: bool = False) -> SearchPlan:
    """The plan for `flags` on `task` (a loaded task). `default_policy` is the local model's
    policy where no flag names one; `server_in_env`: $OPENAI_BASE_URL is set."""
    from ..models import default_sampling, is_named, prompt_templates, search_default_model
    from ..search import EvolveConfig
    f = flags
    if f.algo not in (None, *ALGOS):
        raise UserError(f"algorithm {f.algo!r} is not one of {', '.join(ALGOS)}")
    try:
        evolve = EvolveConfig(f.generations, f.islands, f.children, f.migrate_every,
                              f.migrants, tuple(x.strip() for x in f.features.split(",")),
                              exploit=f.exploit, crossover=f.crossover, stage=f.stage,
                              seed=f.seed or 0)
    except ValueError as exc:
        raise UserError(f"evolve options: {exc}") from None
    policy = f.policy or ("replay" if f.replay else "openai"
                          if f.model or f.base_url or server_in_env else default_policy)
    local = policy in ("hf", "openvino")
    model_path = f.model_path
    if local and model_path is None:  # no flag names a model: the measured choice
        model_path = Path(search_default_model())
    # a named local model (none given: the default) samples and opens as measured for it
    local_default = local and is_named(model_path)
    measured = default_sampling(model_path) if local_default else None
    sampling, answer_start = _sampling(f, policy, measured)
    # the no-flag search: a search's best is one draw with a wide spread (1.00-4.75x over
    # seeds on dgemm), so it draws again or climbs while its time budget has room
    # (docs/models/coder.md)
    no_flag = (local_default and str(model_path) != "smollm2" and f.iterations is None
               and f.max_candidates is None)
    algo = f.algo or ("climb" if no_flag and climbs(task) else "sqd")
    if algo == "climb" and not climbs(task):
        raise UserError(f"--algo climb asks for loop transforms of a C or C++ kernel; task "
                        f"{task.name} is a PyTorch problem: use --algo sqd")
    no_flag_sqd = no_flag and algo == "sqd"
    budget_minutes = f.budget_minutes
    if algo == "climb" and budget_minutes is None and no_flag:
        budget_minutes = NO_FLAG_BUDGET_MINUTES
    ratios, restarts, budget_minutes = sqd_defaults(no_flag_sqd, f.ratios, f.restarts,
                                                    budget_minutes)
    _check_budget(algo, restarts, budget_minutes)
    iterations = f.iterations
    if iterations is None:  # the 135M model: a short first run; a climb: its budget ends it
        iterations = (ClimbConfig.rounds if algo == "climb" else
                      1 if local_default and str(model_path) == "smollm2" else 3)
    if min(f.n, f.turns, f.chains) < 1:
        raise UserError("--n, --turns and --chains are at least 1")
    if f.reward not in SCHEMES:
        raise UserError(f"reward scheme {f.reward!r} is not one of {', '.join(SCHEMES)}")
    sizes = f.sizes
    # a climb keeps a step only when it holds at every train size; so does the no-flag SQD
    if (sizes is None and (no_flag_sqd or algo == "climb") and not f.group_timing
            and not f.ray_address and len(task.sizes("train")) > 1):
        sizes = NO_FLAG_SIZES
    try:
        ratio_values = tuple(float(x) for x in ratios.split(","))
        stage_values = tuple(int(x) for x in f.stages.split(","))
    except ValueError:
        raise UserError("--ratios takes three numbers and --stages integers, comma-separated")
    plan = SearchPlan(
        flags=f, task=task, algo=algo, policy=policy, model_path=model_path, local=local,
        local_default=local_default, sampling=sampling, answer_start=answer_start,
        iterations=iterations, restarts=restarts, budget_minutes=budget_minutes,
        ratios=ratio_values, stages=stage_values, sizes=sizes,
        size_set=search_sizes(task, sizes), profilers=_profile(f.profile, f.profilers),
        templates=(f.templates if f.templates is not None or not local_default
                   else prompt_templates(model_path)),  # a named model's own prompts
        climb=_climb_config(f, algo, iterations, budget_minutes), evolve=evolve, config={},
        no_flag_sqd_defaults=(no_flag_sqd and f.restarts is None and f.budget_minutes is None
                              and f.ratios is None and f.sizes is None))
    plan.config = _config(plan)
    return plan


def _sampling(f: SearchFlags, policy: str, measured: dict | None) -> tuple[dict, bool]:
    """The sampler (the flags over the named model's measured one, else generic) and whether
    perfgym opens each answer."""
    given = {"temperature": f.temperature, "top_k": f.top_k, "top_p": f.top_p,
             "min_p": f.min_p, "max_tokens": f.max_tokens}
    chosen = {**(measured or GENERIC_SAMPLING),
              **{k: v for k, v in given.items() if v is not None}}
    answer_start = f.answer_start if f.answer_start is not None else measured is not None
    grammar = f.grammar
    if grammar is None:
        grammar = bool(measured is not None and policy == "openvino" and measured["grammar"])
    if grammar and not (answer_start and policy == "openvino"):
        raise UserError("--grammar constrains opened answers on the openvino policy: add "
                        "--answer-start and --policy openvino, or drop --grammar")
    if answer_start and policy == "replay":
        raise UserError("--answer-start: replayed answers are whole answers already; drop it")
    if not (0 < chosen["top_p"] <= 1 and 0 <= chosen["min_p"] < 1 and chosen["top_k"] >= 0
            and f.repetition_penalty > 0):
        raise UserError("--top-p is in (0, 1], --min-p in [0, 1), --top-k >= 0 and "
                        "--repetition-penalty > 0")
    if not (chosen["temperature"] >= 0 and chosen["max_tokens"] >= 1 and f.concurrency >= 1):
        raise UserError("--temperature is at least 0, --max-tokens and --concurrency at least 1")
    sampling = {"temperature": chosen["temperature"], "top_k": chosen["top_k"],
                "top_p": chosen["top_p"], "min_p": chosen["min_p"],
                "repetition_penalty": f.repetition_penalty, "max_tokens": chosen["max_tokens"]}
    if grammar:  # (absent otherwise: runs from before the option resume as they were)
        sampling["grammar"] = True
    return sampling, answer_start


def _check_budget(algo: str, restarts: int, budget_minutes: float | None) -> None:
    if algo != "sqd" and restarts != 1:
        raise UserError("--restarts are SQD's: add --algo sqd or drop them")
    if restarts < 1 or (budget_minutes is not None and budget_minutes <= 0):
        raise UserError("--restarts is at least 1 and --budget-minutes above 0")


def _climb_config(f: SearchFlags, algo: str, rounds: int,
                  budget_minutes: float | None) -> ClimbConfig | None:
    if algo != "climb":
        return None
    try:
        return ClimbConfig(tuple(x.strip() for x in f.transforms.split(",")), samples=f.g,
                           rounds=rounds, max_answer_tokens=f.max_tokens,
                           budget_seconds=budget_minutes * 60 if budget_minutes else None)
    except ValueError as exc:
        raise UserError(f"climb options: {exc}") from None


def _config(plan: SearchPlan) -> dict:
    """What the run store records. A key marked "(likewise)" is absent unless set, so runs
    from before its option resume as they were."""
    from ..models import model_title
    f = plan.flags
    config = {"task": plan.task.name, "algo": plan.algo, "policy": plan.policy,
              # the model's name, for the report: the default model when no model was given
              "model": f.model or (model_title(plan.model_path) if plan.local else None),
              "iterations": plan.iterations, "G": f.g, "ratios": list(plan.ratios),
              "stages": list(plan.stages), "n": f.n, "turns": f.turns, "chains": f.chains,
              "stage": f.stage, "reward": f.reward, "opt": f.opt, "sampling": plan.sampling}
    if plan.profilers:  # (a run without profiling keeps the config it was started with)
        config["profile"] = list(plan.profilers)
    if plan.sizes is not None:  # (likewise)
        config["sizes"] = plan.sizes
    if f.group_timing:  # (likewise)
        if f.ray_address or plan.sizes is not None:
            raise UserError("--group-timing times groups on this machine at the default size: "
                            "drop --ray-address and --sizes, or --group-timing")
        config["group_timing"] = True
    if f.threads is not None:  # (likewise)
        if f.threads < 1:
            raise UserError(f"--threads is at least 1, not {f.threads}")
        config["threads"] = f.threads
    if plan.answer_start:
        config["answer_start"] = True
    if f.seed is not None:  # (likewise)
        config["seed"] = f.seed
    if plan.algo == "sqd" and (plan.restarts > 1 or plan.budget_minutes is not None):
        config.update(restarts=plan.restarts, budget_minutes=plan.budget_minutes)
    if plan.algo in ("refine", "best-of-n", "evolve") and plan.budget_minutes is not None:
        config["budget_minutes"] = plan.budget_minutes  # (likewise)
    if plan.climb is not None:
        config["climb"] = {"transforms": list(plan.climb.transforms),
                           "budget_minutes": plan.budget_minutes}
    if f.max_candidates is not None:  # (likewise)
        if f.max_candidates < 1:
            raise UserError(f"--max-candidates is at least 1, not {f.max_candidates}")
        config["max_candidates"] = f.max_candidates
    if plan.algo == "evolve":  # (a run started before evolve existed keeps its config)
        config["evolve"] = {"islands": f.islands, "generations": f.generations,
                            "children": f.children, "migrate_every": f.migrate_every,
                            "migrants": f.migrants, "features": list(plan.evolve.features),
                            "crossover": f.crossover, "exploit": f.exploit}
    if f.memory is not None:
        if f.memory_k < 1:
            raise UserError(f"--memory-k is how many kernels a prompt shows, at least 1, "
                            f"not {f.memory_k}")
        config.update(memory=str(f.memory), memory_k=f.memory_k)
    return config


def resumed(plan: SearchPlan, started_with: dict | None) -> SearchPlan:
    """The plan of a resumed run: a no-flag SQD keeps the no-flag settings it was started
    with; any other difference from `started_with` is the user's error."""
    if started_with is None:  # (a store made before configs were recorded)
        return plan
    started_with = dict(started_with)
    config = plan.config
    if started_with and plan.local_default and started_with.get("model") is None:
        started_with["model"] = config["model"]  # (runs from before the name was recorded)
    if started_with and "model_id" in config and "model_id" not in started_with:
        started_with["model_id"] = config["model_id"]  # (runs from before it was)
    if started_with and plan.no_flag_sqd_defaults:
        config = as_started(config, started_with)
        sizes = config.get("sizes")
        plan = dataclasses.replace(
            plan, config=config, restarts=config.get("restarts", 1),
            budget_minutes=config.get("budget_minutes"), ratios=tuple(config["ratios"]),
            sizes=sizes, size_set=search_sizes(plan.task, sizes))
    if started_with != plan.config:
        raise UserError(f"{plan.flags.run_dir} was started with other settings; resume with "
                        "the same options (see `perfgym report`)")
    return plan


def search_sizes(task, label: str | None) -> list[dict[str, int]] | None:
    """The size set a search judges on. Held-out sizes are refused: they judge the result."""
    if label is None:
        return None
    if label not in ("default", "train"):
        raise UserError(f"--sizes {label!r}: a search judges on default or train (held-out "
                        "sizes are kept for judging what it found: perfgym eval --sizes heldout)")
    if not hasattr(task, "sizes"):
        raise UserError(f"--sizes: task {task.name}'s sizes are fixed in its problem file")
    return task.sizes(label)
