"""verl's reward functions without their group: a refused sample scores about its group's mean,
and a batch groups by verl's uid. The evaluations are stand-ins with fixed statuses (their
rewards under the schemes are what is tested, not the judging)."""
from __future__ import annotations

import json

import pytest

import perfgym.integrations.verl as verl_reward
from perfgym.integrations import RecentRewards
from perfgym.outcome import Outcome, Status

LABEL = json.dumps({"task": "dot"})
STATUS = {"wrong": Status.WRONG_ANSWER, "broken": Status.COMPILE_ERROR,
          "refused": Status.HOST_ERROR}


@pytest.fixture(autouse=True)
def fake_judge(monkeypatch):
    """Each answer's status is its text; a fresh memory of recent rewards."""
    def run(requests):
        return [Outcome(status=STATUS.get(r.text, Status.OK), task="dot", sizes={"N": 1},
                        gflops=float(r.text[3:]) if r.text.startswith("ok:") else None)
                for r in requests]
    monkeypatch.setattr(verl_reward, "executor_for", lambda address=None: run)
    monkeypatch.setattr(verl_reward, "recent", RecentRewards())


def test_a_refused_sample_scores_its_prompts_recent_mean_not_zero():
    info = {"index": 3, "op": "improve"}
    wrong = verl_reward.compute_score("perfgym/dot", "wrong", LABEL, info)["score"]
    broken = verl_reward.compute_score("perfgym/dot", "broken", LABEL, info)["score"]
    assert wrong < 0 and broken < wrong  # failures only: 0 would outrank them all
    out = verl_reward.compute_score("perfgym/dot", "refused", LABEL, info)
    assert out["refused"] == 1.0 and out["score"] == pytest.approx((wrong + broken) / 2)
    # another prompt has no history: 0
    other = verl_reward.compute_score("perfgym/dot", "refused", LABEL, {"index": 4})
    assert other["score"] == 0.0


def test_a_batch_groups_by_verls_uid_not_the_exports_row_index():
    """Two exports' rows, both index 0: verl's uid tells their groups apart."""
    answers = ["ok:10", "ok:5", "ok:5", "ok:5"]  # GFLOP/s
    infos = [{"index": 0, "uid": u} for u in ("a", "a", "b", "b")]
    out = verl_reward.compute_score_batch(["perfgym/dot"] * 4, answers, [LABEL] * 4, infos,
                                          reward="group_normalized")
    scores = [o["score"] for o in out]
    # each group against its own best: one group of four would give b 50 each
    assert scores == [100.0, 50.0, 100.0, 100.0]
    given = verl_reward.compute_score_batch(["perfgym/dot"] * 4, answers, [LABEL] * 4,
                                            [{"index": 0}] * 4, reward="group_normalized",
                                            uids=["a", "a", "b", "b"])
    assert [o["score"] for o in given] == scores
