"""Run every task's naive and expert kernels and tabulate them: rate, fraction of the roofline,
expert speedup. Doubles as the check that every expert kernel is right at every size."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import machine
from .backends import backend_for
from .config import EvalConfig
from .executors import Request, evaluate_many
from .outcome import Outcome
from .paths import cache_dir
from .tasks import Task, format_size


@dataclass
class Row:
    task: str
    kind: str
    size: dict[str, int]
    naive: Outcome
    expert: Outcome | None

    @property
    def speedup(self) -> float | None:
        if self.expert and self.expert.ok and self.naive.ok:
            return self.naive.timing.median / self.expert.timing.median
        return None

    def to_dict(self) -> dict[str, Any]:
        def brief(o: Outcome | None) -> dict[str, Any] | None:
            if o is None:
                return None
            return {"status": o.status.value, "message": o.message, "gflops": o.gflops,
                    "gbps": o.gbps, "median_s": o.timing.median if o.timing else None,
                    "cv": o.timing.trimmed_cv if o.timing else None,
                    "fraction_of_roofline": o.fraction_of_roofline, "bound": o.bound}
        return {"task": self.task, "kind": self.kind, "size": self.size,
                "naive": brief(self.naive), "expert": brief(self.expert),
                "speedup": self.speedup}


def run_suite(tasks: list[Task], size_set: str = "default", config: EvalConfig = EvalConfig(),
              progress: bool = False) -> list[Row]:
    requests, index = [], []
    for t in tasks:
        for size in t.sizes(size_set):
            text, baseline_config = backend_for(t).baseline_candidate(t, config)
            requests.append(Request(t, text, size, baseline_config))
            index.append((t, size, "naive"))
            if t.expert:
                requests.append(Request(t, t.expert.read_text(), size, config))
                index.append((t, size, "expert"))
    outcomes = evaluate_many(requests, progress=progress)
    rows: dict[tuple, Row] = {}
    for (t, size, which), o in zip(index, outcomes):
        key = (t.name, format_size(size))
        if which == "naive":
            rows[key] = Row(t.name, t.kind, size, o, None)
        else:
            rows[key].expert = o
    return list(rows.values())


def blas_comparison(task: Task, config: EvalConfig, n: int = 1024) -> dict[str, float]:
    """dgemm expert at n against NumPy's BLAS at n, measured back to back in this run."""
    size = {"M": n, "N": n, "K": n}
    expert = evaluate_many([Request(task, task.expert.read_text(), size,
                                    config.replace(compare_baseline=False))])[0]
    blas = machine.blas_dgemm_gflops(n)
    return {"n": n, "expert_gflops": expert.gflops if expert.ok else 0.0,
            "expert_status": expert.status.value, "blas_gflops": blas,
            "ratio": (expert.gflops or 0.0) / blas if expert.ok else 0.0}


def rate(o: Outcome | None) -> str:
    if o is None:
        return "-"
    if not o.ok:
        return o.status.value
    if o.gflops:
        return f"{o.gflops:.2f} GFLOP/s"
    if o.gbps:
        return f"{o.gbps:.2f} GB/s"
    # a PyTorch task: no counted work, only its time and its speed over the reference
    return f"{o.timing.median * 1e3:.3f} ms ({o.speedup:.2f}x ref)" if o.speedup else \
        f"{o.timing.median * 1e3:.3f} ms"


def roof(o: Outcome | None) -> str:
    if o is None or not o.ok or o.fraction_of_roofline is None:
        return "-"
    return f"{o.fraction_of_roofline * 100:.0f}% ({o.bound})"


def markdown(rows: list[Row], info: dict[str, Any], blas: dict[str, float] | None,
             command: str) -> str:
    fp = info["fingerprint"]
    lines = [f"Machine: {fp['cpu']}, {fp['cores']} cores, {fp['compiler']}; FP64 peak "
             f"{info['peak_gflops']:.1f} GFLOP/s, bandwidth {info['bandwidth_gbs']:.1f} GB/s. "
             f"Command: `{command}`", "",
             "| task | kind | size | naive | expert | expert of roofline | expert speedup |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        sp = f"{r.speedup:.2f}x" if r.speedup else "-"
        lines.append(f"| {r.task} | {r.kind} | {format_size(r.size)} | {rate(r.naive)} | "
                     f"{rate(r.expert)} | {roof(r.expert)} | {sp} |")
    if blas:
        lines += ["", f"dgemm expert at n={blas['n']}: {blas['expert_gflops']:.1f} GFLOP/s, "
                  f"NumPy BLAS {blas['blas_gflops']:.1f} GFLOP/s in the same run: "
                  f"{blas['ratio'] * 100:.0f}% of BLAS."]
    return "\n".join(lines) + "\n"


def save_for_listing(rows: list[Row], machine_id: str) -> None:
    """Default-size figures per task, for `perfgym tasks` on this machine."""
    path = cache_dir() / "suite" / f"{machine_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(path.read_text()) if path.is_file() else {}
    for r in rows:
        known.setdefault(r.task, {})[format_size(r.size)] = {
            "naive": rate(r.naive), "expert": rate(r.expert), "measured_at": time.time()}
    path.write_text(json.dumps(known, indent=2))


def listing_figures(machine_id: str) -> dict[str, Any]:
    path = cache_dir() / "suite" / f"{machine_id}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def write_report(rows: list[Row], out: Path, info: dict[str, Any],
                 blas: dict[str, float] | None, command: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "suite.md", out / "suite.json"
    md.write_text(markdown(rows, info, blas, command))
    js.write_text(json.dumps({"machine": info, "command": command, "blas": blas,
                              "rows": [r.to_dict() for r in rows]}, indent=2))
    return md, js
