"""The sandboxed Python starts from every layout users install into: this environment (a venv
in CI, under a mode-700 home), a venv under a private directory in /tmp whose packages come from
.pth files, a `--user` site in a private home, and the system interpreter. A host that still
cannot start it gets a HostError that says what to fix, never a verdict on the candidate."""
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfgym import sandbox
from perfgym.errors import HostError
from perfgym.sandbox_python import check_starts, sandbox_python

import perfgym

# where this environment's packages and perfgym itself (an editable install's src/) live
HERE_PATHS = [p for p in sys.path if p and Path(p).is_dir() and "site-packages" in p] + [
    str(Path(perfgym.__file__).resolve().parents[1])]
PROBE = textwrap.dedent("""
    import sys
    from perfgym.errors import HostError
    from perfgym.sandbox_python import check_starts
    try:
        check_starts(tuple(sys.argv[1:]))
    except HostError as exc:
        print(exc)
        sys.exit(3)
    print("started")
""")


def run_probe(python: str, modules: list[str], env: dict[str, str] | None = None, cwd="/"):
    return subprocess.run([python, "-c", PROBE, *modules], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def private_dir(parent: Path) -> Path:
    """A directory only root may enter, as /root or a home with mode 700 is."""
    parent.mkdir(parents=True, exist_ok=True)
    parent.chmod(0o700)
    return parent


def test_this_environment_starts_numpy_in_the_sandbox():
    check_starts(("numpy",))


def test_this_environment_starts_torch_in_the_sandbox():
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    check_starts(("numpy", "torch"))


def test_everything_the_interpreter_imports_from_is_mapped():
    py = sandbox_python()
    inside = py.env["PYTHONPATH"].split(":")
    for path in site.getsitepackages():  # (not what imported packages added to sys.path since)
        if Path(path).is_dir():
            assert py.inside(path) in inside
    if sandbox.isolation().own_uid and sandbox.isolation().private_tmp:
        for root in py.expose:  # exposed only what the sandbox uid could not reach
            assert py.inside(root) != str(Path(root).resolve())


def test_a_venv_in_a_private_tmp_dir_with_pth_packages(tmp_path):
    venv = private_dir(tmp_path / "home") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # this environment's packages (perfgym, numpy) reach the new venv only through a .pth file
    (site / "host.pth").write_text("\n".join(HERE_PATHS) + "\n")
    r = run_probe(str(venv / "bin" / "python"), ["numpy"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "started" in r.stdout


def test_a_user_site_in_a_private_home(tmp_path):
    # the base interpreter: a venv hides the user site; perfgym comes in through PYTHONPATH
    python = getattr(sys, "_base_executable", sys.executable)
    env = {"PYTHONUSERBASE": str(private_dir(tmp_path / "home") / ".local"),
           "PYTHONPATH": ":".join(HERE_PATHS)}
    user_site = subprocess.run([python, "-c", "import site; print(site.getusersitepackages())"],
                               capture_output=True, text=True, env={**os.environ, **env},
                               check=True).stdout.strip()
    Path(user_site).mkdir(parents=True)
    (Path(user_site) / "perfgym_user_probe.py").write_text("VALUE = 42\n")
    r = run_probe(python, ["perfgym_user_probe"], env)
    assert r.returncode == 0, r.stdout + r.stderr


def system_python() -> Path:
    """/usr/bin/python3, skipping the test when it is absent or another Python version (the
    installed packages would not load in it)."""
    system = Path("/usr/bin/python3")
    if not system.exists():
        pytest.skip("no /usr/bin/python3 on this machine")
    same = subprocess.run([str(system), "-c", "import sys; print(sys.version_info[:2])"],
                          capture_output=True, text=True).stdout.strip()
    if same != str(sys.version_info[:2]):
        pytest.skip(f"/usr/bin/python3 is {same}, this one {sys.version_info[:2]}: the "
                    "installed packages would not load in it")
    return system


def test_the_system_interpreter(tmp_path):
    system = system_python()
    r = run_probe(str(system), ["numpy"], {"PYTHONPATH": ":".join(HERE_PATHS)})
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_module_the_sandbox_cannot_import_is_a_host_error_that_says_what_to_do():
    with pytest.raises(HostError) as err:
        check_starts(("numpy", "perfgym_no_such_module_anywhere"))
    message = str(err.value)
    assert "perfgym_no_such_module_anywhere" in message and "pip install" in message
    assert "\n" not in message


def test_a_worker_that_cannot_start_is_not_charged_to_the_candidate(monkeypatch):
    """The first loop's failure: a venv's sandboxed worker died on `import numpy` and every
    GPU candidate was scored RUNTIME_ERROR. Now the host is blamed, with a HostError."""
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    from perfgym import EvalConfig, evaluate, get_task
    import perfgym.backends.torch.protocol as pt  # imported before the patch, or it would
    import perfgym.sandbox_python as sp           # keep the broken one after this test
    broken = sp.SandboxPython(sp.sandbox_python().executable, {"PYTHONPATH": "/nonexistent"},
                              ())
    monkeypatch.setattr(sp, "sandbox_python", lambda: broken)
    monkeypatch.setattr(pt, "sandbox_python", lambda: broken)
    task = get_task("relu")
    solution = Path(pt.__file__).parents[2] / "tasks" / "builtin_gpu" / "solutions" / "relu.py"
    with pytest.raises(HostError, match="cannot import numpy"):
        evaluate(task, solution.read_text(), None, EvalConfig(use_cache=False))


def test_a_worker_killed_on_a_healthy_host_is_still_the_candidates_fault(monkeypatch):
    """The host check must not become a way out: a worker that died without a report on a host
    whose Python starts is the candidate's RUNTIME_ERROR, not a HostError."""
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    from perfgym import EvalConfig, Status, evaluate, get_task
    import perfgym.backends.torch.protocol as pt
    solution = Path(pt.__file__).parents[2] / "tasks" / "builtin_gpu" / "solutions" / "relu.py"
    killer = "import os\nos.kill(os.getpid(), 9)\n" + solution.read_text()  # dies at import
    outcome = evaluate(get_task("relu"), killer, None,
                       EvalConfig(use_cache=False, extra={"static_rules": False}))
    assert outcome.status is Status.RUNTIME_ERROR, outcome.message
    assert "stopped answering" in outcome.message and "SIGKILL" in outcome.message


def test_a_private_folder_on_the_path_is_a_host_error_that_names_it_and_the_fix(tmp_path):
    """A bind keeps a folder's own mode: a mode-700 PYTHONPATH entry stays unreadable inside,
    and Python would silently import something else. It is named, with the chmod to run."""
    private = private_dir(tmp_path / "private-lib")
    (private / "perfgym_private_probe.py").write_text("VALUE = 1\n")
    r = run_probe(sys.executable, ["numpy"], {"PYTHONPATH": ":".join([str(private), *HERE_PATHS])})
    assert r.returncode == 3, r.stdout + r.stderr
    assert str(private) in r.stdout and "chmod o+rx" in r.stdout
