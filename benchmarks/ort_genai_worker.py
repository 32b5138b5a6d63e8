"""ONNX Runtime GenAI's tokens per second on the coder, in ORT GenAI's own environment (run by
`shipped_engine_speed.py --engine ort_genai` with that environment's Python; this file imports
nothing of perfgym's).

    ORT_PY ort_genai_worker.py MODEL_DIR IDS_JSON SAMPLES TOKENS

MODEL_DIR: the coder built by ORT GenAI's model builder (int4 weights, int8 compute: accuracy
level 4). One JSON line a sample count: `tok_s` (new tokens over the request's whole time),
`decode_tok_s` (after the prompt is in), `prefill_s`. ORT GenAI has no prefix sharing on the
CPU: a batch of S samples of one prompt is S rows that each compute the prompt, so `tok_s` pays
the prompt S times, where OpenVINO's and vLLM's prefix caches pay it once (their rows time the
decoding only: compare `decode_tok_s` with theirs, and `tok_s` with what a search would see).
Build it (the fp32 transformers conversion perfgym keeps, then ORT GenAI's builder; about
7 GB of disk and 17 GB of memory at its peak, about a minute on 2 cores):

    python -c "from perfgym.models import resolve_model; print(resolve_model('coder'))"
    ORT_PY -m onnxruntime_genai.models.builder -i THAT_DIR -o MODEL_DIR -p int4 -e cpu \
        --extra_options accuracy_level=4 block_size=32 prune_lm_head=true

A warm-up request first (one sample, 4 tokens); EOS is masked until the last token, so every
sample generates TOKENS; temperature 0.5, as the other engines' rows.
"""
from __future__ import annotations

import json
import sys
import time


def main() -> None:
    import numpy as np
    import onnxruntime_genai as og

    model_dir, ids_path, samples, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ids = np.array(json.loads(open(ids_path).read()), dtype=np.int32)
    model = og.Model(model_dir)

    def run(n: int, new: int, seed: int) -> tuple[float, float, int]:
        params = og.GeneratorParams(model)
        length = len(ids) + new
        params.set_search_options(batch_size=n, do_sample=True, temperature=0.5, top_k=0,
                                  top_p=1.0, random_seed=seed, max_length=length,
                                  min_length=length)
        generator = og.Generator(model, params)
        started = time.perf_counter()
        generator.append_tokens(np.tile(ids, (n, 1)))
        prefilled = time.perf_counter()
        while not generator.is_done():
            generator.generate_next_token()
        ended = time.perf_counter()
        made = sum(len(generator.get_sequence(i)) - len(ids) for i in range(n))
        return prefilled - started, ended - started, made

    run(1, 4, 1)
    for n in (int(s) for s in samples.split(",")):
        prefill, seconds, made = run(n, tokens, 2)
        print(json.dumps({"samples": n, "tok_s": made / seconds, "prefill_s": prefill,
                          "decode_tok_s": made / (seconds - prefill)}), flush=True)


if __name__ == "__main__":
    main()
