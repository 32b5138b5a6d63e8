"""The parent's end of a torch worker: a sandboxed process spoken to over two pipes it owns.

The worker (harness/torch_worker.py) reads commands on one pipe and answers on the other; the
wire format is described there. Everything that arrives from a candidate's worker is a claim:
sizes are checked against what the parent expects before a byte of payload is read, every read
and write has the evaluation's deadline, and a worker that stops talking is a dead worker.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ... import sandbox
from ...sandbox_python import SandboxPython

ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
            "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
MAX_HEADER = 1 << 20
PIPE_BYTES = 1 << 20  # bigger pipe buffers: fewer wake-ups per megabyte moved
_F_SETPIPE_SZ = 1031


class WorkerDied(Exception):
    """The worker exited, closed its channel or broke the protocol."""


class WorkerTimeout(Exception):
    """The evaluation's deadline passed while waiting for the worker."""


@dataclass
class Tensor:
    """A tensor as bytes on the wire: what the parent forwards and compares."""

    dtype: str
    shape: list[int]
    data: bytearray | None = None  # None until read (or when streamed past)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * ITEMSIZE[self.dtype]

    def meta(self) -> dict:
        return {"dtype": self.dtype, "shape": self.shape}

    def array(self) -> np.ndarray:
        return as_numeric(self.data, self.dtype).reshape(self.shape)


