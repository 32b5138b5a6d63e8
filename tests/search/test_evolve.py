"""Evolve: islands, a MAP-Elites archive per island, migration, crossover prompts, resume and
the report's archive; driven by the replay policy and real evaluations."""
import json
import subprocess
import sys

import pytest
from conftest import NAIVE_IKJ

from perfgym import EvalConfig
from perfgym.policies.replay import ReplayPolicy
from perfgym.report import write_plots, write_summary
from perfgym.search import Engine, Evolve, EvolveConfig, Step
from perfgym.search.evolve import Archive, cell, parents_of
from perfgym.store import RunStore

FAST = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)
SIMD = NAIVE_IKJ.replace("```c\n", "```c\n/* tuned */\n", 1).replace(
    "for (int j", "#pragma omp simd\n        for (int j", 1)


def engine(tmp_path, dgemm, replay_file, name="run"):
    return Engine(RunStore(tmp_path / name), ReplayPolicy(replay_file), dgemm, FAST)


def fake(store, slot, gflops, techniques=(), code=NAIVE_IKJ):
    """A finished candidate with a given rate, straight into the store (no evaluation)."""
    gen = int(slot.split(":")[1])
    store.add_pending(slot, gen, None, None, "improve", "replay", None, code)
    c = store.by_slot(slot)
    store.complete(c.id, {"status": "OK" if gflops else "WRONG_ANSWER", "gflops": gflops,
                          "techniques": list(techniques), "message": f"{gflops} GFLOP/s",
                          "fraction_of_roofline": 0.1}, 0.0)
    return store.by_slot(slot)


def test_the_archive_keeps_the_best_per_cell(tmp_path, dgemm, replay_file):
    store = engine(tmp_path, dgemm, replay_file).store
    archive = Archive()
    a, b, c = (fake(store, f"evo:1:0:{k}:1", g) for k, g in enumerate((2.0, 5.0, 3.0)))
    wrong = fake(store, "evo:1:0:3:1", None)
    for x in (a, b, c, wrong):
        archive.offer(x, ("plain",))
    assert archive.elites == {("plain",): b}
    assert archive.offer(fake(store, "evo:1:0:4:1", 1.0, ["openmp"]), ("openmp",))
    assert len(archive.elites) == 2 and archive.best()[0] is b


def test_cells_follow_the_chosen_features(tmp_path, dgemm, replay_file):
    store = engine(tmp_path, dgemm, replay_file).store
    c = fake(store, "evo:1:0:0:1", 2.0, ["simd", "openmp"])
    assert cell(c, "int x;", ("techniques", "roofline"), 4) == ("openmp+simd", "roof<0.25")
    assert cell(c, "x" * 3000, ("code_size",), 4) == ("4096ch",)


def test_islands_migrate_their_best_every_interval(tmp_path, dgemm, replay_file):
    ev = Evolve(engine(tmp_path, dgemm, replay_file),
                EvolveConfig(islands=3, migration_interval=2, migration_size=1,
                             features=("techniques",)))
    store = ev.engine.store
    best0 = fake(store, "evo:1:0:0:1", 9.0, ["openmp"])
    fake(store, "evo:1:1:0:1", 1.0)
    fake(store, "evo:2:2:0:1", 4.0, ["simd"])
    after1 = ev.archives(1)
    assert [len(a.elites) for a in after1] == [1, 1, 0]  # nothing has moved yet
    after2 = ev.archives(2)
    # generation 2 migrates: island 0's best to island 1, island 1's to 2, island 2's to 0
    assert after2[1].elites[("openmp",)].id == best0.id
    assert after2[2].elites[("plain",)].gflops == 1.0
    assert after2[0].elites[("simd",)].gflops == 4.0


