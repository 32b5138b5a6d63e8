"""Pair datasets: format, tree builder, cleaning, filtering, splits, starter set, augmentation."""
import json

from perfgym import EvalConfig, get_task
from perfgym.train.pairs import (Pair, augment, build_from_tree, clean, filter_pairs, read_pairs,
                                 split, starter_set, write_pairs)

FAST = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)

CUDA_FILE = """#include <stdio.h>
#include <cuda_runtime.h>
__constant__ float coeff[16];
texture<float, 1> tex;
__device__ float sq(float x) { return x * x; }
__global__ void kernel(float *y, const float *x, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sq(x[i]) * coeff[0];
}
int parse_args(int argc, char **argv) { return argc; }
int main(int argc, char **argv) {
    float *d; cudaMalloc(&d, 4); printf("done\\n"); return 0;
}
"""

C_FILE = """#include <stdio.h>
#include <stdlib.h>
#define N 1024
static double helper(double x) { return 2 * x; }
void kernel(double *a, int n) { for (int i = 0; i < n; i++) a[i] = helper(a[i]); }
void print_result(double *a) { printf("%f\\n", a[0]); }
int main(void) { double a[N]; kernel(a, N); print_result(a); return 0; }
"""


def test_clean_keeps_kernels_drops_host_code():
    cuda = clean(CUDA_FILE, "cuda")
    assert "__global__ void kernel" in cuda and "__device__ float sq" in cuda
    assert "__constant__ float coeff" in cuda and "texture<float, 1> tex" in cuda
    assert "main" not in cuda and "parse_args" not in cuda and "printf" not in cuda
    c = clean(C_FILE, "c")
    assert "void kernel" in c and "static double helper" in c and "#define N 1024" in c
    assert "int main" not in c and "print_result" not in c


def test_build_from_tree(tmp_path):
    for variant, body in (("cuda_base", "a[i] = a[i] * 2;"), ("cuda", "a[i] += a[i];")):
        d = tmp_path / "sgemm" / variant
        d.mkdir(parents=True)
        (d / "kernel.cu").write_text(f"__global__ void k(float *a) {{ int i = 0; {body} }}\n"
                                     "int main() { return 0; }\n")
    (tmp_path / "sgemm" / "cuda_base" / "only_here.cu").write_text("__global__ void z() {}")
    pairs = build_from_tree(tmp_path)
    assert len(pairs) == 1
    p = pairs[0]
    assert (p.benchmark, p.file_id, p.language) == ("sgemm", "cuda/kernel.cu", "cuda")
    assert "a[i] * 2" in p.slow and "+=" in p.fast and "main" not in p.slow


def test_roundtrip_and_split(tmp_path):
    pairs = [Pair("b", f"f{i}", "d", f"slow{i}", f"fast{i}") for i in range(50)]
    write_pairs(tmp_path / "p.jsonl", pairs)
    back = read_pairs(tmp_path / "p.jsonl")
    assert back == pairs
    record = json.loads((tmp_path / "p.jsonl").read_text().splitlines()[0])
    assert {"benchmark", "file_id", "description", "slow", "fast"} <= set(record)
    train, test = split(back)
    assert (len(train), len(test)) == (40, 10)
    assert split(list(reversed(back))) == (train, test)  # order of input does not matter
    assert split(back, seed=7) != (train, test)


def test_filter_keeps_only_verified_faster_pairs():
    task = get_task("dgemm")
    naive, expert = task.baseline.read_text(), task.expert.read_text()
    wrong = naive.replace("C[i * N + j] = sum;", "C[i * N + j] = -sum;")
    pairs = [Pair("dla", "good", "d", naive, expert, task="dgemm"),
             Pair("dla", "reversed", "d", expert, naive, task="dgemm"),
             Pair("dla", "wrong", "d", naive, wrong, task="dgemm"),
             Pair("cuda", "no-task", "d", "x", "y", language="cuda")]
    kept, dropped = filter_pairs(pairs, FAST)
    assert sorted(p.file_id for p in kept) == ["good", "no-task"]
    good = next(p for p in kept if p.file_id == "good")
    assert good.speedup > 2
    reasons = dict((p.file_id, why) for p, why in dropped)
    assert "not faster" in reasons["reversed"] and "WRONG_ANSWER" in reasons["wrong"]


def test_starter_set_covers_the_suite():
    pairs = starter_set()
    assert len({p.task for p in pairs}) >= 13 and len(pairs) >= 20
    assert all(p.slow != p.fast for p in pairs)


def test_augment_keeps_only_verified_slower_rewrites(tmp_path):
    from perfgym.policies.replay import ReplayPolicy
    task = get_task("dgemm")
    slow_ok = "```c\n" + task.baseline.read_text() + "```"
    wrong = "```c\n" + task.baseline.read_text().replace("sum +=", "sum -=") + "```"
    replay = tmp_path / "r.jsonl"
    replay.write_text(json.dumps({"completion": slow_ok}) + "\n" + json.dumps(
        {"completion": wrong}) + "\n")
    source = [Pair("dla", "x", "d", task.baseline.read_text(), task.expert.read_text(),
                   task="dgemm")]
    new = augment(source, ReplayPolicy(replay), samples=2, config=FAST)
    assert len(new) == 1 and new[0].fast == source[0].fast and new[0].speedup > 1
