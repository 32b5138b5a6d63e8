import shutil

import pytest

from perfgym.tasks import TaskError, builtin_names, get_task, load_task, parse_size
from perfgym.tasks.signature import SignatureError, parse_signature


def test_dgemm_is_the_seed_task(dgemm):
    assert dgemm.signature.name == "matmul_optimized"
    assert dgemm.entry == "void matmul_optimized(double *A, double *B, double *C, int M, int N, int K)"
    assert dgemm.default_size == {"M": 256, "N": 256, "K": 256}
    assert dgemm.flop_count({"M": 2, "N": 3, "K": 4}) == 48
    awkward = [s for s in dgemm.sizes("all") if any(v % 8 for v in s.values())]
    assert awkward, "the size list must include sizes that are not multiples of 8"


def test_builtin_listing():
    assert "dgemm" in builtin_names()


def test_signature_parsing():
    sig = parse_signature("void f(const double *restrict x, float *y, int n, long m)")
    assert [(p.ctype, p.name, p.pointer, p.const) for p in sig.params] == [
        ("double", "x", True, True), ("float", "y", True, False), ("int", "n", False, False),
        ("long", "m", False, False)]
    assert parse_signature("long long f(double *x)").ret == "long long"  # a returned value
    with pytest.raises(SignatureError):
        parse_signature("struct s f(double *x)")
    with pytest.raises(SignatureError):
        parse_signature("void f(struct s *x)")


def test_parse_size(dgemm):
    assert parse_size("64", dgemm) == {"M": 64, "N": 64, "K": 64}
    assert parse_size("M=3,N=4,K=5", dgemm) == {"M": 3, "N": 4, "K": 5}
    for bad in ("M=3", "x", "M=0,N=1,K=1", "M=1,N=1,K=1,Q=2"):
        with pytest.raises(TaskError):
            parse_size(bad, dgemm)


def copy_task(tmp_path, dgemm):
    d = tmp_path / "t"
    shutil.copytree(dgemm.directory, d)
    return d


@pytest.mark.parametrize("edit, field", [
    (lambda s: s.replace('reference = "A @ B"\n', ""), "reference"),
    (lambda s: s.replace("void matmul_optimized(double *A", "void matmul_optimized(double A["),
     "entry"),
    (lambda s: s.replace('flops = "2*M*N*K"', 'flops = "2*M*N*Q"'), "flops"),
    (lambda s: s.replace('flops = "2*M*N*K"', 'flops = "2*M*"'), "flops"),
    (lambda s: s.replace('baseline = "naive.c"', 'baseline = "missing.c"'), "baseline"),
    (lambda s: s.replace('shape = ["M", "K"]', 'shape = ["M", "Z"]'), "arrays.A.shape"),
    (lambda s: s.replace('mode = "full"', 'mode = "most"'), "verify.mode"),
    (lambda s: s.replace('[arrays.C]', '[arrays.D]'), "entry"),
])
def test_malformed_task_names_the_field(tmp_path, dgemm, edit, field):
    d = copy_task(tmp_path, dgemm)
    spec = d / "task.toml"
    spec.write_text(edit(spec.read_text()))
    with pytest.raises(TaskError) as exc:
        load_task(d)
    assert f"'{field}'" in str(exc.value)


def test_not_a_task(tmp_path):
    with pytest.raises(TaskError, match="no task.toml"):
        load_task(tmp_path)
    with pytest.raises(TaskError, match="no task"):
        get_task("no-such-task")
    (tmp_path / "task.toml").write_text("name = [")
    with pytest.raises(TaskError, match="not valid TOML"):
        load_task(tmp_path)


def test_spec_hash_follows_the_baseline(tmp_path, dgemm):
    d = copy_task(tmp_path, dgemm)
    before = load_task(d).spec_hash
    (d / "naive.c").write_text((d / "naive.c").read_text() + "\n/* changed */\n")
    assert load_task(d).spec_hash != before
