"""Verification's compare() in blocks against one pass over the whole arrays.

    python benchmarks/compare_speed.py [--repeats 5] [--json [OUT]]

Three outputs the size of the built-in tasks' largest: transpose's 4096 x 4096 doubles against
its reference (A.T, a transposed view), dot-sized 4M doubles and histogram-sized 16M floats,
each compared with the answer it should be (all elements checked, as `verify = "full"` does).
Each is timed `--repeats` times with verify.BLOCK_ELEMENTS as shipped and with one block that
holds the whole array (temporaries the size of the output, as before blocks; the code before
blocks also copied both arrays once more, so it was slower than this), alternating; prints the
medians and their ratio.
"""
from __future__ import annotations

import argparse
import statistics
import time

from results_by_machine import json_flag, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    json_flag(ap, "compare_speed")
    args = ap.parse_args()
    import numpy as np

    from perfgym import verify
    from perfgym.machine import cpu_model
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (4096, 4096))
    x = rng.uniform(-1, 1, 4_000_000)
    f = rng.uniform(-1, 1, 16_000_000).astype(np.float32)
    cases = {"transpose 4096x4096 float64 (reference A.T)": (np.ascontiguousarray(a.T), a.T),
             "4M float64": (x.copy(), x), "16M float32": (f.copy(), f)}
    shipped = verify.BLOCK_ELEMENTS
    results = {}
    for name, (got, expected) in cases.items():
        seconds = {"blocks": [], "whole": []}
        for r in range(args.repeats):
            for way in (("blocks", "whole") if r % 2 == 0 else ("whole", "blocks")):
                verify.BLOCK_ELEMENTS = shipped if way == "blocks" else got.size
                t0 = time.perf_counter()
                verdict = verify.compare("out", got, expected, 1e-6, 1e-9)
                seconds[way].append(time.perf_counter() - t0)
                assert verdict.ok
        verify.BLOCK_ELEMENTS = shipped
        med = {k: statistics.median(v) for k, v in seconds.items()}
        results[name] = {"seconds": med, "blocks_over_whole": med["blocks"] / med["whole"]}
        print(f"{name:45s} blocks {med['blocks']:.3f} s, whole {med['whole']:.3f} s: "
              f"{med['blocks'] / med['whole']:.2f}x", flush=True)
    result = {"machine": cpu_model(), "block_elements": shipped, "repeats": args.repeats,
              "cases": results}
    if args.json:
        record("compare_speed", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    return {f"{case}: blocks / whole": f"{c['blocks_over_whole']:.2f}x"
            for case, c in result["cases"].items()}


if __name__ == "__main__":
    main()
