"""How an untrusted command runs.

Every compile, link and run of candidate code goes through `run()`:
  * its own session and process group, killed as a group on a wall-clock timeout;
  * when root: an unprivileged uid of its own (so RLIMIT_NPROC binds and leftover processes can
    be found and killed by uid), a fresh network namespace with no interfaces up, and a mount
    namespace where every world-writable directory (/tmp, /dev/shm...) is an empty throwaway
    tmpfs, so the only place it can leave a file is its own work directory;
  * rlimits (CPU, address space, file size, open files, processes, no core files);
  * a scrubbed environment and a throwaway working directory;
  * stdout/stderr read through a cap: past it the command is killed;
  * it dies with its driver: a parent-death signal (SIGKILL, set by setpriv after the uid
    change, which would clear it) reaches the command itself, even after kill -9 of the driver.
    Work directories carry their driver's pid and start time in their name, so `sweep_stale()`
    can remove those whose driver is gone, and `abandon()` ends a driver's commands and
    directories on SIGTERM / SIGINT.
Isolation is put into the argv (unshare, setpriv, prlimit), never into a preexec_fn, so it is
safe to call from threads (the local executor, Ray workers).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

UID_BASE = 61000  # sandbox uids are UID_BASE .. UID_BASE + UID_SLOTS - 1; no passwd entry needed
UID_SLOTS = 512
LOCK_DIR = Path(tempfile.gettempdir()) / "perfgym-uids"


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 8.0
    cpu_seconds: int = 60
    address_space: int = 4 << 30  # bytes
    file_size: int = 256 << 20  # bytes any one file may grow to
    open_files: int = 64
    processes: int = 64  # threads count too: OpenMP needs one per core
    stack: int = 16 << 20  # libgomp gives each thread a stack this size
    output_bytes: int = 64 << 10  # stdout+stderr kept; more than this kills the command


@dataclass
class RunResult:
    returncode: int | None
    stdout: str
    stderr: str
    wall: float
    timed_out: bool = False
    output_overflow: bool = False
    killed_by: str | None = None  # signal name when the command died of a signal
    # (arrival time.monotonic(), line) of each stdout line starting with MARKER: progress
    # markers timed by the parent's clock, out of the command's reach (the C harness's timed
    # calls). They stay in stdout too and count against the output cap.
    markers: list[tuple[float, str]] = field(default_factory=list)
    # marker line -> the CPU seconds the command's process (all its threads) had used when the
    # line arrived, read from the kernel's accounting right after the arrival time: a witness
    # of the work done between markers that, unlike the arrival times, a parent kept from its
    # CPU does not change (the first arrival of a line counts)
    marker_cpu: dict[str, float] = field(default_factory=dict)
    # marker line -> the earliest time.monotonic() it can have been written: when the parent
    # asked for the read before the one that brought it (its arrival time can be late by as
    # long as the parent waited for a CPU between that read and its clock; this cannot)
    marker_floor: dict[str, float] = field(default_factory=dict)
    MARKER = b"@"

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.output_overflow


SHADOWED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
ROOT_WORK_DIR = Path("/var/lib/perfgym/work")  # not world-writable, so not shadowed
# Runs inside the new mount namespace as root, then drops to the sandbox uid: $1 is an fstab
# (fstab_for) whose lines bind host directories read-only and shadow each world-writable
# directory with an empty tmpfs, mounted in its order by one `mount` (a `mount` per directory
# was 3.4 ms more per sandboxed command: three per candidate).
_SHADOW_SCRIPT = 'mount --all --fstab "$1" || exit 97; shift; exec "$@"'
EXPOSE_ROOT = Path("/var/lib/perfgym/expose")  # mount points for exposed host directories
FSTAB_DIR = Path("/var/lib/perfgym/fstab")  # root's: the sandbox cannot change what it mounts
_SHADOW_SOURCE = "perfgym-shadow"  # the tmpfs's name in the mount table


@dataclass
class Isolation:
    """What this host can enforce; probed once."""

    own_uid: bool
    no_network: bool
    private_tmp: bool
    dies_with_driver: bool = False  # setpriv --pdeathsig works here
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = ["process group + wall timeout", "rlimits", "scrubbed env"]
        parts.append("own uid" if self.own_uid else "same uid (not root)")
        parts.append("no network" if self.no_network else "network NOT isolated")
        parts.append("private /tmp" if self.private_tmp else "shared /tmp")
        parts.append("dies with its driver" if self.dies_with_driver
                     else "may outlive its driver")
        return ", ".join(parts)


@lru_cache(maxsize=1)
def isolation() -> Isolation:
    notes = []
    own_uid = os.geteuid() == 0 and shutil.which("setpriv") is not None
    no_net = private_tmp = False
    if own_uid and shutil.which("unshare"):
        probe = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True)
        no_net = probe.returncode == 0
        if not no_net:
            notes.append("unshare --net failed: " + probe.stderr.decode(errors="replace").strip())
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh",
                                "-c", _SHADOW_SCRIPT, "sh", str(fstab_for(())), "true"],
                               capture_output=True)
        private_tmp = probe.returncode == 0
        if not private_tmp:
            notes.append("private mount namespace failed: "
                         + probe.stderr.decode(errors="replace").strip())
        elif _SHADOW_SOURCE in Path("/proc/self/mounts").read_text().split():
            # mount -a would skip a shadow already in this table (fstab_for): not shadowed
            private_tmp = False
            notes.append(f"a {_SHADOW_SOURCE} mount is already in this process's table "
                         "(perfgym inside a perfgym sandbox?): world-writable directories are "
                         "not shadowed")
    dies = shutil.which("setpriv") is not None and subprocess.run(
        ["setpriv", *_PDEATHSIG, "--", "true"], capture_output=True).returncode == 0
    if not dies:
        notes.append("setpriv --pdeathsig is missing: a killed driver leaves its commands running "
                     "until their CPU limit")
    return Isolation(own_uid=own_uid, no_network=no_net, private_tmp=private_tmp,
                     dies_with_driver=dies, notes=notes)


_PDEATHSIG = ["--pdeathsig", "SIGKILL"]


def _shadowed() -> list[str]:
    return [d for d in SHADOWED_DIRS if os.path.isdir(d)]


class UidSlot:
    """A sandbox uid held exclusively (across threads and processes) for one command."""

    _counter = 0
    _lock = threading.Lock()

    def __enter__(self) -> int:
        LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
        with UidSlot._lock:
            start = UidSlot._counter
            UidSlot._counter += 1
        offset = (os.getpid() * 7 + start) % UID_SLOTS
        for i in range(UID_SLOTS):
            uid = UID_BASE + (offset + i) % UID_SLOTS
            fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd, self.uid = fd, uid
            kill_uid(uid)  # what a killed driver's command left behind under this uid
            return uid
        raise RuntimeError("perfgym: every sandbox uid is in use")

    def __exit__(self, *exc: object) -> None:
        kill_uid(self.uid)  # whatever the command left behind dies with the slot
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def kill_uid(uid: int) -> None:
    """SIGKILL every process running as `uid` (catches children that left the process group)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        pids = processes_of_uid(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def processes_of_uid(uid: int) -> list[int]:
    """Live processes of `uid`. Zombies are left out: they hold no memory, run nothing, and are
    reaped by init once their parent is gone."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:  # one read of the status file (called three times per sandboxed command)
            fd = os.open(f"/proc/{entry}/status", os.O_RDONLY)
            try:
                status = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:
            continue
        # the last such line: the process name comes first, and a name is the process's to set
        uid_at, state_at = status.rfind(b"\nUid:"), status.rfind(b"\nState:")
        if uid_at < 0 or state_at < 0:
            continue
        real_uid = status[uid_at + 5:].split(None, 1)[0]
        state = status[state_at + 7:].lstrip()[:1]
        if real_uid.isdigit() and int(real_uid) == uid and state not in (b"Z", b"X"):
            pids.append(int(entry))
    return pids


def make_workdir(prefix: str = "perfgym-") -> Path:
    """A fresh directory for one evaluation. As root it lives outside every shadowed directory
    (a root-owned, non-listable parent), so the sandbox sees it and nothing else it may write.
    Its name carries this driver's pid and start time (out of the command's reach, unlike a
    file inside), so a sweep can tell when its driver is gone."""
    stamped = f"{prefix}{_owner_stamp(os.getpid())}-"
    if isolation().own_uid:
        ROOT_WORK_DIR.mkdir(parents=True, exist_ok=True)
        for d in (ROOT_WORK_DIR.parent, ROOT_WORK_DIR):
            os.chmod(d, 0o711)
    return Path(tempfile.mkdtemp(prefix=stamped, dir=work_root()))


def work_root() -> Path:
    """Where work directories are made."""
    return ROOT_WORK_DIR if isolation().own_uid else Path(tempfile.gettempdir())


def _owner_stamp(pid: int) -> str | None:
    """"PID.START" (start time in clock ticks since boot: a reused pid has another), or None
    when `pid` is not running."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the name in (...) may hold spaces
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return f"{pid}.{fields[19]}"  # field 22 of stat; fields[0] is field 3


