"""perfgym's template for PyTorch workers: torch imported once, each worker forked from here.

    python torch_template.py SOCKET_FD SHADOWED_DIRS_JSON [workers|checks]

`workers` (the default) forks torch workers (torch_worker.py), with torch and Triton imported
(in the workers' TRITON_INTERPRET mode: a template serves one environment). `checks` imports no torch but
Triton's front end, in Triton's compiling mode (TRITON_INTERPRET=0 in its environment, where
the workers on a CPU interpret), and forks one checker per kernel check (kernel_check.py).

The parent starts this in a sandbox's namespaces (no network, world-writable directories
shadowed, the Python installation bound in), as root, and it runs only perfgym's code: it never
imports a task or a candidate, and it never reads what a worker sends. For each request on
SOCKET_FD (a JSON header and, passed with it, the worker's command and reply pipes and its
stdout and stderr) it forks a child that, before it runs any worker code:
  * takes a mount namespace of its own with fresh empty tmpfs mounts over the shadowed
    directories, and a network namespace of its own: nothing one child leaves there reaches
    the next;
  * sets the request's rlimits, and starts a session of its own;
  * gives up root for good: no new privileges, an empty capability bounding set, no
    supplementary groups, then the request's uid and gid, then no capabilities at all, and a
    SIGKILL when this template dies;
  * takes the request's environment and working directory, and runs torch_worker.main()
    (a checker: kernel_check.check_here(), its exit status the verdict).
Every child is a copy of this process as it was before any worker ran, so a thread, a patched
module or a memo one worker leaves exists in its own memory only. The parent holds the child's
uid and kills what runs under it when the worker ends.

Replies: {"id": n, "pid": pid} or {"id": n, "error": why} for each request, and
{"exit": pid, "status": wait status} when a child ends.
"""
import array
import ctypes
import fcntl
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import threading

KIND = sys.argv[3] if len(sys.argv) > 3 else "workers"
if KIND == "checks":
    import kernel_check
    kernel_check.preload()
    torch_worker = kernel_program = None
else:
    import torch  # noqa: F401
    # what the first operator on a meta tensor imports (0.26 s): every trace of a forward
    import torch.fx.experimental.symbolic_shapes  # noqa: F401
    import kernel_program  # the replayer's
    import torch_worker
    try:  # a Triton answer's worker and its replayer import it: 0.15 s each, once here
        import triton.language  # noqa: F401  (in the workers' mode: this template's env)
        from triton.runtime import autotuner, interpreter, jit  # noqa: F401
    except ImportError:  # (the gpu extra is not installed: the workers will not import it)
        pass

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_REC, MS_PRIVATE = 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
LIMITS = {"cpu_seconds": resource.RLIMIT_CPU, "address_space": resource.RLIMIT_AS,
          "file_size": resource.RLIMIT_FSIZE, "open_files": resource.RLIMIT_NOFILE,
          "processes": resource.RLIMIT_NPROC, "stack": resource.RLIMIT_STACK}
FDS = 4  # command pipe, reply pipe, stdout, stderr
libc = ctypes.CDLL(None, use_errno=True)


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def drop_privileges(uid):
    """From root to `uid` with nothing left: no path back to any capability."""
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1  # until the kernel knows no more capabilities (EINVAL)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # effective and permitted are empty after the uid change; clear the inheritable set too
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    check(libc.capset(header, data), "capset")
    status = open("/proc/self/status").read()
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        value = status.split(f"\n{field}:", 1)[1].split()[0]
        if int(value, 16):
            raise OSError(f"{field} is {value} after dropping privileges")
    if os.getuid() == 0 or os.geteuid() == 0:
        raise OSError("still root after dropping privileges")


def private_namespaces(shadowed):
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    for d in shadowed:
        check(libc.mount(b"perfgym-shadow", d.encode(), b"tmpfs", 0, b"size=64m,mode=1777"),
              f"mount tmpfs on {d}")


def become_worker(request, fds, status, shadowed, template_pid):
    """In the child: isolate, drop root, say so on `status`, run the worker; never returns.
    A step that fails before the worker runs is reported on `status` (the host's fault, never
    the candidate's: the parent then starts the worker the usual way)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        private_namespaces(shadowed)
        # above every number dup2 writes to, so that none is overwritten before it is moved
        cmd, reply, out, err = (fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds)
        status = fcntl.fcntl(status, fcntl.F_DUPFD, 5)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(cmd, 3)
        os.dup2(reply, 4)
        os.closerange(5, status)  # the socket to the parent among them
        os.closerange(status + 1, os.sysconf("SC_OPEN_MAX"))
        for name, value in request["limits"].items():
            resource.setrlimit(LIMITS[name], (value, value))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.chdir(request["workdir"])
        drop_privileges(request["uid"])
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        if os.getppid() != template_pid:  # the template died before the signal was set
            os._exit(1)
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        sys.path[0] = request["workdir"]  # where an exec'd worker's script directory is
        sys.path_importer_cache.clear()
        if KIND == "workers":
            sys.modules["__main__"] = torch_worker  # as in a worker started as a script
            for module in (torch_worker, kernel_program):  # the worker's copies
                module.__file__ = os.path.join(request["workdir"],
                                               os.path.basename(module.__file__))
            sys.argv = ["torch_worker.py", request["role"], "3", "4",
                        json.dumps(request["options"])]
        os.write(status, b"ok")
        os.close(status)
    except BaseException as exc:
        try:
            os.write(status, f"{type(exc).__name__}: {exc}".encode()[:4000])
        finally:
            os._exit(112)
    code = 0
    try:
        if KIND == "checks":
            code = 3  # a checker that raised never passes a kernel (1 is a refusal)
            code = kernel_check.check_here()
        else:
            torch_worker.main()
    except BaseException:
        if KIND == "checks":
            import traceback
            traceback.print_exc()
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def fork_worker(request, fds, shadowed):
    """The child's pid once it is ready to run the worker; raises with the reason if its
    setup failed (the child is then reaped)."""
    if threading.active_count() != 1:
        raise RuntimeError("the template runs a thread of its own: no fork")
    ready_r, ready_w = os.pipe()
    template_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        become_worker(request, fds, ready_w, shadowed, template_pid)
    os.close(ready_w)
    said = b""
    while chunk := os.read(ready_r, 4096):
        said += chunk
    os.close(ready_r)
    if said != b"ok":
        os.waitpid(pid, 0)
        raise RuntimeError(said.decode(errors="replace") or "the worker died in its setup")
    return pid


def receive(sock):
    fds = array.array("i")
    msg, ancdata, _, _ = sock.recvmsg(1 << 16, socket.CMSG_LEN(FDS * fds.itemsize))
    if not msg:
        return None, []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return json.loads(msg), list(fds)


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    shadowed = json.loads(sys.argv[2])
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            events = []
        for fd, _ in events:
            if fd == wake_r:
                os.read(wake_r, 4096)
        while True:  # every child that ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock.send(json.dumps({"exit": pid, "status": status}).encode())
        if not any(fd == sock.fileno() for fd, _ in events):
            continue
        request, fds = receive(sock)
        if request is None:  # the parent closed its end
            return
        try:
            if len(fds) != FDS:
                raise ValueError(f"{len(fds)} descriptors passed, not {FDS}")
            pid = fork_worker(request, fds, shadowed)
            sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())
        except Exception as exc:
            sock.send(json.dumps({"id": request["id"], "error": str(exc)}).encode())
        finally:
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    main()
