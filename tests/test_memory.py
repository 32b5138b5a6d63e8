"""The kernel memory: only verified kernels go in, retrieval ranks by similarity then rate and
never shows a task its own kernels, and a copied memory kernel is caught in a real search.

Real SQLite, real evaluations (dot at N=1003 and a twin of dot under another name), real CLI
subprocesses."""
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from perfgym import EvalConfig, get_task
from perfgym.evaluate import evaluate
from perfgym.memory import KernelMemory, canonical_tokens, fingerprint, terms
from perfgym.memory import sources
from perfgym.memory.index import bm25
from perfgym.memory.store import Kernel
from perfgym.outcome import Outcome, Status
from perfgym.policies.replay import ReplayPolicy
from perfgym.prompts import add_memory, expand_prompt
from perfgym.rewards import score
from perfgym.search import Engine, Refine, Step, select
from perfgym.store import Candidate, RunStore

QUICK = EvalConfig(use_cache=False, compare_baseline=False, timeout=3.0, max_time=0.2,
                   max_samples=10, min_samples=3)
CACHED = QUICK.replace(use_cache=True)  # a cached Outcome is an earlier real evaluation
SMALL = {"N": 100003}  # dot's smallest train size: what `memory add --small` evaluates at


def perfgym(*args):
    return subprocess.run([sys.executable, "-m", "perfgym.cli", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def dot():
    return get_task("dot")


@pytest.fixture(scope="module")
def expert_outcome(dot):
    """The dot expert, evaluated for real once (and cached for `from_experts`)."""
    o = evaluate(dot, dot.expert.read_text(), SMALL, CACHED)
    assert o.ok, o.message
    return o.to_dict()


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """dot under another name and entry (`twin_dot`): a task whose kernels pass for dot once
    renamed, as an imported suite's copy of a problem would."""
    d = tmp_path_factory.mktemp("tasks") / "dot_twin"
    shutil.copytree(get_task("dot").directory, d)
    spec = (d / "task.toml").read_text().replace('name = "dot"', 'name = "dot_twin"')
    (d / "task.toml").write_text(spec.replace("dot_optimized", "twin_dot"))
    for f in ("naive.c", "expert.c"):
        (d / f).write_text((d / f).read_text().replace("dot_optimized", "twin_dot"))
    return get_task(d)


@pytest.fixture(scope="module")
def small_dot(tmp_path_factory):
    """dot with its smallest train size as the default: a search evaluates at the default."""
    d = tmp_path_factory.mktemp("tasks") / "dot"
    shutil.copytree(get_task("dot").directory, d)
    spec = (d / "task.toml").read_text()
    (d / "task.toml").write_text(spec.replace("default = { N = 4000000 }",
                                              "default = { N = 100003 }"))
    task = get_task(d)
    assert task.default_size == SMALL
    return task


@pytest.fixture(scope="module")
def twin_outcome(twin):
    o = evaluate(twin, twin.expert.read_text(), SMALL, QUICK)
    assert o.ok, o.message
    return o.to_dict()


# -- the index ------------------------------------------------------------------------------

def test_fingerprint_ignores_names_whitespace_and_comments_only(dot):
    code = dot.expert.read_text()
    renamed = (code.replace("total", "grand").replace("acc", "lanes").replace("xb", "px")
               .replace("dot_optimized", "my_dot"))
    reflowed = "/* mine */\n" + "\n".join("   " + line.replace(" = ", "=") for line in
                                          renamed.splitlines())
    assert fingerprint(reflowed) == fingerprint(code)
    assert canonical_tokens("int a = b + 1;") == canonical_tokens("int q=r+1; // x")
    # a change a model had to make itself is no copy: a type, a constant, an operator
    assert fingerprint(code.replace("double", "float")) != fingerprint(code)
    assert fingerprint(code.replace("16", "8")) != fingerprint(code)
    assert fingerprint(code.replace("+=", "-=")) != fingerprint(code)


def test_terms_split_identifiers_and_bm25_prefers_the_similar_document():
    assert {"_mm256_fmadd_pd", "mm256", "fmadd", "pd"} <= set(terms("_mm256_fmadd_pd(a, b)"))
    assert "blockSize" not in terms("blockSize") and {"blocksize", "block", "size"} <= set(
        terms("blockSize"))
    docs = [terms("matrix multiply gemm tile register blocking"),
            terms("histogram bins atomic counts"),
            terms("dense matrix vector gemv rows")]
    scores = bm25(terms("gemm matrix multiply"), docs)
    assert scores[0] > scores[2] > scores[1] == 0.0


# -- only verified kernels go in ------------------------------------------------------------

def test_add_from_a_run_keeps_only_verified_kernels_and_counts_the_rest(tmp_path, dot,
                                                                        expert_outcome):
    wrong = dot.expert.read_text().replace("out[0] = total;", "out[0] = total + 1.0;")
    wrong_outcome = evaluate(dot, wrong, SMALL, QUICK).to_dict()
    assert wrong_outcome["status"] == "WRONG_ANSWER"
    store = RunStore(tmp_path / "run")
    store.set_config({"task": "dot"})
    answer = "```c\n" + dot.expert.read_text() + "```"

    def cand(slot, op, text, outcome):
        cid = store.add_pending(slot, 1, None, None, op, "replay", "p", text)
        if outcome is not None:
            store.complete(cid, outcome, 0.0)

    cand("seed", "seed", dot.baseline.read_text(), expert_outcome)  # the baseline: left out
    cand("ok", "generate", answer, expert_outcome)
    cand("wrong", "generate", "```c\n" + wrong + "```", wrong_outcome)
    cand("pending", "generate", answer, None)
    cand("copied", "generate", answer, {**expert_outcome, "copied_from": "memory #1"})
    cand("unmeasured", "generate", answer, {**expert_outcome, "timing": None})
    cand("prose", "generate", "I cannot write this kernel.", expert_outcome)
    cand("other task", "generate", answer, {**expert_outcome, "task": "dgemm"})
    store.close()

    memory = KernelMemory(tmp_path / "m.sqlite")
    counts = memory.add_all(*sources.from_run(tmp_path / "run"))
    assert counts["added"] == 1 and counts["refused"] == 6
    assert counts["refused_why"] == {
        "status WRONG_ANSWER, not OK": 1, "never evaluated": 1,
        "a copy of a memory kernel": 1, "no measurement in its outcome": 1,
        "no kernel in the answer": 1, "its outcome is for another task": 1}
    # the same run again adds nothing new; every stored outcome is an OK one
    assert memory.add_all(*sources.from_run(tmp_path / "run"))["duplicate"] == 1
    rows = sqlite3.connect(memory.path).execute("SELECT outcome, source FROM kernels").fetchall()
    assert [json.loads(o)["status"] for o, _ in rows] == ["OK"]
    assert rows[0][1].startswith("run:") and rows[0][1].endswith("#2")


def test_add_experts_and_pairs_evaluates_them_and_refuses_what_it_cannot_verify(
        tmp_path, dot, expert_outcome):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps(p) for p in [
        {"benchmark": "b", "file_id": "1", "description": "d", "slow": "s", "task": "dot",
         "fast": dot.expert.read_text().replace("16", "8")},
        {"benchmark": "b", "file_id": "3", "description": "cuda", "slow": "s",
         "fast": "__global__ void k() {}", "language": "cuda"}]) + "\n")
    memory = KernelMemory(tmp_path / "m.sqlite")
    counts = memory.add_all(*sources.from_pairs(pairs, small=True, config=QUICK))
    assert (counts["added"], counts["refused"]) == (1, 1)
    assert counts["refused_why"] == {"a pair without a task cannot be verified": 1}
    # the expert at dot's smallest train size: the fixture's evaluation, from the cache
    counts = memory.add_all(*sources.from_experts(["dot"], small=True, config=CACHED))
    assert counts["added"] == 1
    stats = memory.stats()
    assert stats["kernels"] == 2 and stats["by_task"] == {"dot": 2}
    assert stats["by_kind"] == {"reduction": 2} and stats["by_source"] == {"expert": 1,
                                                                            "pairs": 1}
    assert stats["by_technique"]["openmp"] == 2 and stats["best_gflops"]["dot"] > 0