# perfgym-[nvcc-|torch-ROLE-]PID.START-RANDOM; older, unstamped directories lack PID.START
_WORKDIR_NAME = re.compile(r"perfgym-(?:nvcc-|torch-[a-z]+-)?(?:(\d+\.\d+)-)?[a-z0-9_]{8}")
UNSTAMPED_AGE = 86400.0  # seconds after which an unstamped work directory is taken as stale


def sweep_stale() -> list[Path]:
    """Remove the work directories of drivers that are no longer running, and (as root) kill
    what a dead driver's commands left running under a sandbox uid no driver holds. Returns
    the directories removed."""
    removed = []
    root = work_root()
    try:
        entries = list(os.scandir(root))
    except OSError:
        entries = []
    for entry in entries:
        if not (m := _WORKDIR_NAME.fullmatch(entry.name)) or not entry.is_dir(follow_symlinks=False):
            continue
        if m.group(1) is not None:
            pid = int(m.group(1).split(".")[0])
            if _owner_stamp(pid) == m.group(1):
                continue  # its driver is alive
        else:  # from before the stamp: only when nothing can still be using it
            try:
                if time.time() - entry.stat(follow_symlinks=False).st_mtime < UNSTAMPED_AGE:
                    continue
            except OSError:
                continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.exists(entry.path):
            removed.append(Path(entry.path))
    if isolation().own_uid:
        _kill_unheld_uids()
    return removed


