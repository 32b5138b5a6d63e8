"""`perfgym serve`: the gym as an HTTP reward service for any RL framework.

    POST /evaluate   one or a batch of candidates -> Outcomes and rewards
    POST /openrlhf   OpenRLHF's remote reward-model protocol (integrations/openrlhf.py)
    GET  /tasks      the tasks it can score
    GET  /health     liveness, machine and queue facts
    GET  /openapi.json

Bearer-token authentication is on by default and the server binds to localhost unless told
otherwise. Requests over the body limit get 413 (counted as the body streams in, whatever it
declares), batches over the count limit 422, unknown tasks or sizes 400; a request whose
headers or body do not arrive in time gets 408 and its connection is closed. Each request is
answered once, with every candidate it carried, in order; evaluations from concurrent requests
share one exclusive benchmark lane, and run in worker threads, off the event loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import secrets
import threading
import time
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from . import __version__
from .config import OPT_LEVELS, EvalConfig
from .errors import HostError
from .lane import bounded, reward_wait
from .executors import Request as EvalRequest
from .executors import evaluate_many
from .integrations import executor_for
from .inflight import CallerGone, Inflight, content_key
from .integrations.openrlhf import OpenRLHFRequest, OpenRLHFResponse, score_rollouts
from .integrations.openrlhf import check as check_openrlhf
from .opening import answer_start, closed, full_answer
from .rewards import SCHEMES, score
from .tasks import TaskError, builtin_names, get_task, parse_size
from .tasks.torch_task import builtin_gpu_names

MAX_CODE_CHARS = 200_000


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=200, description="a built-in task name")
    code: str = Field(max_length=MAX_CODE_CHARS,
                      description="C source, or a model's whole answer with a code block")
    stage: int | None = Field(None, ge=1, le=6, description="SQD stage rules (1-6)")
    size: str | None = Field(None, max_length=200, description="'256' or 'M=..,N=..,K=..'")
    group: str | None = Field(None, max_length=200, description="candidates with the same group "
                              "are scored together (e.g. a GRPO group); default: the batch")
    opened: bool = Field(False, description="code is what the model wrote after the task's "
                         "answer_start (GET /tasks): the service puts the opening before it, "
                         "and the reward pays nothing for the opening's part")


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidates: list[Candidate] = Field(min_length=1)
    reward: Literal[tuple(SCHEMES)] = "tiered"  # type: ignore[valid-type]
    opt: Literal[OPT_LEVELS] = "O3"  # type: ignore[valid-type]
    use_cache: bool = True
    min_samples: int | None = Field(None, ge=1, le=1000, description="timed calls at least")
    max_samples: int | None = Field(None, ge=1, le=1000, description="timed calls at most")


class Result(BaseModel):
    # null: refused, no reward to learn from (a timing disturbed by other programs, a copy of
    # a memory kernel); the outcome says which. JSON has no NaN.
    reward: float | None
    outcome: dict[str, Any]


class EvaluateResponse(BaseModel):
    results: list[Result]
    elapsed: float


DRAIN_FACTOR = 16  # an over-limit body up to 16x the limit is read before its 413 ...
MAX_DRAIN = 64 << 20  # ... and never more than 64 MiB
REQUEST_TIMEOUT = 60.0  # seconds for a request's headers, and again for its body
IDLE_TIMEOUT = 15.0  # seconds without a byte while a request's body is on its way


class BodyGuard:
    """ASGI middleware that reads each request's body itself before the app sees it, so size and
    pace are bounded whatever the client declares: past `max_body` bytes (a chunked body has no
    Content-Length) the answer is 413, when no byte comes for `idle` seconds or the body is not
    complete after `deadline` seconds it is 408, and either way the connection is closed. An
    over-limit body is read and dropped up to a bound first, so that its client reads the 413
    rather than a reset. It also keeps a server error an ordinary answer on a usable connection."""

    def __init__(self, app, max_body: int, idle: float, deadline: float) -> None:
        self.app, self.max_body, self.idle, self.deadline = app, max_body, idle, deadline
        # how much of an over-limit body is read (and dropped) so its 413 can be read: a
        # body past this is cut off, and its client may see a reset instead
        self.drain_limit = min(DRAIN_FACTOR * max_body, MAX_DRAIN)

    async def _drain(self, receive, seen: int, ends: float) -> None:
        """Read and drop the rest of a body, within the drain bound and the body's deadlines."""
        while seen <= self.drain_limit:
            try:
                wait = min(self.idle, ends - time.monotonic())
                message = await asyncio.wait_for(receive(), max(wait, 0.0))
            except asyncio.TimeoutError:
                return
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"0")
        over = f"request body over the limit of {self.max_body} bytes"
        ends = time.monotonic() + self.deadline
        if not declared.isdigit():
            return await _refuse(send, 413, over)
        if int(declared) > self.max_body:
            # a client that waits for "100 Continue" reads the 413 now (uvicorn sends the 100
            # only once the body is asked for); one that sends its body at once would have its
            # connection reset, the answer unread, were the rest left in the socket: that body
            # is read and dropped first, when it is within the drain bound
            if (headers.get(b"expect", b"").lower() != b"100-continue"
                    and int(declared) <= self.drain_limit):
                await self._drain(receive, 0, ends)
            return await _refuse(send, 413, over)
        body = bytearray()
        while True:
            try:
                wait = min(self.idle, ends - time.monotonic())
                message = await asyncio.wait_for(receive(), max(wait, 0.0))
            except asyncio.TimeoutError:
                return await _refuse(send, 408, "the request body did not arrive in time (no byte "
                                     f"for {self.idle:g} s, or not all of it within "
                                     f"{self.deadline:g} s)")
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                if message.get("more_body", False):
                    await self._drain(receive, len(body), ends)
                return await _refuse(send, 413, over)
            if not message.get("more_body", False):
                break

        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()  # http.disconnect, when the client goes
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        started = False

        async def watch(message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, replay, watch)
        except Exception as exc:
            # answered here as any other answer: raised on, it would make uvicorn (or Starlette)
            # close the connection the client may be reusing
            if started:  # half an answer cannot be finished: the connection must go
                raise
            logging.getLogger("uvicorn.error").exception("error while answering a request")
            await _refuse(send, 500, f"internal error in the reward service: "
                          f"{type(exc).__name__}: {str(exc)[:300]}", close=False)


