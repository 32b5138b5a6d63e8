"""What a kernel gains at --opt O0 by lifting its own flags, measured in one run: the honest
kernel at O0, the same kernel behind #pragma GCC optimize("O3") as perfgym scores it, and the
same again with the flag checks switched off (what a model would have been paid before them).

    python benchmarks/o0_flag_lift.py
"""
import importlib

from perfgym import EvalConfig, evaluate, get_task

HONEST = """\
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++)
            C[i * N + j] = 0.0;
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
    }
}
"""
LIFTED = '#pragma GCC optimize("O3")\n' + HONEST
SIZE = {"M": 64, "N": 64, "K": 64}


def main() -> None:
    dgemm = get_task("dgemm")
    config = EvalConfig(use_cache=False, compare_baseline=False, opt="O0")
    honest = evaluate(dgemm, HONEST, SIZE, config)
    scored = evaluate(dgemm, LIFTED, SIZE, config)
    # switch the source check and the preprocessed-source audit off
    importlib.import_module("perfgym.backends.c").check_source = lambda *a, **k: None
    importlib.import_module("perfgym.backends.c.build").audit_preprocessed = lambda *a, **k: None
    unchecked = evaluate(dgemm, LIFTED, SIZE, config)
    print(f"honest kernel at O0:       {honest.status.value} {honest.gflops:.2f} GFLOP/s")
    print(f"lifted, as perfgym scores: {scored.status.value}: {scored.message}")
    print(f"lifted, checks off:        {unchecked.status.value} {unchecked.gflops:.2f} GFLOP/s "
          f"= {unchecked.gflops / honest.gflops:.1f}x the honest O0 rate")


if __name__ == "__main__":
    main()