def _kill_unheld_uids() -> None:
    """Processes under a sandbox uid whose slot no driver holds outlived their driver."""
    uids = set()
    for entry in os.listdir("/proc"):
        try:
            uid = os.stat(f"/proc/{entry}").st_uid if entry.isdigit() else -1
        except OSError:
            continue
        if UID_BASE <= uid < UID_BASE + UID_SLOTS:
            uids.add(uid)
    for uid in uids:
        LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a live driver's command
        else:
            kill_uid(uid)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


# Commands running now, for `abandon()`: process -> its sandbox uid (None when not root)
_running: dict[subprocess.Popen, int | None] = {}
_running_lock = threading.RLock()  # re-entrant: a signal handler may interrupt its holder


def abandon() -> None:
    """Kill every command this driver is running and remove its work directories: for a
    driver that is about to exit on a signal (the commands would die with it anyway; this
    does it before the directories go)."""
    with _running_lock:
        running = list(_running.items())
    for proc, uid in running:
        kill_group(proc)
        if uid is not None:
            kill_uid(uid)
    mine = _owner_stamp(os.getpid())
    for path in work_root().glob(f"perfgym-*{mine}-*"):
        m = _WORKDIR_NAME.fullmatch(path.name)
        if m and m.group(1) == mine:
            shutil.rmtree(path, ignore_errors=True)


