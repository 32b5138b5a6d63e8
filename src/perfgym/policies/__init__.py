"""Policies: who writes the code. One interface:

    generate(prompts: list[str], n: int, **sampling) -> list[list[str]]

n completions for each prompt, in prompt order. A policy whose answers depend on what it handed
out before (replay's cursor) also has `state() -> dict` and `restore(dict)`: the search engine
stores the state with each batch of completions and restores it on resume.
"""
from __future__ import annotations

from typing import Any, Protocol

from .errors import PolicyError  # noqa: F401  (perfgym.policies.PolicyError)


class Policy(Protocol):
    name: str

    def generate(self, prompts: list[str], n: int, **sampling: Any) -> list[list[str]]: ...




def make_policy(kind: str, **options: Any) -> Policy:
    if kind == "openai":
        from .openai_compat import OpenAIPolicy
        return OpenAIPolicy(**options)
    if kind == "hf":
        from .hf import HFPolicy
        return HFPolicy(**options)
    if kind == "openvino":
        from .openvino import OpenVINOPolicy
        return OpenVINOPolicy(**options)
    if kind == "replay":
        from .replay import ReplayPolicy
        return ReplayPolicy(**options)
    raise ValueError(f"policy {kind!r} is not one of openai, hf, openvino, replay")


def default_local_policy() -> str:
    """The local model's policy: the fast engine when it is installed, else transformers."""
    from ..engine.openvino import available
    return "openvino" if available() else "hf"