async def _refuse(send, status: int, detail: str, close: bool = True) -> None:
    headers = [(b"content-type", b"application/json")]
    if close:  # the rest of the body is never read: the connection cannot carry another request
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": detail}).encode()})


def create_app(token: str | None, max_batch: int = 64, max_body: int = 4 << 20,
               allow_tasks: list[str] | None = None, request_timeout: float = REQUEST_TIMEOUT,
               idle_timeout: float = IDLE_TIMEOUT, ray_address: str | None = None) -> FastAPI:
    app = FastAPI(title="perfgym reward service", version=__version__,
                  description=__doc__.split("\n\n")[0])
    authorized, authorized_or_basic = _token_checks(token)
    service = _Service(set(allow_tasks or builtin_names() + builtin_gpu_names()), max_batch,
                       ray_address)
    app.add_middleware(BodyGuard, max_body=max_body, idle=idle_timeout, deadline=request_timeout)
    app.add_exception_handler(RequestValidationError, _invalid)
    from .machine import fingerprint
    machine = fingerprint()["id"]  # measured now, not while /health must answer at once
    _add_info_routes(app, service, machine, authorized)
    _add_evaluate_route(app, service, authorized)
    _add_openrlhf_route(app, service, authorized_or_basic)
    return app


class _Service:
    """What one app's routes share: the tasks it scores, its batch limit, where candidates are
    evaluated, and the counts /health reports (kept under a lock: routes run in threads)."""

    def __init__(self, known: set[str], max_batch: int, ray_address: str | None) -> None:
        self.known, self.max_batch, self.ray_address = known, max_batch, ray_address
        self.state = {"requests": 0, "candidates": 0, "in_flight": 0, "started": time.time()}
        self.lock = threading.Lock()
        self.inflight = Inflight(workers=max(64, max_batch))
        # this machine, or a Ray cluster's benchmark nodes (connected now: a wrong address is
        # told at start, not at the first reward)
        self.executor = executor_for(ray_address) if ray_address else evaluate_many

    @contextlib.contextmanager
    def evaluating(self, n: int):
        """A request's n candidates counted while they are evaluated; the host's fault a 503
        (no reward: the client retries elsewhere), the task's at the size asked a 400."""
        with self.lock:
            self.state["in_flight"] += n
        try:
            yield
        except HostError as exc:
            raise HTTPException(503, f"this reward host cannot evaluate: {exc}") from None
        except TaskError as exc:  # (a reference too slow at that size)
            raise HTTPException(400, str(exc)) from None
        finally:
            with self.lock:
                self.state["in_flight"] -= n
                self.state["requests"] += 1
                self.state["candidates"] += n


