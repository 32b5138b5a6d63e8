import os
import tempfile

import pytest

# Tests keep their cache (outcomes, harness objects, machine peaks) apart from the user's, but
# share it across the session so the machine is measured once.
os.environ.setdefault("PERFGYM_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                        "perfgym-test-cache"))

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
