"""Evolutionary search with islands and a MAP-Elites archive per island.

    archive(i) = {cell: best verified kernel}         cell = the kernel's features, binned
    for generation g = 1..T, for each island i:
        parent  = the archive's best  (with probability `exploit`)
                | a random elite      (otherwise: exploration)
        child   = improve(parent)
                | crossover(parent, another elite)   (with probability `crossover`)
        the children are evaluated; each verified one enters its island's archive when its
        cell is empty or it beats the cell's elite (GFLOP/s)
        every `migration_interval` generations, each island's `migration_size` best elites
        enter the next island's archive (a ring)

An island starts from the seed (the task's naive kernel) and improves the seed while its
archive is empty. The plan of a generation is a function of the stored candidates and a seeded
RNG, so a killed run resumes with the same plan; the archives are rebuilt from the store.
A child's slot names its island and its parents ("evo:3:1:0:12+15"), so the run store keeps
every candidate with both parents without a schema of its own.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field

from ..backends import backend_for
from ..extract import normalize
from ..store import Candidate
from .engine import Engine, Step, parent_code
from .sqd import summary

FEATURES = ("techniques", "roofline", "code_size")
SLOT = re.compile(r"^evo:(?P<gen>\d+):(?P<island>\d+):(?P<k>\d+):(?P<a>\d+)(?:\+(?P<b>\d+))?$")


@dataclass
class EvolveConfig:
    generations: int = 4
    islands: int = 2
    children: int = 4  # per island per generation
    migration_interval: int = 2  # generations between migrations; 0: never
    migration_size: int = 1
    features: tuple[str, ...] = ("techniques", "roofline")
    bins: int = 4  # bins of a continuous feature
    exploit: float = 0.7  # chance that a parent is the island's best, not a random elite
    crossover: float = 0.25  # chance that a child has two parents
    seed: int = 0  # of the plan's RNG
    stage: int | None = None
    seed_code: str | None = None  # default: the task's naive kernel

    def __post_init__(self) -> None:
        if min(self.generations, self.islands, self.children, self.bins) < 1:
            raise ValueError("generations, islands, children and bins must be at least 1")
        if self.migration_interval < 0 or self.migration_size < 0:
            raise ValueError("migration interval and size must not be negative")
        if not 0 <= self.exploit <= 1 or not 0 <= self.crossover <= 1:
            raise ValueError("exploit and crossover are probabilities between 0 and 1")
        if not self.features or any(f not in FEATURES for f in self.features):
            raise ValueError(f"features are among {', '.join(FEATURES)}")


def cell(candidate: Candidate, code: str, features: tuple[str, ...], bins: int
         ) -> tuple[str, ...]:
    """The archive cell of a verified kernel (`code`: its extracted kernel): one label per
    feature axis."""
    outcome = candidate.outcome or {}
    labels = []
    for f in features:
        if f == "techniques":
            labels.append("+".join(sorted(outcome.get("techniques") or [])) or "plain")
        elif f == "roofline":
            share = outcome.get("fraction_of_roofline") or outcome.get("fraction_of_peak")
            labels.append("?" if share is None else
                          f"roof<{min(bins, math.floor(share * bins) + 1) / bins:.2f}")
        else:  # code size: powers of two of the normalized kernel's characters
            size = len(normalize(code))
            labels.append(f"{2 ** min(bins + 9, max(10, math.ceil(math.log2(size + 1))))}ch")
    return tuple(labels)


@dataclass
class Archive:
    """One island's elites: the best verified kernel found for each cell."""

    elites: dict[tuple[str, ...], Candidate] = field(default_factory=dict)

    def offer(self, c: Candidate, key: tuple[str, ...]) -> bool:
        held = self.elites.get(key)
        # a copy of a memory kernel (Candidate.copied) is no elite: not the model's own
        if c.ok and not c.copied and c.rate and (held is None or c.rate > held.rate):
            self.elites[key] = c
            return True
        return False

    def best(self, n: int = 1) -> list[Candidate]:
        return sorted(self.elites.values(), key=lambda c: (-c.rate, c.id))[:n]


def parents_of(c: Candidate) -> tuple[int, ...]:
    """Both parents of an evolve child (its slot names them), else its one parent."""
    m = SLOT.match(c.slot)
    if m:
        return tuple(int(x) for x in (m["a"], m["b"]) if x is not None)
    return (c.parent_id,) if c.parent_id is not None else ()


@dataclass
class Evolve:
    engine: Engine
    config: EvolveConfig = field(default_factory=EvolveConfig)

    def run(self) -> Candidate | None:
        store = self.engine.store
        seed = self._seed()
        done = store.done_iterations()
        for g in range(1, self.config.generations + 1):
            if g in done:
                continue
            archives = self.archives(g - 1)
            children = self.engine.run_steps(self.plan(g, seed, archives))
            store.event("iteration_done", iteration=g, **summary(children))
        archives = self.archives(self.config.generations)
        store.event("archive", islands=[
            {"|".join(k): c.id for k, c in a.elites.items()} for a in archives])
        return store.best()

    def _seed(self) -> Candidate:
        store = self.engine.store
        code = self.config.seed_code or self.engine.task.baseline.read_text()
        step = Step("evo:0:seed", 0, self.config.stage, None, "seed")
        if store.by_slot(step.slot) is None:
            store.add_pending(step.slot, 0, self.config.stage, None, "seed", "seed", None, code)
        return self.engine.run_steps([step])[0]

    def archives(self, upto: int) -> list[Archive]:
        """Every island's archive after generation `upto`, rebuilt from the store: each
        generation's verified children, then that generation's migration."""
        cfg = self.config
        archives = [Archive() for _ in range(cfg.islands)]
        by_gen: dict[int, list[tuple[int, Candidate]]] = {}
        for c in self.engine.store.candidates():
            m = SLOT.match(c.slot)
            if m and not c.pending and 1 <= int(m["gen"]) <= upto:
                by_gen.setdefault(int(m["gen"]), []).append((int(m["island"]), c))
        def key(c: Candidate) -> tuple[str, ...]:
            return cell(c, parent_code(self.engine.task, c) or "", cfg.features, cfg.bins)

        for g in range(1, upto + 1):
            for island, c in by_gen.get(g, []):
                if island < cfg.islands:
                    archives[island].offer(c, key(c))
            if cfg.migration_interval and g % cfg.migration_interval == 0 and cfg.islands > 1:
                migrants = [a.best(cfg.migration_size) for a in archives]
                for i, group in enumerate(migrants):
                    for c in group:
                        archives[(i + 1) % cfg.islands].offer(c, key(c))
        return archives

    def plan(self, g: int, seed: Candidate, archives: list[Archive]) -> list[Step]:
        cfg = self.config
        op_for_seed = backend_for(self.engine.task).seed_op
        steps = []
        for i, archive in enumerate(archives):
            rng = random.Random(f"{cfg.seed}:{g}:{i}")  # the same plan on resume
            elites = sorted(archive.elites.values(), key=lambda c: c.id)
            for k in range(cfg.children):
                if not elites:
                    parent, other, op = seed, None, op_for_seed
                else:
                    parent = archive.best()[0] if rng.random() < cfg.exploit \
                        else rng.choice(elites)
                    others = [e for e in elites if e.id != parent.id]
                    other = rng.choice(others) if others and rng.random() < cfg.crossover \
                        else None
                    op = "crossover" if other else "improve"
                slot = f"evo:{g}:{i}:{k}:{parent.id}" + (f"+{other.id}" if other else "")
                steps.append(Step(slot, g, cfg.stage, parent, op, other))
        return steps
