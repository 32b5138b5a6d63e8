"""What machine a number was measured on: fingerprint, ISA, cores, measured peaks.

Peaks are measured per machine (fingerprint) and cached; every Outcome carries them so a GFLOP/s
figure is never separated from where it was taken. A neighbour on a shared machine must not be
able to lower them: the probes time themselves by CPU time as well as wall clock, each pass is
checked (CPU share, all-core scaling, clock against the rated one) and repeated when disturbed,
and every figure keeps its best.
"""
from __future__ import annotations

import fcntl
import hashlib
import math
import json
import os
import platform
import re
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

from .backends.c.build import C, compiler_version
from .cpuinfo import _cpuinfo, isa_flags  # noqa: F401  (perfgym.machine.isa_flags)
from .errors import HostError
from .paths import cache_dir

def cpu_model() -> str:
    info = _cpuinfo()
    return info.get("model name") or info.get("CPU part") or platform.processor() or "unknown"


def _cache_sizes() -> dict[str, str]:
    sizes = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except OSError:
            continue
        if kind != "Instruction":
            sizes[f"L{level}"] = size
    return sizes


@lru_cache(maxsize=None)
def fingerprint(compiler: str = "gcc") -> dict[str, Any]:
    """Who measured: CPU, ISA, cores, compiler. `id` is a short hash of all of it.
    Fixed for the life of the process, so computed once."""
    fp = {
        "cpu": cpu_model(),
        "arch": platform.machine(),
        "isa": isa_flags(),
        "cores": len(os.sched_getaffinity(0)),
        "caches": _cache_sizes(),
        "compiler": compiler_version(C.compiler(compiler)),  # the C driver of --cc
        "hostname": platform.node(),
    }
    stable = {k: v for k, v in fp.items() if k != "hostname"}
    fp["id"] = hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:12]
    return fp


