"""A batch's workers forked from a template process that has imported torch.

Starting a worker costs a torch import, about a second of a 2-core machine's CPU, and a
candidate needs two of them (its own worker and the replayer). Within a batch, a template
process (harness/torch_template.py) imports torch (and Triton) once and forks every worker from
that state; a second template, of kind "checks", has imported Triton's front end and forks one
checker for each of the replayers' kernel checks. A forked worker gets what `sandbox.run()` gives a command: a uid of its own (held here,
and everything under it killed when the worker ends), its own network and mount namespaces
with an empty /tmp, rlimits, a session of its own, no capabilities, death with the template
(which dies with this driver), a scrubbed environment and its own work directory. It is a copy
of the template as it was before any worker ran: no thread, patch, file or cache entry of an
earlier worker is there.

Only a root driver with every isolation layer uses templates (`sandbox.can_fork_workers`);
elsewhere, and whenever a template cannot serve, workers start as before. A "faster" finding's
replicate starts every worker fresh (protocol.CPU_REPLICATES).
"""
from __future__ import annotations

import array
import collections
import itertools
import json
import os
import shutil
import socket
import threading
import time
import warnings
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

from ... import sandbox
from ...sandbox_python import SandboxPython

STARTUP_SECONDS = 120.0  # a cold torch import on a busy machine
SPAWN_SECONDS = 10.0
SCRIPTS = ("torch_template.py", "torch_worker.py", "kernel_program.py", "kernel_check.py")
CHECK_LIMITS = sandbox.Limits(wall_seconds=120, cpu_seconds=120, address_space=16 << 30,
                              file_size=16 << 20, processes=64, output_bytes=64 << 10)


class TemplateUnavailable(Exception):
    """The template cannot fork this worker: start it the usual way."""


# Workers (and checks) that a template could not serve, by role and reason. A fallback changes
# no verdict, only the cost (a torch import each), so it is silent to the caller; counted and
# warned of once per reason, a template that never serves one kind is seen (the problem and
# reference workers went unforked for a whole stop).
FALLBACKS: collections.Counter = collections.Counter()
_fallbacks_lock = threading.Lock()


def note_fallback(role: str, why: str) -> None:
    with _fallbacks_lock:
        first = not any(reason == why for _, reason in FALLBACKS)
        FALLBACKS[(role, why)] += 1
    if first:
        warnings.warn(f"perfgym: a {role} could not be forked from its template ({why}); "
                      "such workers start fresh, a torch import each", RuntimeWarning,
                      stacklevel=2)


