"""The engine's settings are chosen on the machine that runs them: measured once per machine
and model, stored, read back; the default stays unless another is clearly faster. The
measurement is a fake here, where the test is about the choice; `test_a_real_probe...` runs
the real one on a tiny GGUF."""
import json

import pytest

from perfgym.engine import probe


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


def fake(rates: dict[str, float], calls: list):
    by_props = {json.dumps(p, sort_keys=True): n for n, p in probe.CANDIDATES.items()}

    def measure(path, props):
        name = by_props[json.dumps(props, sort_keys=True)]
        calls.append(name)
        return rates[name]
    return measure


def test_the_fastest_setting_is_chosen_stored_and_read_back_without_measuring(gguf):
    calls = []
    rates = {"engine": 20.0, "exact": 14.0, "kv_f16": 31.0}
    chosen = probe.engine_settings(gguf, fake(rates, calls))
    assert chosen["name"] == "kv_f16" and chosen["properties"] == probe.CANDIDATES["kv_f16"]
    assert sorted(calls) == sorted(probe.CANDIDATES)
    assert {r["name"]: r["tok_s"] for r in chosen["rows"]} == rates
    assert chosen["cpu"] and isinstance(chosen["isa"], list)
    # the second use reads the stored choice: no measurement
    again = probe.engine_settings(gguf, fake(rates, calls))
    assert again["name"] == "kv_f16" and len(calls) == len(probe.CANDIDATES)


def test_the_default_stays_unless_another_wins_by_the_margin(gguf):
    rates = {"engine": 20.0, "exact": 20.0 * probe.MARGIN * 0.99, "kv_f16": 5.0}
    assert probe.engine_settings(gguf, fake(rates, []))["name"] == probe.DEFAULT


def test_another_machine_or_model_file_measures_again(gguf, monkeypatch):
    calls = []
    rates = {"engine": 30.0, "exact": 10.0, "kv_f16": 10.0}
    probe.engine_settings(gguf, fake(rates, calls))
    other = gguf.with_name("other.gguf")
    other.write_bytes(b"GGUF" + b"\0" * 90)
    probe.engine_settings(other, fake(rates, calls))
    assert len(calls) == 2 * len(probe.CANDIDATES)
    from perfgym import machine
    monkeypatch.setattr(machine, "fingerprint", lambda *a: {"id": "another", "cpu": "X",
                                                             "isa": ["avx2"]})
    probe.engine_settings(gguf, fake(rates, calls))
    assert len(calls) == 3 * len(probe.CANDIDATES)


def test_a_damaged_or_unknown_stored_choice_is_measured_again(gguf):
    calls = []
    rates = {"engine": 30.0, "exact": 10.0, "kv_f16": 10.0}
    path = probe.choice_path(gguf)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert probe.engine_settings(gguf, fake(rates, calls))["name"] == "engine"
    path.write_text(json.dumps({"name": "a setting from a newer perfgym"}))
    probe.engine_settings(gguf, fake(rates, calls))
    assert len(calls) == 2 * len(probe.CANDIDATES)
