"""How the fast engine runs a GGUF as shipped (search and evaluation, not training).

Chosen by `benchmarks/shipped_engine_speed.py --model coder` (2-core AMD EPYC with AVX-512
BF16; benchmarks/results/shipped_engine_speed.json): the coder's tokens per second, prompt
included, for batches of requests of perfgym's dgemm improve prompt (96 new tokens each):

    | batch | exact FP32 | + prefix caching | engine's precisions | + prefix caching |
    |   1   |    10.5    |       17.9       |        13.9         |       14.6       |
    |   8   |    14.6    |       21.2       |        22.8         |       77.8       |
    |  32   |    14.2    |       53.0       |        25.0         |      127.0       |

Every candidate of a search step shares its prompt, so prefix caching computes the ~800-token
prompt once; together with the engine's own precisions (bf16 where the CPU has it, a u8 KV
cache) a batch of 32 runs 9x faster than exact FP32. Search takes both. Training keeps
exactness (`OpenVINOEngine(exact=True)`): its samples must come from the trainer's own
distribution.
"""
# The precisions themselves are chosen on the machine that runs them (engine/probe.py): the
# table above holds on the machine it was measured on.
SHIPPED_ENGINE = {"exact": False, "prefix_caching": True, "cache_gb": 2}