def test_add_refuses_a_failed_outcome_directly(tmp_path, dot, expert_outcome):
    memory = KernelMemory(tmp_path / "m.sqlite")
    for status in ("WRONG_ANSWER", "COMPILE_ERROR", "HOST_ERROR", "TIMEOUT"):
        result = memory.add(dot, "void f(){}", {**expert_outcome, "status": status}, "test")
        assert result == f"refused: status {status}, not OK"
    assert memory.add(dot, dot.expert.read_text(), None, "x") == "refused: never evaluated"
    assert memory.stats()["kernels"] == 0


# -- retrieval ------------------------------------------------------------------------------

def test_retrieval_ranks_by_similarity_then_rate_and_never_shows_the_task_its_own(
        tmp_path, dot, twin, expert_outcome, twin_outcome):
    memory = KernelMemory(tmp_path / "m.sqlite")
    code = dot.expert.read_text()
    rate = expert_outcome["gflops"]
    slow = {**expert_outcome, "sizes": {"N": 7}, "gflops": rate / 4}  # same code, other size
    assert memory.add(dot, code, expert_outcome, "a") == "added"
    assert memory.add(dot, code, slow, "b") == "added"
    assert memory.add(twin, twin.expert.read_text(), twin_outcome, "c") == "added"
    # a faster measurement of a held kernel replaces it; a slower one is a duplicate
    assert memory.add(dot, code, {**slow, "gflops": rate / 2}, "b2") == "faster"
    assert memory.add(dot, code, slow, "b3") == "duplicate"

    found = memory.search(code_query=terms(code), k=5)
    dots = [k for k, _ in found if k.task == "dot"]
    assert [k.size for k in dots] == [SMALL, {"N": 7}]  # equal similarity: the faster first
    assert dots[1].gflops == rate / 2 and dots[1].source == "b2"
    assert {k.task for k, _ in found} == {"dot", "dot_twin"}
    # what a prompt for dot may show: the twin, never dot itself (at any size)
    shown = memory.for_prompt(dot, code, k=5)
    assert [k.task for k in shown] == ["dot_twin"]
    assert [k.task for k, _ in memory.search([], terms(code), 5, exclude_task=dot)] == [
        "dot_twin"]
    assert [k.task for k in memory.for_prompt(twin, None, k=5)] == ["dot"]
    assert memory.for_prompt(get_task("dgemm"), None, k=5)  # C kernels for another C task
    assert memory.for_prompt(get_task("dgemm"), None, k=1)[0].task in ("dot", "dot_twin")


