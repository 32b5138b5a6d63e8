"""Does a shorter improve prompt help the default model? The prompt a search sends first, in
full and without its closing rules paragraph and machine facts, N opened answers each, scored.

    python benchmarks/short_prompt.py [--tasks dgemm] [--samples 16]

The opened answer already holds the fence, the includes and the signature, so the rules on
headers and the answer's format are moot for it; a 135M model may read a shorter prompt
better. Prints the status counts per task and prompt.
"""
from __future__ import annotations

import argparse
import re
import time


def shorter(prompt: str) -> str:
    prompt = re.sub(r"\n\nKeep it correct at every size.*", "", prompt, flags=re.S)
    return re.sub(r"How it did on the target machine \([^)]*\)", "How it did", prompt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="dgemm")
    ap.add_argument("--samples", type=int, default=16)
    args = ap.parse_args()
    from perfgym.backends import backend_for
    from perfgym.config import EvalConfig
    from perfgym.executors import Request, evaluate_many
    from perfgym.models import DEFAULT_SAMPLING
    from perfgym.opening import answer_start, full_answer
    from perfgym.policies.openvino import OpenVINOPolicy
    from perfgym.prompts import expand_prompt
    from perfgym.tasks import get_task
    policy = OpenVINOPolicy()
    for name in args.tasks.split(","):
        task = get_task(name)
        seed = backend_for(task).baseline_candidate(task, EvalConfig())[0]
        base = evaluate_many([Request(task, seed, None, EvalConfig())])[0]
        full = expand_prompt(task, "improve", seed, base.to_dict())
        for label, prompt in (("full", full), ("short", shorter(full))):
            opening = answer_start(task)
            started = time.monotonic()
            texts = policy.generate([prompt], args.samples, openings=[opening],
                                    **DEFAULT_SAMPLING)[0]
            outcomes = evaluate_many([Request(task, full_answer(opening, t), None, EvalConfig())
                                      for t in texts])
            counts: dict[str, int] = {}
            for o in outcomes:
                counts[o.status.value] = counts.get(o.status.value, 0) + 1
            print(f"{name} {label} prompt ({len(prompt)} characters): {counts} "
                  f"({time.monotonic() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
