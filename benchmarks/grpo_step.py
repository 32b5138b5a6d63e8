"""Where the time of a GRPO step goes on this machine: generating, evaluating, updating.

    python benchmarks/grpo_step.py [--model default|tiny|PATH] [--steps 3] [--G 8] [--groups 2]
                                   [--mode fixed|sqd] [--max-completion-length 200] [--lora]
                                   [--engine transformers|openvino|both]
    python benchmarks/grpo_step.py --like-learning [--steps 2]
    python benchmarks/grpo_step.py --like-learning --before-after [--json OUT]

`--model default` is the real default model (SmolLM2-135M-Instruct; `PATH` a model directory,
e.g. the learning curve's SFT model, which writes kernels that compile); `tiny` (the default of
this script) a tiny model taught to write two real dgemm kernels (built here, cached under
/tmp/perfgym-bench-coder). Either way the evaluator compiles, runs and times real code. Prints
the shares of the steps' wall time measured in one run and the process's peak memory. The
evaluator must not dominate. `--engine both` runs the same steps with TRL's own generation
and with the fast CPU engine (perfgym.engine, the default model's architecture only), one after
the other in one run: the step split before and after. `--like-learning` runs the steps of the
learning experiment's GRPO instead (experiments/learning/: the default model, opened
answers to the improve prompts of its five short training tasks, G 4, LoRA, bf16, the fast
engine), where the answers compile and the evaluator has real work. `--before-after` runs
those steps twice in one run: as the learning experiment ran them (TRL's per-row update,
micro-batches of 2, LoRA dropout 0.05, each answer timed alone), then as GRPO runs now (the
shared-prefix update in micro-batches of one group, G 4, each group cut to its longest answer,
no dropout, and group timing); `--json` writes both splits and `step_ratio` (after over
before). Each way starts from an empty outcome cache. With `--steps` 2 or more, each way's split over the steps after the first is given
too, with `step_ratio_after_the_first`: a training run's steady step, without the first
step's start-up (TRL's optimizer and data loader, the engine's first compile, baselines).
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from results_by_machine import json_flag, record

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--mode", default="fixed", choices=["fixed", "sqd"])
    ap.add_argument("--max-completion-length", type=int, default=200)
    ap.add_argument("--model", default="tiny", help="default, tiny or a model directory")
    ap.add_argument("--lora", action="store_true", help="train a LoRA adapter (r=16)")
    ap.add_argument("--engine", default="transformers",
                    choices=["transformers", "openvino", "both"])
    ap.add_argument("--like-learning", action="store_true",
                    help="the learning experiment's GRPO settings, on the default model")
    ap.add_argument("--before-after", action="store_true", help="--like-learning twice: the "
                    "per-row update in micro-batches of 2, then the shared-prefix update in "
                    "micro-batches of G")
    json_flag(ap, "grpo_step")
    args = ap.parse_args()
    if args.like_learning or args.before_after:
        args.like_learning, args.engine, args.model = True, "openvino", "default"
    results = {}
    if args.before_after:
        results["before"] = run_steps(args, "openvino", {"shared_prefix": False,
                                                         "micro_batch": 2,
                                                         "group_timing": False,
                                                         "lora_dropout": 0.05})
        results["after"] = run_steps(args, "openvino", {"shared_prefix": True,
                                                        "micro_batch": 4})
        results["step_ratio"] = (results["after"]["seconds_per_step"]
                                 / results["before"]["seconds_per_step"])
        print(f"step time after / before: {results['step_ratio']:.2f}")
        if results["after"]["after_the_first_step"] and \
                results["before"]["after_the_first_step"]:
            results["step_ratio_after_the_first"] = (
                results["after"]["after_the_first_step"]["seconds_per_step"]
                / results["before"]["after_the_first_step"]["seconds_per_step"])
            print(f"after the first step, after / before: "
                  f"{results['step_ratio_after_the_first']:.2f}")
    else:
        for engine in (["transformers", "openvino"] if args.engine == "both"
                       else [args.engine]):
            results[engine] = run_steps(args, engine)
    if args.json:
        results.update(steps=args.steps)
        record("grpo_step", results, summary(results), args.json)


def run_steps(args, engine: str, overrides: dict | None = None) -> dict:

    from perfgym.train import grpo
    from perfgym.train.tiny import build_coder_model
    templates = None
    if args.model == "tiny":
        templates = Path(__file__).parent / "templates"
        model = build_coder_model(Path(tempfile.gettempdir()) / "perfgym-bench-coder", templates)
    else:
        from perfgym.models import resolve_model
        model = resolve_model(None if args.model == "default" else args.model)
    out = Path(tempfile.mkdtemp(prefix="perfgym-grpo-bench-"))
    if args.like_learning:
        import sys
        sys.path.insert(0, str(Path(__file__).parent))
        import learning

        from perfgym.train import recipes
        settings = recipes._settings(grpo.GRPOSettings, dict(
            learning.GRPO, model_path=str(model), output_dir=str(out), steps=args.steps,
            save_steps=10**6, seed=1, **(overrides or {})), "grpo")
        args.G, args.groups, args.mode = settings.G, settings.groups_per_step, settings.mode
    else:
        settings = grpo.GRPOSettings(model_path=str(model), mode=args.mode, output_dir=str(out),
                                     steps=args.steps, G=args.G, groups_per_step=args.groups,
                                     max_completion_length=args.max_completion_length,
                                     learning_rate=1e-4, save_steps=10**6, lora=args.lora,
                                     templates=str(templates) if templates else None,
                                     engine=engine,
                                     # as `perfgym train grpo` does for the default model
                                     answer_start=args.model == "default" and
                                     args.mode == "fixed")
    # each way starts from an empty outcome cache, as a training run does: answers the first
    # way judged (the same seed writes the same ones) are not free for the second
    import importlib

    from perfgym.cache import OutcomeCache
    # (the module: the package's `evaluate` is the function)
    importlib.import_module("perfgym.evaluate")._cache = OutcomeCache(out / "outcomes.sqlite")
    run = grpo.build(settings)
    spent = {"generate": 0.0, "evaluate": 0.0}

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.perf_counter() - t0
        return wrapper

    run.trainer._generate = timed("generate", run.trainer._generate)  # rollout or TRL's own
    run.reward.score = timed("evaluate", run.reward.score)
    # (wall, generate, evaluate) at the end of each step: the steps after the first carry none
    # of the first's start-up (TRL's optimizer and data loader, the engine's first compile,
    # the baselines the outcome cache lacked)
    ends: list[tuple[float, float, float]] = []
    from transformers import TrainerCallback

    class StepEnds(TrainerCallback):
        def on_step_end(self, *_, **__):
            ends.append((time.perf_counter(), spent["generate"], spent["evaluate"]))
    run.trainer.add_callback(StepEnds())
    t0 = time.perf_counter()
    run.trainer.train()
    total = time.perf_counter() - t0
    update = total - spent["generate"] - spent["evaluate"]
    n = args.steps * args.G * args.groups
    print(f"{args.steps} GRPO steps ({args.mode} mode, {args.groups} prompts x G={args.G}, "
          f"{n} completions, generation: {engine}) in {total:.1f} s, "
          f"{total / args.steps:.2f} s per step")
    for name, seconds in (("generate", spent["generate"]), ("evaluate", spent["evaluate"]),
                          ("update and the rest", update)):
        print(f"  {name:20s} {seconds:7.2f} s  {100 * seconds / total:5.1f}%")
    if engine == "openvino":
        r = run.rollout.seconds
        print(f"  (of generate: writing and loading the new weights {r['sync']:.2f} s, "
              f"generating {r['generate']:.2f} s)")
    statuses = {}
    for s in run.reward.step_stats:
        for k, v in s["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    print(f"  statuses: {statuses}")
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"  peak memory (max RSS of this process): {peak:.2f} GiB; model {args.model}")
    shutil.rmtree(out, ignore_errors=True)
    later = None
    if len(ends) >= 2:  # the steps after the first
        (w0, g0, e0), (w1, g1, e1) = ends[0], ends[-1]
        k = len(ends) - 1
        later = {"steps": k, "seconds_per_step": (w1 - w0) / k,
                 "split": {"generate": (g1 - g0) / k, "evaluate": (e1 - e0) / k,
                           "update": ((w1 - w0) - (g1 - g0) - (e1 - e0)) / k}}
        print(f"  the {k} steps after the first: {later['seconds_per_step']:.1f} s per step "
              + ", ".join(f"{name} {v:.1f} s" for name, v in later["split"].items()))
    return {"settings": overrides or {}, "completions": n, "seconds": total,
            "seconds_per_step": total / args.steps, "after_the_first_step": later,
            "split": {"generate": spent["generate"], "evaluate": spent["evaluate"],
                      "update": update},
            "shares": {k: v / total for k, v in (("generate", spent["generate"]),
                                                 ("evaluate", spent["evaluate"]),
                                                 ("update", update))},
            "statuses": statuses}


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds: per way, the
    seconds of a step (a steady step's where there is one) and its generate / evaluate /
    update split."""
    out = {}
    for way, r in result.items():
        if not isinstance(r, dict) or "seconds_per_step" not in r:
            continue
        steady = r.get("after_the_first_step")
        split = (steady or r)["split"]
        per = (steady or {}).get("seconds_per_step", r["seconds_per_step"])
        n = 1 if steady else result.get("steps", 1)
        out[f"{way}: s a step{' (steady)' if steady else ''}"] = (
            f"{per:.1f} (" + " / ".join(f"{split[k] / n:.1f}" for k in ("generate", "evaluate",
                                                                          "update")) + ")")
    ratio = result.get("step_ratio_after_the_first", result.get("step_ratio"))
    if ratio:
        out["after / before"] = f"{ratio:.2f}x"
    return out


if __name__ == "__main__":
    main()