def test_the_prompt_section_carries_task_size_rate_and_techniques(dot):
    kernels = [Kernel(7, "sgemm", "dense linear algebra", "c", {"M": 64, "N": 64, "K": 64},
                      "void sgemm_optimized(float *a) { /* fast */ }", ["openmp", "simd"],
                      41.5, None, 0.42, 3.0, "expert:sgemm")]
    base = expand_prompt(dot, "improve", dot.baseline.read_text(), None)
    prompt = add_memory(base, dot, kernels)
    section = prompt.index("Verified kernels for similar tasks")
    assert "sgemm (dense linear algebra) at size M=64,N=64,K=64: 41.50 GFLOP/s (42% of peak); " \
           "techniques: openmp, simd" in prompt
    assert "void sgemm_optimized(float *a)" in prompt
    # before the answer-format paragraph, after the parent's code
    assert prompt.index("Current version") < section < prompt.index("Answer with the complete")
    assert add_memory(base, dot, []) == base
    # a long kernel loses its comments first, then its tail
    long = "/* why it is fast */\n" + "\n".join(f"static int f{i}(void) {{ return {i}; }} // n"
                                                 for i in range(150))
    shown = add_memory(base, dot, [Kernel(**{**kernels[0].to_dict(), "code": long})])
    assert "why it is fast" not in shown and "// n" not in shown and "f0(void)" in shown
    assert "f149" not in shown and "/* ... cut */" in shown
    fenced = [Kernel(**{**kernels[0].to_dict(), "code": "```c\nvoid f(void) {}\n```"})]
    assert add_memory(base, dot, fenced).count("```") == base.count("```") + 2


