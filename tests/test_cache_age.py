"""The outcome cache's age limit (what a baseline asks for): a row kept longer ago than
`max_age` is not served; a row without a time (kept by a version whose column default,
unixepoch('subsec'), is NULL below SQLite 3.42) counts as too old; without `max_age` any row
is served."""
import json
import time

from perfgym.cache import OutcomeCache
from perfgym.outcome import Outcome, Status


def _outcome() -> Outcome:
    return Outcome(Status.OK, "dot", {"N": 8}, "ok")


def test_a_row_is_served_within_its_max_age_and_not_after(tmp_path):
    cache = OutcomeCache(tmp_path / "outcomes.sqlite")
    cache.put("k", _outcome())
    assert cache.get("k", max_age=60) is not None
    with cache._conn() as conn:
        conn.execute("UPDATE outcomes SET created = ? WHERE key = 'k'", (time.time() - 61,))
    assert cache.get("k", max_age=60) is None
    assert cache.get("k") is not None and cache.get("k").cached


def test_a_row_without_a_time_is_too_old_for_any_max_age(tmp_path):
    cache = OutcomeCache(tmp_path / "outcomes.sqlite")
    with cache._conn() as conn:
        conn.execute("INSERT INTO outcomes (key, outcome, created) VALUES ('old', ?, NULL)",
                     (json.dumps(_outcome().to_dict()),))
    assert cache.get("old", max_age=1e9) is None
    assert cache.get("old") is not None


def test_replacing_a_row_renews_its_time(tmp_path):
    cache = OutcomeCache(tmp_path / "outcomes.sqlite")
    cache.put("k", _outcome())
    with cache._conn() as conn:
        conn.execute("UPDATE outcomes SET created = created - 1000 WHERE key = 'k'")
    assert cache.get("k", max_age=60) is None
    cache.put("k", _outcome())
    assert cache.get("k", max_age=60) is not None


def test_the_cache_follows_the_cache_directory_set_after_a_first_use(tmp_path, monkeypatch):
    """An experiment (or a test) that sets $PERFGYM_CACHE_DIR after something was evaluated
    gets a cache of its own: CI saw a test judged against the session's shared cache."""
    from perfgym.evaluate import outcome_cache
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "first"))
    outcome_cache().put("k", _outcome())
    assert outcome_cache().get("k") is not None
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "second"))
    assert outcome_cache().path == tmp_path / "second" / "outcomes.sqlite"
    assert outcome_cache().get("k") is None
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "first"))
    assert outcome_cache().get("k") is not None
