"""Any OpenAI-compatible chat-completions server: vLLM, SGLang, llama.cpp, hosted APIs.

Requests run concurrently up to a limit; 429 and 5xx answers and timeouts are retried with
exponential backoff (the SDK's own retries are off so the policy is explicit). When a server
returns fewer than n choices (some ignore `n`), the rest are asked for at once, one request
each, within the same concurrency limit. A request the server refuses (a 400: a prompt past the
context, a parameter it rejects) fails only its own candidates: they get an answer that says so
and score as a format error; the run goes on.

An opened answer (perfgym.opening) is a prefill. With a tokenizer (`tokenizer`: a path; by
default the model's name when it is a local directory, as `transformers serve` and vLLM are
given one) the policy renders the chat template itself, appends the opening and asks the legacy
completions endpoint, which every server here has. Without one it sends the opening as a last
assistant message with vLLM's and SGLang's `continue_final_message`.
"""
from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from .errors import PolicyError


class OpenAIPolicy:
    name = "openai"

    def __init__(self, model: str | None = None, base_url: str | None = None,
                 api_key: str | None = None, concurrency: int = 8, max_retries: int = 5,
                 timeout: float = 600.0, system_prompt: str | None = None,
                 tokenizer: str | None = None, **_: Any) -> None:
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
        self.extras_refused = False  # the server rejected top_k/min_p/repetition_penalty once
        self.tokenizer_path = tokenizer or (self.model if os.path.isdir(self.model) else None)
        self._tokenizer = None

    def _render(self, prompt: str, opening: str) -> str | None:
        """The prompt as the model sees it, opened; None without a tokenizer to render it."""
        if self.tokenizer_path is None:
            return None
        if self._tokenizer is None:
            from transformers import AutoTokenizer
            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path)
        from .hf import chat_text
        return chat_text(self._tokenizer, prompt, opening)

    def generate(self, prompts: list[str], n: int, openings: list[str | None] | None = None,
                 **sampling: Any) -> list[list[str]]:
        """n completions per prompt: what the model wrote after each prompt's opening."""
        return asyncio.run(self._generate_all(prompts, n, sampling,
                                              openings or [None] * len(prompts)))

    def complete(self, texts: list[str], seeds: list[int | None],
                 **sampling: Any) -> list[tuple[str, str]]:
        """One continuation of each text as it stands (a prompt already rendered, sent to the
        legacy completions endpoint), each with its own seed, and why it stopped ("stop",
        "length"; "refused" with the server's reason as the text). GRPO's server rollouts
        (perfgym.train.server_engine) send token contexts this way."""
        return asyncio.run(self._complete_all(texts, seeds, sampling))

    async def _complete_all(self, texts: list[str], seeds: list[int | None],
                            sampling: dict[str, Any]) -> list[tuple[str, str]]:
        from openai import AsyncOpenAI
        client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0,
                             timeout=self.timeout)
        limit = asyncio.Semaphore(self.concurrency)
        try:
            replies = await asyncio.gather(*(self._request(
                client, limit, text, 1, sampling if seed is None else {**sampling, "seed": seed},
                raw=True) for text, seed in zip(texts, seeds)))
        finally:
            await client.close()
        return [r[0] if r else ("", "empty") for r in replies]

    async def _generate_all(self, prompts: list[str], n: int, sampling: dict[str, Any],
                            openings: list[str | None]) -> list[list[str]]:
        from openai import AsyncOpenAI
        client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0,
                             timeout=self.timeout)
        limit = asyncio.Semaphore(self.concurrency)
        try:
            return list(await asyncio.gather(
                *(self._one_prompt(client, limit, p, n, sampling, o)
                  for p, o in zip(prompts, openings))))
        finally:
            await client.close()

    async def _one_prompt(self, client, limit, prompt: str, n: int,
                          sampling: dict[str, Any], opening: str | None = None) -> list[str]:
        if opening:
            from ..opening import STOP
            sampling = {**sampling, "stop": list(STOP)}
        texts = await self._request(client, limit, prompt, n, sampling, opening)
        while len(texts) < n:  # the server ignored n: the rest concurrently, one each
            # each with a seed of its own unless one was given: a server that seeds every
            # request alike (transformers serve) would answer the same prompt the same way
            more = await asyncio.gather(*(self._request(
                client, limit, prompt, 1,
                sampling if "seed" in sampling else {**sampling, "seed": random.getrandbits(31)},
                opening) for _ in range(n - len(texts))))
            if not any(more):
                raise PolicyError(f"{self.base_url or 'the API'} returned no choices")
            texts += [t for batch in more for t in batch]
        return texts[:n]

    async def _request(self, client, limit, prompt: str, n: int,
                       sampling: dict[str, Any], opening: str | None = None,
                       raw: bool = False) -> list:
        """n answers to `prompt` (a user message; `raw`: a rendered prompt, answered with
        (text, why it stopped) pairs)."""
        import openai
        messages = ([{"role": "system", "content": self.system_prompt}]
                    if self.system_prompt else []) + [{"role": "user", "content": prompt}]
        rendered = prompt if raw else self._render(prompt, opening) if opening else None
        params = {k: v for k, v in sampling.items()
                  if k in ("temperature", "top_p", "max_tokens", "seed", "stop") and v is not None}
        # not in OpenAI's API; vLLM, SGLang, llama.cpp and transformers serve read them
        extra = {k: v for k, v in sampling.items()  # only those switched on (0 and 1.0: off)
                 if k in ("top_k", "min_p", "repetition_penalty") and v
                 and not (k == "repetition_penalty" and v == 1.0)}
        if opening and rendered is None:  # the server continues the assistant's message
            messages.append({"role": "assistant", "content": opening})
            extra.update(continue_final_message=True, add_generation_prompt=False)
        if extra and not self.extras_refused:
            params["extra_body"] = extra
        for attempt in range(self.max_retries + 1):
            try:
                async with limit:
                    if rendered is not None:
                        reply = await client.completions.create(
                            model=self.model, prompt=rendered, n=n, **params)
                        texts = [(c.text or "", c.finish_reason) for c in reply.choices]
                    else:
                        reply = await client.chat.completions.create(
                            model=self.model, messages=messages, n=n, **params)
                        texts = [(c.message.content or "", c.finish_reason)
                                 for c in reply.choices]
                if raw:
                    return [(t, reason or "stop") for t, reason in texts]
                if opening:
                    from ..opening import closed
                    return [closed(t, reason == "stop") for t, reason in texts]
                return [t for t, _ in texts]
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError) as exc:
                if attempt == self.max_retries:
                    raise PolicyError(f"{self.base_url or 'the API'}: {type(exc).__name__} "
                                      f"after {attempt + 1} tries: {exc}") from None
                await asyncio.sleep(min(30.0, 0.5 * 2**attempt) * (0.5 + random.random()))
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                said = f"{exc.message} {exc.body or ''}"  # the message alone may be bare
                if "extra_body" in params and any(k in said for k in extra):
                    # a server that knows only OpenAI's own parameters: sample without ours
                    if not self.extras_refused:
                        import sys
                        print(f"note: {self.base_url or 'the API'} does not take "
                              f"{', '.join(extra)}; sampling without them", file=sys.stderr)
                    self.extras_refused = True
                    params.pop("extra_body")
                    continue
                # this prompt only (too long, a value the server rejects): its candidates fail
                refusal = f"[the server refused this request ({exc.status_code}): {said}]"
                return [(refusal, "refused")] * n if raw else [refusal] * n
            except openai.APIStatusError as exc:
                raise PolicyError(f"{self.base_url or 'the API'} refused the request "
                                  f"({exc.status_code}): {exc.message}") from None
        raise AssertionError("unreachable")
