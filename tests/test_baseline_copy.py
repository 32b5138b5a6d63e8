"""The naive kernel in disguise is the naive kernel (evaluate.is_baseline_copy): a copy is
paid as the naive kernel by the speed reward, whatever noise its timing carried. Disguises
an answer can wear, and real changes that must not be mistaken for a copy."""
import pytest

from perfgym import get_task
from perfgym.backends import backend_for
from perfgym.evaluate import is_baseline_copy
from perfgym.extract import code_shape
from perfgym.opening import answer_start


def naive(name: str) -> str:
    return get_task(name).baseline.read_text()


DISGUISES = {
    "comments and blank lines": lambda k: "/* mine */\n" + k.replace("\n", "\n\n// x\n"),
    "perfgym's own #include lines (an opened answer)": lambda k: "#include <stddef.h>\n"
                                                                 "#include <omp.h>\n" + k,
    "one line": lambda k: " ".join(k.split("\n")),
    "spaces around every operator": lambda k: k.replace("+=", " += ").replace("] * ", "]*")
                                              .replace("= 0.0", " =  0.0"),
    "renamed variables": lambda k: k.replace("sum", "acc").replace("int i", "int ii")
                                    .replace("[i]", "[ii]").replace("i++", "ii++")
                                    .replace("i <", "ii <"),
}


@pytest.mark.parametrize("disguise", DISGUISES)
def test_a_disguised_naive_kernel_is_a_copy(disguise):
    task = get_task("dot")
    disguised = DISGUISES[disguise](naive("dot"))
    assert disguised != naive("dot")
    assert is_baseline_copy(task, disguised), disguised


def test_the_opened_answer_of_the_naive_body_is_a_copy():
    for name in ("dot", "dgemm", "jacobi2d"):
        task = get_task(name)
        opening = answer_start(task)
        body = naive(name).split("{", 1)[1]  # what the model writes after perfgym's opening
        kernel = backend_for(task).extract(task, opening + body + "\n```")
        assert "#include" in kernel and is_baseline_copy(task, kernel), name


@pytest.mark.parametrize("change", [
    lambda k: k.replace("for (int i", "#pragma omp simd reduction(+:sum)\n    for (int i"),
    lambda k: k.replace("for (int i", "#pragma omp parallel for reduction(+:sum)\n"
                                      "    for (int i"),
    lambda k: k.replace("sum += x[i] * y[i];", "sum += x[i] * y[i] * 1.0000001;"),
    lambda k: k.replace("i++", "i += 1") + "\n",
    lambda k: k.replace("double sum", "float sum"),
])
def test_a_real_change_is_no_copy(change):
    changed = change(naive("dot"))
    assert changed != naive("dot")
    assert not is_baseline_copy(get_task("dot"), changed)


def test_pragmas_are_kept_as_written():
    # `omp simd` and `omp parallel` at one place are two kernels, not one renamed
    a = "#pragma omp simd\nfor (int i = 0; i < n; i++) x[i] = 0;"
    b = "#pragma omp parallel for\nfor (int i = 0; i < n; i++) x[i] = 0;"
    assert code_shape(a) != code_shape(b)
    # names are renamed consistently: swapping two names' roles is a change
    assert code_shape("a[i] = b[i];") == code_shape("p[k] = q[k];")
    assert code_shape("a[i] = b[i];") != code_shape("a[i] = a[i];")