class Template:
    """`kind`: "workers" (torch workers) or "checks" (Triton front-end checks of kernels,
    forked from a template that imported Triton's front end and no torch)."""

    def __init__(self, env: dict[str, str], python: SandboxPython, kind: str = "workers") -> None:
        self.workdir = sandbox.make_workdir("perfgym-torch-template-")
        for script in SCRIPTS:
            (self.workdir / script).write_text(
                resources.files("perfgym.harness").joinpath(script).read_text())
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = open(self.workdir / "template.log", "wb")
        shadowed = [d for d in sandbox.SHADOWED_DIRS if os.path.isdir(d)]
        try:
            self.proc = sandbox.start_template(
                [python.executable, "torch_template.py", str(child.fileno()),
                 json.dumps(shadowed), kind], self.workdir, env, python.expose,
                (child.fileno(),), self._log)
        finally:
            child.close()
        self._sock = parent
        self._cond = threading.Condition()
        self._replies: dict[int, dict] = {}
        self._exits: dict[int, int] = {}
        self._dead = False
        self._ids = itertools.count()
        parent.settimeout(STARTUP_SECONDS)
        try:
            hello = parent.recv(1 << 16)
        except OSError:
            hello = b""
        parent.settimeout(None)
        if not hello:
            self.close()
            raise TemplateUnavailable(f"the torch template did not start: {self.log_tail()}")
        self.pid = json.loads(hello)["pid"]
        threading.Thread(target=self._read, daemon=True).start()

    def log_tail(self) -> str:
        try:
            return (self.workdir / "template.log").read_text(errors="replace")[-500:].strip()
        except OSError:
            return ""

    def _read(self) -> None:
        while True:
            try:
                msg = self._sock.recv(1 << 16)
            except OSError:
                msg = b""
            with self._cond:
                if not msg:
                    self._dead = True
                    self._cond.notify_all()
                    return
                reply = json.loads(msg)
                if "exit" in reply:
                    self._exits[reply["exit"]] = reply["status"]
                else:
                    self._replies[reply["id"]] = reply
                self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return not self._dead and self.proc.poll() is None

    def _fork(self, request: dict, fds: list[int]) -> int:
        n = next(self._ids)
        with self._cond:
            if not self.alive:
                raise TemplateUnavailable("the torch template has ended")
            try:
                self._sock.sendmsg([json.dumps({**request, "id": n}).encode()],
                                   [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                     array.array("i", fds))])
            except OSError as exc:
                raise TemplateUnavailable(f"the torch template is unreachable: {exc}") from None
            deadline = time.monotonic() + SPAWN_SECONDS
            while n not in self._replies and not self._dead:
                if not self._cond.wait(deadline - time.monotonic()):
                    break
            reply = self._replies.pop(n, None)
        if reply is None:  # a late fork must not run beside the worker started instead
            self._end()
        if reply is None or "pid" not in reply:
            why = reply["error"] if reply else "no answer"
            raise TemplateUnavailable(f"the torch template could not fork a worker: {why}")
        return reply["pid"]

    def _wait_exit(self, pid: int, seconds: float) -> int | None:
        deadline = time.monotonic() + seconds
        with self._cond:
            while pid not in self._exits and not self._dead:
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    break
            return self._exits.pop(pid, None)

    def run(self, role: str, options: dict, workdir: Path, limits: sandbox.Limits,
            env: dict[str, str], pass_fds: tuple[int, int], on_start) -> sandbox.RunResult:
        """`sandbox.run()`'s contract for one worker forked from the template. Raises
        TemplateUnavailable (before anything ran) when it cannot fork."""
        start = time.monotonic()
        with sandbox.UidSlot() as uid:
            sandbox.hand_over(workdir, uid)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                pid = self._fork({
                    "uid": uid, "workdir": str(workdir), "role": role, "options": options,
                    "env": sandbox.scrubbed_env(workdir, env),
                    "limits": {name: int(getattr(limits, name)) for name in (
                        "cpu_seconds", "address_space", "file_size", "open_files",
                        "processes", "stack")}},  # (a pooled worker's CPU limit is a float)
                    [*pass_fds, out_w, err_w])
            except TemplateUnavailable:
                os.close(out_r)
                os.close(err_r)
                raise
            finally:
                os.close(out_w)
                os.close(err_w)
            if on_start is not None:
                on_start(SimpleNamespace(pid=pid))  # its own session: killpg(pid) reaches it
            output = _Output(limits.output_bytes, lambda: sandbox.kill_uid(uid))
            readers = [threading.Thread(target=output.drain, args=(fd, key), daemon=True)
                       for fd, key in ((out_r, "out"), (err_r, "err"))]
            for t in readers:
                t.start()
            status = self._wait_exit(pid, limits.wall_seconds - (time.monotonic() - start))
            timed_out = status is None and not self._dead
            if status is None:
                sandbox.kill_uid(uid)
                status = self._wait_exit(pid, 5.0)
            wall = time.monotonic() - start
            sandbox.kill_uid(uid)  # what left its session dies too
            for t in readers:
                t.join(timeout=2)
        rc = killed_by = None
        if status is not None:
            rc = os.waitstatus_to_exitcode(status)
            if rc < 0:
                killed_by = sandbox.signal_name(-rc)
        return sandbox.RunResult(returncode=rc, stdout=output.text("out"),
                                 stderr=output.text("err"), wall=wall, timed_out=timed_out,
                                 output_overflow=output.overflow, killed_by=killed_by)

    def check_kernel(self, kernels: str, request: dict, env: dict[str, str]) -> dict:
        """Triton's front end on one kernel of `kernels` (kernel_check.py), in a checker forked
        from this ("checks") template: {"ok": True}, {"refused": why}, or {"self": why} where
        this template could not give a verdict (the replayer then checks in a process of its
        own, as where no template runs)."""
        workdir = sandbox.make_workdir("perfgym-kernel-check-")
        try:
            (workdir / "perfgym_kernels.py").write_text(kernels)
            (workdir / "request.json").write_text(json.dumps(request, sort_keys=True))
            env = {**env, "TRITON_CACHE_DIR": str(workdir / ".triton")}
            unused = os.pipe()  # (a checker reads its request from its directory)
            try:
                ran = self.run("check", {}, workdir, CHECK_LIMITS, env, unused, None)
            finally:
                for fd in unused:
                    os.close(fd)
        except TemplateUnavailable as exc:
            note_fallback("kernel check", str(exc))
            return {"self": str(exc)}
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if ran.returncode == 0 and not ran.timed_out and not ran.output_overflow:
            return {"ok": True}
        if ran.returncode == 1 and not ran.timed_out and not ran.output_overflow:
            lines = (ran.stdout.strip() or ran.stderr.strip() or "no message").splitlines()
            return {"refused": lines[-1][:300]}
        why = (f"the checker ended with {ran.returncode} "
               f"({(ran.stderr.strip().splitlines() or [''])[-1][:200]})")
        note_fallback("kernel check", why)
        return {"self": why}

    def _end(self) -> None:
        """The template and every worker it forked end (they die with it)."""
        with self._cond:
            self._dead = True
            self._cond.notify_all()
        sandbox.stop_template(self.proc)

    def close(self) -> None:
        self._end()
        try:
            self._sock.close()
        except OSError:
            pass
        self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class _Output:
    """A worker's stdout and stderr, kept up to a cap; past it the worker is killed."""

    def __init__(self, cap: int, kill) -> None:
        self.cap, self.kill = cap, kill
        self.kept = {"out": bytearray(), "err": bytearray()}
        self.total = 0
        self.overflow = False
        self._lock = threading.Lock()

    def drain(self, fd: int, key: str) -> None:
        try:
            while chunk := os.read(fd, 65536):
                with self._lock:
                    room = self.cap - len(self.kept["out"]) - len(self.kept["err"])
                    self.kept[key] += chunk[:max(room, 0)]
                    self.total += len(chunk)
                    over = self.total > self.cap and not self.overflow
                    self.overflow = self.overflow or over
                if over:
                    self.kill()
        finally:
            os.close(fd)

    def text(self, key: str) -> str:
        with self._lock:
            return self.kept[key].decode(errors="replace")
