"""perfgym's worker for PyTorch/Triton/CUDA tasks (runs in the sandbox, driven by the parent).

    python torch_worker.py problem|reference|candidate|replayer CMD_FD REPLY_FD [options.json]

Three of these run per evaluation, each in its own sandboxed process: the *problem* worker
imports the task's problem file and makes inputs from seeds the parent keeps secret; the
*reference* worker runs Model; the *candidate* worker imports only the candidate and runs
ModelNew; the *replayer* never imports the candidate, and runs the kernel program the
candidate's forward was traced to (kernel_program.py). The reference and candidate workers do exactly the same work between calls (input
making would leave one of them in a different state), and are timed alike. The parent
sends commands on CMD_FD and reads replies on REPLY_FD; it compares outputs and times calls
with its own clock. Nothing here decides a verdict: in the candidate's process this code is as
compromised as the candidate itself, and the parent treats every reply as a claim to check.

A message is an 8-byte little-endian length, a JSON header of that length, then the raw bytes
of every tensor the header lists ({"dtype", "shape"}), in order.
"""
import importlib.util
import json
import os
import struct
import sys
import time
import traceback

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


# ---- the wire ---------------------------------------------------------------------------------

def read_exact(fd, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        chunk = os.readv(fd, [view[got:]])
        if chunk == 0:
            raise EOFError("the parent closed the channel")
        got += chunk
    return buf


def read_into(fd, view):
    got = 0
    while got < len(view):
        chunk = os.readv(fd, [view[got:]])
        if chunk == 0:
            raise EOFError("the parent closed the channel")
        got += chunk


def write_all(fd, data):
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


def receive(fd):
    header = json.loads(read_exact(fd, struct.unpack("<Q", read_exact(fd, 8))[0]))
    tensors = []
    for meta in header.get("tensors", []):
        dtype = DTYPES[meta["dtype"]]
        count = 1
        for d in meta["shape"]:
            count *= d
        # read straight into torch's own (64-byte aligned) storage: a tensor over a bytearray
        # sits wherever malloc put it, at any alignment, and vector kernels care
        flat = torch.empty(count, dtype=dtype)
        if count:
            read_into(fd, memoryview(flat.view(torch.uint8).numpy()))
        tensors.append(flat.reshape(meta["shape"]))
    return header, tensors


def send(fd, header, tensors=()):
    blobs = []
    header = dict(header, tensors=[])
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        header["tensors"].append({"dtype": NAMES[t.dtype], "shape": list(t.shape)})
        blobs.append(t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b"")
    data = json.dumps(header).encode()
    write_all(fd, struct.pack("<Q", len(data)) + data)
    for blob in blobs:
        write_all(fd, blob)


def encode(value, tensors):
    """Arguments as JSON, tensors replaced by {"tensor": index} into `tensors`."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"tensor": len(tensors) - 1}
    if isinstance(value, tuple):
        return {"tuple": [encode(v, tensors) for v in value]}
    if isinstance(value, list):
        return [encode(v, tensors) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot send a {type(value).__name__} between processes")


def decode(value, tensors):
    if isinstance(value, dict):
        if "tensor" in value:
            return tensors[value["tensor"]]
        return tuple(decode(v, tensors) for v in value["tuple"])
    if isinstance(value, list):
        return [decode(v, tensors) for v in value]
    return value


# ---- the models -------------------------------------------------------------------------------

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def shrink(problem, budget):
    """Scale the problem's module-level sizes (ints, and ints in tuples and lists) down by
    powers of two until no input or output has more than `budget` elements. Shapes come from the
    meta device, so nothing is allocated; a factor that breaks the model (sizes that had to
    agree) is not taken."""
    original = {k: v for k, v in vars(problem).items() if not k.startswith("_") and (
        type(v) is int or isinstance(v, (tuple, list)) and v and all(type(x) is int for x in v))}

    def scaled(v, factor):
        if isinstance(v, (tuple, list)):
            return type(v)(scaled(x, factor) for x in v)
        return max(8, v // factor) if v >= 32 else v

    def largest(factor):
        for k, v in original.items():
            setattr(problem, k, scaled(v, factor))
        with torch.device("meta"):
            inputs = problem.get_inputs()
            out = problem.Model(*problem.get_init_inputs())(*inputs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        return max(t.numel() for t in [*inputs, *outs] if isinstance(t, torch.Tensor))

    factor, good = 1, None
    while factor <= 1 << 20:
        try:
            size = largest(factor)
        except Exception:  # no meta kernel, or sizes that had to agree no longer do
            break
        good = factor
        if size <= budget:
            break
        factor *= 2
    for k, v in original.items():
        setattr(problem, k, scaled(v, good or 1))
    return {k: getattr(problem, k) for k, v in original.items() if getattr(problem, k) != v}


def footprint(problem):
    """Bytes of one input set and of one output set, from the meta device (None if unknown)."""
    try:
        with torch.device("meta"):
            inputs = problem.get_inputs()
            out = problem.Model(*problem.get_init_inputs())(*inputs)
    except Exception:
        return None
    outs = out if isinstance(out, (tuple, list)) else [out]
    size = lambda ts: sum(t.numel() * t.element_size() for t in ts  # noqa: E731
                          if isinstance(t, torch.Tensor))
    return {"inputs": size(inputs), "outputs": size(outs)}


def outputs_of(result):
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    for i, t in enumerate(outs):
        if type(t) is not torch.Tensor:  # a subclass could compute lazily, after the clock
            raise TypeError(f"forward returned {type(t).__name__} as output {i}, "
                            "not a torch.Tensor")
    return outs


def main():
    role, cmd_fd, reply_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    device = options.get("device", "cpu")
    models = {}
    # the replayer's: kernel module source -> its rebuilt kernels, and "staged": the program,
    # its constants and inputs to run next (and, once run, its outputs)
    kernels = {}
    extensions = {"load_inline": 0}  # the candidate's: how often it built CUDA code
    module = None
    try:
        if role == "problem":  # makes inputs; shrinks the problem and measures it first
            module = load("problem.py", "perfgym_problem")
            if options.get("input_budget"):
                options["shrunk"] = shrink(module, options["input_budget"])
            ready = {"shrunk": options.get("shrunk", {}), "footprint": footprint(module)}
        elif role == "reference":  # runs Model, at the sizes the problem worker chose
            module = load("problem.py", "perfgym_problem")
            for k, v in options.get("sizes", {}).items():
                setattr(module, k, type(getattr(module, k))(v))
            ready = {}
        elif role == "replayer":  # runs kernel programs; never imports the candidate
            ready = {}
        else:
            if options.get("count_extensions"):  # (a claim the parent can only lose by)
                count_extensions(extensions)
            module = load("candidate.py", "perfgym_candidate")
            if not hasattr(module, "ModelNew"):
                raise AttributeError("the candidate defines no ModelNew")
            ready = {}
        send(reply_fd, {"ready": True, **ready})
    except BaseException as exc:
        send(reply_fd, {"error": f"{type(exc).__name__}: {exc}", "stage": "import",
                        "traceback": traceback.format_exc()[-4000:]})
        return
    while True:
        try:
            header, tensors = receive(cmd_fd)
        except EOFError:
            return
        op = header["op"]
        try:
            if op == "quit":  # at once: the interpreter's teardown with torch loaded took
                # 0.4 s a worker, and no exit hook of the candidate's runs
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            if op == "ping":  # the parent's check that nothing of an earlier exchange is left
                send(reply_fd, {"pong": header.get("nonce")})
            elif op == "init_args":  # problem only: the constructor's arguments
                out = []
                args = encode(list(module.get_init_inputs()), out)
                send(reply_fd, {"args": args}, out)
            elif op == "inputs":  # problem only: one input set from a seed the parent chose
                torch.manual_seed(header["seed"])
                out = []
                args = encode(list(module.get_inputs()), out)
                send(reply_fd, {"args": args}, out)
            elif op == "build":
                cls = module.Model if role == "reference" else module.ModelNew
                args = decode(header["args"], tensors)
                torch.manual_seed(header["seed"])  # the same weights on both sides
                models[header["slot"]] = cls(*args).to(device)
                send(reply_fd, {"built": header["slot"]})
            elif op == "call":
                send_call(reply_fd, models[header["slot"]], decode(header["args"], tensors),
                          device, header.get("return_inputs", False))
            elif op == "extensions" and role == "candidate":
                send(reply_fd, extensions)
            elif op == "trace" and role == "candidate":
                send_trace(reply_fd, models[header["slot"]], header)
            elif op in ("stage", "run", "outputs") and role == "replayer":
                ask = None
                if options.get("checks_by_parent"):  # the parent forks each kernel check
                    def ask(request):
                        send(reply_fd, {"check": request})
                        answer, _ = receive(cmd_fd)
                        return answer
                replayer_op(reply_fd, op, header, tensors, kernels, device, ask)
            else:
                raise ValueError(f"unknown command {op!r}")
        except BaseException as exc:  # reported, and the parent decides what it means
            send(reply_fd, {"error": f"{type(exc).__name__}: {exc}", "stage": op,
                            "traceback": traceback.format_exc()[-4000:]})


def count_extensions(counts):
    """load_inline and load counted where the candidate calls them: CUDA code that ran."""
    from torch.utils import cpp_extension

    def counted(build):
        def run(*args, **kwargs):
            counts["load_inline"] += 1
            return build(*args, **kwargs)
        return run
    cpp_extension.load_inline = counted(cpp_extension.load_inline)
    cpp_extension.load = counted(cpp_extension.load)


def send_call(reply_fd, model, args, device, return_inputs):
    args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        if device == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = model(*args)
            torch.cuda.synchronize()  # before the end event: every kernel has finished
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            result = model(*args)
            seconds = time.perf_counter() - t0
    outs = outputs_of(result)
    extra = [a for a in args if isinstance(a, torch.Tensor)] if return_inputs else []
    send(reply_fd, {"seconds": seconds, "outputs": len(outs)}, [*outs, *extra])


def send_trace(reply_fd, model, header):
    """Forward traced on meta tensors of the inputs' shapes (the parent sends no values)."""
    import kernel_program
    metas = [torch.empty(m["shape"], dtype=DTYPES[m["dtype"]], device="meta")
             for m in header["metas"]]
    program, constants = kernel_program.trace_forward(model, decode(header["args"], metas))
    send(reply_fd, {"program": program}, constants)


def replayer_op(reply_fd, op, header, tensors, kernels, device, ask=None):
    """A candidate's program run on real inputs, with its kernels rebuilt from the source the
    parent read (kernel_program.py says what is checked; `ask` sends a check to the parent).
    "stage" takes the program and its inputs, "run" replays it once and says only that it is
    done (the parent times that exchange with its own clock), "outputs" sends what it gave."""
    import kernel_program
    try:
        if op == "stage":
            source, n = header["kernels"], header["constants"]
            if source not in kernels:
                kernels[source] = kernel_program.Kernels(source, ask=ask)
            args = decode(header["args"], tensors[n:])
            kernels["staged"] = {
                "program": header["program"], "constants": tensors[:n], "kernels": source,
                "inputs": [a.to(device) for a in args if isinstance(a, torch.Tensor)]}
            send(reply_fd, {"staged": True})
        elif op == "run":
            staged = kernels["staged"]
            with torch.no_grad():
                staged["outputs"] = kernel_program.replay(
                    staged["program"], staged["constants"], staged["inputs"],
                    kernels[staged["kernels"]], device)
            if device == "cuda":
                torch.cuda.synchronize()
            send(reply_fd, {"ran": True})
        else:
            outs = kernels["staged"]["outputs"]
            send(reply_fd, {"outputs": len(outs)}, outs)
    except kernel_program.Refused as exc:
        send(reply_fd, {"refused": str(exc)})


if __name__ == "__main__":
    main()
