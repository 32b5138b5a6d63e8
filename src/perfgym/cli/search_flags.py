"""`perfgym search`'s flags, declared once: the command's signature is made from them
(`command_signature`), and the plan (search_plan.py) reads them as one object."""
from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Optional

import typer

from ..rewards import SCHEMES
from ..search.climb import TRANSFORMS
from .common import PROFILERS_HELP, PROFILE_HELP

# SQD's shares (deepen, improve, repair). The no-flag search repairs nothing: the coder's
# repairs fixed 0 of 64 wrong kernels, and a draw that finds nothing is then 16 answers, not
# 36, so the budget holds more draws, each with its 12 improves of the seed, where its fast
# kernels come from (docs/models/coder.md)
RATIOS = "0.4,0.3,0.3"
NO_FLAG_RATIOS = "0.4,0.3,0"


def flag(default, *names: str, help: str):
    """A field of SearchFlags: its default, and the command-line option that sets it."""
    return dataclasses.field(default=default,
                             metadata={"option": typer.Option(default, *names, help=help)})


@dataclasses.dataclass(frozen=True)
class SearchFlags:
    """Every flag of `perfgym search`, as the user gave it (None: not given)."""
    task: str = flag("dgemm", "--task", "-t", help="built-in task name or task directory")
    algo: Optional[str] = flag(None, help="climb, sqd, refine, best-of-n or evolve "
                               "(default: climb for the no-flag search of a C or "
                               "C++ task, else sqd)")
    policy: Optional[str] = flag(None, help="openai, hf, openvino or replay (default: "
                                 "openai when --model, --base-url or $OPENAI_BASE_URL "
                                 "is set, replay with --replay, else the local model: "
                                 "openvino, the fast CPU engine, when installed, "
                                 "else hf)")
    model: Optional[str] = flag(None, help="model name (openai policy)")
    base_url: Optional[str] = flag(None, help="OpenAI-compatible server URL "
                                   "(default: $OPENAI_BASE_URL)")
    api_key_env: str = flag("OPENAI_API_KEY", help="environment variable with the key")
    model_path: Optional[Path] = flag(None, help="hf/openvino policy: a model name "
                                      "(coder, smollm2), a model or adapter directory "
                                      "or a .gguf (default: coder, Qwen2.5-Coder-1.5B-"
                                      "Instruct, fetched once: 1.1 GB)")
    replay: Optional[Path] = flag(None, help="JSONL of completions (replay policy)")
    run_dir: Path = flag(Path("runs/latest"), help="where the run store lives")
    resume: bool = flag(False, help="continue the run in --run-dir")
    iterations: Optional[int] = flag(None, help="SQD iterations (default 3; 1 with "
                                     "the local default model, a short first run); "
                                     "climb: rounds at most")
    g: int = flag(4, "--G", help="children per node (SQD); answers per transform "
                  "per round (climb)")
    transforms: str = flag(",".join(TRANSFORMS), help="climb: the textbook "
                           "transforms a round asks for")
    restarts: Optional[int] = flag(None, help="SQD: run the iterations again from the "
                                   "seed up to this many times, a new draw each; the "
                                   "best of all is the result (default 1; as many "
                                   "as --budget-minutes 12 holds when no flag sets "
                                   "the model, --iterations or --max-candidates)")
    budget_minutes: Optional[float] = flag(None, help="SQD: start a restart only while "
                                           "the time spent plus the longest restart "
                                           "yet fits this many minutes; climb: the "
                                           "same for its rounds (default 12 in the "
                                           "no-flag search); refine, best-of-n, evolve: "
                                           "no new step past it")
    ratios: Optional[str] = flag(None, help=f"SQD top,middle,error shares (default "
                                 f"{RATIOS}; {NO_FLAG_RATIOS} when no flag sets the "
                                 "model, --iterations or --max-candidates)")
    stages: str = flag("1,2,3,4,5,6", help="SQD stages")
    n: int = flag(8, help="samples (best-of-n)")
    turns: int = flag(4, help="turns per chain (refine)")
    chains: int = flag(1, help="parallel chains (refine)")
    stage: Optional[int] = flag(None, help="stage rules for refine / best-of-n / "
                                "evolve")
    sizes: Optional[str] = flag(None, help="judge every candidate on a size set of "
                                "the task: default or train (folded: the worst status, "
                                "geometric-mean rates; default: the default size)")
    heldout: bool = flag(True, help="at the end, judge the best kernels on the task's "
                         "held-out sizes (for the report)")
    islands: int = flag(2, help="islands (evolve)")
    generations: int = flag(4, help="generations (evolve)")
    children: int = flag(4, help="children per island per generation (evolve)")
    migrate_every: int = flag(2, help="generations between migrations (evolve; 0: "
                              "never)")
    migrants: int = flag(1, help="elites each island sends the next (evolve)")
    features: str = flag("techniques,roofline", help="archive axes (evolve): "
                         "techniques, roofline, code_size")
    crossover: float = flag(0.25, help="share of children with two parents (evolve)")
    exploit: float = flag(0.7, help="share of parents that are the island's best, "
                          "not a random elite (evolve)")
    reward: str = flag("tiered", help=f"reward scheme: {', '.join(SCHEMES)}")
    opt: str = flag("O3", help="optimization level of the benchmark")
    group_timing: bool = flag(False, "--group-timing", help="time each group's "
                              "correct children against each other and the baseline "
                              "in interleaved rounds (5) before ranking them")
    threads: Optional[int] = flag(None, help="OpenMP threads each kernel runs with "
                                  "(default: every core; 1 judges single-thread "
                                  "speed, steadier on a busy machine)")
    temperature: Optional[float] = flag(None, help="sampling temperature (default "
                                        "1.0; the local default model: measured, "
                                        "see the docs)")
    top_k: Optional[int] = flag(None, help="sample from the k likeliest tokens (0: "
                                "off; default 40)")
    top_p: Optional[float] = flag(None, help="nucleus sampling (1: off; default 0.95)")
    min_p: Optional[float] = flag(None, help="drop tokens below this share of the "
                                  "likeliest (0: off; default 0.05)")
    repetition_penalty: float = flag(1.0, help="penalize repeating generated tokens "
                                     "(the prompt is spared; 1: off)")
    max_tokens: Optional[int] = flag(None, help="tokens per completion (default 2048; "
                                     "the 135M model 256, the coder 768; a climb's answers "
                                     "about their parent's length, at most this)")
    answer_start: Optional[bool] = flag(
        None, "--answer-start/--no-answer-start", help="perfgym writes the start of each "
        "answer (fence, includes, the entry's signature) and the model writes the body "
        "(default: on for the local default model)")
    grammar: Optional[bool] = flag(
        None, "--grammar/--no-grammar", help="constrain an opened answer's body to balanced "
        "braces ending at the entry's brace (openvino policy; default: measured for the "
        "default model)")
    concurrency: int = flag(8, help="requests in flight (openai policy)")
    templates: Optional[Path] = flag(None, help="directory of prompt templates "
                                     "(generate.txt, improve.txt, ...) overriding ours")
    ray_address: Optional[str] = flag(None, help="evaluate on this Ray cluster's "
                                      "benchmark nodes")
    memory: Optional[Path] = flag(None, help="a kernel memory (`perfgym memory`): "
                                  "prompts show its kernels of similar tasks")
    memory_k: int = flag(3, help="how many memory kernels a prompt shows")
    as_json: bool = flag(False, "--json", help="print the best candidate as JSON")
    profile: bool = flag(False, "--profile", help=PROFILE_HELP + "; improve and "
                         "repair prompts carry the lines")
    profilers: Optional[str] = flag(None, help=PROFILERS_HELP)
    seed: Optional[int] = flag(None, help="seed of the sampler (local policies; "
                               "openai: the requests' seeds) and of evolve's plan: "
                               "the same seed repeats a run as far as the sampler does "
                               "(default: 0 locally, random requests' seeds on a "
                               "server)")
    max_candidates: Optional[int] = flag(None, help="stop after this many candidates "
                                         "besides the seed, whatever the algorithm "
                                         "plans (equal-budget comparisons)")


def command_signature(flags=SearchFlags) -> inspect.Signature:
    """The signature typer reads a command's options from: one keyword per field of `flags`,
    its type and its option."""
    hints = typing.get_type_hints(flags)
    return inspect.Signature([
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                          default=f.metadata["option"]) for f in dataclasses.fields(flags)])