def as_numeric(buf, dtype: str) -> np.ndarray:
    """NumPy view (or float32 copy, for bfloat16, which NumPy lacks) of raw tensor bytes."""
    if dtype == "bfloat16":
        return (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(buf, np.bool_ if dtype == "bool" else np.dtype(dtype))


def parse_metas(header: dict) -> list[Tensor]:
    metas = header.get("tensors", [])
    if not isinstance(metas, list):
        raise WorkerDied("malformed reply: tensors is not a list")
    out = []
    for m in metas:
        if (not isinstance(m, dict) or m.get("dtype") not in ITEMSIZE
                or not isinstance(m.get("shape"), list)
                or not all(type(d) is int and 0 <= d < 1 << 40 for d in m["shape"])):
            raise WorkerDied(f"malformed tensor description {str(m)[:100]}")
        out.append(Tensor(m["dtype"], m["shape"]))
    return out


class Worker:
    """One sandboxed worker process and its two pipes."""

    def __init__(self, role: str, workdir: Path, files: dict[str, str], options: dict,
                 limits: sandbox.Limits, python: SandboxPython, env: dict[str, str],
                 deadline: float, template=None) -> None:
        self.role, self.deadline = role, deadline
        for name, text in files.items():
            (workdir / name).write_text(text)
        for script in ("torch_worker.py", "kernel_program.py", "kernel_check.py"):
            (workdir / script).write_text(
                resources.files("perfgym.harness").joinpath(script).read_text())
        cmd_r, self.cmd = os.pipe()
        self.reply, reply_w = os.pipe()
        for fd in (self.cmd, reply_w):
            try:
                fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
            except OSError:
                pass  # a smaller pipe is only slower
        os.set_blocking(self.cmd, False)
        os.set_blocking(self.reply, False)
        py = python
        argv = [py.executable, "torch_worker.py", role, str(cmd_r), str(reply_w),
                json.dumps(options)]
        self.result: sandbox.RunResult | None = None
        self._closed = self._asked = False
        self._child_ends = [cmd_r, reply_w]

        self._proc = None

        def close_child_ends(proc=None) -> None:
            self._proc = proc or self._proc
            while self._child_ends:
                os.close(self._child_ends.pop())

        def supervise() -> None:
            from .template import TemplateUnavailable, note_fallback
            try:
                if template is not None:  # forked from a template that has imported torch
                    try:
                        self.result = template.run(role, options, workdir, limits, env,
                                                   (cmd_r, reply_w), close_child_ends)
                        return
                    except TemplateUnavailable as exc:  # nothing ran: started the usual way
                        note_fallback(f"{role} worker", str(exc))
                self.result = sandbox.run(argv, workdir, limits, env=env, expose=py.expose,
                                          pass_fds=(cmd_r, reply_w), on_start=close_child_ends)
            finally:
                close_child_ends()

        self._thread = threading.Thread(target=supervise, daemon=True)
        self._thread.start()

    # ---- the wire ----
    def _wait(self, fd: int, event: int) -> None:
        poller = select.poll()
        poller.register(fd, event)
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout()
            if poller.poll(min(left, 0.25) * 1000):
                return
            if not self._thread.is_alive():
                raise WorkerDied("the worker exited")

    def _write(self, data) -> None:
        view = memoryview(data).cast("B")
        while view:
            self._wait(self.cmd, select.POLLOUT)
            try:
                view = view[os.write(self.cmd, view):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise WorkerDied("the worker closed its channel") from None

    def _read_into(self, view: memoryview) -> None:
        while view:
            self._wait(self.reply, select.POLLIN)
            try:
                n = os.readv(self.reply, [view])
            except BlockingIOError:
                continue
            if n == 0:
                raise WorkerDied("the worker closed its channel")
            view = view[n:]

    def send(self, header: dict, tensors: list[Tensor] = ()) -> None:
        data = json.dumps({**header, "tensors": [t.meta() for t in tensors]}).encode()
        self._write(struct.pack("<Q", len(data)) + data)
        for t in tensors:
            self._write(t.data)

    def header(self) -> dict:
        size = bytearray(8)
        self._read_into(memoryview(size))
        (n,) = struct.unpack("<Q", size)
        if n > MAX_HEADER:
            raise WorkerDied(f"a reply header of {n} bytes")
        raw = bytearray(n)
        self._read_into(memoryview(raw))
        try:
            header = json.loads(raw)
        except (ValueError, RecursionError):  # a forged header nested deep enough to recurse
            raise WorkerDied("a reply that is not JSON the parent can read") from None
        if not isinstance(header, dict):
            raise WorkerDied("a reply that is not a JSON object")
        return header

    def read(self, t: Tensor) -> Tensor:
        t.data = bytearray(t.nbytes)
        self._read_into(memoryview(t.data))
        return t

    def stream(self, t: Tensor, chunk_bytes: int):
        """Yield (offset in elements, numeric chunk) without holding the whole tensor."""
        item = ITEMSIZE[t.dtype]
        step = max(item, chunk_bytes // item * item)
        buf = bytearray(min(step, t.nbytes))
        done = 0
        while done < t.nbytes:
            n = min(step, t.nbytes - done)
            view = memoryview(buf)[:n]
            self._read_into(view)
            yield done // item, as_numeric(view, t.dtype)
            done += n

    def request(self, header: dict, tensors: list[Tensor] = ()) -> dict:
        """Send a command and read the reply's header (its tensors are left for the caller)."""
        self.send(header, tensors)
        return self.header()

    @property
    def usable(self) -> bool:
        """Its pipes are still open (after ask_to_quit their numbers may belong to others)."""
        return not self._asked

    def ask_to_quit(self) -> None:
        """Send "quit" and close the pipes, not waiting for the end (close() waits): workers
        asked together end together."""
        if self._asked:
            return
        self._asked = True
        try:
            self.send({"op": "quit"})
        except (WorkerDied, WorkerTimeout, OSError):
            pass
        os.close(self.cmd)
        os.close(self.reply)

    def close(self) -> sandbox.RunResult | None:
        """Stop the worker (idempotent: a second close must not close a reused fd number)."""
        if self._closed:
            return self.result
        self._closed = True
        self.ask_to_quit()
        self._thread.join(timeout=2.0)
        if self._thread.is_alive() and self._proc is not None:
            sandbox.kill_group(self._proc)  # a worker that ignores "quit" is not waited for
            self._thread.join()
        return self.result
