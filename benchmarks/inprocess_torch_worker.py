"""The OLD in-process protocol (perfgym before the trust-model rewrite), kept only so
benchmarks/torch_isolation_cost.py can measure what the isolation costs. Not used by perfgym.

    python torch_worker.py manifest.json

For each trial (fresh seed): build the reference Model and the candidate ModelNew from the same
seed, make inputs, run the candidate FIRST on its own clone of the inputs (so it cannot see the
reference's output), check its inputs are unchanged, then run the reference on another clone.
Both outputs are saved for the parent to compare (the comparison does not happen here, where the
candidate's code has run). Then both models are timed the same way: CUDA events with a
synchronize before the end event and an L2 flush between samples on a GPU, wall clock on the CPU.
Kernel launches of the candidate's own Triton kernels are counted, and on a GPU the profiler
lists the CUDA kernels that ran, so a decoy (a kernel defined but never launched) shows.
"""
import importlib.util
import json
import math
import sys
import time
import traceback

import numpy as np
import torch

LAUNCHES = {}


def count_triton_launches():
    """Count launches per kernel name, for JIT and interpreter mode alike (installed before the
    candidate is imported)."""
    try:
        from triton.runtime import jit
        classes = [jit.JITFunction]
        try:
            from triton.runtime import interpreter
            classes.append(interpreter.InterpretedFunction)
        except ImportError:
            pass
    except ImportError:
        return
    for cls in classes:
        original = cls.run

        def run(self, *args, _original=original, **kwargs):
            fn = getattr(self, "fn", None)
            name = getattr(fn, "__name__", None) or getattr(self, "__name__", "kernel")
            LAUNCHES[name] = LAUNCHES.get(name, 0) + 1
            return _original(self, *args, **kwargs)
        cls.run = run


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def to_device(values, device):
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def clone(values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def unchanged(a, b):
    return all(torch.equal(x, y) or (x.is_floating_point() and torch.allclose(
        x, y, rtol=0, atol=0, equal_nan=True)) if isinstance(x, torch.Tensor) else x == y
        for x, y in zip(a, b))


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def save(tensor_or_tuple, prefix):
    outs = tensor_or_tuple if isinstance(tensor_or_tuple, (tuple, list)) else [tensor_or_tuple]
    shapes = []
    for i, t in enumerate(outs):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"forward returned a {type(t).__name__}, not a tensor")
        arr = t.detach().to("cpu")
        dtype = str(arr.dtype).replace("torch.", "")
        if arr.dtype in (torch.float16, torch.bfloat16):
            arr = arr.float()
        np.save(f"{prefix}_{i}.npy", arr.numpy())
        shapes.append({"shape": list(t.shape), "dtype": dtype})
    return shapes


def time_model(model, inputs, device, policy, flush):
    samples = []
    with torch.no_grad():
        for _ in range(policy["warmup"]):
            model(*inputs)
        sync(device)
        started = time.perf_counter()
        while True:
            if flush is not None:
                flush.zero_()  # evict the L2 so every sample starts cold alike
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                model(*inputs)
                torch.cuda.synchronize()  # before the end event: the kernel has finished
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                model(*inputs)
                samples.append(time.perf_counter() - t0)
            n = len(samples)
            if n >= policy["max_samples"]:
                break
            if n >= policy["min_samples"] and trimmed_cv(samples) <= policy["cv_target"]:
                break
            if time.perf_counter() - started > policy["max_time"] and n >= 3:
                break
    return samples


def trimmed_cv(samples):
    s = sorted(samples)[: len(samples) - len(samples) // 10]
    if len(s) < 2:
        return math.inf
    mean = sum(s) / len(s)
    var = sum((x - mean) ** 2 for x in s) / (len(s) - 1)
    return math.sqrt(var) / mean if mean > 0 else math.inf


def main():
    manifest = json.load(open(sys.argv[1]))
    device = manifest["device"]
    result = {"stage": "import", "trials": [], "device": device}
    try:
        count_triton_launches()
        problem = load("problem.py", "perfgym_problem")
        candidate = load("candidate.py", "perfgym_candidate")
        if not hasattr(candidate, "ModelNew"):
            raise AttributeError("the candidate defines no ModelNew")
        result["stage"] = "run"
        for trial in range(manifest["trials"]):
            seed = manifest["seed"] + 7919 * trial
            init = problem.get_init_inputs()
            torch.manual_seed(seed)
            reference = problem.Model(*init).to(device)
            torch.manual_seed(seed)
            model_new = candidate.ModelNew(*init).to(device)
            torch.manual_seed(seed + 1)
            pristine = to_device(problem.get_inputs(), device)
            for_new, for_ref = clone(pristine), clone(pristine)
            before = sum(LAUNCHES.values())
            with torch.no_grad():
                if trial == 0 and device == "cuda":
                    from torch.profiler import ProfilerActivity, profile
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        out_new = model_new(*for_new)
                        sync(device)
                    result["cuda_kernels"] = sorted({e.name for e in prof.events()
                                                     if e.device_type.name == "CUDA"})
                else:
                    out_new = model_new(*for_new)
                    sync(device)
                launches = sum(LAUNCHES.values()) - before
                modified = not unchanged(for_new, pristine)
                out_ref = reference(*for_ref)
                sync(device)
            result["trials"].append({"seed": seed, "launches": launches,
                                     "input_modified": modified,
                                     "new": save(out_new, f"new{trial}"),
                                     "ref": save(out_ref, f"ref{trial}")})
        result["stage"] = "time"
        flush = None
        if device == "cuda":
            flush = torch.empty(manifest["flush_bytes"] // 4, dtype=torch.float32, device=device)
        inputs = to_device(problem.get_inputs(), device)
        policy = manifest["timing"]
        result["time_new"] = time_model(model_new, clone(inputs), device, policy, flush)
        result["time_ref"] = time_model(reference, clone(inputs), device, policy, flush)
        result["launch_counts"] = LAUNCHES
        result["stage"] = "done"
    except BaseException as exc:  # report, do not crash: the parent reads the stage
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
    with open("result.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
