"""One results file per benchmark, one entry per machine kind: benchmarks/results/<name>.json.

    from results_by_machine import record          (benchmarks/ is the script's own folder)
    record("reward_noise", result, summary={"naive time CV, alone (max)": "6.7%"}, path=args.json)

The machine kind is the CPU's model name, its generation as the vendor numbers it (x86's
family and model) and the ISA flags that change what a figure means, read by perfgym.machine
and perfgym.cpuinfo (what every Outcome's fingerprint is made of), not a second reader of
/proc/cpuinfo. A run on a new kind adds an entry and replaces none; a run on a kind the file
already holds becomes that kind's entry, and the entry it replaces moves to the kind's
`earlier` list, so no figure is lost. Each entry says when (`date`, UTC), at which `commit` of
the perfgym it measured and with which `command`. `summary` is a few headline figures as
strings: the docs' benchmark page renders them as one table row per machine kind
(docs/hooks/results_tables.py); `result` is everything the script measured.

The file:

    {"benchmark": NAME, "script": "benchmarks/NAME.py",
     "machines": {"AMD EPYC | avx2": {"cpu": ..., "isa": [...], "cores": 2, "date": ...,
                                      "commit": ..., "command": ..., "summary": {...},
                                      "result": {...}, "earlier": [older entries]}}}
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
# The flags of perfgym.cpuinfo's ISA list that tell one machine kind's figures from another's:
# vector width, bf16 and fp16 in hardware, AMX, and Arm's. (The rest of that list, sse4_2 to
# avx512vl, comes with one of these. avx512_vnni is not in it, so it is not in the key either.)
KIND_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "asimd", "sve", "sve2")


def cpu_family() -> str | None:
    """The CPU's generation as its vendor numbers it: 'family 25 model 17' (x86) or
    'implementer 0x41 part 0xd0c' (Arm); None where /proc/cpuinfo gives neither. Why: a VM
    may show one model name for several generations. 'AMD EPYC' with the same ISA flags was
    a Zen 5 (L1d 48K, 270 GFLOP/s FP64 on 2 cores) in the sessions to 2026-11-30 and a Zen 4
    (family 25 model 17: L1d 32K, 117 GFLOP/s) after; naive dgemm ran 1.7-2.3x slower on the
    second, so one kind's figures would have mixed the two."""
    from perfgym.cpuinfo import _cpuinfo
    info = _cpuinfo()
    if info.get("cpu family") and info.get("model"):
        return f"family {info['cpu family']} model {info['model']}"
    if info.get("CPU implementer") and info.get("CPU part"):
        return f"implementer {info['CPU implementer']} part {info['CPU part']}"
    return None


def machine(every_flag: bool = False) -> dict:
    """This machine's kind (`cpu`, `family`, `isa`: its KIND_FLAGS, or with `every_flag` all
    the ISA flags perfgym reads, as a cell or a draw records them) and its core count."""
    from perfgym.machine import cpu_model, isa_flags
    return {"cpu": cpu_model(), "family": cpu_family(),
            "isa": [f for f in isa_flags() if every_flag or f in KIND_FLAGS],
            "cores": len(os.sched_getaffinity(0))}


def kind(cpu: str, isa: list[str] | None, family: str | None = None) -> str:
    """The key of a machine kind in a results file:
    'AMD EPYC (family 25 model 17) | avx2 avx512f avx512_bf16' (isa None: an old run that
    recorded no flags; family None: one that recorded no generation, a kind of its own)."""
    flags = 'ISA not recorded' if isa is None else ' '.join(isa) or 'no avx2'
    return f"{cpu}{f' ({family})' if family else ''} | {flags}"


def commit() -> str:
    """The commit of the perfgym being measured (its checkout's HEAD, '+changes' when its src/
    or benchmarks/ differ from it, the results the benchmarks write aside), or 'unknown'
    outside a git checkout."""
    import perfgym
    where = Path(perfgym.__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(where), *args], capture_output=True,
                              text=True, check=True).stdout.strip()
    try:
        head = git("rev-parse", "--short", "HEAD")
        top = Path(git("rev-parse", "--show-toplevel"))
        changed = git("status", "--porcelain", "--", str(top / "src"), str(top / "benchmarks"),
                      f":(exclude){top / 'benchmarks' / 'results'}")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if changed else "")


def load(name: str, path: str | Path | None = None) -> dict:
    """A benchmark's results file (an empty one if there is none yet)."""
    path = Path(path) if path else RESULTS / f"{name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    return {"benchmark": name, "script": f"benchmarks/{name}.py", "machines": {}}


def record(name: str, result: dict, summary: dict | None = None,
           path: str | Path | None = None) -> Path:
    """Merge this run into `path` (default benchmarks/results/<name>.json) as this machine
    kind's entry; the kind's previous entry, if any, moves to its `earlier` list."""
    path = Path(path) if path else RESULTS / f"{name}.json"
    data = load(name, path)
    here = machine()
    entry = {**here,
             "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
             "commit": commit(),
             "command": "python " + shlex.join([f"benchmarks/{Path(sys.argv[0]).name}",
                                                *sys.argv[1:]]),
             "summary": {k: str(v) for k, v in (summary or {}).items()},
             "result": result}
    key = kind(here["cpu"], here["isa"], here["family"])
    if old := data["machines"].get(key):
        entry["earlier"] = [{k: v for k, v in old.items() if k != "earlier"},
                            *old.get("earlier", [])]
    data["machines"][key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path} (machine kind {key!r})")
    return path


def json_flag(ap, name: str) -> None:
    """`--json [OUT]` on a script's parser: record the run into OUT, by default
    benchmarks/results/<name>.json."""
    ap.add_argument("--json", nargs="?", const=str(RESULTS / f"{name}.json"), default=None,
                    metavar="OUT", help="add this machine kind's entry to OUT (default: "
                    f"benchmarks/results/{name}.json)")
