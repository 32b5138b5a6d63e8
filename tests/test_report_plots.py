"""The report's progress figure: per iteration for a run of several, per candidate for one."""
import matplotlib

matplotlib.use("Agg")

from perfgym.report.plots import _plot_candidates, _plot_iterations, write_plots  # noqa: E402
from perfgym.store import RunStore  # noqa: E402


def _run(tmp_path, rows):
    store = RunStore(tmp_path / "run")
    for i, (iteration, status, gflops) in enumerate(rows):
        cid = store.add_pending(f"s{i}", iteration, None, None, "generate", "hf", "", "")
        store.complete(cid, {"status": status, "gflops": gflops}, gflops or -40.0)
    return store


def test_a_one_iteration_run_draws_each_candidate(tmp_path):
    import matplotlib.pyplot as plt
    store = _run(tmp_path, [(0, "OK", 3.0), (0, "WRONG_ANSWER", None), (0, "OK", 5.0)])
    cands = store.candidates()
    fig, (ax1, ax2) = plt.subplots(1, 2)
    _plot_candidates(cands, ax1, ax2)
    # one bar per candidate on each side (the legend's zero-height bars aside)
    rewards = [p.get_height() for p in ax1.patches]
    assert rewards == [3.0, -40.0, 5.0]
    rates = [p.get_height() for p in ax2.patches][:3]
    assert rates == [3.0, 0.0, 5.0]  # a failed candidate has no GFLOP/s
    assert sorted(t.get_text() for t in ax2.get_legend().get_texts()) == ["OK", "WRONG_ANSWER"]
    plt.close(fig)
    assert (tmp_path / "report" / "progress.png") in write_plots(store, tmp_path / "report")


def test_a_run_of_several_iterations_draws_a_curve_per_iteration(tmp_path):
    import matplotlib.pyplot as plt
    store = _run(tmp_path, [(0, "OK", 2.0), (0, "OK", 4.0), (1, "OK", 6.0)])
    from collections import defaultdict
    by_iter = defaultdict(list)
    for c in store.candidates():
        by_iter[c.iteration].append(c)
    fig, (ax1, ax2) = plt.subplots(1, 2)
    _plot_iterations(by_iter, [0, 1], ax1, ax2)
    assert list(ax1.lines[0].get_ydata()) == [3.0, 6.0]  # mean reward per iteration
    assert list(ax2.lines[0].get_ydata()) == [4.0, 6.0]  # best GFLOP/s per iteration
    plt.close(fig)


def test_the_best_kernel_block_has_no_fence_inside_it():
    from perfgym.report.summary import _code
    opened = "```c\n#include <stdlib.h>\n\nvoid f(double *x) {\n    x[0] = 1.0;\n}"
    closed = "Here it is.\n```c\nvoid f(double *x) {\n    x[0] = 2.0;\n}\n```\nDone."
    for answer, body in ((opened, "x[0] = 1.0;"), (closed, "x[0] = 2.0;")):
        code = _code(answer)
        assert "```" not in code and body in code and code.startswith(("#include", "void"))
