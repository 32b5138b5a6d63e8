"""Completions read from a JSONL file: re-scoring logged generations, tests, demos.

Each line is {"completion": "..."} and may carry "match": a substring; a line with a match
serves only prompts that contain it (e.g. "stage 2" or "Fix the"), a line without serves any.
Lines are handed out in file order, cycling, per match group, so a run is reproducible; the
cursor is the policy's `state`, which a search keeps in its run store so `--resume` continues
where the run stopped rather than from the top of the file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import PolicyError


class ReplayPolicy:
    name = "replay"

    def __init__(self, path: str | Path, **_: Any) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise PolicyError(f"replay file {self.path} does not exist")
        self.entries: list[dict[str, Any]] = []
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PolicyError(f"{self.path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("completion"), str):
                raise PolicyError(f"{self.path}:{number}: needs a string field 'completion'")
            self.entries.append(entry)
        if not self.entries:
            raise PolicyError(f"replay file {self.path} has no completions")
        self.cursor: dict[str, int] = {}

    def generate(self, prompts: list[str], n: int, **sampling: Any) -> list[list[str]]:
        out = []
        for prompt in prompts:
            matching = [e for e in self.entries if e.get("match") and e["match"] in prompt]
            group = matching or [e for e in self.entries if not e.get("match")] or self.entries
            key = matching[0]["match"] if matching else ""
            picks = []
            for _ in range(n):
                i = self.cursor.get(key, 0)
                picks.append(group[i % len(group)]["completion"])
                self.cursor[key] = i + 1
            out.append(picks)
        return out

    def state(self) -> dict[str, Any]:
        """Where each match group's cursor stands (JSON), to `restore` on resume."""
        return {"cursor": dict(self.cursor)}

    def restore(self, state: dict[str, Any]) -> None:
        self.cursor = {str(k): int(v) for k, v in state.get("cursor", {}).items()}
