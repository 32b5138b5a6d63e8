"""Named models: fetched from data wheels with pip, joined, checked against the published size
and SHA-256, refused loudly when they differ, and used offline once cached. The wheels here are
small fakes served from a local directory (PIP_NO_INDEX, PIP_FIND_LINKS): pip runs for real,
nothing leaves the machine, and nothing of 1.1 GB is downloaded."""
import hashlib
import subprocess
import sys
import zipfile

import pytest

from perfgym import models
from perfgym.models import ModelUnavailable, NamedModel


def make_wheel(folder, index, data):
    package = f"fakemodel_part{index}"
    name = f"fakemodel-part{index}"
    wheel = folder / f"{package}-0.1.0-py3-none-any.whl"
    info = f"{package}-0.1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"{package}/__init__.py", "")
        z.writestr(f"{package}/data/part{index:02d}.bin", data)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
                                    "true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return wheel


PARTS = [bytes([i]) * (1000 + 37 * i) for i in range(1, 4)]
WHOLE = b"".join(PARTS)


def fake_model(size=len(WHOLE), sha256=hashlib.sha256(WHOLE).hexdigest()):
    return NamedModel(name="fake", title="Fake-Model", gguf="fake.gguf",
                      wheels=tuple(f"fakemodel-part{i}==0.1.0" for i in range(1, 4)),
                      members=tuple(f"fakemodel_part{i}/data/part{i:02d}.bin"
                                    for i in range(1, 4)),
                      size=size, sha256=sha256)


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A local wheel index pip is pointed at, and an empty models directory."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path / "models"))
    return wheels


def register(monkeypatch, model):
    monkeypatch.setitem(models.NAMED_MODELS, model.name, model)


def test_parts_are_joined_in_order_and_verified(index, monkeypatch):
    for i, data in enumerate(PARTS, 1):
        make_wheel(index, i, data)
    model = fake_model()
    register(monkeypatch, model)
    path = models.named_gguf("fake", quiet=True)
    assert path.read_bytes() == WHOLE
    assert path.with_name(path.name + ".verified").is_file()
    # nothing else is left beside it: no partial file, no wheel
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf", "fake.gguf.verified"]


def test_a_corrupted_part_is_refused_and_never_becomes_the_model(index, monkeypatch):
    for i, data in enumerate(PARTS, 1):
        make_wheel(index, i, data if i != 2 else data[:-1] + b"\xff")  # one byte flipped
    register(monkeypatch, fake_model())
    with pytest.raises(ModelUnavailable, match="SHA-256 .* is not the published"):
        models.named_gguf("fake", quiet=True)
    assert not list((models.models_dir()).glob("fake.gguf*"))


def test_a_truncated_part_is_refused_by_its_size(index, monkeypatch):
    for i, data in enumerate(PARTS, 1):
        make_wheel(index, i, data if i != 3 else data[:100])
    register(monkeypatch, fake_model())
    with pytest.raises(ModelUnavailable, match=f"{len(PARTS[0]) + len(PARTS[1]) + 100:,} bytes"):
        models.named_gguf("fake", quiet=True)
    assert not list(models.models_dir().glob("fake.gguf*"))


def test_a_missing_wheel_says_what_could_not_be_fetched(index, monkeypatch):
    make_wheel(index, 1, PARTS[0])  # parts 2 and 3 are nowhere
    register(monkeypatch, fake_model())
    with pytest.raises(ModelUnavailable, match="could not fetch fakemodel-part2==0.1.0"):
        models.named_gguf("fake", quiet=True)
    assert not list(models.models_dir().glob("fake.gguf*"))


def test_a_cached_model_resolves_offline(index, monkeypatch, tmp_path):
    for i, data in enumerate(PARTS, 1):
        make_wheel(index, i, data)
    register(monkeypatch, fake_model())
    first = models.named_gguf("fake", quiet=True)
    for wheel in index.iterdir():  # the index is gone: only the cache can answer
        wheel.unlink()
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    assert models.named_gguf("fake", quiet=True) == first
    assert models.shipped_engine_gguf("fake") == first


def test_a_cached_file_that_was_altered_is_refused(index, monkeypatch):
    for i, data in enumerate(PARTS, 1):
        make_wheel(index, i, data)
    register(monkeypatch, fake_model())
    path = models.named_gguf("fake", quiet=True)
    path.write_bytes(WHOLE[:-1] + b"\x00")  # same size, other bytes, new mtime
    with pytest.raises(ModelUnavailable, match="remove it and run `perfgym model fetch fake`"):
        models.named_gguf("fake", quiet=True)


def test_the_cli_refuses_a_bad_cached_coder_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path))
    (tmp_path / models.CODER.gguf).write_bytes(b"GGUF" + b"\x00" * 100)  # not the coder
    done = subprocess.run([sys.executable, "-m", "perfgym.cli", "model", "fetch", "coder"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not Qwen2.5-Coder-1.5B-Instruct" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_model_identity_names_size_and_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_MODELS_DIR", str(tmp_path / "models"))
    gguf = tmp_path / "my.gguf"
    gguf.write_bytes(WHOLE)
    ident = models.model_identity(gguf)
    assert ident == {"name": "my.gguf", "size": len(WHOLE),
                     "sha256": hashlib.sha256(WHOLE).hexdigest()}
    assert models.model_title("coder") == models.CODER.title
    assert models.default_sampling("coder") is models.CODER_SAMPLING
    assert models.default_sampling(None) is models.DEFAULT_SAMPLING
    assert models.default_sampling(str(gguf)) is None
