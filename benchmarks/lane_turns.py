"""How two processes share the timing lane: each takes evaluations from one counter (as two
Ray benchmark nodes on one machine take them from the driver) and holds the lane as an
evaluation does, with sleeps instead of work: the build and the check call shared, the timing
exclusive. It reports each process's share of the evaluations, its longest wait for the
exclusive lane, and the wall time.

    python benchmarks/lane_turns.py [--evaluations 60] [--repeats 3] [--out FILE]

Modes: `blocking` (unbounded waits: a blocking flock, as on a Ray node, in a search or
training), `bounded` (both wait as a reward call does, under lane.bounded: LOCK_NB looked at
every lane.POLL s) and `mixed` (process 0 bounded, process 1 blocking). The lock file is a
private one in the temporary directory unless PERFGYM_LANE_LOCK names one: never the
machine's lane, and nothing else of perfgym's is held up. No CPU is used while the lane is
held.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from multiprocessing import Process, Queue, Value
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOLDS = {"build": 0.03, "check": 0.02, "timing": 0.06, "between": 0.003}  # seconds


def node(i: int, mode: str, counter, total: int, out: Queue) -> None:
    from perfgym import lane
    bounded = mode == "bounded" or (mode == "mixed" and i == 0)
    done, waits = 0, [0.0]
    with lane.bounded(120.0) if bounded else nullcontext():
        while True:
            with counter.get_lock():
                if counter.value >= total:
                    break
                counter.value += 1
            with lane.LANE.shared():
                time.sleep(HOLDS["build"])
            with lane.LANE.shared():
                time.sleep(HOLDS["check"])
            time.sleep(HOLDS["between"])
            asked = time.monotonic()
            with lane.LANE.exclusive():
                waits.append(time.monotonic() - asked)
                time.sleep(HOLDS["timing"])
            time.sleep(HOLDS["between"])
            done += 1
    out.put((i, done, max(waits)))


def run(mode: str, total: int) -> dict:
    counter, out = Value("i", 0), Queue()
    started = time.monotonic()
    procs = [Process(target=node, args=(i, mode, counter, total, out)) for i in range(2)]
    for p in procs:
        p.start()
    results = sorted(out.get() for _ in procs)
    for p in procs:
        p.join()
    return {"mode": mode, "shares": [round(d / total, 3) for _, d, _ in results],
            "max_wait_s": [round(w, 3) for *_, w in results],
            "seconds": round(time.monotonic() - started, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--evaluations", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                    "lane_turns.json")
    args = ap.parse_args()
    if not os.environ.get("PERFGYM_LANE_LOCK"):  # (read when perfgym.lane is imported)
        os.environ["PERFGYM_LANE_LOCK"] = str(Path(tempfile.mkdtemp()) / "lane.lock")
    sys.path.insert(0, str(ROOT / "src"))
    rows = []
    for mode in ("blocking", "bounded", "mixed"):
        for _ in range(args.repeats):
            rows.append(run(mode, args.evaluations))
            print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({"holds_s": HOLDS, "evaluations": args.evaluations,
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
