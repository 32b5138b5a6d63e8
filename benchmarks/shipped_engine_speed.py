"""Tokens per second of a model run as shipped on the fast engine, by setting and by samples of
one prompt, on this machine: the figures behind `perfgym.engine.probe`'s candidates.

    python benchmarks/shipped_engine_speed.py [--model coder] [--samples 1,8,16,32]
                                              [--tokens 96] [--json PATH]

The prompt is perfgym's improve prompt for dgemm (what a search sends); S samples are one
request with S return sequences, as a search step's answers of one prompt are (prefix caching
on: the prompt is computed once). EOS is ignored, so every setting generates the same count.
Each row names the machine (`cpu`, `isa`), the setting and its OpenVINO properties; the JSON
keeps the rows of other machine kinds and replaces this kind's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="coder")
    ap.add_argument("--samples", default="1,8,16,32")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--settings", default=None, help="comma-separated names of "
                    "perfgym.engine.probe.CANDIDATES (default: all)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from perfgym.engine.probe import CANDIDATES, measure_tok_s
    from perfgym.machine import fingerprint
    from perfgym.models import model_identity, shipped_engine_gguf
    from perfgym.policies.openvino import search_prompt_ids

    gguf = shipped_engine_gguf(args.model)
    if gguf is None:
        raise SystemExit(f"{args.model}: not a GGUF run as shipped (a name or a .gguf path)")
    fp = fingerprint()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or None
    names = args.settings.split(",") if args.settings else list(CANDIDATES)
    ids = search_prompt_ids(gguf)
    rows = []
    for name in names:
        for samples in (int(s) for s in args.samples.split(",")):
            tok_s = measure_tok_s(gguf, CANDIDATES[name], ids, samples=samples,
                                  tokens=args.tokens)
            row = {"cpu": fp["cpu"], "isa": fp["isa"], "cores": fp["cores"], "setting": name,
                   "properties": CANDIDATES[name], "prefix_caching": True,
                   "samples": samples, "tokens_per_sample": args.tokens, "tok_s": tok_s,
                   "load_average": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d"),
                   "commit": commit}
            rows.append(row)
            print(f"{name:8s} {samples:3d} samples: {tok_s:6.1f} tok/s "
                  f"(load {row['load_average']:.2f})", flush=True)
    if args.json:
        path = Path(args.json)
        old = json.loads(path.read_text()) if path.exists() else {}
        kind = (fp["cpu"], tuple(fp["isa"]))
        kept = [r for r in old.get("rows", []) if (r.get("cpu"), tuple(r.get("isa") or ()))
                != kind]
        path.write_text(json.dumps({"model": model_identity(args.model),
                                    "rows": kept + rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
