"""How the fast engine runs a GGUF as shipped (search and evaluation, not training).

Chosen by `benchmarks/engine_speed.py --model coder`: tokens per second of the coder at batch
1, 8 and 32, exact FP32 against the engine's own precisions, with prefix caching on and off.
Training keeps exactness (`OpenVINOEngine(exact=True)`): its samples must come from the
trainer's own distribution.
"""
SHIPPED_ENGINE = {"exact": False, "prefix_caching": True, "cache_gb": 2}
