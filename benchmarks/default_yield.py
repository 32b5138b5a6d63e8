"""How many of the default model's answers are kernels: parse, compile, correct, faster.

    python benchmarks/default_yield.py [--samples 16] [--tasks all] [--json OUT]
    python benchmarks/default_yield.py --grid [--samples 8]      (the sampler grid)
    python benchmarks/default_yield.py --model coder [--samples 8] --json OUT
                                       (a named model's one-shot yield, at its own sampler)
    python benchmarks/default_yield.py --model coder --grid [--tasks all] [--samples 8]
                                       (the sampler grid for a named model)
    python benchmarks/default_yield.py --model coder --templates DIR --json OUT
                                       (the same with other prompt templates: a prompt A/B)

For each built-in task, `--samples` answers from the default model (SmolLM2-135M-Instruct on
the fast engine) to the prompt a search sends first: improve the task's naive kernel, shown
with its measured outcome. Per task: the share of answers that parse (a kernel is extracted),
compile, are correct, and are faster than the naive kernel (by the evaluator's confidence
bound where it gives one, else by at least 10%: FASTER), and the best speedup. Four settings, in one run, so the effect of each change shows
on its own:

  before    the answer not opened, the old sampler (T=1.0, top-k 40, top-p 0.95, min-p 0.05,
            512 tokens): what `perfgym search` did before issue 26
  opened    + perfgym opens the answer (fence, includes, the entry's signature): the model
            writes the body (perfgym.opening)
  grammar   + the body's grammar on the engine (opening.GRAMMAR)
  default   + the default sampler (models.DEFAULT_SAMPLING): what `perfgym search` does now

`--model NAME` scores a named model (perfgym.models.NAMED_MODELS: `coder`, Qwen2.5-Coder-1.5B)
as the default setting does, at that model's measured sampler, as one setting named after it;
with `--json` the setting is added to the file's others (the committed file keeps one row per
model).

`--grid` instead scores a small grid of samplers (opened; the temperature) on the short-kernel
tasks and prints the best by the share faster than the naive kernel, then the share correct;
models.DEFAULT_SAMPLING holds the winner. Evaluations share perfgym's outcome cache, so an
answer seen before (a copy of the naive kernel) is judged once.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

GROUP = 4  # GRPO's group size in the learning experiment
SHORT = ("dot", "dgemv", "prefix_sum", "transpose", "histogram")
OLD_SAMPLING = {"temperature": 1.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                "repetition_penalty": 1.0, "max_tokens": 512}


def settings() -> dict[str, tuple[bool, dict]]:
    from perfgym.models import DEFAULT_SAMPLING
    plain = dict(OLD_SAMPLING)
    return {"before": (False, plain),
            "opened": (True, plain),
            "grammar": (True, {**plain, "grammar": True}),
            "default": (True, dict(DEFAULT_SAMPLING))}


def grid(max_tokens: int = 256) -> dict[str, tuple[bool, dict]]:
    points = {}
    # (the grammar is left out: on the engine it costs several times the tokens' time; the
    # yield run measures it once, as its own setting)
    for t, min_p in itertools.product((0.3, 0.6, 0.9, 1.2), (0.0,)):
        points[f"T={t},min_p={min_p}"] = (True, {
            "temperature": t, "top_k": 0, "top_p": 0.95, "min_p": min_p,
            "repetition_penalty": 1.0, "max_tokens": max_tokens})
    return points


# A C kernel's speedup comes from a few timed calls (no confidence bound), and a copy of the
# naive kernel measures anywhere in 0.9-1.1x: "faster" needs a margin beyond that noise.
FASTER = 1.1


def beats_naive(o) -> bool:
    if not o.ok or o.speedup is None:
        return False
    return o.speedup_low > 1.0 if o.speedup_low is not None else o.speedup >= FASTER


def prompts(tasks, templates: Path | None = None) -> dict[str, str]:
    """The prompt a search sends first for each task: improve its naive kernel, with the
    naive kernel's measured outcome as feedback (from `templates`, a directory of prompt
    templates, where given: an A/B of a prompt change)."""
    from perfgym.backends import backend_for
    from perfgym.config import EvalConfig
    from perfgym.executors import Request, evaluate_many
    from perfgym.prompts import expand_prompt
    seeds = {t.name: backend_for(t).baseline_candidate(t, EvalConfig())[0] for t in tasks}
    outcomes = evaluate_many([Request(t, seeds[t.name], None, EvalConfig()) for t in tasks])
    return {t.name: expand_prompt(t, "improve", seeds[t.name], o.to_dict(),
                                   override_dir=templates)
            for t, o in zip(tasks, outcomes)}


def measure(policy, tasks, texts: dict[str, str], opened: bool, sampling: dict,
            samples: int) -> dict:
    """Per task: the shares that parse, compile, are correct and beat the naive kernel, and
    the best speedup; plus generation time."""
    from perfgym.backends import backend_for
    from perfgym.config import EvalConfig
    from perfgym.executors import Request, evaluate_many
    from perfgym.opening import answer_start, full_answer
    from perfgym.outcome import Status
    from perfgym.rewards import score
    openings = [answer_start(t) if opened else None for t in tasks]
    started = time.monotonic()
    kwargs = {"openings": openings} if opened else {}
    completions = policy.generate([texts[t.name] for t in tasks], samples, **kwargs, **sampling)
    generate_s = time.monotonic() - started
    tokens = sum(len(policy.tokenizer(c)["input_ids"]) for group in completions for c in group)
    answers = [(t, full_answer(o, c)) for t, o, group in zip(tasks, openings, completions)
               for c in group]
    outcomes = evaluate_many([Request(t, a, None, EvalConfig()) for t, a in answers],
                             progress=True)
    compiled = {Status.TIMEOUT, Status.RUNTIME_ERROR, Status.WRONG_ANSWER, Status.OK}
    rows, spread = {}, []
    for t in tasks:
        mine = [(a, o) for (task, a), o in zip(answers, outcomes) if task is t]
        parsed = 0
        for a, _ in mine:
            try:
                backend_for(t).extract(t, a)
                parsed += 1
            except ValueError:
                pass
        n = len(mine)
        # GRPO's view: the task's samples in groups of G=4, scored by the tiered scheme (the
        # opened parse tier withheld); a group whose rewards are all equal has no gradient
        for g in range(0, n - GROUP + 1, GROUP):
            rewards = score("tiered", [o for _, o in mine[g:g + GROUP]], opened=opened)
            spread.append(max(rewards) > min(rewards))
        speedups = [o.speedup for _, o in mine if o.ok and o.speedup]
        rows[t.name] = {
            "parse": parsed / n, "compile": sum(o.status in compiled for _, o in mine) / n,
            "correct": sum(o.ok for _, o in mine) / n,
            "faster_than_naive": sum(beats_naive(o) for _, o in mine) / n,
            "best_speedup": max(speedups) if speedups else None,
            "distinct": len({a for a, _ in mine}) / n,
            "statuses": {s.value: sum(o.status is s for _, o in mine) for s in Status
                         if any(o.status is s for _, o in mine)}}
    return {"opened": opened, "sampling": sampling, "samples_per_task": samples,
            "generate_seconds": round(generate_s, 1), "tokens": tokens,
            "tokens_per_second": round(tokens / generate_s, 1), "tasks": rows,
            "mean": {k: sum(r[k] for r in rows.values()) / len(rows)
                     for k in ("parse", "compile", "correct", "faster_than_naive")},
            "short_tasks_correct": _mean([rows[n]["correct"] for n in SHORT if n in rows]),
            "groups_with_reward_spread": _mean(spread)}


def _mean(xs):
    return sum(xs) / len(xs) if xs else None


def table(results: dict) -> str:
    lines = ["| setting | parse | compile | correct | correct (short tasks) | faster than naive |"
             " best speedup (median over tasks) | GRPO groups with a reward spread | tokens/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        m = r["mean"]
        best = sorted(x["best_speedup"] or 0 for x in r["tasks"].values())
        short = r["short_tasks_correct"]
        lines.append(f"| {name} | {m['parse']:.0%} | {m['compile']:.0%} | {m['correct']:.0%} | "
                     f"{'-' if short is None else f'{short:.0%}'} | "
                     f"{m['faster_than_naive']:.0%} | {best[len(best) // 2]:.2f}x | "
                     f"{r['groups_with_reward_spread']:.0%} | {r['tokens_per_second']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=None, help="answers per task (16; grid 8)")
    ap.add_argument("--tasks", default="all", help="comma-separated task names, or all")
    ap.add_argument("--grid", action="store_true", help="score the sampler grid instead")
    ap.add_argument("--only", default=None, help="comma-separated settings to run")
    ap.add_argument("--grammar-samples", type=int, default=4, help="answers per task in the "
                    "grammar setting (constrained decoding is several times slower here)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--model", default=None, help="a named model (e.g. coder): its row only")
    ap.add_argument("--templates", default=None, help="a directory of prompt templates to use "
                    "instead of perfgym's (an A/B of a prompt change, e.g. "
                    "benchmarks/prompt_variants/example)")
    args = ap.parse_args()
    from perfgym.policies.openvino import OpenVINOPolicy
    from perfgym.tasks import builtin_names, get_task
    names = (list(SHORT) if args.grid and args.tasks == "all" else
             builtin_names() if args.tasks == "all" else args.tasks.split(","))
    tasks = [get_task(n) for n in names]
    samples = args.samples or (8 if args.grid else 16)
    configs = grid() if args.grid else settings()
    if args.model:
        from perfgym.models import default_sampling
        if default_sampling(args.model) is None:
            raise SystemExit(f"--model {args.model}: not a named model (perfgym model list)")
        own = dict(default_sampling(args.model))
        # the grid at the model's own token limit; else the model's sampler alone
        configs = grid(own["max_tokens"]) if args.grid else {args.model: (True, own)}
    if args.only:
        configs = {k: v for k, v in configs.items() if k in args.only.split(",")}
    started = time.monotonic()
    policy = OpenVINOPolicy(model_path=args.model)
    from perfgym.models import prompt_templates
    texts = prompts(tasks, Path(args.templates) if args.templates else
                    prompt_templates(args.model))  # the model's own prompts, as a search's
    results = {}
    for name, (opened, sampling) in configs.items():
        print(f"[{time.monotonic() - started:6.0f}s] {name}",
              file=sys.stderr, flush=True)
        count = args.grammar_samples if sampling.get("grammar") and not args.grid else samples
        results[name] = measure(policy, tasks, texts, opened, sampling, count)
        m = results[name]["mean"]
        print(f"  parse {m['parse']:.0%} compile {m['compile']:.0%} correct {m['correct']:.0%} "
              f"faster {m['faster_than_naive']:.0%}", file=sys.stderr, flush=True)
    print(table(results))
    if args.grid:
        best = max(results, key=lambda k: (results[k]["mean"]["faster_than_naive"],
                                           results[k]["mean"]["correct"]))
        print(f"best sampler: {best}")
    from perfgym.machine import machine_info
    out = {"kind": "grid" if args.grid else "yield", "tasks": names, "templates": args.templates,
           "machine": machine_info().get("fingerprint", {}).get("cpu"),
           "wall_seconds": round(time.monotonic() - started), "settings": results}
    if args.model and not args.grid:  # one row per model: the file's other settings are kept
        from perfgym.models import model_identity
        results[args.model]["model"] = model_identity(args.model)
        results[args.model]["machine"] = out["machine"]
        results[args.model]["wall_seconds"] = out["wall_seconds"]
        if args.json and Path(args.json).is_file():
            kept = json.loads(Path(args.json).read_text())
            kept["settings"] = {**kept["settings"], **results}
            out = kept
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
