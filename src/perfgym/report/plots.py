"""Plots of a run: mean reward and max GFLOP/s per iteration, the status mix per stage, and the
best kernel's lineage, in the style of Fig. 7/8 of
"Improving HPC Code Generation Capability of LLMs via Online RL with Real-Machine Benchmark Rewards"."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from ..outcome import Status
from ..store import RunStore
from .figure import save as _save

STATUS_COLOURS = {
    "OK": "#2ca02c", "WRONG_ANSWER": "#ff7f0e", "RUNTIME_ERROR": "#d62728",
    "TIMEOUT": "#9467bd", "COMPILE_ERROR": "#8c564b", "STAGE_VIOLATION": "#e377c2",
    "LIBRARY_VIOLATION": "#7f7f7f", "FORMAT_ERROR": "#bcbd22", "HOST_ERROR": "#17becf",
}


def write_plots(store: RunStore, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    cands = [c for c in store.candidates() if not c.pending and c.op != "seed"]
    by_iter = defaultdict(list)
    for c in cands:
        by_iter[c.iteration].append(c)
    iters = sorted(by_iter)
    paths = []

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    if len(iters) == 1:  # one dot per iteration would say nothing: draw the candidates
        _plot_candidates(cands, ax1, ax2)
    else:
        _plot_iterations(by_iter, iters, ax1, ax2)
    fig.tight_layout()
    paths.append(_save(fig, out / "progress.png"))

    stages = sorted({c.stage for c in cands if c.stage is not None}) or [None]
    counts = {s: Counter(c.status for c in cands if c.stage == s) for s in stages}
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0] * len(stages)
    labels = [f"stage {s}" if s is not None else "no stage" for s in stages]
    for status in [s.value for s in Status]:
        heights = [counts[s].get(status, 0) for s in stages]
        if any(heights):
            ax.bar(labels, heights, bottom=bottom, label=status,
                   color=STATUS_COLOURS.get(status, "#000000"))
            bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set(title="Status of candidates per stage", ylabel="candidates")
    if cands:  # an empty run has nothing to name
        ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, out / "status_by_stage.png"))

    best = store.best()
    if best is not None:
        chain = store.lineage(best.id)
        fig, ax = plt.subplots(figsize=(7, 4))
        xs = [c.iteration for c in chain]
        ys = [c.gflops or 0.0 for c in chain]
        ax.plot(xs, ys, marker="o")
        for c, x, y in zip(chain, xs, ys):
            stage = f" s{c.stage}" if c.stage is not None else ""
            ax.annotate(f"#{c.id} {c.op}{stage}\n{c.status}", (x, y), fontsize=7,
                        textcoords="offset points", xytext=(4, 6))
        ax.set(title=f"Lineage of the best kernel (#{best.id})", xlabel="iteration",
               ylabel="GFLOP/s (0 = failed)")
        ax.set_xticks(sorted(set(xs)))
        ax.grid(alpha=0.3)
        fig.tight_layout()
        paths.append(_save(fig, out / "best_lineage.png"))
    from .archive import plot_archive
    if (picture := plot_archive(store, out)) is not None:  # an evolve run
        paths.append(picture)
    if (picture := plot_turns(cands, out)) is not None:  # a multi-turn GRPO run
        paths.append(picture)
    return paths


def _plot_iterations(by_iter, iters, ax1, ax2) -> None:
    # a refused candidate (a host error, a disturbed timing, a memory copy) has no reward (NULL)
    rewarded = {t: [c.reward for c in by_iter[t] if c.reward is not None] for t in iters}
    mean_reward = [sum(r) / len(r) if r else float("nan") for r in rewarded.values()]
    ax1.plot(iters, mean_reward, marker="o")
    ax1.set(title="Mean reward per iteration", xlabel="iteration", ylabel="mean reward")
    max_rate = [max((c.gflops or 0.0 for c in by_iter[t] if c.ok and not c.copied),
                    default=0.0) for t in iters]
    ax2.plot(iters, max_rate, marker="o", color="#2ca02c")
    ax2.set(title="Max GFLOP/s per iteration", xlabel="iteration", ylabel="GFLOP/s")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.set_xticks(iters)


def _plot_candidates(cands, ax1, ax2) -> None:
    """One bar per candidate, coloured by its status: its reward and its GFLOP/s."""
    labels = [f"#{c.id}" for c in cands]
    colours = [STATUS_COLOURS.get(c.status, "#000000") for c in cands]
    ax1.bar(labels, [c.reward if c.reward is not None else 0.0 for c in cands], color=colours)
    ax1.set(title="Reward of each candidate", xlabel="candidate", ylabel="reward")
    ax2.bar(labels, [(c.gflops or 0.0) if c.ok else 0.0 for c in cands], color=colours)
    ax2.set(title="GFLOP/s of each candidate (0 = failed)", xlabel="candidate",
            ylabel="GFLOP/s")
    for status in sorted({c.status for c in cands}):  # one legend entry per status seen
        ax2.bar([labels[0]], [0], color=STATUS_COLOURS.get(status, "#000000"), label=status)
    if cands:
        ax2.legend(fontsize=8)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, axis="y")
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)


def turn_table(cands) -> dict[int, dict[str, float]]:
    """Multi-turn GRPO (slots grpo:mt:STEP:TRAJECTORY:TURN): per turn index, the turns taken,
    the share OK and the best GFLOP/s."""
    by_turn: dict[int, list] = defaultdict(list)
    for c in cands:
        if c.slot.startswith("grpo:mt:"):
            by_turn[int(c.slot.rsplit(":", 1)[1]) + 1].append(c)
    return {k: {"turns": len(v), "ok": sum(c.ok for c in v) / len(v),
                "best_gflops": max((c.gflops or 0.0 for c in v if c.ok), default=0.0)}
            for k, v in sorted(by_turn.items())}


def plot_turns(cands, out: Path) -> Path | None:
    table = turn_table(cands)
    if not table:
        return None
    import matplotlib.pyplot as plt
    turns = list(table)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(turns, [table[t]["ok"] for t in turns], marker="o")
    ax1.set(title="Share OK by turn", xlabel="turn", ylabel="share of turns OK", ylim=(0, 1))
    ax2.plot(turns, [table[t]["best_gflops"] for t in turns], marker="o", color="#2ca02c")
    ax2.set(title="Best GFLOP/s by turn", xlabel="turn", ylabel="GFLOP/s")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.set_xticks(turns)
    fig.tight_layout()
    return _save(fig, out / "turns.png")


