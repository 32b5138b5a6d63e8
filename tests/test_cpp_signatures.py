"""C++ entries in the forms real suites use (ParEval's): std::vector<T> const& inputs and
std::vector<T>& outputs, bool and std::complex elements, and a value returned from a vector."""
import textwrap

import pytest

from perfgym import evaluate
from perfgym.outcome import Status
from perfgym.tasks import TaskError, load_task
from perfgym.tasks.signature import SignatureError, parse_signature


def task_dir(tmp_path, name, toml, baseline, language="cpp"):
    directory = tmp_path / name
    directory.mkdir()
    (directory / "task.toml").write_text(textwrap.dedent(f"""
        name = "{name}"
        language = "{language}"
        description = "{name}"
        baseline = "naive.cpp"
        """) + textwrap.dedent(toml))
    (directory / "naive.cpp").write_text(baseline)
    return directory


SCALE_TOML = """
entry = "void scale(std::vector<double> const& x, std::vector<double> &y)"
flops = "N"
bytes = "16*N"
reference = "2.0 * x"
[arrays.x]
shape = ["N"]
[arrays.y]
shape = ["N"]
role = "out"
[sizes]
default = { N = 5000 }
[verify]
rtol = 1e-12
atol = 0.0
"""
SCALE = """#include <cstddef>
#include <vector>
void scale(std::vector<double> const& x, std::vector<double> &y) {
    for (size_t i = 0; i < x.size(); i++) y[i] = 2.0 * x[i];
}
"""


@pytest.fixture
def scale_task(tmp_path):
    return load_task(task_dir(tmp_path, "scale", SCALE_TOML, SCALE))


def test_vectors_in_and_out(scale_task, fast):
    assert [p.vector for p in scale_task.signature.params] == [True, True]
    o = evaluate(scale_task, SCALE, None, fast)
    assert o.status is Status.OK, o.message


def test_a_wrong_vector_answer_is_caught(scale_task, fast):
    o = evaluate(scale_task, SCALE.replace("2.0 * x[i]", "2.0 * x[i] + (i == 77)"), None, fast)
    assert o.status is Status.WRONG_ANSWER and "y[77]" in o.message, o.message


def test_an_unwritten_vector_output_is_caught(scale_task, fast):
    # the output vector arrives holding NaN: an element left alone is wrong, not zero
    o = evaluate(scale_task, SCALE.replace("x.size()", "x.size() - 1"), None, fast)
    assert o.status is Status.WRONG_ANSWER, o.message


def test_writing_a_const_input_vector_is_caught(scale_task, fast):
    cheat = SCALE.replace("y[i] = 2.0 * x[i];",
                          "{ y[i] = 2.0 * x[i]; const_cast<std::vector<double>&>(x)[i] = 0; }")
    o = evaluate(scale_task, cheat, None, fast)
    assert o.status is Status.WRONG_ANSWER and "modified its input x" in o.message, o.message


def test_resizing_an_output_vector_is_a_runtime_error(scale_task, fast):
    o = evaluate(scale_task, SCALE.replace("for (", "y.resize(1); for (", 1), None, fast)
    assert o.status is Status.RUNTIME_ERROR and "length of a std::vector" in o.message, o.message


def test_a_const_input_vector_is_the_harness_array_itself(scale_task, fast):
    # no copy: reading one past the end meets the harness's guard page (or the NaN fill
    # before it), as through a pointer; a copied vector would read the heap's leftovers
    past = SCALE.replace("y[i] = 2.0 * x[i];", "y[i] = 2.0 * x[i] + 0.0 * x.data()[i + 1];")
    o = evaluate(scale_task, past, None, fast)
    assert (o.status is Status.RUNTIME_ERROR and "guard page" in o.message) or \
        (o.status is Status.WRONG_ANSWER and "nan" in o.message.lower()), o.message


def test_shrinking_a_const_input_vector_is_a_runtime_error(scale_task, fast):
    shrink = SCALE.replace("for (", "const_cast<std::vector<double>&>(x).pop_back(); for (", 1)
    o = evaluate(scale_task, shrink, None, fast)
    assert o.status is Status.RUNTIME_ERROR and "length of a std::vector" in o.message, o.message


def test_an_answer_kept_from_an_earlier_call_is_wrong(scale_task, fast):
    # the vectors live on between calls, so a kernel can leave itself a mark in y's capacity
    # and skip the work afterwards; y is refilled (with NaN) before every call, so that is wrong
    lazy = SCALE.replace("for (", "if (y.capacity() > y.size()) return; y.reserve(2 * y.size());"
                         " for (", 1)
    o = evaluate(scale_task, lazy, None, fast)
    assert o.status is Status.WRONG_ANSWER, o.message