def _token_checks(token: str | None):
    """The two ways a route may ask for the token (no check at all when it is None): the bearer
    token, and the bearer token or HTTP basic auth's password."""
    bearer = HTTPBearer(auto_error=False)

    def authorized(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if token is None:
            return
        if creds is None or not secrets.compare_digest(creds.credentials, token):
            raise HTTPException(401, "missing or wrong bearer token",
                                headers={"WWW-Authenticate": "Bearer"})

    def authorized_or_basic(request: Request) -> None:
        """The bearer token, or the same token as HTTP basic auth's password: a client that
        sends no headers of its own (OpenRLHF) carries it in its URL (http://u:TOKEN@host)."""
        if token is None:
            return
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip()
        if scheme.lower() == "basic":
            import base64
            import binascii
            try:
                given = base64.b64decode(given, validate=True).decode().partition(":")[2]
            except (binascii.Error, UnicodeDecodeError):
                given = ""
        elif scheme.lower() != "bearer":
            given = ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "missing or wrong token (bearer, or basic auth's "
                                "password)", headers={"WWW-Authenticate": "Bearer"})

    return authorized, authorized_or_basic


async def _invalid(request, exc: RequestValidationError) -> Response:
    # FastAPI's own answer echoes the input as UTF-8 and fails (a 500) on a lone surrogate
    # ("\ud800", valid JSON): escaped to ASCII, any input can be echoed
    detail = json.dumps({"detail": jsonable_encoder(exc.errors())}, ensure_ascii=True)
    return Response(detail, status_code=422, media_type="application/json")


def _add_info_routes(app: FastAPI, service: _Service, machine: str, authorized) -> None:
    """GET /health and GET /tasks."""
    state, inflight = service.state, service.inflight

    @app.get("/health")
    async def health() -> dict[str, Any]:  # on the event loop: no worker thread needed
        return {"status": "ok", "version": __version__, "machine": machine,
                "uptime": time.time() - state["started"], **{k: state[k] for k in
                                                             ("requests", "candidates",
                                                              "in_flight")},
                "evaluations_started": inflight.started,
                "evaluations_cancelled": inflight.cancelled, "ray_address": service.ray_address}

    @app.get("/tasks", dependencies=[Depends(authorized)])
    def tasks() -> list[dict[str, Any]]:
        out = []
        for name in sorted(service.known):
            t = get_task(name)
            out.append({"name": t.name, "kind": t.kind, "entry": t.entry,
                        "default_size": t.default_size, "language": t.language,
                        "answer_start": answer_start(t)})
        return out


def _add_evaluate_route(app: FastAPI, service: _Service, authorized) -> None:
    """POST /evaluate."""
    max_batch = service.max_batch

    @app.post("/evaluate", response_model=EvaluateResponse, dependencies=[Depends(authorized)],
              responses={400: {"description": "unknown task or bad size"},
                         401: {"description": "missing or wrong token"},
                         413: {"description": "body over the limit"},
                         503: {"description": "the host cannot evaluate (not the candidates' "
                               "fault)"}})
    def evaluate(body: EvaluateRequest) -> EvaluateResponse:
        if len(body.candidates) > max_batch:
            raise HTTPException(422, f"{len(body.candidates)} candidates: the limit is "
                                f"{max_batch} per request")
        started = time.monotonic()
        requests = _eval_requests(body, service.known)
        for members in _groups(body.candidates).values():
            if len({body.candidates[i].opened for i in members}) > 1:
                raise HTTPException(400, "a group mixes opened and whole answers: its rewards "
                                    "would not compare; give them different groups")
        with service.evaluating(len(requests)), bounded(reward_wait()):
            outcomes = service.executor(requests)
        if failed := [o for o in outcomes if o.status.value == "HOST_ERROR"]:  # no reward
            raise HTTPException(503, f"this reward host cannot evaluate: {failed[0].message}")
        rewards = [0.0] * len(outcomes)
        for members in _groups(body.candidates).values():
            opened = body.candidates[members[0]].opened
            for i, r in zip(members, score(body.reward, [outcomes[i] for i in members],
                                           opened=opened)):
                rewards[i] = r
        return EvaluateResponse(results=[Result(reward=r if math.isfinite(r) else None,
                                                outcome=o.to_dict())
                                         for r, o in zip(rewards, outcomes)],
                                elapsed=time.monotonic() - started)


