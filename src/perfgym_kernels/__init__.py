"""The verifiers taskset `perfgym-kernels`: verifiers finds a taskset (and its environment) by
importing the top-level package its id names, so this one name points at perfgym's
environment, `perfgym.integrations.verifiers_env`.

    vf-eval perfgym-kernels -m MODEL --client.base-url URL/v1 --env.turns 2 --no-push
"""
from perfgym.integrations.verifiers_env import KernelEnv, KernelTaskset, load_environment

__all__ = ["KernelEnv", "KernelTaskset", "load_environment"]
