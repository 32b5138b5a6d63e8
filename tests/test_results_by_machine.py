"""benchmarks/results_by_machine.py: a machine kind names the CPU's generation, so two CPUs a
VM shows under one model name are not one kind."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import results_by_machine as rbm  # noqa: E402

import perfgym.cpuinfo  # noqa: E402


@pytest.mark.parametrize("info, family", [
    ({"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17",
      "model name": "AMD EPYC"}, "family 25 model 17"),
    ({"cpu family": "6", "model": "143", "model name": "Intel Xeon"}, "family 6 model 143"),
    ({"CPU implementer": "0x41", "CPU part": "0xd0c"}, "implementer 0x41 part 0xd0c"),
    ({"model name": "some CPU"}, None),
    ({}, None),
])
def test_the_generation_is_the_vendors_numbers_or_none(info, family, monkeypatch):
    monkeypatch.setattr(perfgym.cpuinfo, "_cpuinfo", lambda: info)
    assert rbm.cpu_family() == family


def test_the_kind_names_the_generation_when_recorded():
    assert rbm.kind("AMD EPYC", ["avx2"], "family 25 model 17") == (
        "AMD EPYC (family 25 model 17) | avx2")
    assert rbm.kind("AMD EPYC", ["avx2"]) == "AMD EPYC | avx2"
    assert rbm.kind("AMD EPYC", None) == "AMD EPYC | ISA not recorded"
    assert rbm.kind("AMD EPYC", [], "family 23 model 49") == (
        "AMD EPYC (family 23 model 49) | no avx2")


def test_two_generations_record_two_entries_in_a_results_file(tmp_path, monkeypatch):
    path = tmp_path / "bench.json"
    for family in ("family 26 model 2", "family 25 model 17", "family 25 model 17"):
        monkeypatch.setattr(rbm, "machine", lambda: {"cpu": "AMD EPYC", "family": family,
                                                     "isa": ["avx2"], "cores": 2})
        rbm.record("bench", {"family": family}, path=path)
    machines = json.loads(path.read_text())["machines"]
    assert set(machines) == {"AMD EPYC (family 26 model 2) | avx2",
                             "AMD EPYC (family 25 model 17) | avx2"}
    zen4 = machines["AMD EPYC (family 25 model 17) | avx2"]
    assert zen4["family"] == "family 25 model 17" and len(zen4["earlier"]) == 1
    assert machines["AMD EPYC (family 26 model 2) | avx2"]["result"] == {
        "family": "family 26 model 2"}


def test_this_machine_records_its_generation():
    here = rbm.machine()
    assert set(here) == {"cpu", "family", "isa", "cores"}
    if Path("/proc/cpuinfo").exists() and "cpu family" in Path("/proc/cpuinfo").read_text():
        assert here["family"].startswith("family ")
