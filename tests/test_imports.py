"""perfgym's modules import each other without circles, at the top of a file or inside a
function alike (a lazy import is still a dependency: it hides the circle, it does not break it)."""
import pytest

grimp = pytest.importorskip("grimp", reason="the test extra is not installed: pip install 'perfgym[test]'")


def circles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_circles():
    graph = grimp.build_graph("perfgym")
    assert circles(graph) == []


def test_the_check_finds_a_circle(tmp_path, monkeypatch):
    """The check itself: a package whose two modules import each other (one lazily)."""
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from . import a\n")
    (package / "c.py").write_text("from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert circles(grimp.build_graph("circled")) == [["circled.a", "circled.b"]]