# -- copy-through ---------------------------------------------------------------------------

def test_a_copied_memory_kernel_is_caught_and_not_counted(tmp_path, small_dot, twin,
                                                          twin_outcome):
    dot = small_dot
    memory = KernelMemory(tmp_path / "m.sqlite")
    assert memory.add(twin, twin.expert.read_text(), twin_outcome, "expert:dot_twin") == "added"
    # the model's answer: the twin's kernel with its variables renamed and reflowed
    copy = (twin.expert.read_text().replace("total", "t").replace("acc", "a")
            .replace("    ", "  "))
    own = dot.baseline.read_text()
    replay = tmp_path / "replay.jsonl"
    replay.write_text("\n".join(json.dumps({"completion": f"```c\n{c}```"})
                                for c in (copy, own)) + "\n")
    store = RunStore(tmp_path / "run")
    engine = Engine(store, ReplayPolicy(replay), dot, QUICK, memory=memory, memory_k=2)
    prompt = engine.prompt_with_memory(Step("x", 0, None, None, "generate"))
    assert "dot_twin (reduction)" in prompt and "twin_dot" in prompt
    assert "dot (reduction)" not in prompt
    best = Refine(engine, turns=2).run()

    copied, mine = store.candidates()
    assert copied.status == "OK" and copied.copied and mine.ok and not mine.copied
    # refine does not improve on a copy: the chain starts over from the task
    assert (mine.op, mine.parent_id) == ("generate", None)
    assert copied.outcome["copied_from"].startswith("memory #1: dot_twin at {\"N\": 100003}")
    assert copied.outcome["message"].startswith("a copy of memory #1")
    # no reward (NaN, which SQLite keeps as NULL) for the copy, for being one; the model's own
    # is scored (unless other programs disturbed its timing: then refused for that)
    assert copied.reward is None
    assert math.isnan(score("tiered", [Outcome.from_dict({**copied.outcome,
                                                           "disturbed": None})])[0])
    if not mine.outcome.get("disturbed"):
        assert mine.reward == pytest.approx(mine.gflops)
    assert best.id == mine.id  # the copy is faster, and still not the best
    # the report draws a run whose copy has no reward
    from perfgym.report import write_plots
    assert write_plots(store, tmp_path / "report")
    # a copy never goes back into the memory either
    counts = memory.add_all(*sources.from_run(tmp_path / "run", task=dot))
    assert counts["refused_why"].get("a copy of a memory kernel") == 1
    store.close()


def test_sqd_never_grows_from_a_copy():
    def cand(id_, gflops, copied):
        outcome = {"status": "OK", "copied_from": "memory #1: x" if copied else None}
        return Candidate(id_, f"s{id_}", 1, 1, None, "improve", "replay", None, "", "OK", 1.0,
                         gflops, outcome)
    nodes = [cand(1, 50.0, True), cand(2, 5.0, False), cand(3, 2.0, False)]
    top, middle, errors = select(nodes, (0.4, 0.3, 0.3))
    assert [c.id for c in top + middle] == [2, 3] and errors == []


def test_evolve_archive_keeps_no_copy():
    from perfgym.search.evolve import Archive
    outcome = {"status": "OK", "copied_from": "memory #1: x"}
    copy = Candidate(1, "e1", 1, None, None, "improve", "replay", None, "", "OK", None, 50.0,
                     outcome)
    own = Candidate(2, "e2", 1, None, None, "improve", "replay", None, "", "OK", 1.0, 5.0,
                    {"status": "OK"})
    archive = Archive()
    assert not archive.offer(copy, ("plain",)) and archive.offer(own, ("plain",))
    assert archive.best() == [own]


def test_rewards_refuse_a_copied_outcome():
    ok = Outcome(Status.OK, "dot", SMALL, gflops=2.0)
    copied = Outcome(Status.OK, "dot", SMALL, gflops=9.0, copied_from="memory #3: x")
    for scheme in ("tiered", "group_normalized", "weighted", "log_speedup"):
        rewards = score(scheme, [ok, copied])
        assert math.isnan(rewards[1]) and not math.isnan(rewards[0]), scheme
    assert score("group_normalized", [ok, copied])[0] == 100.0  # scored without the copy
    assert Outcome.from_dict(copied.to_dict()).copied_from == "memory #3: x"


