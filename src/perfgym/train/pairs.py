"""Slow/fast kernel pairs (KernelCompare): the record format, and the ways the data
grows: a builder over a directory tree, cleaning, execution-based filtering, deterministic splits,
a starter set from the task suite, and model-assisted augmentation.

A record (one JSON line): benchmark, file_id, description, slow, fast, plus language and, for
CPU kernels perfgym can run, the task and the measured speedup.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..config import EvalConfig
from ..executors import Request, evaluate_many
from ..extract import strip_comments
from ..tasks import builtin_names, get_task

SOURCE_SUFFIXES = {".c": "c", ".h": "c", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp",
                   ".cc": "cpp"}


@dataclass
class Pair:
    benchmark: str
    file_id: str
    description: str
    slow: str
    fast: str
    language: str = "c"
    task: str | None = None  # a perfgym task both kernels implement (enables filtering)
    speedup: float | None = None  # measured fast over slow, when filtered here
    extra: dict[str, Any] = field(default_factory=dict)


def read_pairs(path: str | Path) -> list[Pair]:
    pairs = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            pairs.append(Pair(**record))
        except (json.JSONDecodeError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a pair record ({exc})") from None
    return pairs


def write_pairs(path: str | Path, pairs: Iterable[Pair]) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w") as f:
        for p in pairs:
            f.write(json.dumps(asdict(p)) + "\n")
            n += 1
    return n


# -- building from a tree -------------------------------------------------------------------

def build_from_tree(root: str | Path, clean_code: bool = True) -> list[Pair]:
    """Pairs from a tree where a slow version lives in a directory named `X_base` (or `base`)
    and the fast one at the same relative path in its sibling `X` (or any sibling of `base`),
    as Parboil's `cuda_base`/`cuda` layout. The benchmark is the parent directory's name."""
    root = Path(root)
    pairs = []
    for base in sorted(p for p in root.rglob("*") if p.is_dir() and
                       (p.name.endswith("_base") or p.name == "base")):
        if base.name == "base":
            siblings = [s for s in sorted(base.parent.iterdir()) if s.is_dir() and s != base]
        else:
            sibling = base.parent / base.name[: -len("_base")]
            siblings = [sibling] if sibling.is_dir() else []
        for fast_dir in siblings:
            for slow_file in sorted(f for f in base.rglob("*") if f.suffix in SOURCE_SUFFIXES):
                rel = slow_file.relative_to(base)
                fast_file = fast_dir / rel
                if not fast_file.is_file():
                    continue
                language = SOURCE_SUFFIXES[slow_file.suffix]
                slow, fast = slow_file.read_text(errors="replace"), fast_file.read_text(
                    errors="replace")
                if clean_code:
                    slow, fast = clean(slow, language), clean(fast, language)
                if not slow.strip() or not fast.strip() or slow == fast:
                    continue
                pairs.append(Pair(benchmark=base.parent.name,
                                  file_id=f"{fast_dir.name}/{rel}",
                                  description=f"{base.name} -> {fast_dir.name}",
                                  slow=slow, fast=fast, language=language))
    return pairs


# -- cleaning -------------------------------------------------------------------------------

_HOST_NAMES = re.compile(r"^(main|usage|parse_\w+|print\w*|read_\w+|write_\w+|load_\w+|"
                         r"save_\w+|check\w*|verify\w*|init_\w+|timer\w*|get_time\w*)$")
_IO_CALL = re.compile(r"\b(printf|fprintf|puts|fopen|fread|fwrite|scanf|fscanf|getopt|"
                      r"gettimeofday|clock_gettime|cudaEventRecord|cudaMemcpy|malloc_host|"
                      r"exit)\s*\(")
_FUNCTION = re.compile(r"(?m)^[ \t]*((?:template\s*<[^>]*>\s*)?(?:[\w:*&<>,]+[ \t\n*&]+)+?"
                       r"(\w+)\s*\([^;{)]*\)[^;{]*)\{")


def clean(code: str, language: str = "c") -> str:
    """Keep the kernel, drop host boilerplate.

    CUDA: `__global__`/`__device__` functions, `__shared__`/`__constant__` declarations and
    texture declarations. C/C++: every function except `main`, argument parsing, I/O and
    timing helpers (by name, or because they call I/O or timing functions), plus the
    preprocessor lines and file-scope declarations they rely on.
    """
    code = strip_comments(code)
    functions = _functions(code)
    if language == "cuda":
        kept = [body for name, header, body in functions
                if "__global__" in header or "__device__" in header]
        decls = [ln for ln in _file_scope_lines(code, functions)
                 if re.search(r"__shared__|__constant__|\btexture\s*<|\bsurface\s*<", ln)]
        return "\n".join(decls + [""] * bool(decls) + kept).strip() + "\n" if kept else ""
    kept = [body for name, header, body in functions
            if not _HOST_NAMES.match(name) and not _IO_CALL.search(body)]
    if not kept:
        return ""
    prelude = [ln for ln in _file_scope_lines(code, functions)
               if ln.strip().startswith(("#include", "#define", "#pragma", "typedef", "static const",
                                         "const "))]
    return "\n".join(prelude + [""] * bool(prelude) + kept).strip() + "\n"


def _functions(code: str) -> list[tuple[str, str, str]]:
    """(name, header, full text) of each top-level function definition."""
    out, pos = [], 0
    while m := _FUNCTION.search(code, pos):
        name = m.group(2)
        if name in ("if", "for", "while", "switch", "return", "sizeof"):
            pos = m.end()
            continue
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        out.append((name, m.group(1), code[m.start():i].strip()))
        pos = i
    return out


def _file_scope_lines(code: str, functions: list[tuple[str, str, str]]) -> list[str]:
    rest = code
    for _, _, body in functions:
        rest = rest.replace(body, "")
    return [ln for ln in rest.splitlines() if ln.strip()]


# -- filtering, splitting -------------------------------------------------------------------

def filter_pairs(pairs: list[Pair], config: EvalConfig = EvalConfig(),
                 min_speedup: float = 1.0) -> tuple[list[Pair], list[tuple[Pair, str]]]:
    """Keep a pair with a task only when both kernels verify and the fast one is faster;
    record the measured speedup. Pairs without a task (e.g. CUDA) pass unchanged.
    Returns (kept, [(dropped, why)])."""
    runnable = [p for p in pairs if p.task]
    requests = [Request(get_task(p.task), code, None, config.replace(compare_baseline=False))
                for p in runnable for code in (p.slow, p.fast)]
    done = [0]

    def progress(_i: int, _outcome) -> None:  # minutes of silence otherwise
        done[0] += 1
        if done[0] == len(requests) or done[0] % max(1, len(requests) // 10) == 0:
            import sys
            print(f"[pairs] {done[0]}/{len(requests)} kernels evaluated", file=sys.stderr,
                  flush=True)

    outcomes = evaluate_many(requests, on_result=progress)
    kept = [p for p in pairs if not p.task]
    dropped = []
    for i, p in enumerate(runnable):
        slow, fast = outcomes[2 * i], outcomes[2 * i + 1]
        if not slow.ok:
            dropped.append((p, f"slow version: {slow.status.value} {slow.message}"))
        elif not fast.ok:
            dropped.append((p, f"fast version: {fast.status.value} {fast.message}"))
        else:
            speedup = slow.timing.median / fast.timing.median
            if speedup <= min_speedup:
                dropped.append((p, f"fast version is not faster ({speedup:.2f}x)"))
            else:
                kept.append(Pair(**{**asdict(p), "speedup": round(speedup, 3)}))
    return kept, dropped


def split(pairs: list[Pair], seed: int = 42, test_fraction: float = 0.2
          ) -> tuple[list[Pair], list[Pair]]:
    """Deterministic train/test split (KernelCompare's: seed 42, 80/20), independent of input
    order."""
    ordered = sorted(pairs, key=lambda p: (p.benchmark, p.file_id, p.slow, p.fast))
    random.Random(seed).shuffle(ordered)
    n_test = round(len(ordered) * test_fraction)
    return ordered[n_test:], ordered[:n_test]


# -- the starter set ------------------------------------------------------------------------

VARIANTS_DIR = Path(__file__).parent / "variants"


def starter_set() -> list[Pair]:
    """The suite's naive -> expert kernels, plus intermediate versions we wrote (variants/):
    naive -> intermediate and intermediate -> expert."""
    pairs = []
    for name in builtin_names():
        task = get_task(name)
        if task.expert is None:
            continue
        naive, expert = task.baseline.read_text(), task.expert.read_text()
        pairs.append(Pair(task.kind, f"{name}/naive->expert", f"{name}: naive to expert",
                          naive, expert, "c", name))
        for variant in sorted(VARIANTS_DIR.glob(f"{name}__*.c")):
            label = variant.stem.split("__", 1)[1].replace("_", " ")
            code = variant.read_text()
            pairs.append(Pair(task.kind, f"{name}/naive->{variant.stem}", f"{name}: {label}",
                              naive, code, "c", name))
            pairs.append(Pair(task.kind, f"{name}/{variant.stem}->expert",
                              f"{name}: from {label} to expert", code, expert, "c", name))
    return pairs


# -- model-assisted augmentation ------------------------------------------------------------

AUGMENT_PROMPT = """Rewrite this C kernel so that it computes exactly the same result but without
any performance optimizations: plain loops in the most straightforward order, no blocking, no
unrolling, no SIMD intrinsics, no OpenMP, no prefetching. Keep the function signature.

```c
{fast}
```

Answer with the complete code in one ```c code block."""


def augment(pairs: list[Pair], policy: Any, samples: int = 2,
            config: EvalConfig = EvalConfig()) -> list[Pair]:
    """For each fast kernel with a task, ask the model for a semantically equal, unoptimized
    version; keep it as a new pair only if it verifies and is slower."""
    from ..extract import FormatError, extract_code
    with_task = [p for p in pairs if p.task]
    prompts = [AUGMENT_PROMPT.format(fast=p.fast.strip()) for p in with_task]
    answers = policy.generate(prompts, samples) if prompts else []
    candidates = []
    for p, texts in zip(with_task, answers):
        sig = get_task(p.task).signature
        for t in texts:
            try:
                candidates.append((p, extract_code(t, sig)))
            except FormatError:
                continue
    new, _ = filter_pairs([Pair(p.benchmark, f"{p.file_id}#augmented{i}",
                                f"{p.description} (model-written slow version)", code, p.fast,
                                p.language, p.task)
                           for i, (p, code) in enumerate(candidates)], config)
    return new


# -- pairs from search runs -----------------------------------------------------------------

# A C kernel's speedup comes from one evaluation's median with no paired bound, and a copy of
# the naive kernel measured up to 1.19x on a noisy 2-core AMD EPYC: a child must beat its
# parent by this much, where no confidence bound says more.
RUN_PAIR_MARGIN = 1.1


def pairs_from_runs(run_dirs: Iterable[str | Path], exclude: Iterable[str] = (),
                    min_speedup: float = RUN_PAIR_MARGIN, from_naive: bool = False) -> list[Pair]:
    """Slow/fast pairs from search runs' verified improvements: each verified child with its
    verified parent (the task's naive kernel when the child had none, or its parent was the
    run's seed), kept when it is faster than the parent by the evaluator's bound (the 99.9%
    lower bound of the paired speedup, where the evaluator gives one) and by `min_speedup` on
    the medians. With `from_naive`, also every verified kernel faster than the naive kernel by
    the same rule, paired with the naive kernel (what an "improve the naive kernel" prompt
    teaches). A timing other programs disturbed gives no pair. Tasks in `exclude` (held out)
    never appear. The order is the runs' order, then candidate id; one pair per distinct
    (slow, fast) kernel pair: a rerun writes the same file."""
    from ..extract import normalize
    from ..store import RunStore
    excluded = set(exclude)
    pairs: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        if not RunStore.exists(run_dir):
            raise ValueError(f"{run_dir} holds no search run (no run store)")
        store = RunStore(run_dir)
        try:
            config = store.config() or {}
            by_id = {c.id: c for c in store.candidates()}
        finally:
            store.close()
        if config.get("task") is None or config["task"] in excluded:
            continue
        for pair in _run_pairs(run_dir.name, config, by_id, min_speedup, from_naive):
            key = (normalize(pair.slow), normalize(pair.fast))
            if key not in seen:
                seen.add(key)
                pairs.append(pair)
    return pairs


def merge_pairs(held: list[Pair], new: Iterable[Pair]) -> list[Pair]:
    """`held` (a committed pairs file, whose run stores may be gone with their machine), then
    the pairs of `new` it does not hold (the same slow and fast kernels, up to comments and
    white space). A new pair whose file_id is taken (a run of the same name on another machine)
    gets a suffix: ids stay unique."""
    from ..extract import normalize
    out = list(held)
    seen = {(normalize(p.slow), normalize(p.fast)) for p in held}
    ids = {p.file_id for p in held}
    for p in new:
        key = (normalize(p.slow), normalize(p.fast))
        if key in seen:
            continue
        seen.add(key)
        file_id, n = p.file_id, 2
        while file_id in ids:
            file_id, n = f"{p.file_id}~{n}", n + 1
        ids.add(file_id)
        out.append(p if file_id == p.file_id else replace(p, file_id=file_id))
    return out


def _trusted(c) -> bool:
    """A verified kernel of the run's own making whose timing nothing disturbed."""
    return (c.op != "seed" and c.ok and not c.copied and bool(c.outcome)
            and not c.outcome.get("disturbed"))


def _run_pairs(run_name: str, config: dict, by_id: dict, margin: float,
               from_naive: bool) -> Iterator[Pair]:
    """One run's pairs, in candidate order (see pairs_from_runs)."""
    from ..backends import backend_for
    from ..evaluate import is_baseline_copy
    from ..extract import FormatError
    task = get_task(config["task"])
    backend = backend_for(task)
    naive = task.baseline.read_text()

    def kernel(c) -> str | None:
        try:
            return naive if c is None or c.op == "seed" else backend.extract(task, c.completion)
        except (FormatError, ValueError):
            return None

    def pair(c, parent, ratio: float, file_suffix: str = "") -> Pair | None:
        slow, fast = kernel(parent), kernel(c)
        if slow is None or fast is None or is_baseline_copy(task, fast):
            return None  # (a copy of the naive kernel timed fast is noise, whenever it ran)
        return Pair(task.kind, f"{task.name}/{run_name}#{c.id}{file_suffix}",
                    f"{task.name}: a search's verified improvement", slow, fast, task.language,
                    task.name, round(ratio, 3),
                    {"run": run_name, "child": c.id, "parent": parent.id if parent else None,
                     "op": c.op, "child_speedup_over_naive": round(c.outcome["speedup"], 3),
                     "model": config.get("model")})

    for c in sorted(by_id.values(), key=lambda c: c.id):
        if not _trusted(c) or not c.outcome.get("speedup"):
            continue
        over_naive, low = c.outcome["speedup"], c.outcome.get("speedup_low")
        naive_beaten = over_naive >= margin and (low is None or low > 1.0)
        parent = by_id.get(c.parent_id) if c.parent_id is not None else None
        if parent is None or parent.op == "seed":
            if naive_beaten and (made := pair(c, None, over_naive)):
                yield made
            continue
        if _trusted(parent) and parent.outcome.get("speedup"):
            ratio = over_naive / parent.outcome["speedup"]
            if ratio >= margin and (made := pair(c, parent, ratio)):
                yield made
        if from_naive and naive_beaten and (made := pair(c, None, over_naive, "/naive")):
            yield made