def test_crossover_prompts_carry_both_parents(tmp_path, dgemm, replay_file):
    ev = Evolve(engine(tmp_path, dgemm, replay_file),
                EvolveConfig(islands=1, children=3, crossover=1.0, features=("techniques",)))
    store = ev.engine.store
    a = fake(store, "evo:1:0:0:1", 3.0, [], NAIVE_IKJ)
    b = fake(store, "evo:1:0:1:1", 2.0, ["simd"], SIMD)
    steps = ev.plan(2, a, ev.archives(1))
    assert all(s.op == "crossover" and {s.parent.id, s.other.id} == {a.id, b.id}
               for s in steps)
    prompt = ev.engine.prompt(steps[0])
    assert "Version A" in prompt and "Version B" in prompt
    assert "/* tuned */" in prompt and "#pragma omp simd" in prompt  # both parents' code
    assert "3.0 GFLOP/s" in prompt and "2.0 GFLOP/s" in prompt  # and both measurements
    assert set(parents_of(_child(store, steps[0]))) == {a.id, b.id}


def _child(store, step):
    store.add_pending(step.slot, step.iteration, None, step.parent.id, step.op, "replay", None,
                      "x")
    return store.by_slot(step.slot)


def test_plans_are_reproducible_and_explore(tmp_path, dgemm, replay_file):
    ev = Evolve(engine(tmp_path, dgemm, replay_file),
                EvolveConfig(islands=1, children=40, exploit=0.5, crossover=0.0,
                             features=("techniques",)))
    store = ev.engine.store
    top = fake(store, "evo:1:0:0:1", 9.0, ["openmp"])
    fake(store, "evo:1:0:1:1", 2.0, ["simd"])
    fake(store, "evo:1:0:2:1", 1.0)
    first = ev.plan(2, top, ev.archives(1))
    assert [s.slot for s in first] == [s.slot for s in ev.plan(2, top, ev.archives(1))]
    picked = [s.parent.id for s in first]
    assert picked.count(top.id) > len(picked) // 2  # exploitation: mostly the best
    assert len(set(picked)) == 3  # exploration: every elite gets a child


def test_evolve_end_to_end_and_resume(tmp_path, dgemm, replay_file):
    config = EvolveConfig(generations=3, islands=2, children=2, migration_interval=1,
                          features=("techniques",))
    whole = Evolve(engine(tmp_path, dgemm, replay_file, "whole"), config)
    best = whole.run()
    cands = whole.engine.store.candidates()
    assert len(cands) == 1 + 3 * 2 * 2
    assert best is not None and best.ok
    # generation 1 improves the seed on both islands; later ones take archive parents
    seed = cands[0]
    assert all(c.parent_id == seed.id for c in cands if c.iteration == 1)
    assert any(c.parent_id != seed.id for c in cands if c.iteration > 1)

    # stopped after one generation, then resumed: the same candidates in the same slots
    part = engine(tmp_path, dgemm, replay_file, "part")
    Evolve(part, EvolveConfig(generations=1, islands=2, children=2, migration_interval=1,
                              features=("techniques",))).run()
    resumed = Engine(part.store, ReplayPolicy(replay_file), dgemm, FAST)
    Evolve(resumed, config).run()
    again = resumed.store.candidates()
    host_errors = [c.outcome.get("details") for c in again + cands if c.status == "HOST_ERROR"]
    assert [(c.slot, c.completion, c.status) for c in again] == \
        [(c.slot, c.completion, c.status) for c in cands], host_errors

    out = tmp_path / "report"
    summary = write_summary(whole.engine.store, out, write_plots(whole.engine.store, out))
    text = summary.read_text()
    assert "## Archive (MAP-Elites, per island)" in text and "Island 1" in text
    assert (out / "archive.png").is_file()