# -- the command line -----------------------------------------------------------------------

def test_memory_cli_add_search_stats(tmp_path, dot, expert_outcome):
    run = tmp_path / "run"
    store = RunStore(run)
    store.set_config({"task": "dot"})
    cid = store.add_pending("a", 1, None, None, "generate", "replay", "p",
                            "```c\n" + dot.expert.read_text() + "```")
    store.complete(cid, expert_outcome, 1.0)
    store.close()
    mem = str(tmp_path / "m.sqlite")
    r = perfgym("memory", "add", "--run", str(run), "--memory", mem, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["added"] == 1
    r = perfgym("memory", "add", "--run", str(run), "--memory", mem)
    assert r.returncode == 0 and "already held 1" in r.stdout
    r = perfgym("memory", "stats", "--memory", mem, "--json")
    assert json.loads(r.stdout)["by_task"] == {"dot": 1}
    r = perfgym("memory", "search", "dot", "--memory", mem, "--json")
    assert json.loads(r.stdout) == []  # a prompt for dot is never shown dot's kernels
    r = perfgym("memory", "search", "dot", "--same-task", "--memory", mem, "--json")
    [hit] = json.loads(r.stdout)
    assert hit["task"] == "dot" and hit["size"] == SMALL and hit["similarity"] > 0
    assert "reduction" in hit["kind"] and "openmp" in hit["techniques"]
    code = tmp_path / "k.c"
    code.write_text(dot.expert.read_text())
    r = perfgym("memory", "search", "--code", str(code), "-k", "1", "--memory", mem)
    assert r.returncode == 0 and "dot" in r.stdout and "run:" in r.stdout


@pytest.mark.parametrize("args, fragment", [
    (["memory", "add", "--memory", "{tmp}/m.sqlite"], "nothing to add"),
    (["memory", "add", "--run", "{tmp}", "--memory", "{tmp}/m.sqlite"], "holds no run"),
    (["memory", "add", "--pairs", "{tmp}/none.jsonl"], "is not a file"),
    (["memory", "add", "--run", "{tmp}/bad", "--memory", "{tmp}/m.sqlite"],
     "is not a readable run store"),
    (["memory", "add", "--run", "{tmp}/dotrun", "--task", "dgemm", "--memory",
      "{tmp}/m.sqlite"], "is a run of dot, not of --task dgemm"),
    (["memory", "add", "--pairs", "{tmp}/junk.sqlite", "--memory", "{tmp}/m.sqlite"],
     "not a pair record"),
    (["memory", "stats", "--memory", "{tmp}/none.sqlite"], "no kernel memory at"),
    (["memory", "stats", "--memory", "{tmp}"], "is a directory"),
    (["memory", "stats", "--memory", "{tmp}/junk.sqlite"], "is not a kernel memory"),
    (["memory", "search", "--memory", "{tmp}/m.sqlite"], "give a task name"),
    (["memory", "search", "nosuchtask", "--memory", "{tmp}/m.sqlite"], "no task 'nosuchtask'"),
    (["memory", "search", "dot", "-k", "0"], "-k is how many"),
    (["search", "--task", "dot", "--replay", "{tmp}/r.jsonl", "--run-dir", "{tmp}/run",
      "--memory", "{tmp}/none.sqlite"], "no kernel memory at"),
    (["search", "--task", "dot", "--replay", "{tmp}/r.jsonl", "--run-dir", "{tmp}/run",
      "--memory", "{tmp}/m.sqlite", "--memory-k", "0"], "--memory-k"),
])
def test_memory_user_errors_are_one_line(tmp_path, args, fragment):
    (tmp_path / "junk.sqlite").write_text("not a database, " * 100)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.sqlite").write_text("not a database, " * 100)
    RunStore(tmp_path / "dotrun").set_config({"task": "dot"})
    KernelMemory(tmp_path / "m.sqlite").close()
    (tmp_path / "r.jsonl").write_text('{"completion": "x"}\n')
    r = perfgym(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert fragment in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "run").exists()