def _prlimit_args(limits: Limits) -> list[str]:
    return [
        "prlimit",
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.address_space}",
        f"--fsize={limits.file_size}",
        f"--nofile={limits.open_files}",
        f"--nproc={limits.processes}",
        f"--stack={limits.stack}",
        "--core=0",
        "--",
    ]


def expose_path(host_dir: str | Path) -> Path:
    """Where `host_dir` appears inside the sandbox when passed in `expose` (as root, a
    read-only bind under EXPOSE_ROOT; otherwise the directory itself)."""
    host_dir = Path(host_dir).resolve()
    if not (isolation().own_uid and isolation().private_tmp):
        return host_dir
    return EXPOSE_ROOT / hashlib.sha256(str(host_dir).encode()).hexdigest()[:12]


def run(argv: list[str], workdir: Path, limits: Limits = Limits(),
        env: dict[str, str] | None = None, expose: list[str | Path] = (),
        pass_fds: tuple[int, ...] = (), on_start=None, on_marker=None) -> RunResult:
    """Run `argv` in `workdir` under every isolation layer this host supports. Directories in
    `expose` (e.g. a Python installation under /root) become readable at `expose_path(dir)`.
    `pass_fds` stay open in the command (a channel to talk to it while it runs);
    `on_start(proc)` is called once it has started (to close the parent's copies of them);
    `on_marker(line)` as each marker line arrives, from the thread that times them (it must
    return at once)."""
    iso = isolation()
    clean_env = scrubbed_env(workdir, env)
    if iso.own_uid:
        with UidSlot() as uid:
            hand_over(workdir, uid)
            # --pdeathsig after the uid change: setpriv sets it last, a uid change clears it
            wrapped = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                       "--inh-caps=-all", "--bounding-set=-all",
                       *(_PDEATHSIG if iso.dies_with_driver else []), "--"]
            namespaces = (["--net"] if iso.no_network else []) + (
                ["--mount", "--propagation", "private"] if iso.private_tmp else [])
            if iso.private_tmp:
                wrapped = ["sh", "-c", _SHADOW_SCRIPT, "sh", str(_sandbox_fstab(expose))] + \
                    wrapped
            if namespaces:
                wrapped = ["unshare", *namespaces, "--"] + wrapped
            return _supervise(wrapped + _prlimit_args(limits) + argv, workdir, limits, clean_env,
                              uid, pass_fds, on_start, on_marker)
    dies = ["setpriv", *_PDEATHSIG, "--"] if iso.dies_with_driver else []
    return _supervise(dies + _prlimit_args(limits) + argv, workdir, limits, clean_env, None,
                      pass_fds, on_start, on_marker)


def scrubbed_env(workdir: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command: a fixed PATH and locale, its work
    directory as HOME and TMPDIR, and `env`."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "LANG": "C",
            "LC_ALL": "C", "TMPDIR": str(workdir), **(env or {})}


def _sandbox_fstab(expose) -> Path:
    """The fstab of a sandbox that sees each of `expose` read-only at `expose_path()`."""
    binds = []
    for host_dir in expose:
        target = expose_path(host_dir)
        target.mkdir(parents=True, exist_ok=True)
        binds.append((Path(host_dir).resolve(), target))
    return fstab_for(tuple(binds))


def can_fork_workers() -> bool:
    """Whether this host gives a forked worker what `run()` gives a command: its own uid,
    network, /tmp, and death with its driver (a root driver with every layer)."""
    iso = isolation()
    return iso.own_uid and iso.no_network and iso.private_tmp and iso.dies_with_driver


