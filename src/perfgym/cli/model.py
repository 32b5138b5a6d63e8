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


@model_app.command("int8")
@_guard
def model_int8(model: str = typer.Argument(
        ..., help="a named model (coder, smollm2) or a .gguf that transformers reads"),
        out: str = typer.Argument(..., help="the checkpoint's directory (written once)")) -> None:
    """Write a GGUF model again as an int8 checkpoint (int8 weights per channel, int8
    activations per token) that vLLM's CPU build serves: on a CPU without BF16 it decoded
    the coder's search batch faster than the fast engine's FP32. A search writes and runs it
    by itself where vLLM's environment is installed ($PERFGYM_VLLM_PYTHON); this command is
    for serving it yourself: `vllm serve OUT`, then `perfgym search --model OUT --base-url
    http://127.0.0.1:8000/v1`."""
    from pathlib import Path

    from ..models import ModelUnavailable, is_named, named_gguf
    gguf = Path(model).expanduser()
    if is_named(model):
        try:
            gguf = named_gguf(model)
        except ModelUnavailable as exc:
            raise UserError(str(exc)) from None
    elif gguf.suffix != ".gguf" or not gguf.is_file():
        raise UserError(f"{model}: not a named model or a .gguf file; give coder or the "
                        f"path of a .gguf")
    if Path(out).exists() and not Path(out).is_dir():
        raise UserError(f"{out}: exists and is not a directory; give a directory to write")
    try:
        import safetensors  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise UserError("writing an int8 checkpoint needs the local extra: "
                        "pip install 'perfgym[local]'") from None
    from ..engine.int8_checkpoint import write_int8_checkpoint
    print(write_int8_checkpoint(gguf, out))
