"""`perfgym serve`: the gym as an HTTP reward service for any RL framework.

    POST /evaluate   one or a batch of candidates -> Outcomes and rewards
    GET  /tasks      the tasks it can score
    GET  /health     liveness, machine and queue facts
    GET  /openapi.json

Bearer-token authentication is on by default and the server binds to localhost unless told
otherwise. Requests over the body limit get 413, batches over the count limit 422, unknown
tasks or sizes 400. Each request is answered once, with every candidate it carried, in order;
evaluations from concurrent requests share one exclusive benchmark lane.
"""
from __future__ import annotations

import secrets
import threading
import time
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from . import __version__
from .config import OPT_LEVELS, EvalConfig
from .errors import HostError
from .executors import Request as EvalRequest
from .executors import evaluate_many
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


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidates: list[Candidate] = Field(min_length=1)
    reward: Literal[tuple(SCHEMES)] = "tiered"  # type: ignore[valid-type]
    opt: Literal[OPT_LEVELS] = "O3"  # type: ignore[valid-type]
    use_cache: bool = True
    min_samples: int | None = Field(None, ge=1, le=1000, description="timed calls at least")
    max_samples: int | None = Field(None, ge=1, le=1000, description="timed calls at most")


class Result(BaseModel):
    reward: float
    outcome: dict[str, Any]


class EvaluateResponse(BaseModel):
    results: list[Result]
    elapsed: float


def create_app(token: str | None, max_batch: int = 64, max_body: int = 4 << 20,
               allow_tasks: list[str] | None = None) -> FastAPI:
    app = FastAPI(title="perfgym reward service", version=__version__,
                  description=__doc__.split("\n\n")[0])
    bearer = HTTPBearer(auto_error=False)
    known = set(allow_tasks or builtin_names() + builtin_gpu_names())
    state = {"requests": 0, "candidates": 0, "in_flight": 0, "started": time.time()}
    lock = threading.Lock()

    def authorized(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if token is None:
            return
        if creds is None or not secrets.compare_digest(creds.credentials, token):
            raise HTTPException(401, "missing or wrong bearer token",
                                headers={"WWW-Authenticate": "Bearer"})

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body):
            return JSONResponse({"detail": f"request body over the limit of {max_body} bytes"},
                                status_code=413)
        return await call_next(request)

    @app.get("/health")
    def health() -> dict[str, Any]:
        from .machine import fingerprint
        return {"status": "ok", "version": __version__, "machine": fingerprint()["id"],
                "uptime": time.time() - state["started"], **{k: state[k] for k in
                                                             ("requests", "candidates",
                                                              "in_flight")}}

    @app.get("/tasks", dependencies=[Depends(authorized)])
    def tasks() -> list[dict[str, Any]]:
        out = []
        for name in sorted(known):
            t = get_task(name)
            out.append({"name": t.name, "kind": t.kind, "entry": t.entry,
                        "default_size": t.default_size, "language": t.language})
        return out

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
        requests = []
        for i, c in enumerate(body.candidates):
            if c.task not in known:
                raise HTTPException(400, f"candidate {i}: unknown task {c.task!r}")
            task = get_task(c.task)
            try:
                size = parse_size(c.size, task) if c.size else None
            except TaskError as exc:
                raise HTTPException(400, f"candidate {i}: {exc}") from None
            timing = {k: v for k, v in (("min_samples", body.min_samples),
                                        ("max_samples", body.max_samples)) if v is not None}
            if timing.get("min_samples", 1) > timing.get("max_samples", 1000):
                raise HTTPException(400, "min_samples is larger than max_samples")
            config = EvalConfig(opt=body.opt, stage=c.stage, use_cache=body.use_cache, **timing)
            requests.append(EvalRequest(task, c.code, size, config, tag=i))
        with lock:
            state["in_flight"] += len(requests)
        try:
            outcomes = evaluate_many(requests)
        except HostError as exc:  # the host's fault: no reward, the client retries elsewhere
            raise HTTPException(503, f"this reward host cannot evaluate: {exc}") from None
        except TaskError as exc:  # the task at the size asked (a reference too slow there)
            raise HTTPException(400, str(exc)) from None
        finally:
            with lock:
                state["in_flight"] -= len(requests)
                state["requests"] += 1
                state["candidates"] += len(requests)
        if failed := [o for o in outcomes if o.status.value == "HOST_ERROR"]:  # no reward
            raise HTTPException(503, f"this reward host cannot evaluate: {failed[0].message}")
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(body.candidates):
            groups.setdefault(c.group or "", []).append(i)
        rewards = [0.0] * len(outcomes)
        for members in groups.values():
            for i, r in zip(members, score(body.reward, [outcomes[i] for i in members])):
                rewards[i] = r
        return EvaluateResponse(results=[Result(reward=r, outcome=o.to_dict())
                                         for r, o in zip(rewards, outcomes)],
                                elapsed=time.monotonic() - started)

    return app


def serve(host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          max_batch: int = 64, max_body: int = 4 << 20) -> None:
    import uvicorn
    uvicorn.run(create_app(token, max_batch, max_body), host=host, port=port, log_level="info")
