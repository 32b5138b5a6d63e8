"""The layout matrix: wherever a user puts Python and its packages, the sandboxed interpreter
starts and imports numpy and torch, and nothing bound into the sandbox is writable from it.

Each layout is a real interpreter holding real copies of this environment's numpy, torch and
perfgym (hard links where the file system allows, so a venv costs little), and each is checked
by starting the sandboxed Python from it. The sandbox shadows /tmp, /var/tmp and /dev/shm with
empty tmpfs mounts, so a venv there vanishes unless it is bound in, whatever its permission
bits; a mode-700 directory is bound because the sandbox uid cannot read it."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import perfgym
from perfgym import sandbox

pytestmark = [pytest.mark.slow]
torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
if not (sandbox.isolation().own_uid and sandbox.isolation().private_tmp):
    pytest.skip("needs root and a private mount namespace (the sandbox shadows nothing "
                "otherwise)", allow_module_level=True)

MODULES = ["numpy", "torch"]
# Run by the layout's interpreter: start the sandboxed Python, import MODULES there, then try to
# write into every host folder bound into the sandbox (each attempt must fail).
PROBE = textwrap.dedent("""
    import json, shutil, sys
    from perfgym import sandbox
    from perfgym.errors import HostError
    from perfgym.sandbox_python import check_starts, sandbox_python
    try:
        check_starts(tuple(sys.argv[1:]))
    except HostError as exc:
        print(json.dumps({"started": False, "error": str(exc)}))
        sys.exit(0)
    py = sandbox_python()
    writes = {}
    for root in py.expose:
        work = sandbox.make_workdir("perfgym-writeprobe-")
        try:
            target = py.inside(root) + "/perfgym-write-probe"
            r = sandbox.run([py.executable, "-c", f"open({target!r}, 'w').write('x')"], work,
                            env=py.env, expose=py.expose)
            writes[root] = r.returncode == 0
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"started": True, "binds": list(py.expose), "writable": writes}))
""")


def needed_tops() -> list[Path]:
    """The top-level folders and modules of this environment's site-packages that importing
    numpy, torch and the sandbox helpers loads (plus the vendored `*.libs` beside them)."""
    code = ("import json, sys, numpy, torch, perfgym.sandbox_python\n"
            "print(json.dumps(sorted({m.__file__ for m in list(sys.modules.values())"
            " if getattr(m, '__file__', None)})))")
    files = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                      text=True, check=True, cwd="/").stdout)
    sites = [Path(p).resolve() for p in sys.path if p.endswith("site-packages")]
    tops: set[Path] = set()
    for f in map(lambda p: Path(p).resolve(), files):
        for site in sites:
            if f.is_relative_to(site):
                tops.add(site / f.relative_to(site).parts[0])
    for top in list(tops):
        libs = top.parent / f"{top.name}.libs"
        if libs.is_dir():
            tops.add(libs)
    tops.add(Path(perfgym.__file__).resolve().parent)  # an editable perfgym is outside site
    return sorted(tops)


def copy_in(tops: list[Path], site: Path) -> None:
    """Hard-linked copies where the file system allows, real copies elsewhere (/dev/shm)."""
    site.mkdir(parents=True, exist_ok=True)
    for top in tops:
        dest = site / top.name
        if top.is_dir():
            try:
                shutil.copytree(top, dest, copy_function=os.link, symlinks=True)
            except (OSError, shutil.Error):
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(top, dest, symlinks=True)
        else:
            shutil.copy2(top, dest)


def base_python() -> str:
    return getattr(sys, "_base_executable", sys.executable)


def make_venv(where: Path, tops: list[Path]) -> Path:
    subprocess.run([base_python(), "-m", "venv", "--without-pip", str(where)], check=True)
    site = Path(subprocess.run([str(where / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    copy_in(tops, site)
    return where / "bin" / "python"


def probe(python: str | Path, modules=MODULES, env: dict[str, str] | None = None) -> dict:
    # a clean environment: nothing of this interpreter's own path leaks into the layout's
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONUSERBASE",
                                                            "VIRTUAL_ENV", "PYTHONHOME")}
    r = subprocess.run([str(python), "-c", PROBE, *modules], capture_output=True, text=True,
                       env={**base, **(env or {})}, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_serves(result: dict, inside: Path | None = None) -> None:
    assert result["started"], result.get("error")
    assert result["binds"], "nothing was bound: the layout was not exercised"
    if inside is not None:
        assert any(Path(b).is_relative_to(inside.resolve()) for b in result["binds"]), result
    writable = [root for root, ok in result["writable"].items() if ok]
    assert not writable, f"bound read-write into the sandbox: {writable}"


@pytest.fixture(scope="module")
def tops() -> list[Path]:
    return needed_tops()


@pytest.fixture
def scratch(request):
    """A world-readable folder (mode 755, as `mkdir` makes under the default umask) in the
    shadowed root the test names, removed afterwards."""
    made = []

    def make(root: str) -> Path:
        if not os.path.isdir(root):
            pytest.skip(f"{root} does not exist on this machine")
        d = Path(tempfile.mkdtemp(prefix="perfgym-layout-", dir=root))
        d.chmod(0o755)
        made.append(d)
        return d
    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("root", ["/tmp", "/var/tmp", "/dev/shm"])
def test_a_world_readable_venv_under_a_shadowed_root(root, scratch, tops):
    where = scratch(root)
    assert_serves(probe(make_venv(where / "venv", tops)), where)


def test_a_venv_in_a_mode_700_directory_outside_the_shadowed_roots(tops):
    sandbox.ROOT_WORK_DIR.parent.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="perfgym-layout-", dir=sandbox.ROOT_WORK_DIR.parent))
    try:
        home.chmod(0o700)
        assert_serves(probe(make_venv(home / "venv", tops)), home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_venv_reached_through_a_symlink(scratch, tops):
    where = scratch("/tmp")
    make_venv(where / "real-venv", tops)
    (where / "link").symlink_to(where / "real-venv")
    result = probe(where / "link" / "bin" / "python")
    assert_serves(result, where / "real-venv")  # bound at its real place, not the link's


def test_a_user_site_in_a_world_readable_home_under_tmp(scratch, tops):
    """`pip install --user` with PYTHONUSERBASE under /tmp: the user site is a sys.path entry the
    base interpreter adds itself."""
    userbase = scratch("/tmp") / ".local"
    env = {"PYTHONUSERBASE": str(userbase)}
    user_site = subprocess.run([base_python(), "-c", "import site; print(site.getusersitepackages())"],
                               capture_output=True, text=True, env={**os.environ, **env},
                               check=True).stdout.strip()
    copy_in(tops, Path(user_site))
    assert_serves(probe(base_python(), env=env), userbase)


def test_an_editable_install_from_a_checkout_under_tmp(scratch, tops):
    """A real `pip install -e` (setuptools' PEP 660 import hook, not a path .pth) of a project
    checked out under /tmp: its package lives only in the checkout."""
    where = scratch("/tmp")
    python = make_venv(where / "venv", tops)
    checkout = where / "checkout"
    (checkout / "perfgym_editable_probe").mkdir(parents=True)
    (checkout / "perfgym_editable_probe" / "__init__.py").write_text("VALUE = 7\n")
    (checkout / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "perfgym-editable-probe"
        version = "0.0.1"
        [tool.setuptools]
        packages = ["perfgym_editable_probe"]
    """))
    site = Path(subprocess.run([str(python), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # the build backend, offline: this environment's setuptools with its entry points
    setuptools = pytest.importorskip(
        "setuptools", reason="setuptools is not installed: the editable install needs it")
    home = Path(setuptools.__file__).resolve().parents[1]
    copy_in([home / "setuptools", home / "_distutils_hack",
             *home.glob("setuptools-*.dist-info")], site)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-index", "-e", str(checkout)],
                   check=True)
    assert list(site.glob("__editable__*finder.py")), "not the import-hook kind of install"
    result = probe(python, modules=[*MODULES, "perfgym_editable_probe"])
    assert_serves(result, checkout)


def test_the_system_interpreter_with_packages_on_pythonpath(scratch, tops):
    from test_sandbox_python import system_python  # (tests/ is on the path under pytest)
    system = system_python()
    packages = scratch("/tmp") / "packages"
    copy_in(tops, packages)
    assert_serves(probe(system, env={"PYTHONPATH": str(packages)}), packages)