def test_evolve_from_the_cli(tmp_path, replay_file):
    run_dir = tmp_path / "cli"
    base = [sys.executable, "-m", "perfgym.cli", "search", "--task", "dgemm", "--algo", "evolve",
            "--policy", "replay", "--replay", str(replay_file), "--run-dir", str(run_dir),
            "--islands", "2", "--generations", "2", "--children", "2", "--json"]
    r = subprocess.run(base, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["best"]["status"] == "OK"
    assert "Archive" in (run_dir / "report" / "summary.md").read_text()
    bad = subprocess.run(base[:-1] + ["--features", "colour", "--run-dir",
                                      str(tmp_path / "bad")], capture_output=True, text=True)
    assert bad.returncode == 2 and "features are among" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize("options", [
    dict(islands=0), dict(exploit=1.5), dict(features=("colour",)), dict(migration_size=-1)])
def test_bad_evolve_options(options):
    with pytest.raises(ValueError):
        EvolveConfig(**options)


FIXED_K = NAIVE_IKJ.replace("k < K", "k < K - (K != 256)")  # right at the default size only


def fixed_k_replay(tmp_path):
    path = tmp_path / "fixed_k.jsonl"
    path.write_text(json.dumps({"completion": FIXED_K}) + "\n")
    return path


def test_a_size_set_judges_every_candidate_on_every_size(tmp_path, dgemm):
    assert "K != 256" in FIXED_K
    replay = fixed_k_replay(tmp_path)
    steps = [Step("bon:0", 0, None, None, "generate")]
    one = Engine(RunStore(tmp_path / "one"), ReplayPolicy(replay), dgemm, FAST)
    (c,) = one.run_steps(steps)
    assert c.ok  # at the default size it cannot be told apart
    train = Engine(RunStore(tmp_path / "train"), ReplayPolicy(replay), dgemm, FAST,
                   sizes=dgemm.sizes("train"))
    (c,) = train.run_steps(steps)
    assert c.status == "WRONG_ANSWER" and c.outcome["message"].startswith("1/3 sizes OK")
    assert len(c.outcome["per_size"]) == 3


def test_grpo_rewards_the_folded_outcome(tmp_path, dgemm):
    pytest.importorskip("trl", reason="the train extra is not installed: pip install "
                        "'perfgym[train]'")
    from perfgym.train.grpo import GRPOSettings, PerfgymReward
    with pytest.raises(ValueError, match="held-out"):
        GRPOSettings(model_path=None, sizes="heldout")
    statuses, rewards = {}, {}
    for label, sizes in (("default", None), ("train", dgemm.sizes("train"))):
        reward = PerfgymReward(dgemm, RunStore(tmp_path / label), FAST, "tiered", 2,
                               sizes=sizes)
        rewards[label] = reward.score(["p", "p"], [FIXED_K, NAIVE_IKJ], {})
        statuses[label] = [c.status for c in reward.store.candidates()]
    assert statuses["default"] == ["OK", "OK"], statuses  # both look right
    assert statuses["train"] == ["WRONG_ANSWER", "OK"], statuses  # the fold tells them apart
    assert rewards["train"][0] < 0 < rewards["train"][1]


def test_search_refuses_held_out_sizes_and_judges_its_best_on_them(tmp_path, replay_file):
    base = [sys.executable, "-m", "perfgym.cli", "search", "--task", "dgemm", "--algo",
            "best-of-n", "--n", "4", "--policy", "replay", "--replay", str(replay_file)]
    bad = subprocess.run(base + ["--sizes", "heldout", "--run-dir", str(tmp_path / "bad")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "held-out" in bad.stderr and "Traceback" not in bad.stderr
    run_dir = tmp_path / "ok"
    r = subprocess.run(base + ["--sizes", "train", "--run-dir", str(run_dir)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    store = RunStore(run_dir)
    (rows,) = [d["rows"] for _, _, d in store.events("heldout")]
    assert rows[0]["candidate"] == store.best().id
    assert [p["sizes"] for p in rows[0]["per_size"]] == [
        {"M": 97, "N": 131, "K": 61}, {"M": 1, "N": 300, "K": 7}, {"M": 512, "N": 512, "K": 512}]
    text = (run_dir / "report" / "summary.md").read_text()
    assert "## The best kernels on held-out sizes" in text and "M=512" in text


def test_a_deadline_ends_evolve_after_the_generation_running_then(tmp_path, dgemm, replay_file):
    """--budget-minutes for an algorithm without a budget of its own: past the engine's
    deadline no new step runs; what the store holds already still counts on resume."""
    import time
    eng = engine(tmp_path, dgemm, replay_file)
    eng.deadline = time.monotonic() + 3600
    Evolve(eng, EvolveConfig(generations=1, islands=1, children=2)).run()
    before = len(eng.store.candidates())
    assert before > 1  # the seed and a generation
    eng.deadline = time.monotonic() - 1  # spent
    Evolve(eng, EvolveConfig(generations=3, islands=1, children=2)).run()
    assert len(eng.store.candidates()) == before  # no new step
    late = [Step("late:1", 9, None, eng.store.candidates()[0], "improve")]
    assert eng.run_steps(late) == []