def _eval_requests(body: EvaluateRequest, known: set[str]) -> list[EvalRequest]:
    """An evaluation request for each candidate, in order; a 400 for the first that names an
    unknown task, a bad size or timing, or an opening its task does not have."""
    requests = []
    for i, c in enumerate(body.candidates):
        if c.task not in known:
            raise HTTPException(400, f"candidate {i}: unknown task {c.task!r}")
        task = get_task(c.task)
        if c.size is not None and not c.size.strip():
            raise HTTPException(400, f"candidate {i}: size is empty: give e.g. '256' or "
                                "'M=..,N=..,K=..', or leave it out for the default size")
        try:
            size = parse_size(c.size, task) if c.size else None
        except (TaskError, ValueError, OverflowError) as exc:
            raise HTTPException(400, f"candidate {i}: {exc}") from None
        timing = {k: v for k, v in (("min_samples", body.min_samples),
                                    ("max_samples", body.max_samples)) if v is not None}
        if timing.get("min_samples", 1) > timing.get("max_samples", 1000):
            raise HTTPException(400, "min_samples is larger than max_samples")
        config = EvalConfig(opt=body.opt, stage=c.stage, use_cache=body.use_cache, **timing)
        code = c.code
        if c.opened:
            opening = answer_start(task)
            if opening is None:
                raise HTTPException(400, f"candidate {i}: task {c.task!r} has no opening "
                                    "(answer_start); send the whole answer, opened false")
            code = full_answer(opening, closed(code))
        requests.append(EvalRequest(task, code, size, config, tag=i))
    return requests


def _add_openrlhf_route(app: FastAPI, service: _Service, authorized_or_basic) -> None:
    """POST /openrlhf."""
    max_batch = service.max_batch

    @app.post("/openrlhf", response_model=OpenRLHFResponse,
              dependencies=[Depends(authorized_or_basic)],
              responses={400: {"description": "query, prompts and labels differ in length"},
                         401: {"description": "missing or wrong token"},
                         413: {"description": "body over the limit"}})
    async def openrlhf(request: Request, body: OpenRLHFRequest,
                       reward: Literal[tuple(SCHEMES)] = "tiered"  # type: ignore[valid-type]
                       ) -> Any:
        """OpenRLHF's remote reward model: its rollouts (prompt + response), prompts and
        labels in, one reward per rollout out, always a number: a rollout that cannot be
        judged (a bad label, a query without its prompt, a refused timing, a host fault) is
        neutral, with its reason in extra_logs["perfgym_reason"] and "reasons". The rollouts
        of one prompt form a group. A request whose client goes away is cancelled; the same
        request sent again while it runs joins it."""
        if len(body.query) > max_batch:
            raise HTTPException(422, f"{len(body.query)} rollouts: the limit is {max_batch} "
                                "per request")
        try:
            check_openrlhf(body)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        key = content_key("openrlhf", reward, body.query, body.prompts, body.labels)

        def work(cancel: threading.Event) -> OpenRLHFResponse:
            with service.evaluating(len(body.query)):
                return score_rollouts(body, reward, service.known, cancel, service.executor)

        try:
            return await service.inflight.run(key, work, request.is_disconnected)
        except CallerGone:  # nobody reads this answer
            return Response(status_code=499)


def _groups(candidates: list[Candidate]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        groups.setdefault(c.group or "", []).append(i)
    return groups


def serve(host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          max_batch: int = 64, max_body: int = 4 << 20, request_timeout: float = REQUEST_TIMEOUT,
          idle_timeout: float = IDLE_TIMEOUT, ray_address: str | None = None) -> None:
    import uvicorn
    request_timeout = _seconds("PERFGYM_SERVE_REQUEST_TIMEOUT", request_timeout)
    idle_timeout = _seconds("PERFGYM_SERVE_IDLE_TIMEOUT", idle_timeout)
    app = create_app(token, max_batch, max_body, request_timeout=request_timeout,
                     idle_timeout=idle_timeout, ray_address=ray_address)
    uvicorn.run(app, host=host, port=port, log_level="info",
                http=header_deadline_protocol(request_timeout))


def _seconds(variable: str, default: float) -> float:
    """A timeout from the environment (seconds), else the default."""
    text = os.environ.get(variable)
    try:
        value = float(text) if text is not None else default
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise ValueError(f"{variable}={text!r} is not a timeout: give seconds, e.g. 30")
    return value


def header_deadline_protocol(seconds: float):
    """uvicorn's HTTP/1.1 protocol with a deadline for each request's headers: a client that
    connects, or finishes a request, and then sends part of the next request's headers and
    stalls is dropped after `seconds` (uvicorn only closes connections idle between requests).
    The body has its own deadlines, in BodyGuard."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadline(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            self._armed = getattr(self, "_armed", 0) + 1
            self.loop.call_later(seconds, self._overdue, self._armed)

        def _overdue(self, armed: int) -> None:
            between = self.cycle is None or self.cycle.response_complete  # no request under way
            if armed == self._armed and between and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadline
