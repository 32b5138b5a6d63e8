"""No function of perfgym's source (everything under src/) is longer than 100 lines: past that
it no longer reads in one screen. A function's length is the AST's, from its `def` line to its
last line (decorators not counted); a nested function counts on its own and again as part of
its parent. The source walked is the one imported, found from the package itself."""
import ast
import importlib.util
from pathlib import Path

import perfgym

LIMIT = 100


def package_dirs() -> list[Path]:
    """perfgym's directory and the verifiers taskset's beside it (perfgym_kernels), found
    without importing the taskset (it imports the verifiers extra)."""
    dirs = [Path(perfgym.__file__).resolve().parent]
    kernels = importlib.util.find_spec("perfgym_kernels")
    if kernels is not None and kernels.submodule_search_locations:
        dirs.append(Path(kernels.submodule_search_locations[0]).resolve())
    return dirs


def long_functions(package: Path, limit: int = LIMIT) -> list[str]:
    """'FILE: NAME is N lines (from line L)' for each function of the package's .py files
    that is longer than `limit` lines; FILE is relative to the package's parent directory."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_bytes(), filename=str(path))
        functions = sorted((node for node in ast.walk(tree)
                            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))),
                           key=lambda node: node.lineno)  # (the walk goes level by level)
        for node in functions:
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append(f"{path.relative_to(package.parent)}: {node.name} is {length} "
                             f"lines (from line {node.lineno})")
    return found


def test_no_function_is_longer_than_100_lines():
    found = [f for package in package_dirs() for f in long_functions(package)]
    assert not found, (f"longer than {LIMIT} lines (split each into named parts):\n"
                       + "\n".join(found))


def test_the_check_finds_a_long_function(tmp_path):
    """The check itself: a function of 101 lines is found (a method, an async function and a
    nested one alike, the nested one again inside its parent); one of 100 lines is not, and
    its decorator does not count."""
    package = tmp_path / "lengthy"
    (package / "sub").mkdir(parents=True)

    def function(name: str, lines: int, prefix: str = "def", indent: str = "") -> str:
        body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
        return f"{indent}{prefix} {name}():\n{body}{indent}    return 0\n"

    (package / "__init__.py").write_text("@staticmethod\n" + function("fits", 100))
    (package / "sub" / "m.py").write_text(
        "class C:\n" + function("method", 101, indent="    ")
        + function("coroutine", 101, prefix="async def")
        + "def parent():\n" + function("nested", 101, indent="    ") + "    return nested\n")
    assert long_functions(package) == [
        "lengthy/sub/m.py: method is 101 lines (from line 2)",
        "lengthy/sub/m.py: coroutine is 101 lines (from line 103)",
        "lengthy/sub/m.py: parent is 103 lines (from line 204)",
        "lengthy/sub/m.py: nested is 101 lines (from line 205)",
    ]
