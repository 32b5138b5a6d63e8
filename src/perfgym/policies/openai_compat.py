"""Any OpenAI-compatible chat-completions server: vLLM, SGLang, llama.cpp, hosted APIs.

Requests run concurrently up to a limit; 429 and 5xx answers and timeouts are retried with
exponential backoff (the SDK's own retries are off so the policy is explicit). When a server
returns fewer than n choices (some ignore `n`), the rest are asked for one at a time.
"""
from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from . import PolicyError


class OpenAIPolicy:
    name = "openai"

    def __init__(self, model: str | None = None, base_url: str | None = None,
                 api_key: str | None = None, concurrency: int = 8, max_retries: int = 5,
                 timeout: float = 600.0, system_prompt: str | None = None, **_: Any) -> None:
        try:
            import openai  # noqa: F401
        except ImportError:
            raise PolicyError("the openai policy needs the openai package: "
                              "pip install 'perfgym[llm]'") from None
        self.model = model or os.environ.get("PERFGYM_MODEL") or os.environ.get("OPENAI_MODEL")
        if not self.model:
            raise PolicyError("no model: pass --model or set PERFGYM_MODEL")
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.concurrency, self.max_retries, self.timeout = concurrency, max_retries, timeout
        self.system_prompt = system_prompt

    def generate(self, prompts: list[str], n: int, **sampling: Any) -> list[list[str]]:
        return asyncio.run(self._generate_all(prompts, n, sampling))

    async def _generate_all(self, prompts: list[str], n: int,
                            sampling: dict[str, Any]) -> list[list[str]]:
        from openai import AsyncOpenAI
        client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0,
                             timeout=self.timeout)
        limit = asyncio.Semaphore(self.concurrency)
        try:
            return list(await asyncio.gather(
                *(self._one_prompt(client, limit, p, n, sampling) for p in prompts)))
        finally:
            await client.close()

    async def _one_prompt(self, client, limit, prompt: str, n: int,
                          sampling: dict[str, Any]) -> list[str]:
        texts = await self._request(client, limit, prompt, n, sampling)
        while len(texts) < n:
            texts += await self._request(client, limit, prompt, 1, sampling)
        return texts[:n]

    async def _request(self, client, limit, prompt: str, n: int,
                       sampling: dict[str, Any]) -> list[str]:
        import openai
        messages = ([{"role": "system", "content": self.system_prompt}]
                    if self.system_prompt else []) + [{"role": "user", "content": prompt}]
        params = {k: v for k, v in sampling.items()
                  if k in ("temperature", "top_p", "max_tokens", "seed", "stop")}
        for attempt in range(self.max_retries + 1):
            try:
                async with limit:
                    reply = await client.chat.completions.create(
                        model=self.model, messages=messages, n=n, **params)
                return [c.message.content or "" for c in reply.choices]
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError) as exc:
                if attempt == self.max_retries:
                    raise PolicyError(f"{self.base_url or 'the API'}: {type(exc).__name__} "
                                      f"after {attempt + 1} tries: {exc}") from None
                await asyncio.sleep(min(30.0, 0.5 * 2**attempt) * (0.5 + random.random()))
            except openai.APIStatusError as exc:
                raise PolicyError(f"{self.base_url or 'the API'} refused the request "
                                  f"({exc.status_code}): {exc.message}") from None
        raise AssertionError("unreachable")
