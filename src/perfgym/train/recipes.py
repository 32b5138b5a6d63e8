"""Recipes: a TOML file with [pairs], [sft] and [grpo] sections, run in that order. `smoke`
shrinks everything to minutes on the CPU and, without a model path, uses the tiny local model."""
from __future__ import annotations

import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..config import EvalConfig
from . import grpo, sft
from .pairs import filter_pairs, split, starter_set, write_pairs

SMOKE_GRPO = {"steps": 2, "G": 2, "groups_per_step": 1, "fixed_prompts": 1,
              "max_completion_length": 64, "save_steps": 1,
              "eval_overrides": {"max_time": 0.2, "max_samples": 10, "min_samples": 3}}
SMOKE_SFT = {"max_steps": 3, "batch_size": 2, "warmup_steps": 0, "max_length": 4096}


SHIPPED = Path(__file__).parent.parent / "recipes"  # the papers' experiments, in the package


def shipped() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.toml"))


def resolve(name_or_path: str | Path) -> Path:
    """A recipe file: a path, or the name of a shipped recipe (`perfgym train recipe
    online_rl_exp1_fixed`)."""
    path = Path(name_or_path)
    if path.is_file() or path.suffix == ".toml":
        return path
    if (SHIPPED / f"{path.name}.toml").is_file():
        return SHIPPED / f"{path.name}.toml"
    raise ValueError(f"recipe {name_or_path}: no such file or shipped recipe (shipped: "
                     f"{', '.join(shipped())})")


def load(path: str | Path) -> dict[str, Any]:
    path = resolve(path)
    try:
        recipe = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"recipe {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"recipe {path}: not valid TOML: {exc}") from None
    unknown = set(recipe) - {"pairs", "data", "sft", "grpo"}
    if unknown or not recipe:
        raise ValueError(f"recipe {path}: sections are [pairs] or [data], [sft] and [grpo]; got "
                         f"{', '.join(sorted(recipe)) or 'none'}")
    return recipe


def _settings(cls, values: dict[str, Any], where: str):
    names = {f.name for f in fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"[{where}] has unknown keys: {', '.join(sorted(unknown))}")
    tuples = {f.name for f in fields(cls) if "tuple" in str(f.type)}
    return cls(**{k: tuple(v) if k in tuples and isinstance(v, list) else v
                  for k, v in values.items()})


def check_overrides(recipe: dict[str, Any], overrides: dict[str, dict[str, Any]]) -> None:
    """A command-line value (`--sft-steps 4`) needs the recipe section it belongs to."""
    for section in overrides:
        given = _given(overrides, section)
        if given and section not in recipe:
            raise ValueError(f"the recipe has no [{section}] section for "
                             f"{', '.join(sorted(given))}")


def _given(overrides: dict[str, dict[str, Any]] | None, section: str) -> dict[str, Any]:
    """The values given for a section (flags left unset are None); they win over the recipe's
    and over --smoke's."""
    return {k: v for k, v in (overrides or {}).get(section, {}).items() if v is not None}


def build_sft_data(data: dict[str, Any], out: Path) -> Path:
    """[data]: SFT examples from verified kernels, in the form GRPO asks for. With
    `opened = true`: opened "improve" answers (sft_data.opened_examples) for every task named
    in `task` (comma-separated), the form search and GRPO use with answer_start."""
    from ..machine import machine_info
    from ..tasks import get_task
    from .sft_data import build_examples, opened_examples, write_examples
    unknown = set(data) - {"task", "threads", "max_chars", "opt", "opened"}
    if unknown:
        raise ValueError(f"[data] has unknown keys: {', '.join(sorted(unknown))}")
    config = EvalConfig(threads=data.get("threads"), opt=data.get("opt", "O3"))
    names = [n.strip() for n in str(data.get("task", "dgemm")).split(",") if n.strip()]
    if data.get("opened"):
        records, skipped = opened_examples([get_task(n) for n in names], machine_info(),
                                           config, max_body_chars=data.get("max_chars"))
    else:
        records, skipped = build_examples(get_task(names[0]), machine_info(), config,
                                          max_chars=data.get("max_chars"))
    if not records:
        raise ValueError(f"[data]: no kernel of {', '.join(names)} verified: {skipped}")
    path = out / "sft_data.jsonl"
    write_examples(path, records)
    return path


def run(path: str | Path, model_path: str | None, output_dir: str | Path,
        smoke: bool = False, overrides: dict[str, dict[str, Any]] | None = None,
        stages: tuple[str, ...] = ("pairs", "data", "sft", "grpo")) -> dict[str, Any]:
    recipe = load(path)
    check_overrides(recipe, overrides or {})
    recipe = {k: v for k, v in recipe.items() if k in stages}
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if model_path is None and smoke:
        from .tiny import build_tiny_model
        model_path = str(build_tiny_model(out / "tiny-model"))
    from ..models import resolve_model
    model_path = str(resolve_model(model_path))  # none given: the default model
    results: dict[str, Any] = {"model_path": model_path}
    sft_data = None
    if "data" in recipe:
        progress("building SFT examples from the task's verified kernels")
        sft_data = build_sft_data(recipe["data"], out)
        results["data"] = str(sft_data)

    if "pairs" in recipe:
        p = recipe["pairs"]
        if p.get("source", "starter") != "starter":
            raise ValueError("[pairs] source: only 'starter' is built in; point [sft] pairs at a "
                             "JSONL of your own instead")
        progress("filtering the starter pairs by running them (a few minutes)")
        pairs = starter_set()[:4] if smoke else starter_set()
        kept, dropped = filter_pairs(pairs, EvalConfig(**(SMOKE_GRPO["eval_overrides"]
                                                          if smoke else {})))
        train_pairs, test_pairs = split(kept, p.get("seed", 42), p.get("test_fraction", 0.2))
        write_pairs(out / "pairs_train.jsonl", train_pairs)
        write_pairs(out / "pairs_test.jsonl", test_pairs)
        results["pairs"] = {"kept": len(kept), "dropped": len(dropped),
                            "train": len(train_pairs), "test": len(test_pairs)}

    if "sft" in recipe:
        progress("SFT")
        values = {"pairs": str(sft_data or out / "pairs_train.jsonl"), **recipe["sft"],
                  "model_path": model_path, "output_dir": str(out / "sft")}
        if smoke:
            values.update(SMOKE_SFT)
        values.update(_given(overrides, "sft"))
        settings = _settings(sft.SFTSettings, values, "sft")
        sft.train(settings)
        model_path = str(out / "sft" / ("merged" if settings.lora else "final"))
        results["sft"] = model_path

    if "grpo" in recipe:
        progress("GRPO")
        values = {**recipe["grpo"], "model_path": model_path, "output_dir": str(out / "grpo")}
        if smoke:
            values.update(SMOKE_GRPO)
        values.update(_given(overrides, "grpo"))
        run_ = grpo.train(_settings(grpo.GRPOSettings, values, "grpo"))
        results["grpo"] = {"steps": len(run_.reward.step_stats),
                           "completions": len(run_.reward.seen),
                           "last": run_.reward.step_stats[-1] if run_.reward.step_stats else None}
    return results


def progress(stage: str) -> None:
    import sys
    print(f"[recipe] {stage}", file=sys.stderr, flush=True)
