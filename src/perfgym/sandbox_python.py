"""How the sandbox runs this host's Python, whatever its layout.

The sandbox may not see the interpreter where the host does: pyenv under a mode-700 /root, a
virtualenv whose site-packages lie outside `sys.base_prefix`, a `--user` site in a private home,
a venv anywhere under /tmp, /var/tmp or /dev/shm (which the sandbox replaces with empty tmpfs
mounts, whatever the venv's permission bits), an editable install whose source sits in one of
those. So we ask a fresh interpreter exactly where it imports from (its `sys.path`, after .pth
files, the user site and PYTHONPATH, plus the source folders of editable installs' import
hooks), bind each of those roots the sandbox would not see read-only into it, and start the
base interpreter there with that path list. The shared libraries it links against by absolute
RUNPATH (pyenv's libpython) are found through LD_LIBRARY_PATH at their bound place.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import sandbox
from .errors import HostError


@dataclass(frozen=True)
class SandboxPython:
    executable: str  # the interpreter, as the sandbox sees it
    env: dict[str, str]  # PYTHONPATH and LD_LIBRARY_PATH, as the sandbox sees them
    expose: tuple[str, ...]  # host directories bound read-only into the sandbox

    def inside(self, host_path: str | Path) -> str:
        """Where a host path appears inside the sandbox."""
        path = Path(host_path).resolve()
        for root in self.expose:
            if path.is_relative_to(root):
                return str(sandbox.expose_path(root) / path.relative_to(root))
        return str(path)


# Prints the import path of a fresh interpreter, then the folders that editable installs' import
# hooks map packages to (setuptools' PEP 660 finders keep them in their module's MAPPING): those
# hooks come from .pth files, which the sandbox's interpreter, started on PYTHONPATH, never runs.
_ASK_PATHS = """
import json, os, sys
hooked = []
for finder in sys.meta_path:
    mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
    if isinstance(mapping, dict):
        hooked += [os.path.dirname(str(p).rstrip("/")) for p in mapping.values()]
print(json.dumps(sys.path + hooked))
"""


def import_roots() -> list[str]:
    """Where a fresh interpreter of this Python imports from (not our cwd or script dir)."""
    out = subprocess.run([sys.executable, "-c", _ASK_PATHS],
                         capture_output=True, text=True, cwd="/")
    if out.returncode != 0:
        raise HostError(f"cannot ask {sys.executable} for its import path: "
                        f"{out.stderr.strip()[-300:]}")
    paths = []
    for entry in json.loads(out.stdout):
        if not entry or entry == "/":
            continue  # the cwd of `-c`
        path = Path(entry).resolve()
        if path.exists() and str(path) not in paths:
            paths.append(str(path))
    return paths


def reachable(path: Path) -> bool:
    """Whether any uid can enter every directory down to `path` and read it."""
    path = path.resolve()
    for part in [*reversed(path.parents), path]:
        try:
            mode = os.stat(part).st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def shadowed(path: Path) -> bool:
    """Whether the sandbox replaces `path` (or a directory above it) with an empty tmpfs."""
    if not sandbox.isolation().private_tmp:
        return False
    path = path.resolve()
    return any(path.is_relative_to(Path(d).resolve()) for d in sandbox.SHADOWED_DIRS
               if os.path.isdir(d))


def must_bind(path: Path) -> bool:
    """Whether the sandbox would not see `path` where the host does: it lies under a directory
    the sandbox shadows, or the sandbox uid cannot read it."""
    return shadowed(path) or not reachable(path)


def linked_library_dirs(executable: Path) -> list[Path]:
    """Directories of the shared libraries the interpreter loads (from ldd), if it is dynamic."""
    try:
        out = subprocess.run(["ldd", str(executable)], capture_output=True, text=True).stdout
    except OSError:
        return []
    dirs = []
    for m in re.finditer(r"=>\s+(/\S+)", out):
        d = Path(m.group(1)).resolve().parent
        if d not in dirs:
            dirs.append(d)
    return dirs


@lru_cache(maxsize=1)
def sandbox_python() -> SandboxPython:
    base = Path(sys.base_prefix).resolve()
    exe = Path(getattr(sys, "_base_executable", sys.executable)).resolve()  # not a venv's link
    imports = import_roots()
    libs = linked_library_dirs(exe)
    # one root per place: the base prefix (interpreter, stdlib), then each import root or
    # library directory that is not inside a root already
    roots: list[Path] = [base]
    for p in [exe.parent, *map(Path, imports), *libs]:
        if not any(p.is_relative_to(r) for r in roots):
            roots.append(p if p.is_dir() else p.parent)
    expose = tuple(str(r) for r in roots if must_bind(r))
    for root in expose:  # a bind keeps the folder's own mode: the sandbox uid must enter it
        mode = os.stat(root).st_mode
        if not (mode & stat.S_IROTH and mode & stat.S_IXOTH):
            raise HostError(f"the sandboxed Python imports from {root}, a folder of mode "
                            f"{stat.S_IMODE(mode):o} that the sandbox uid cannot read even "
                            f"when bound in: `chmod o+rx {root}` (its contents need o+r too), "
                            f"or install those packages under a world-readable folder")
    iso = sandbox.isolation()
    if expose and iso.own_uid and not iso.private_tmp:
        raise HostError(f"the sandbox cannot read {expose[0]} (a private directory) and this "
                        f"host cannot bind it in (no private mount namespace: "
                        f"{'; '.join(iso.notes) or 'unshare --mount failed'}); install Python "
                        f"and its packages under a world-readable path such as /opt/venv")
    mapping = SandboxPython("", {}, expose)
    env = {"PYTHONPATH": ":".join(mapping.inside(p) for p in imports)}
    hidden_libs = [mapping.inside(d) for d in libs if str(d) != mapping.inside(d)]
    if hidden_libs:
        env["LD_LIBRARY_PATH"] = ":".join(hidden_libs)
    return SandboxPython(mapping.inside(exe), env, expose)


def check_starts(modules: tuple[str, ...] = ("numpy", "torch")) -> None:
    """Start the sandboxed interpreter and import `modules`; raise HostError saying what is
    wrong when it cannot. Called when a worker died before it reported, to tell a broken host
    from a candidate that killed its worker."""
    py = sandbox_python()
    workdir = sandbox.make_workdir("perfgym-pycheck-")
    try:
        result = sandbox.run([py.executable, "-c", f"import {', '.join(modules)}"], workdir,
                             sandbox.Limits(wall_seconds=120, cpu_seconds=120,
                                            address_space=64 << 30, processes=256),
                             env={**py.env, "PYTHONNOUSERSITE": "1"}, expose=py.expose)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not result.ok:
        why = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise HostError(f"the sandboxed Python ({sys.executable}) cannot import "
                        f"{', '.join(modules)}: {why}; install them into this environment "
                        f"(pip install torch==2.13.0 numpy) or run `perfgym machine` to see "
                        f"the sandbox layers")


def report() -> dict:
    """What `perfgym machine` shows of the sandboxed Python: the interpreter, the host folders
    bound into the sandbox, and whether it starts and imports numpy and torch (those of them
    installed here). A broken layout is seen here, before any candidate is evaluated."""
    import importlib.util
    modules = tuple(m for m in ("numpy", "torch") if importlib.util.find_spec(m) is not None)
    info: dict = {"host_python": sys.executable, "modules": list(modules)}
    try:
        py = sandbox_python()
        info.update(executable=py.executable, binds={d: py.inside(d) for d in py.expose})
        check_starts(modules)
        info["starts"], info["error"] = True, None
    except HostError as exc:
        info["starts"], info["error"] = False, str(exc)
    return info
