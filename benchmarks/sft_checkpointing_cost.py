"""What gradient checkpointing costs the learning experiment's SFT: the same SFT (the learning
experiment's settings, one seed, the first STEPS steps) with TRL's default, activations
recomputed in the backward, and without it, one after the other, each alone on the cores.

    python benchmarks/sft_checkpointing_cost.py [--data benchmarks/results/learning_editif_steps_run/sft_data.jsonl]
        [--steps 4] [--seed 1] [--json benchmarks/results/sft_checkpointing_cost.json]

Per variant, from a child process of its own: TRL's seconds a step (its train_runtime over
the steps), the child's peak RSS (VmHWM), and the trained LoRA weights. Checkpointing changes
where the activations come from, not the arithmetic: the figure that matters is the seconds
a step without it over with it, and the weights of the two variants must agree (their largest
difference is printed; the LoRA dropout of the experiment's SFT is 0).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

DEFAULT_DATA = HERE / "results" / "learning_editif_steps_run" / "sft_data.jsonl"


def child(data: str, steps: int, seed: int, checkpointing: bool, out: str) -> None:
    """One SFT in this process; prints its seconds a step and peak RSS as one JSON line."""
    import learning_speed
    from perfgym.train.sft import SFTSettings, train
    trainer = train(SFTSettings(model_path=None, pairs=data, output_dir=out, seed=seed,
                                max_steps=steps, **{**learning_speed.SFT,
                                                    "gradient_checkpointing": checkpointing}))
    runtime = next(e["train_runtime"] for e in trainer.state.log_history if "train_runtime" in e)
    hwm = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    print(json.dumps({"seconds_per_step": round(runtime / steps, 2),
                      "peak_rss_mb": hwm // 1024}), flush=True)


def refuse(message: str, status: int = 2) -> None:
    """One line on stderr; exit status 2 for bad input, 1 for a run that failed."""
    print(message, file=sys.stderr)
    sys.exit(status)


def largest_difference(a: Path, b: Path) -> float:
    from safetensors.torch import load_file
    wa, wb = (load_file(str(p / "final" / "adapter_model.safetensors")) for p in (a, b))
    assert wa.keys() == wb.keys(), "the two adapters hold other tensors"
    return max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="SFT records (JSONL)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps < 1:
        refuse("--steps is at least 1: say how many SFT steps to time")
    if not Path(args.data).is_file():
        refuse(f"--data {args.data}: no such file; give the SFT records of a learning run")
    if args.child:
        return child(args.data, args.steps, args.seed, args.child == "on", args.out)
    rows, outs = [], []
    with tempfile.TemporaryDirectory(prefix="perfgym-sft-gc-") as tmp:
        for mode in ("on", "off"):
            out = Path(tmp) / mode
            done = subprocess.run([sys.executable, __file__, "--child", mode, "--out", str(out),
                                   "--data", args.data, "--steps", str(args.steps),
                                   "--seed", str(args.seed)],
                                  capture_output=True, text=True, env={**os.environ})
            if done.returncode != 0:
                refuse(f"checkpointing {mode}: the SFT failed: "
                       f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}", status=1)
            rows.append({"checkpointing": mode == "on",
                         **json.loads(done.stdout.strip().splitlines()[-1])})
            outs.append(out)
            print(json.dumps(rows[-1]), flush=True)
        diff = largest_difference(*outs)
    on, off = rows
    ratio = off["seconds_per_step"] / on["seconds_per_step"]
    print(f"a step without checkpointing: {ratio:.2f}x the time with it; peak "
          f"{off['peak_rss_mb']} MB against {on['peak_rss_mb']} MB; the LoRA weights differ "
          f"by at most {diff:.3g}")
    if args.json:
        from results_by_machine import record
        record("sft_checkpointing_cost",
               {"data": os.path.relpath(args.data, HERE.parent), "steps": args.steps,
                "seed": args.seed, "rows": rows, "off_over_on": round(ratio, 3),
                "largest_weight_difference": diff},
               {"a step, without over with": f"{ratio:.2f}x",
                "peak RSS, with / without": f"{on['peak_rss_mb']} / {off['peak_rss_mb']} MB"},
               args.json)


if __name__ == "__main__":
    main()
