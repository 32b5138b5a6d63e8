"""What machine a number was measured on: fingerprint, ISA, cores, measured peaks.

Peaks are measured once per machine (fingerprint) and cached; every Outcome carries them so a
GFLOP/s figure is never separated from where it was taken.
"""
from __future__ import annotations

import hashlib
import math
import json
import os
import platform
import subprocess
import tempfile
import time
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from .backends.c import compiler_version
from .paths import cache_dir

_ISA_OF_INTEREST = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw",
                    "avx512vl", "avx512_fp16", "avx512_bf16", "amx_tile", "asimd", "sve", "sve2")


@lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    info.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return info


def isa_flags() -> list[str]:
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return [f for f in _ISA_OF_INTEREST if f in flags]


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
        "compiler": compiler_version(compiler),
        "hostname": platform.node(),
    }
    stable = {k: v for k, v in fp.items() if k != "hostname"}
    fp["id"] = hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:12]
    return fp


def _run_peak_program(args: list[str], compiler: str, defines: tuple[str, ...] = ()) -> float:
    src = resources.files("perfgym.harness").joinpath("peak.c").read_text()
    with tempfile.TemporaryDirectory(prefix="perfgym-machine-") as tmp:
        (Path(tmp) / "peak.c").write_text(src)
        subprocess.run([compiler, "-O2", "-march=native", "-fopenmp", *defines, "peak.c", "-o",
                        "peak"], cwd=tmp, check=True, capture_output=True)
        out = subprocess.run(["./peak", *args], cwd=tmp, check=True, capture_output=True,
                             text=True, env={**os.environ, "OMP_PROC_BIND": "close",
                                             "OMP_PLACES": "cores"})
        return float(out.stdout.strip())


def _blas_dgemm_gflops(n: int = 1024) -> float:
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
                 "blas_dgemm_gflops"}
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


def measure(compiler: str = "gcc") -> dict[str, Any]:
    fp = fingerprint(compiler)
    cores = fp["cores"]
    return {
        "fingerprint": fp,
        "freq_ghz": _run_peak_program(["freq"], compiler) or None,
        "peak_gflops_1core": _run_peak_program(["peak", "1"], compiler),
        "peak_gflops": _run_peak_program(["peak", str(cores)], compiler),
        "peak_gflops_fp32": _run_peak_program(["peak", str(cores)], compiler, ("-DFP32",)),
        "blas_dgemm_gflops": _blas_dgemm_gflops(),
        # arrays far larger than the last-level cache, so the figure is memory bandwidth
        "bandwidth_gbs": _run_peak_program(["triad", str(cores), str(_triad_mib(fp) * 1024)],
                                           compiler),
        "bandwidth_footprint": 3 * (_triad_mib(fp) << 20),
        # and at smaller footprints, for kernels whose working set stays in a cache
        "bandwidth_curve": [[3 * kib * 1024, _run_peak_program(["triad", str(cores), str(kib)],
                                                               compiler)]
                            for kib in CURVE_KIB],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


_loaded: dict[tuple[str, str], dict[str, Any]] = {}  # per process: read the file once


def machine_info(compiler: str = "gcc", refresh: bool = False) -> dict[str, Any]:
    """The measured facts of this machine, from the cache unless `refresh`. Every evaluation
    asks, so the answer is kept in memory after the first read."""
    fp = fingerprint(compiler)
    path = cache_dir() / "machine" / f"{fp['id']}.json"
    memo_key = (compiler, str(path))
    if not refresh and memo_key in _loaded:
        return _loaded[memo_key]
    if path.is_file() and not refresh:
        try:
            info = json.loads(path.read_text())
            if REQUIRED_KEYS <= set(info):
                _loaded[memo_key] = info
                return info
        except json.JSONDecodeError:
            pass
    info = measure(compiler)
    _loaded[memo_key] = info
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=2))
    tmp.replace(path)
    return info


def summary(info: dict[str, Any]) -> dict[str, Any]:
    """The part of machine info every Outcome carries."""
    return {"id": info["fingerprint"]["id"], "cpu": info["fingerprint"]["cpu"],
            "cores": info["fingerprint"]["cores"], "isa": info["fingerprint"]["isa"],
            "peak_gflops": info["peak_gflops"], "peak_gflops_fp32": info["peak_gflops_fp32"],
            "bandwidth_gbs": info["bandwidth_gbs"], "bandwidth_curve": info["bandwidth_curve"],
            "bandwidth_footprint": info.get("bandwidth_footprint"),
            "freq_ghz": info.get("freq_ghz")}