SUM_TOML = """
entry = "double sum(std::vector<double> const& x)"
returns = "total"
flops = "N"
bytes = "8*N"
reference = "x.sum()"
[arrays.x]
shape = ["N"]
[arrays.total]
shape = []
role = "out"
[sizes]
default = { N = 4096 }
[verify]
rtol = 1e-9
atol = 1e-9
"""
SUM = """#include <numeric>
#include <vector>
double sum(std::vector<double> const& x) { return std::accumulate(x.begin(), x.end(), 0.0); }
"""


def test_a_value_returned_from_a_vector(tmp_path, fast):
    task = load_task(task_dir(tmp_path, "sum", SUM_TOML, SUM))
    assert evaluate(task, SUM, None, fast).status is Status.OK
    o = evaluate(task, SUM.replace("0.0)", "1.0)"), None, fast)
    assert o.status is Status.WRONG_ANSWER and "total = " in o.message, o.message


MASK_TOML = """
entry = "void positive(std::vector<double> const& x, std::vector<bool> &mask)"
flops = "N"
bytes = "9*N"
reference = "x > 0"
[arrays.x]
shape = ["N"]
[arrays.mask]
shape = ["N"]
dtype = "bool"
role = "out"
[sizes]
default = { N = 3001 }
[verify]
rtol = 0.0
atol = 0.0
"""
MASK = """#include <cstddef>
#include <vector>
void positive(std::vector<double> const& x, std::vector<bool> &mask) {
    for (size_t i = 0; i < x.size(); i++) mask[i] = x[i] > 0;
}
"""


def test_bool_vectors(tmp_path, fast):
    task = load_task(task_dir(tmp_path, "mask", MASK_TOML, MASK))
    assert evaluate(task, MASK, None, fast).status is Status.OK
    o = evaluate(task, MASK.replace("x[i] > 0", "x[i] >= 0.5"), None, fast)
    assert o.status is Status.WRONG_ANSWER and "mask[" in o.message, o.message


def test_a_bool_pointer_output_left_unwritten_is_wrong(tmp_path, fast):
    # through a pointer the output starts as 0xFF bytes: neither true nor false
    toml = MASK_TOML.replace("std::vector<double> const& x, std::vector<bool> &mask",
                             "const double *x, bool *mask, int N")
    body = """void positive(const double *x, bool *mask, int N) {
    for (int i = 0; i < N; i++) if (x[i] > 0) mask[i] = true;
}
"""
    task = load_task(task_dir(tmp_path, "mask_ptr", toml, body))
    o = evaluate(task, body, None, fast)
    assert o.status is Status.WRONG_ANSWER, o.message
    right = body.replace("if (x[i] > 0) mask[i] = true;", "mask[i] = x[i] > 0;")
    assert evaluate(task, right, None, fast).status is Status.OK


CONJ_TOML = """
entry = "void conjugate(std::vector<std::complex<double>> &z)"
flops = "N"
bytes = "32*N"
reference = "np.conj(z)"
[arrays.z]
shape = ["N"]
dtype = "complex128"
role = "inout"
[sizes]
default = { N = 2000 }
[verify]
rtol = 1e-12
atol = 0.0
"""
CONJ = """#include <complex>
#include <vector>
void conjugate(std::vector<std::complex<double>> &z) {
    for (auto &v : z) v = std::conj(v);
}
"""


def test_complex_vectors_in_place(tmp_path, fast):
    task = load_task(task_dir(tmp_path, "conj", CONJ_TOML, CONJ))
    assert task.arrays["z"].role == "inout"
    assert evaluate(task, CONJ, None, fast).status is Status.OK
    # the imaginary part is checked too, not only the real part
    o = evaluate(task, CONJ.replace("std::conj(v)", "v"), None, fast)
    assert o.status is Status.WRONG_ANSWER and "z[" in o.message, o.message


@pytest.mark.parametrize("entry, match", [
    ("void f(std::map<int, int> &m)", "reference"),
    ("void f(double &x)", "reference"),
    ("void f(std::vector<std::string> const& s)", "element type"),
])
def test_unsupported_parameters_say_what_is_supported(entry, match):
    with pytest.raises(SignatureError, match=match):
        parse_signature(entry)


def test_vectors_and_complex_need_a_cpp_task(tmp_path):
    directory = task_dir(tmp_path, "scale_c", SCALE_TOML, SCALE, language="c")
    with pytest.raises(TaskError, match='language = "cpp"'):
        load_task(directory)