def start_template(argv: list[str], workdir: Path, env: dict[str, str],
                   expose: list[str | Path], pass_fds: tuple[int, ...],
                   stderr) -> subprocess.Popen:
    """Start perfgym's own worker template (harness/torch_template.py) in a sandbox's
    namespaces, as root: it keeps the right to give each process it forks a uid, a network
    and a /tmp of its own, which it does before any of them runs untrusted code. Never for
    untrusted code itself. It dies with its driver, and `abandon()` ends it."""
    if not can_fork_workers():
        raise RuntimeError("this host cannot give forked workers their own uid, network "
                           "and /tmp")
    wrapped = ["unshare", "--net", "--mount", "--propagation", "private", "--",
               "sh", "-c", _SHADOW_SCRIPT, "sh", str(_sandbox_fstab(expose)),
               "setpriv", *_PDEATHSIG, "--"]
    proc = subprocess.Popen(wrapped + argv, cwd=workdir, env=scrubbed_env(workdir, env),
                            stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                            start_new_session=True, close_fds=True, pass_fds=pass_fds)
    with _running_lock:
        _running[proc] = None
    return proc


def stop_template(proc: subprocess.Popen) -> None:
    kill_group(proc)
    proc.wait()
    with _running_lock:
        _running.pop(proc, None)


def fstab_for(binds: tuple[tuple[Path, Path], ...]) -> Path:
    """The fstab the sandbox mounts: each (host directory, mount point) bound read-only, then
    each world-writable directory shadowed by an empty tmpfs (binds first: a directory under
    /tmp must be bound before /tmp is shadowed). One file per content, named by its hash,
    written when it is missing (looked for every time: a removed /var/lib/perfgym must not stop
    every sandbox)."""
    lines = [f"{_fstab_field(src)} {_fstab_field(dst)} none bind,ro 0 0" for src, dst in binds]
    # (mount -a skips an entry whose source is already mounted on its target: the source
    # exists only inside the sandboxes' own private namespaces, and isolation() turns the
    # shadows off where this process's table holds it)
    lines += [f"{_SHADOW_SOURCE} {_fstab_field(d)} tmpfs size=64m,mode=1777 0 0"
              for d in _shadowed()]
    text = "\n".join(lines) + "\n"
    path = FSTAB_DIR / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.fstab"  # its content
    if not path.is_file():
        FSTAB_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(text)
        os.chmod(tmp, 0o644)
        tmp.replace(path)  # atomic: a sandbox starting beside this never reads half a file
    return path