class _Probe:
    """peak.c built once (FP64 and FP32) for one measurement. Each run gives (rate by wall
    clock, rate by CPU time); see peak.c."""

    def __init__(self, compiler: str) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="perfgym-machine-")
        src = resources.files("perfgym.harness").joinpath("peak.c").read_text()
        (Path(self.tmp.name) / "peak.c").write_text(src)
        # both builds at once: a fresh node's first reward waits for them
        builds = [subprocess.Popen([C.compiler(compiler), "-O2", "-march=native", "-fopenmp",
                                    *defines, "peak.c", "-o", binary], cwd=self.tmp.name,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for binary, defines in (("peak", []), ("peak32", ["-DFP32"]))]
        errors = [built.communicate()[1] for built in builds]
        for built, stderr in zip(builds, errors):
            if built.returncode != 0:
                raise HostError(f"cannot build the machine probe with {compiler}: "
                                f"{stderr.strip()[:300]}")

    def run(self, *args: str, fp32: bool = False) -> tuple[float, float]:
        out = subprocess.run(["./peak32" if fp32 else "./peak", *args], cwd=self.tmp.name,
                             capture_output=True, text=True,
                             env={**os.environ, "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"})
        if out.returncode != 0:
            raise HostError(f"the machine probe failed ({' '.join(args)}): {out.stderr[:300]}")
        wall, cpu = map(float, out.stdout.split())
        return wall, cpu

    def close(self) -> None:
        self.tmp.cleanup()


def blas_dgemm_gflops(n: int = 1024) -> float:
    """NumPy's BLAS dgemm rate: what `perfgym machine` shows beside the peaks. Not part of the
    probe, which every evaluation on a fresh node waits for and which no verdict reads."""
    import numpy as np
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    a @ b  # warm-up: thread pool start, page faults
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best / 1e9


def _triad_mib(fp: dict[str, Any]) -> int:
    """Four times the last-level cache per array, between 64 MiB and 256 MiB."""
    sizes = [_parse_cache(v) for v in fp.get("caches", {}).values()]
    llc = max(sizes, default=32 << 20)
    return int(min(max(4 * llc, 64 << 20), 256 << 20) >> 20)


def _parse_cache(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text or 0)


REQUIRED_KEYS = {"peak_gflops", "peak_gflops_fp32", "bandwidth_gbs", "bandwidth_curve",
                 "probe", "isa_bound_gflops"}
CURVE_KIB = (64, 256, 1024, 4096, 16384, 65536)  # per triad array; footprint is 3x


def bandwidth_for(info: dict[str, Any], footprint: float) -> float | None:
    """Triad bandwidth for a working set of `footprint` bytes: interpolated (in log size)
    between measured footprints, the memory figure beyond the largest."""
    points = sorted(info.get("bandwidth_curve") or [])
    dram = info.get("bandwidth_gbs")
    if dram:
        points.append([info.get("bandwidth_footprint", 3 << 28), dram])
    if not points:
        return None
    if footprint <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if footprint <= x1:
            w = (math.log(footprint) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + w * (y1 - y0)
    return points[-1][1]


PROBE_ATTEMPTS = 3  # measurements before we settle for a disturbed one
RETRY_DISTURBED_AFTER = 600  # seconds: a disturbed measurement is measured again when older
MIN_CPU_SHARE = 0.85  # wall rate / CPU-time rate below this: another program shared the cores
MIN_SCALING = 0.75  # all cores must reach this fraction of cores x one core's FMA rate
MIN_CLOCK_RATIO = 0.8  # the measured clock must reach this fraction of the rated one
FMA_PORTS = 2  # FMA units per core: no x86 core has more, so the ISA bound is an upper bound


def measure_once(compiler: str = "gcc") -> tuple[dict[str, Any], dict[str, float]]:
    """One pass of every probe: (figures, share of the CPU each probe got). The clock and the
    FMA peaks are rates by CPU time, which a neighbour cannot lower by taking turns on our
    cores. Bandwidth stays a wall-clock rate: a thread running while its sibling waits gets
    more than its share of memory, so by CPU time a busy machine would look faster."""
    fp = fingerprint(compiler)
    cores = str(fp["cores"])
    probe = _Probe(compiler)
    try:
        runs = {"freq": probe.run("freq"), "peak_1core": probe.run("peak", "1"),
                "peak": probe.run("peak", cores), "peak_fp32": probe.run("peak", cores, fp32=True),
                # arrays far larger than the last-level cache: memory bandwidth
                "bandwidth": probe.run("triad", cores, str(_triad_mib(fp) * 1024))}
        # and at smaller footprints, for kernels whose working set stays in a cache
        curve = {kib: probe.run("triad", cores, str(kib)) for kib in CURVE_KIB}
    finally:
        probe.close()
    figures = {
        "freq_ghz": runs["freq"][1] or None,
        "peak_gflops_1core": runs["peak_1core"][1],
        "peak_gflops": runs["peak"][1],
        "peak_gflops_fp32": runs["peak_fp32"][1],
        "bandwidth_gbs": runs["bandwidth"][0],
        "bandwidth_footprint": 3 * (_triad_mib(fp) << 20),
        "bandwidth_curve": [[3 * kib * 1024, curve[kib][0]] for kib in CURVE_KIB],
    }
    shares = {name: wall / cpu for name, (wall, cpu) in runs.items() if cpu > 0}
    return figures, shares


def rated_ghz() -> float | None:
    """The clock the CPU says it runs at: cpufreq's maximum, else the model name's '@ X GHz',
    else /proc/cpuinfo's current MHz (a VM's nominal clock)."""
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
                   .read_text()) / 1e6
    except (OSError, ValueError):
        pass
    if m := re.search(r"@\s*([0-9.]+)\s*GHz", cpu_model()):
        return float(m.group(1))
    try:
        return float(_cpuinfo().get("cpu MHz", "")) / 1e3
    except ValueError:
        return None


def inconsistencies(figures: dict[str, Any], shares: dict[str, float], cores: int,
                    rated: float | None) -> list[str]:
    """Why one pass of the probe cannot be trusted as it is (empty: it can)."""
    notes = []
    if shares and min(shares.values()) < MIN_CPU_SHARE:
        worst = min(shares, key=shares.get)
        notes.append(f"another program was using the CPU: the {worst} probe got "
                     f"{shares[worst]:.0%} of it")
    scaling = figures["peak_gflops"] / (cores * figures["peak_gflops_1core"])
    if cores > 1 and scaling < MIN_SCALING:
        notes.append(f"{cores} cores reached only {scaling * cores:.2f}x one core's FMA rate")
    if rated and figures["freq_ghz"] and figures["freq_ghz"] < MIN_CLOCK_RATIO * rated:
        notes.append(f"the measured clock {figures['freq_ghz']:.2f} GHz is below the rated "
                     f"{rated:.2f} GHz")
    return notes


def best_of(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Each figure's best over two measurements: a neighbour only ever lowers a rate."""
    merged = dict(a)
    for key, value in b.items():
        if key == "bandwidth_curve":
            mine = dict(map(tuple, a.get(key) or []))
            merged[key] = [[x, max(y, mine.get(x, 0.0))] for x, y in value]
        elif isinstance(value, (int, float)) and isinstance(a.get(key), (int, float)):
            merged[key] = max(value, a[key])
        else:
            merged[key] = value if a.get(key) is None else a[key]
    return merged


# A clock read by the probe lags the boost a kernel may run at a moment later: on a 2-core
# AMD EPYC the measured FMA peak was 0.9% above lanes x FMAs x the clock the probe read, and
# 5.03% above it when the clock was read beside a hog on every core (CI, 2026-11-27). The bound
# only has to be an upper bound: the checks below it need 1.5x the measured peak anyway.
CLOCK_MARGIN = 1.10


def isa_bound_gflops(info: dict[str, Any], fp32: bool = False) -> float:
    """The rate no kernel can exceed on this ISA: vector lanes x 2 (an FMA is two FLOPs) x FMA
    units x the highest clock seen or rated (with CLOCK_MARGIN) x cores. It cannot be too low,
    whatever a neighbour did to the measured figures, nor below a peak a kernel measured."""
    isa = info["fingerprint"]["isa"]
    vector_bytes = 64 if "avx512f" in isa else 32 if "avx" in isa else 256 if "sve" in isa else 16
    ports = FMA_PORTS if info["fingerprint"]["arch"] in ("x86_64", "AMD64") else 4
    clock = max(info.get("freq_ghz") or 0.0, info.get("rated_ghz") or 0.0) or 6.0
    lanes = vector_bytes // (4 if fp32 else 8)
    measured = info.get("peak_gflops_fp32" if fp32 else "peak_gflops") or 0.0
    return max(lanes * 2 * ports * clock * CLOCK_MARGIN * info["fingerprint"]["cores"],
               measured * CLOCK_MARGIN)


def measure(compiler: str = "gcc", previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure until one pass is consistent (at most PROBE_ATTEMPTS), keeping each figure's
    best, also over `previous` (an earlier, disturbed measurement of this machine)."""
    fp = fingerprint(compiler)
    rated = rated_ghz()
    attempts = list((previous or {}).get("probe", {}).get("attempts", []))
    best = {k: v for k, v in (previous or {}).items() if k not in ("fingerprint", "probe")}
    for _ in range(PROBE_ATTEMPTS):
        figures, shares = measure_once(compiler)
        notes = inconsistencies(figures, shares, fp["cores"], rated)
        attempts.append({"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "notes": notes,
                         "cpu_share": round(min(shares.values(), default=1.0), 3)})
        best = best_of(best, figures)
        if not notes:
            break
    info = {"fingerprint": fp, **best, "rated_ghz": rated,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "probe": {"attempts": attempts[-2 * PROBE_ATTEMPTS:],
                      "consistent": not attempts[-1]["notes"]}}
    info["isa_bound_gflops"] = isa_bound_gflops(info)
    info["isa_bound_gflops_fp32"] = isa_bound_gflops(info, fp32=True)
    return info


_loaded: dict[tuple[str, str], dict[str, Any]] = {}  # per process: read the file once
_probing = threading.Lock()  # one probe per process; the file lock makes it one per machine


def machine_info(compiler: str = "gcc", refresh: bool = False) -> dict[str, Any]:
    """The measured facts of this machine, from the cache unless `refresh`. Every evaluation
    asks, so the answer is kept in memory after the first read. A cached measurement that was
    disturbed is measured again once it is RETRY_DISTURBED_AFTER old (not by every process of
    a busy spell), its figures only ever improving.

    The probe runs once per machine and cache, however many threads and processes ask at once
    (verl's reward loop asks from 16 threads on a fresh node): the first takes a thread lock
    and a file lock beside the cache file and measures; the others wait for it and read what
    it wrote. Sixteen probes at once would each be disturbed by the other fifteen."""
    fp = fingerprint(compiler)
    path = cache_dir() / "machine" / f"{fp['id']}.json"
    memo_key = (compiler, str(path))
    if not refresh and memo_key in _loaded:
        return _loaded[memo_key]
    path.parent.mkdir(parents=True, exist_ok=True)
    with _probing, _file_lock(path.with_suffix(".lock")):
        if not refresh and memo_key in _loaded:  # another thread measured while we waited
            return _loaded[memo_key]
        cached = _read_cached(path)
        if cached and not refresh and (cached["probe"]["consistent"] or
                                       time.time() - path.stat().st_mtime
                                       < RETRY_DISTURBED_AFTER):
            # derived, so a cached measurement gets the bound as it is computed now
            cached["isa_bound_gflops"] = isa_bound_gflops(cached)
            cached["isa_bound_gflops_fp32"] = isa_bound_gflops(cached, fp32=True)
            _loaded[memo_key] = cached
            return cached
        info = measure(compiler, previous=None if refresh else cached)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(info, indent=2))
        tmp.replace(path)
        _loaded[memo_key] = info
        return info


def _read_cached(path: Path) -> dict[str, Any] | None:
    """The cached measurement, None when there is none or it is older or damaged."""
    try:
        cached = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return cached if isinstance(cached, dict) and REQUIRED_KEYS <= set(cached) else None


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on `path`, held until the block ends (released if the process dies)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def probe_report(info: dict[str, Any]) -> list[str]:
    """What the probe saw, one line per disturbed measurement, for `perfgym machine`."""
    attempts = info["probe"]["attempts"]
    lines = [f"measurement {i} of {len(attempts)} disturbed: {'; '.join(a['notes'])}"
             for i, a in enumerate(attempts, 1) if a["notes"]]
    if not info["probe"]["consistent"]:
        lines.append("still disturbed: the peaks and clock are the best seen, by CPU time; "
                     "bandwidth and BLAS may be low; perfgym measures again in "
                     f"{RETRY_DISTURBED_AFTER // 60} minutes")
    return lines


def summary(info: dict[str, Any]) -> dict[str, Any]:
    """The part of machine info every Outcome carries."""
    return {"id": info["fingerprint"]["id"], "cpu": info["fingerprint"]["cpu"],
            "cores": info["fingerprint"]["cores"], "isa": info["fingerprint"]["isa"],
            "peak_gflops": info["peak_gflops"], "peak_gflops_fp32": info["peak_gflops_fp32"],
            "bandwidth_gbs": info["bandwidth_gbs"], "bandwidth_curve": info["bandwidth_curve"],
            "bandwidth_footprint": info.get("bandwidth_footprint"),
            "freq_ghz": info.get("freq_ghz"), "isa_bound_gflops": info["isa_bound_gflops"],
            "isa_bound_gflops_fp32": info["isa_bound_gflops_fp32"]}
