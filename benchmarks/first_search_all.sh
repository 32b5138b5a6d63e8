#!/bin/bash
# The no-flag search's draws behind benchmarks/results/first_search.json: dgemm with three
# seeds, then other built-in tasks one draw each (a stencil, a reduction, ...), one at a time
# (two timing jobs never share the cores).
#   [SEEDS="1 2 3"] bash benchmarks/first_search_all.sh [TASKS...]   (default: dgemm x3, then the tasks below)
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results/first_search.json
for seed in ${SEEDS-1 2 3}; do  # SEEDS="" runs no dgemm draw
  python benchmarks/first_search.py --task dgemm --seed "$seed" --run-dir "runs/first_search_dgemm_$seed" --json "$out"
done
for task in "${@:-jacobi2d dot sgemm dgemv transpose}"; do
  for t in $task; do
    python benchmarks/first_search.py --task "$t" --seed 1 --run-dir "runs/first_search_$t" --json "$out"
  done
done
