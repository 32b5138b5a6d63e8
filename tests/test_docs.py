"""The manual covers every command, and the README stays a short tour. (CI builds the site
itself with `mkdocs build --strict`; these checks need no MkDocs.)"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if not (ROOT / "mkdocs.yml").is_file():
    pytest.skip("not a source checkout: the docs are not installed with the package",
                allow_module_level=True)


def commands() -> set[str]:
    from typer.main import get_command

    from perfgym.cli import app
    return set(get_command(app).commands)


def test_every_command_group_has_a_page_in_the_site():
    nav = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r"- perfgym ([a-z-]+)", nav))
    assert commands() - listed == set()
    for page in re.findall(r": ([\w/.-]+\.md)", nav):
        assert (ROOT / "docs" / page).is_file(), page


def test_the_readme_is_a_short_tour_that_links_every_command_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    for link in re.findall(r"\]\((docs/[^)]+\.md)\)", readme):
        assert (ROOT / link).is_file(), link
    linked = set(re.findall(r"\[([a-z-]+)\]\(docs/", readme))
    assert commands() - linked == set()
