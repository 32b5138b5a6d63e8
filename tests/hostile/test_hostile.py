"""Every hostile candidate must end in the status its first line names (and with message=TEXT,
a message that contains TEXT), with the host unharmed:
no process left running as a sandbox uid the evaluation took, no file left outside the work
directory, none of its work directories left behind, and the host still evaluating honest
kernels. (Only the test's own uids and directories count: another perfgym may run beside it.)"""
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from perfgym import Status, evaluate
from perfgym.tasks import parse_size

CANDIDATES = sorted((Path(__file__).parent / "candidates").glob("*.c"))
PWNED = Path(tempfile.gettempdir()) / "perfgym-pwned"


def expectation(path: Path):
    m = re.match(r"// expect: (\w+)(.*)", path.read_text().splitlines()[0])
    assert m, f"{path.name}: first line must be '// expect: STATUS [key=value ...]'"
    options = dict(kv.split("=", 1) for kv in m.group(2).split())
    return Status(m.group(1)), options


def test_there_are_enough_hostile_candidates():
    assert len(CANDIDATES) >= 15


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_hostile_candidate(path, dgemm, fast, sandbox_use):
    expected, options = expectation(path)
    config = fast.replace(verify=options.get("verify"), march=options.get("march", "native"),
                          stage=int(options["stage"]) if "stage" in options else None)
    size = parse_size(options["size"], dgemm) if "size" in options else None
    PWNED.unlink(missing_ok=True)

    outcome = evaluate(dgemm, path.read_text(), size, config)

    assert outcome.status is expected, f"{outcome.status}: {outcome.message}\n{outcome.details}"
    assert options.get("message", "") in outcome.message  # e.g. message=tampering:
    assert outcome.message  # every failure says why, in one line
    assert "\n" not in outcome.message
    assert sandbox_use.processes_left() == {}
    assert not PWNED.exists()
    assert sandbox_use.workdirs_left() == []


def test_divisibility_kernel_is_right_at_the_default_size(dgemm, fast):
    """The divisibility hostile fails only at awkward sizes: the sizes are what catch it."""
    code = (Path(__file__).parent / "candidates" / "assumes_divisible.c").read_text()
    assert evaluate(dgemm, code, None, fast).status is Status.OK


def test_avx512_failure_names_the_cause(dgemm, fast):
    code = (Path(__file__).parent / "candidates" / "avx512_without_avx512.c").read_text()
    outcome = evaluate(dgemm, code, None, fast.replace(march="x86-64-v3"))
    assert "does not have" in outcome.message and "x86-64-v3" in outcome.message


def test_host_still_answers_after_the_suite(dgemm, fast):
    assert subprocess.run(["true"]).returncode == 0
    assert evaluate(dgemm, dgemm.baseline.read_text(), None, fast).status is Status.OK


def test_stack_walking_timer_tamper_is_named(dgemm, fast):
    code = (Path(__file__).parent / "candidates" / "stack_timer_tamper.c").read_text()
    outcome = evaluate(dgemm, code, {"M": 64, "N": 64, "K": 64}, fast)
    assert outcome.status is Status.WRONG_ANSWER and "harness's stack" in outcome.message


@pytest.mark.parametrize("samples, wall, gflops, fragment", [
    ([1e-3, 0.0, 1e-3], 1.0, 10.0, "took no time"),         # a zeroed sample
    ([1e-3, -5e-4], 1.0, 10.0, "took no time"),             # a start time pushed forward
    ([0.4, 0.4, 0.4], 1.0, 10.0, "more than the whole run"),  # samples inflated past the run
    ([1e-6] * 5, 1.0, 5000.0, "above what this machine"),   # faster than the machine can go
])
def test_faked_timings_are_rejected(samples, wall, gflops, fragment):
    from perfgym.backends.c.measure import implausible
    assert fragment in implausible(samples, wall, gflops, bound=225.0)


def test_honest_timings_pass():
    from perfgym.backends.c.measure import implausible
    assert implausible([1e-3] * 10, 1.0, 140.0, bound=225.0) is None
    assert implausible([1e-3] * 10, 1.0, None, bound=None) is None  # no FLOPs: no rate bound