def _fstab_field(path: str | Path) -> str:
    """A path as an fstab field: blanks and backslashes in octal escapes."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in str(path))


def hand_over(workdir: Path, uid: int) -> None:
    """The sandbox uid owns the work directory and nothing else."""
    for root, dirs, files in os.walk(workdir):
        os.chown(root, uid, uid)
        for name in files:
            os.chown(os.path.join(root, name), uid, uid)
    os.chmod(workdir, 0o700)


_READ_BYTES = 65536  # the most one read of a command's output takes


def _supervise(argv: list[str], workdir: Path, limits: Limits, env: dict[str, str],
               uid: int | None, pass_fds: tuple[int, ...] = (), on_start=None,
               on_marker=None) -> RunResult:
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, close_fds=True, pass_fds=pass_fds)
    with _running_lock:
        _running[proc] = uid
    try:
        return _watch(proc, start, limits, uid, on_start, on_marker)
    finally:
        with _running_lock:
            del _running[proc]


def _watch(proc: subprocess.Popen, start: float, limits: Limits, uid: int | None,
           on_start, on_marker=None) -> RunResult:
    if on_start is not None:
        on_start(proc)
    kept: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}
    total = [0]
    overflow = threading.Event()
    lock = threading.Lock()
    markers: list[tuple[float, str]] = []
    marker_cpu: dict[str, float] = {}
    marker_floor: dict[str, float] = {}
    partial = bytearray()  # stdout after its last newline
    cpu_clock = process_cpu_clock(proc.pid)

    def drain(stream, key: str) -> None:
        # A read takes what the pipe holds when it runs, after it was asked for: what the next
        # read brings was written after that (unless this read was cut at its size)
        floor = start
        while True:
            asked = time.monotonic()
            if not (chunk := stream.read1(_READ_BYTES)):
                break
            arrived = time.monotonic()  # before anything else: this is what a marker measures
            cpu = _cpu_seconds(cpu_clock) if key == "out" else None
            with lock:
                room = limits.output_bytes - len(kept["out"]) - len(kept["err"])
                if room > 0:
                    kept[key] += chunk[:room]
                total[0] += len(chunk)
                if total[0] > limits.output_bytes and not overflow.is_set():
                    overflow.set()
                    kill_group(proc)
                if key == "out" and not overflow.is_set():  # (the cap bounds `partial`)
                    partial.extend(chunk)
                    *lines, rest = partial.split(b"\n")
                    known = len(markers)
                    markers.extend((arrived, line.decode(errors="replace")) for line in lines
                                   if line.startswith(RunResult.MARKER))
                    for _, line in markers[known:]:
                        marker_floor.setdefault(line, floor)
                        if cpu is not None:
                            marker_cpu.setdefault(line, cpu)
                    partial[:] = rest
                    if markers and not known:
                        _time_markers_promptly()
                    if on_marker is not None:
                        for _, line in markers[known:]:
                            on_marker(line)
            if len(chunk) < _READ_BYTES:
                floor = asked

    def _time_markers_promptly() -> None:
        # Markers are timed when this thread reads them, so it must not wait for a CPU behind
        # other work: real-time priority where allowed (root). And off the first CPU, where
        # OpenMP binds the command's main thread: preempted there right after writing a marker,
        # it could lose its CPU to a neighbour for a whole time slice the parent would count.
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except (OSError, AttributeError):
            pass
        if len(cpus := os.sched_getaffinity(0)) > 1:
            os.sched_setaffinity(0, {max(cpus)})

    readers = [threading.Thread(target=drain, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, "err"), daemon=True)]
    for t in readers:
        t.start()
    # A blocking wait plus a kill timer: Popen.wait(timeout=...) polls with sleeps that add up
    # to 50 ms of latency to every command.
    expired = threading.Event()

    def on_timeout() -> None:
        expired.set()
        kill_group(proc)

    timer = threading.Timer(limits.wall_seconds, on_timeout)
    timer.start()
    try:
        _wait_unreaped(proc)
    finally:
        timer.cancel()
    timed_out = expired.is_set()
    wall = time.monotonic() - start
    kill_group(proc)  # children that outlived the leader
    if uid is not None:
        kill_uid(uid)  # and those that left its process group
    for t in readers:
        t.join(timeout=2)
    rc = proc.wait()  # reaped only now: the readers are done with its CPU clock
    killed_by = signal_name(-rc) if rc is not None and rc < 0 else None
    return RunResult(returncode=rc, stdout=kept["out"].decode(errors="replace"),
                     stderr=kept["err"].decode(errors="replace"), wall=wall,
                     timed_out=timed_out, output_overflow=overflow.is_set(), killed_by=killed_by,
                     markers=markers, marker_cpu=marker_cpu, marker_floor=marker_floor)


def _wait_unreaped(proc: subprocess.Popen) -> None:
    """Wait for `proc` to end, leaving it a zombie: its CPU clock reads (its total) until it is
    reaped. A reader kept waiting for a CPU can read the last markers after the command ended;
    reaped, their CPU readings would fail, and a CPU witness without them cannot tell a starved
    parent from hidden work (a CI run's honest scan beside a hog: "tampering")."""
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # reaped elsewhere (abandon())
        proc.wait()


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def process_cpu_clock(pid: int) -> int:
    """The clock id of process `pid`'s CPU time (all its threads, in ns, as the kernel accounts
    it): Linux's CPUCLOCK_SCHED of the process, which clock_gettime reads for any process."""
    return ((~pid) << 3) | 2


def _cpu_seconds(clock: int) -> float | None:
    try:
        return time.clock_gettime(clock)
    except (OSError, OverflowError):  # the process is gone (or not Linux)
        return None


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