def test_a_const_vector_cannot_be_an_output(tmp_path):
    toml = SCALE_TOML.replace("std::vector<double> &y", "std::vector<double> const& y")
    with pytest.raises(TaskError, match="const& vector is an input"):
        load_task(task_dir(tmp_path, "scale_const", toml, SCALE))


def test_a_definition_spelled_differently_is_found(scale_task, fast):
    spaced = SCALE.replace("std::vector<double> const& x, std::vector<double> &y",
                           "const std::vector< double > & in, std::vector<double>& out") \
        .replace("x", "in").replace("y[i]", "out[i]")
    o = evaluate(scale_task, spaced, None, fast)
    assert o.status is Status.OK, o.message


POINT_STRUCT = """
[structs.Point]
x = "double"
y = "double"
"""
QUADRANTS_TOML = """
entry = "void countQuadrants(std::vector<Point> const& points, std::array<size_t, 4> &bins)"
flops = "N"
bytes = "16*N"
reference = '''np.array([np.sum((points['x'] >= 0) & (points['y'] >= 0)),
                         np.sum((points['x'] < 0) & (points['y'] >= 0)),
                         np.sum((points['x'] < 0) & (points['y'] < 0)),
                         np.sum((points['x'] >= 0) & (points['y'] < 0))])'''
[arrays.points]
shape = ["N"]
dtype = "Point"
[arrays.bins]
shape = ["4"]
dtype = "uint64"
role = "out"
[sizes]
default = { N = 2000 }
[verify]
rtol = 0.0
atol = 0.0
""" + POINT_STRUCT
QUADRANTS = """#include <array>
#include <cstddef>
#include <vector>
struct Point { double x, y; };
void countQuadrants(std::vector<Point> const& points, std::array<size_t, 4> &bins) {
    bins = {0, 0, 0, 0};
    for (auto const& p : points)
        bins[p.x >= 0 ? (p.y >= 0 ? 0 : 3) : (p.y >= 0 ? 1 : 2)]++;
}
"""


def test_a_vector_of_structs_in_and_a_std_array_out(tmp_path, fast):
    task = load_task(task_dir(tmp_path, "quadrants", QUADRANTS_TOML, QUADRANTS))
    assert task.arrays["points"].numpy.names == ("x", "y")
    o = evaluate(task, QUADRANTS, None, fast)
    assert o.status is Status.OK, o.message
    swapped = QUADRANTS.replace("(p.y >= 0 ? 0 : 3)", "(p.y >= 0 ? 3 : 0)")
    o = evaluate(task, swapped, None, fast)
    assert o.status is Status.WRONG_ANSWER and "bins[" in o.message, o.message


NORMS_TOML = """
entry = "void norms(const Point *p, Point *q, int N)"
flops = "3*N"
bytes = "32*N"
reference = "np.rec.fromarrays([np.hypot(p['x'], p['y']), p['x'] * p['y']], dtype=p.dtype)"
[arrays.p]
shape = ["N"]
dtype = "Point"
[arrays.q]
shape = ["N"]
dtype = "Point"
role = "out"
[sizes]
default = { N = 1000 }
[verify]
rtol = 1e-12
atol = 0.0
""" + POINT_STRUCT
NORMS = """#include <math.h>
typedef struct Point { double x, y; } Point;
void norms(const Point *p, Point *q, int N) {
    for (int i = 0; i < N; i++) { q[i].x = hypot(p[i].x, p[i].y); q[i].y = p[i].x * p[i].y; }
}
"""


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_structs_through_pointers_field_by_field(tmp_path, fast, language):
    task = load_task(task_dir(tmp_path, f"norms_{language}", NORMS_TOML, NORMS, language))
    assert evaluate(task, NORMS, None, fast).status is Status.OK
    o = evaluate(task, NORMS.replace("p[i].x * p[i].y", "p[i].x * p[i].x"), None, fast)
    assert o.status is Status.WRONG_ANSWER and o.message.split(" = ")[0].endswith("q.y[0]") \
        or "q.y[" in o.message, o.message


def test_a_std_array_shape_must_match_its_extent(tmp_path):
    toml = QUADRANTS_TOML.replace('shape = ["4"]', 'shape = ["5"]')
    with pytest.raises(TaskError, match=r'must be \["4"\]'):
        load_task(task_dir(tmp_path, "quadrants5", toml, QUADRANTS))


@pytest.mark.parametrize("fields, match", [
    ('x = "std::string"', "C number type"),
    ('x = "std::complex<double>"', "C number type"),
])
def test_struct_fields_are_numbers(tmp_path, fields, match):
    toml = QUADRANTS_TOML.replace('x = "double"', fields)
    with pytest.raises(TaskError, match=match):
        load_task(task_dir(tmp_path, "quadrants_bad", toml, QUADRANTS))
