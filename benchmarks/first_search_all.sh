#!/bin/bash
# The no-flag search's draws behind benchmarks/results/first_search.json: dgemm with three
# seeds, then other built-in tasks (a stencil, a reduction, ...) with TASK_SEEDS each, one at a
# time (two timing jobs never share the cores). Their run stores are also the learning
# experiment's teacher data (`perfgym pairs from-runs runs/first_search_*`).
#   [SEEDS="1 2 3"] [TASK_SEEDS="1"] bash benchmarks/first_search_all.sh [TASKS...]
#   (default: dgemm x3, then the tasks below)
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results/first_search.json
for seed in ${SEEDS-1 2 3}; do  # SEEDS="" runs no dgemm draw
  python benchmarks/first_search.py --task dgemm --seed "$seed" --run-dir "runs/first_search_dgemm_$seed" --json "$out"
done
for task in "${@:-jacobi2d dot sgemm dgemv transpose}"; do
  for t in $task; do
    for seed in ${TASK_SEEDS-1}; do
      run="runs/first_search_$t"
      [ "$seed" = 1 ] || run="${run}_$seed"  # seed 1 keeps the run directory it always had
      python benchmarks/first_search.py --task "$t" --seed "$seed" --run-dir "$run" --json "$out"
    done
  done
done
