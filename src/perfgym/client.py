"""A small client for `perfgym serve` (standard library only, so any trainer can import it)."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any


class RewardServiceError(RuntimeError):
    pass


class RewardClient:
    def __init__(self, url: str = "http://127.0.0.1:8000", token: str | None = None,
                 timeout: float = 600.0) -> None:
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise RewardServiceError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
        except urllib.error.URLError as exc:
            raise RewardServiceError(f"{self.url}: {exc.reason}") from None
        except (OSError, http.client.HTTPException) as exc:  # reset, timed out, cut short
            raise RewardServiceError(
                f"{method} {path}: the connection failed ({type(exc).__name__}: {exc}); the "
                "server closes it on a body over its limit or one that stalls") from None

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def tasks(self) -> list[dict[str, Any]]:
        return self._call("GET", "/tasks")

    def evaluate(self, candidates: list[dict[str, Any]], reward: str = "tiered",
                 opt: str = "O3") -> list[dict[str, Any]]:
        """candidates: dicts with task, code and optionally stage, size, group. Returns one
        {"reward", "outcome"} per candidate, in order."""
        body = {"candidates": candidates, "reward": reward, "opt": opt}
        return self._call("POST", "/evaluate", body)["results"]

    def rewards(self, task: str, completions: list[str], reward: str = "tiered",
                group: str | None = None) -> list[float]:
        """The rewards for one group of completions: the shape RL reward functions want."""
        results = self.evaluate([{"task": task, "code": c, "group": group} for c in completions],
                                reward)
        return [r["reward"] for r in results]
