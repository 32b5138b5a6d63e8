"""Seconds per SFT step and peak memory under each memory allocator, in one run.

    python benchmarks/train_allocator.py SFT_DATA.jsonl [--steps 3] [--json [OUT]]
        [--variants glibc,glibc_mmap_1mib,jemalloc,tcmalloc] [--no-gc-too]

SFT_DATA is what SFT trains on (the learning-speed experiment's `sft_data.jsonl`). Each variant
is a fresh process running `--steps` steps of the experiment's SFT settings (benchmarks/
learning.py's SFT, LoRA, its batch and max length) on the same records: glibc's malloc as it
comes; glibc with its mmap threshold fixed at 1 MiB (every large block its own mapping,
unmapped when freed); jemalloc and tcmalloc by LD_PRELOAD (Debian's libjemalloc2 and
libtcmalloc-minimal4). The first step is a warm-up, not counted. Prints, per variant, the
mean seconds of the other steps, the process's peak resident memory (VmHWM) and its user and
system CPU seconds, and each variant's time as a ratio of glibc's. The variants run one after
another: give the machine to this script alone.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from results_by_machine import json_flag, record

LIBS = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
VARIANTS = ("glibc", "glibc_mmap_1mib", "jemalloc", "tcmalloc")


def find_lib(name: str) -> str | None:
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/lib"):
        if (Path(d) / name).exists():
            return str(Path(d) / name)
    return None


def child(data: str, steps: int, gc: bool) -> None:
    """Run the steps here and print one JSON line."""
    sys.path.insert(0, str(Path(__file__).parent))
    import learning  # noqa: F401  (the experiment's SFT settings)
    from transformers import TrainerCallback

    from perfgym.train.sft import SFTSettings, build
    step_seconds: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            step_seconds.append(time.perf_counter() - self.started)

    settings = {k: v for k, v in learning.SFT.items() if k != "max_steps"}
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"train_allocator_{os.getpid()}"
    trainer = build(SFTSettings(model_path=None, pairs=data, output_dir=str(out),
                                max_steps=steps, seed=1, **settings))
    trainer.args.gradient_checkpointing = trainer.args.activation_checkpointing = gc
    if not gc:
        trainer.model.gradient_checkpointing_disable()
    trainer.add_callback(Clock())
    trainer.train()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    hwm = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM"))
    print(json.dumps({"step_seconds": step_seconds, "peak_rss_mb": hwm // 1024,
                      "user_s": usage.ru_utime, "sys_s": usage.ru_stime}))


def run_variant(name: str, data: str, steps: int, gc: bool) -> dict:
    env = dict(os.environ)
    if name == "glibc_mmap_1mib":
        env["MALLOC_MMAP_THRESHOLD_"] = str(1 << 20)
    elif name in LIBS:
        lib = find_lib(LIBS[name])
        if lib is None:
            return {"variant": name, "error": f"{LIBS[name]} not installed"}
        env["LD_PRELOAD"] = lib
    out = subprocess.run([sys.executable, __file__, "--child", data, "--steps", str(steps)]
                         + ([] if gc else ["--no-gc"]), env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        return {"variant": name, "error": out.stderr.strip().splitlines()[-1][:300]}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    timed = result["step_seconds"][1:] or result["step_seconds"]
    return {"variant": name, "gradient_checkpointing": gc,
            "seconds_per_step": sum(timed) / len(timed), **result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-gc-too", action="store_true",
                    help="also each variant without gradient checkpointing")
    json_flag(ap, "train_allocator")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-gc", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.data, args.steps, not args.no_gc)
    if not Path(args.data).is_file():
        sys.exit(f"no SFT data at {args.data}")
    rows = []
    for gc in (True, False) if args.no_gc_too else (True,):
        for name in args.variants.split(","):
            row = run_variant(name, args.data, args.steps, gc)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "step_seconds"}), flush=True)
    base = next((r for r in rows if r["variant"] == "glibc" and "error" not in r
                 and r["gradient_checkpointing"]), None)
    print("\nvariant | checkpointing | s/step | x glibc | peak RSS MB | user s | sys s")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']} | - | {r['error']}")
            continue
        ratio = f"{r['seconds_per_step'] / base['seconds_per_step']:.2f}" if base else "-"
        print(f"{r['variant']} | {r['gradient_checkpointing']} | {r['seconds_per_step']:.1f} | "
              f"{ratio} | {r['peak_rss_mb']} | {r['user_s']:.0f} | {r['sys_s']:.0f}")
    if args.json:
        summary = {f"{r['variant']}{'' if r['gradient_checkpointing'] else ', no checkpointing'}":
                   f"{r['seconds_per_step']:.1f} s/step, {r['peak_rss_mb']} MB"
                   for r in rows if "error" not in r}
        record("train_allocator", {"data": args.data, "steps": args.steps, "rows": rows},
               summary, args.json)


if __name__ == "__main__":
    main()
