"""`perfgym model`: named models fetched, verified and cached once."""
from __future__ import annotations

from typing import Optional

import typer

from .common import UserError, _guard, app


model_app = typer.Typer(help="The local models search and training use.",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("fetch")
@_guard
def model_fetch(model: Optional[str] = typer.Argument(
        None, help="a model name (smollm2, the default; coder: Qwen2.5-Coder-1.5B-Instruct, "
                   "1.1 GB) or a .gguf to convert")) -> None:
    """Fetch, verify and cache a model once (first use does it too); print where it is.
    smollm2 and a .gguf are converted for training; coder is kept as the GGUF it ships as."""
    from ..models import ModelUnavailable, is_named, named_gguf, resolve_model
    try:
        if model is not None and is_named(model) and model != "smollm2":
            print(named_gguf(model))
        else:
            print(resolve_model(model))
    except ModelUnavailable as exc:
        raise UserError(str(exc)) from None


@model_app.command("list")
@_guard
def model_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """The named models: name, model, size, SHA-256, and whether it is cached here."""
    import json

    from ..models import NAMED_MODELS, models_dir
    rows = [{"name": m.name, "model": m.title, "size": m.size, "sha256": m.sha256,
             "cached": (models_dir() / m.gguf).is_file()} for m in NAMED_MODELS.values()]
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        size = f"{r['size'] / 1e9:.2f} GB" if r["size"] else "93 MB"
        print(f"{r['name']:8s} {r['model']:38s} {size:>8s}  "
              f"{'cached' if r['cached'] else 'fetched on first use'}")
