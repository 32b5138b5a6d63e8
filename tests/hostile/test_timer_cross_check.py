"""The parent's clock against the C harness's: the harness announces every timed call on stdout,
the sandbox timestamps each marker line as it arrives, and evaluate.cross_check compares. The
hostile kernels that rewrite the harness's timing statics are candidates/timer_*.c; got_hook.c
tries to hook its imports."""
import shutil
import subprocess
from pathlib import Path

import pytest

from perfgym import Status, evaluate
from perfgym import sandbox
from perfgym.backends.c import build as cbackend
from perfgym.backends.c.measure import TAMPER_MARGIN, cross_check

CANDIDATES = Path(__file__).parent / "candidates"


def markers(calls, work=2e-3, dry=3, stand_in=1e-3):
    """Marker lines with arrival times as the sandbox records them: `dry` rounds where a wait of
    `stand_in` seconds stood in for the kernel, then timed calls of these lengths; the harness's
    own work takes `work` seconds a round."""
    t = 1000.0
    out = [(t, "@c 0")]
    for d in range(1, dry + 1):
        t += stand_in + work
        out.append((t, f"@c {d} {stand_in:.9f}"))
    t += 0.05  # the first call and the warm-ups
    out.append((t, "@t 0"))
    for k, length in enumerate(calls, 1):
        t += length + work
        out.append((t, f"@t {k}"))
    return out


# ---- the sandbox records markers --------------------------------------------------------------

@pytest.fixture
def workdir():
    d = sandbox.make_workdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_marker_lines_are_timestamped_as_they_arrive(workdir):
    r = sandbox.run(["sh", "-c", "echo '@a 1'; sleep 0.3; echo plain; echo '@b 2'"], workdir)
    assert [line for _, line in r.markers] == ["@a 1", "@b 2"]
    assert r.markers[1][0] - r.markers[0][0] >= 0.25
    assert "plain" in r.stdout and "@a 1" in r.stdout  # stdout is unchanged


def test_a_marker_flood_still_hits_the_output_cap(workdir):
    r = sandbox.run(["sh", "-c", "while :; do echo '@t 1'; done"], workdir,
                    sandbox.Limits(output_bytes=4096, wall_seconds=5))
    assert r.output_overflow and not r.timed_out
    assert len(r.markers) <= 4096 // len("@t 1\n")


# ---- the rule ---------------------------------------------------------------------------------

def test_honest_figures_pass():
    problem, seen = cross_check([0.010, 0.011, 0.010], markers([0.0101, 0.0109, 0.0102]))
    assert problem is None
    assert seen["overhead"] == pytest.approx(2e-3)  # the dry rounds beyond their stand-in
    assert seen["parent_median"] == pytest.approx(0.0102)


def test_deflated_times_are_tampering():
    problem, _ = cross_check([1e-5] * 5, markers([0.040] * 5))
    assert problem == "the harness reported 0.01 ms per call but the parent saw 40 ms (medians)"


def test_deflation_inside_the_slack_passes_and_is_charged_later():
    problem, seen = cross_check([0.006] * 5, markers([0.010] * 5))
    assert problem is None and seen["parent_median"] > seen["reported_median"]
    # small kernels get an absolute margin rather than the factor
    assert cross_check([1e-5] * 5, markers([TAMPER_MARGIN / 2] * 5))[0] is None


def test_a_count_mismatch_is_tampering():
    problem, _ = cross_check([0.01] * 3, markers([0.01] * 2))
    assert problem == "the harness reported 3 timed calls but announced 2 to the parent"


def test_missing_or_shuffled_markers_are_tampering():
    ms = markers([0.01] * 3)
    no_stand_in = [(ms[1][0], "@c 1")]
    for broken in (ms[:2] + ms[3:], ms[:-2] + ms[-1:] + ms[-2:-1], ms[:1] + no_stand_in + ms[2:],
                   ms[4:], [], markers([])):
        problem, _ = cross_check([0.01] * 3, broken)
        assert problem and "missing or out of order" in problem


def test_reported_calls_cannot_outrun_the_parents_clock():
    problem, _ = cross_check([0.010, 0.200, 0.010], markers([0.010] * 3))
    assert problem == ("the harness reported 210 ms for the first 2 timed calls but the parent "
                       "saw only 24 ms pass")


# ---- end to end -------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["baseline", "expert"])
def test_honest_kernels_pass_with_both_figures_stored(dgemm, fast, which):
    outcome = evaluate(dgemm, getattr(dgemm, which).read_text(), {"M": 128, "N": 128, "K": 128},
                       fast)
    assert outcome.status is Status.OK, outcome.message
    seen = outcome.parent_check
    reported, parent = seen["reported_samples"], seen["parent_samples"]
    assert len(reported) == len(parent) == len(outcome.timing.samples)
    assert outcome.timing.samples == [max(r, p) for r, p in zip(reported, parent)]
    assert seen["parent_median"] <= 2 * seen["reported_median"] + TAMPER_MARGIN
    assert 0 <= seen["charged"] <= len(reported) and seen["overhead"] >= 0


def test_hidden_work_inside_the_slack_is_charged(dgemm, fast):
    """timer_start_nudged.c reports ~0.65x of its real time: not tampering by the rule, but the
    Outcome's timing holds what the parent saw."""
    code = (CANDIDATES / "timer_start_nudged.c").read_text()
    outcome = evaluate(dgemm, code, {"M": 160, "N": 160, "K": 160}, fast)
    assert outcome.status is Status.OK, outcome.message
    seen = outcome.parent_check
    assert seen["charged"] >= len(seen["reported_samples"]) // 2
    assert outcome.timing.median > 1.25 * seen["reported_median"]


def test_the_harness_gets_a_read_only_got(dgemm, fast, workdir):
    """Full RELRO: the GOT cannot be pointed at a hook of clock_gettime or write (got_hook.c)."""
    build = cbackend.build(dgemm, dgemm.baseline.read_text(), fast, workdir)
    assert build.ok, build.message
    dynamic = subprocess.run(["readelf", "-d", str(workdir / "run")], capture_output=True,
                             text=True, check=True).stdout
    assert "BIND_NOW" in dynamic
