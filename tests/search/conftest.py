import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

from perfgym.train.pairs import VARIANTS_DIR

NAIVE_IKJ = ("Here is a tuned version.\n```c\n"
             + (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text() + "```")
WRONG = """```c
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s * 1.01;
        }
}
```"""
BROKEN = """```c
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++) C[i] = A[i] +;
}
```"""
OPENMP = """```c
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    #pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}
```"""
COMPLETIONS = [NAIVE_IKJ, WRONG, BROKEN, OPENMP]


@pytest.fixture
def replay_file(tmp_path):
    path = tmp_path / "replay.jsonl"
    path.write_text("".join(json.dumps({"completion": c}) + "\n" for c in COMPLETIONS))
    return path


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory):
    """A tiny random qwen2 GGUF with the default model's tokenizer (tiny_qwen2.py); the tests
    that use it skip first where gguf is not installed."""
    from tiny_qwen2 import write_tiny_qwen2

    from perfgym.models import shipped_gguf
    return write_tiny_qwen2(tmp_path_factory.mktemp("qwen2") / "tiny-qwen2.gguf",
                            shipped_gguf())
