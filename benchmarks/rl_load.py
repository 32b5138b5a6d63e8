"""The reward under a trainer's load: each framework's own client path sends N rollouts with C
in flight, and the HTTP service is measured with no Ray, a one-node and a two-node local Ray
cluster.

    python benchmarks/rl_load.py [--rollouts 256] [--in-flight 16] [--frameworks verl,openrlhf,verifiers]
                                 [--nodes 0,1,2] [--cluster-rollouts 64] [--cached] [--fresh-node]
                                 [--out benchmarks/results/rl_load.json]

Paths (the dot task at N=200000; the answers of tests/integrations/answers.py in turn, each
made new to the cache with a constant unless --cached):

  verl       perfgym.integrations.verl.compute_score from a thread pool of C, as verl's reward
             loop calls a synchronous custom reward (run_in_executor, one sample per call)
  openrlhf   OpenRLHF 0.11.2's SingleTurnAgentExecutor._fetch_rewards_via_http (its remote-RM
             client: 180 s timeout, 5 tries) posting each rollout to `perfgym serve` /openrlhf,
             C at once on one event loop
  verifiers  KernelTask.perfgym (the environment's reward) awaited by C rollouts on one event
             loop, beside a 10 ms heartbeat task that measures the loop's longest stall

Each reports rollouts, in_flight, seconds, max_wait_s (the slowest rollout's reward, from its
request to its answer), refused (neutral: no verdict, with a reason), failed (an exception or
a non-number reached the trainer), none_rewards and, for openrlhf and verifiers,
refusal_reasons (each refusal's reason as the reward gave it, counted). The cluster rows send
--cluster-rollouts evaluations to `perfgym serve` POST /evaluate (one per request, C in flight): 0 nodes is the
service judging on this machine; 1 is `ray start --head` with the bench_node resource; 2 adds
a second benchmark node on this machine (both share the machine's timing lane, so two local
nodes show the routing and its cost, not speed). Before the clock starts, each row sends
evaluations until every benchmark node has answered one (warm_up_evaluations): a node's first
evaluation also starts its Ray worker and imports perfgym, seconds in which the other node
works alone. node_shares: each node's share (outcome.config["node"]; "this machine" without
Ray) of the evaluations that ran; not_run: the share answered without running, from the
service's own outcome cache ("service cache": the no-code answer, the same text every time)
or not at all (an HTTP status). cpu_seconds: where the machine's CPU went while the row ran:
machine_busy (all cores, /proc/stat) and the seconds of each kind of process (ray daemons:
raylet, GCS, Ray's Python agents; ray workers: the evaluations, with their compiles).

--fresh-node: verl's C concurrent calls (C = --in-flight) on a fresh node, a new process with
an empty perfgym cache (the machine probe, the harness's compile and the naive kernel's timing
all still to do), then on a warm one, a new process on the cache the first left; each with new
answers. `fresh_node` reports both rows and their ratio.

Every Ray process and service this starts is in a process group of its own, ended at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "integrations")]

from answers import ANSWERS, LABEL, TASK  # noqa: E402

KINDS = ["naive", "four_accumulators", "wrong_answer", "compile_error", "no_code",
         "simd_reduction", "library_call", "openmp_reduction"]


def rollouts(n: int, cached: bool) -> list[str]:
    """n answers, the kinds in turn; each new to the outcome cache unless `cached`."""
    out = []
    for i in range(n):
        text = ANSWERS[KINDS[i % len(KINDS)]]
        if not cached:
            text = text.replace("out[0] = ", f"out[0] = 0.0 * {uuid.uuid4().int % 10**9} + ", 1)
        out.append(text)
    return out


def summary(name: str, n: int, c: int, seconds: float, waits: list[float], refused: int,
            failed: int, none: int, **extra) -> dict:
    return {"framework": name, "rollouts": n, "in_flight": c, "seconds": round(seconds, 2),
            "max_wait_s": round(max(waits, default=0.0), 2), "refused": refused,
            "failed": failed, "none_rewards": none, **extra}


def run_verl(answers: list[str], c: int) -> dict:
    from perfgym.integrations.verl import compute_score
    waits, refused, failed, none = [], 0, 0, 0
    lock = threading.Lock()

    def one(text: str) -> None:
        nonlocal refused, failed, none
        started = time.monotonic()
        try:
            out = compute_score(f"perfgym/{TASK}", text, LABEL, {"index": 0})
        except Exception:  # noqa: BLE001  (verl's reward loop would die of it)
            with lock:
                failed += 1
            return
        finally:
            with lock:
                waits.append(time.monotonic() - started)
        with lock:
            score = out.get("score")
            none += score is None
            failed += score is not None and not math.isfinite(score)
            refused += out.get("refused") == 1.0
    started = time.monotonic()
    with ThreadPoolExecutor(c) as pool:  # verl: loop.run_in_executor(None, compute_score...)
        list(pool.map(one, answers))
    return summary("verl", len(answers), c, time.monotonic() - started, waits, refused, failed,
                   none)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def service(env: dict, ray_address: str | None = None):
    """`perfgym serve --no-auth` on a free port (retried while a Ray head is still starting)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "perfgym.cli", "serve", "--no-auth", "--port", str(port),
           "--max-batch", "64"] + (["--ray-address", ray_address] if ray_address else [])
    import httpx
    proc, ends = None, time.monotonic() + 300
    try:
        while True:
            if proc is None or proc.poll() is not None:
                if time.monotonic() > ends:
                    raise RuntimeError("perfgym serve did not start: "
                                       + (proc.stdout.read().decode()[-2000:] if proc else ""))
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            try:
                httpx.get(url + "/health", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.5)
        yield url
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def run_openrlhf(answers: list[str], c: int, env: dict) -> dict:
    from openrlhf.utils.agent import SingleTurnAgentExecutor
    prompt = "<|im_start|>user\nMake the dot kernel faster.<|im_end|>\n<|im_start|>assistant\n"
    with service(env) as url:
        client = SingleTurnAgentExecutor(url + "/openrlhf?reward=tiered")
        waits, counts, reasons = [], {"refused": 0, "failed": 0, "none": 0}, Counter()

        async def one(text: str, gate: asyncio.Semaphore) -> None:
            async with gate:
                started = time.monotonic()
                try:
                    info = (await client._fetch_rewards_via_http([prompt + text], [prompt],
                                                                 [LABEL]))[0]
                except Exception:  # noqa: BLE001  (OpenRLHF leaves the reward None then)
                    counts["none"] += 1
                    return
                finally:
                    waits.append(time.monotonic() - started)
                reward = (info or {}).get("rewards")
                if reward is None:
                    counts["none"] += 1
                elif not all(isinstance(r, (int, float)) and math.isfinite(r) for r in reward):
                    counts["failed"] += 1
                refused = (info.get("extra_logs") or {}).get("perfgym_refused", [0.0])
                counts["refused"] += int(sum(refused))
                if any(refused):
                    reasons.update(r for r in info.get("reasons") or ["(no reason given)"] if r)

        async def main() -> float:
            gate = asyncio.Semaphore(c)
            started = time.monotonic()
            await asyncio.gather(*(one(t, gate) for t in answers))
            return time.monotonic() - started
        seconds = asyncio.run(main())
    return summary("openrlhf", len(answers), c, seconds, waits, counts["refused"],
                   counts["failed"], counts["none"], refusal_reasons=dict(reasons))


def run_verifiers(answers: list[str], c: int) -> dict:
    import verifiers.v1 as vf

    from perfgym.integrations import verifiers_env as env
    waits, counts, stall, reasons = [], {"refused": 0, "failed": 0, "none": 0}, 0.0, Counter()

    async def one(text: str, gate: asyncio.Semaphore) -> None:
        async with gate:
            task = env.KernelTask(env.KernelData(idx=0, id=TASK, name=TASK, prompt="p",
                                                 label=LABEL), env.KernelTaskConfig())
            trace = SimpleNamespace(nodes=[SimpleNamespace(
                sampled=True, message=vf.AssistantMessage(content=text))], info={}, metrics={})
            started = time.monotonic()
            try:
                reward = await task.perfgym(trace)
            except Exception:  # noqa: BLE001
                counts["failed"] += 1
                return
            finally:
                waits.append(time.monotonic() - started)
            if reward is None:
                counts["none"] += 1
            elif not math.isfinite(reward):
                counts["failed"] += 1
            counts["refused"] += int(any(trace.info["perfgym"]["refused"]))
            reasons.update(r for r in trace.info["perfgym"].get("reasons", []) if r)

    async def main() -> float:
        nonlocal stall

        async def beat():
            nonlocal stall
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                stall = max(stall, now - last - 0.01)
                last = now
        heart = asyncio.create_task(beat())
        gate = asyncio.Semaphore(c)
        started = time.monotonic()
        await asyncio.gather(*(one(t, gate) for t in answers))
        heart.cancel()
        return time.monotonic() - started
    seconds = asyncio.run(main())
    return summary("verifiers", len(answers), c, seconds, waits, counts["refused"],
                   counts["failed"], counts["none"], event_loop_max_stall_s=round(stall, 3),
                   refusal_reasons=dict(reasons))


@contextmanager
def ray_cluster(nodes: int, env: dict):
    """`nodes` local Ray nodes, each a benchmark node (bench_node: 1) with its share of this
    machine's CPUs (the row without Ray has them all), each in a process group of its own that
    is ended afterwards; yields the head's address."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    procs = []
    cpus = max(1, (os.cpu_count() or 1) // nodes)
    base = ["--block", f"--num-cpus={cpus}", '--resources={"bench_node": 1}',
            "--disable-usage-stats"]
    try:
        procs.append(subprocess.Popen(["ray", "start", "--head", f"--port={port}",
                                       "--include-dashboard=false", *base], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        for _ in range(nodes - 1):
            time.sleep(10)  # (the head first)
            procs.append(subprocess.Popen(["ray", "start", f"--address={address}", *base],
                                          env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True))
        yield address
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(3)
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        forget_cluster(port)


def forget_cluster(port: int) -> None:
    """Remove Ray's note of the current cluster when it names the head just ended: a head
    killed rather than stopped leaves it, and a later ray.init() with no address would try
    to join the dead cluster."""
    note = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        if note.read_text().strip().endswith(f":{port}"):
            note.unlink()
    except OSError:
        pass


def wait_for_nodes(url: str, address: str, nodes: int, env: dict) -> None:
    """Until `nodes` benchmark nodes are alive (the service may join before the second)."""
    code = ("import ray,sys,time\nray.init(address=sys.argv[1], log_to_driver=False)\n"
            "ends = time.time() + 120\n"
            "while time.time() < ends and len([n for n in ray.nodes() if n['Alive'] and "
            "n['Resources'].get('bench_node')]) < int(sys.argv[2]): time.sleep(0.5)\n")
    subprocess.run([sys.executable, "-c", code, address, str(nodes)], env=env, timeout=300,
                   capture_output=True)


def evaluate_once(url: str, text: str) -> str:
    """POST one evaluation; where it ran: the node, "this machine" (no Ray), "service cache"
    (the service's own outcome cache answered: nothing ran) or the HTTP status."""
    import httpx
    r = httpx.post(url + "/evaluate", json={"candidates": [{
        "task": TASK, "code": text, "size": "N=200000"}]}, timeout=900)
    if r.status_code != 200:
        return f"HTTP {r.status_code}"
    outcome = r.json()["results"][0]["outcome"]
    if node := outcome["config"].get("node"):
        return node
    return "service cache" if outcome.get("cached") else "this machine"


def warm_up(url: str, nodes: int, c: int) -> int:
    """Evaluations (fresh answers) sent until each of `nodes` benchmark nodes has answered one,
    at most 180 s; how many were sent. Without Ray, one round."""
    seen, sent, ends = set(), 0, time.monotonic() + 180
    while True:
        batch = rollouts(max(2, 2 * nodes), cached=False)
        with ThreadPoolExecutor(min(c, len(batch))) as pool:
            seen |= set(pool.map(lambda t: evaluate_once(url, t), batch))
        sent += len(batch)
        ran = {w for w in seen if w != "service cache" and not w.startswith("HTTP")}
        if len(ran) >= max(nodes, 1) or time.monotonic() > ends:
            return sent


def process_cpu() -> dict[int, tuple[str, float]]:
    """Every live process's CPU seconds (its own and its reaped children's: a Ray worker's
    compiles and harness runs count as the worker's), with what it is."""
    tick = os.sysconf("SC_CLK_TCK")
    seen = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # (ended meanwhile)
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (state) on
        seen[int(entry.name)] = (process_kind(comm, cmdline),
                                 sum(int(f) for f in fields[11:15]) / tick)
    return seen


def process_kind(comm: str, cmdline: str) -> str:
    """Ray's daemons apart from the Ray workers that run evaluations, and the rest."""
    if comm.startswith("ray::") or "default_worker.py" in cmdline:
        return "ray workers"
    if comm in ("raylet", "gcs_server") or "/ray/" in cmdline or "ray start" in cmdline:
        return "ray daemons"
    if "perfgym" in cmdline and "serve" in cmdline:
        return "perfgym serve"
    return "other"


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat, all cores)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_spent(before: dict, after: dict, busy: float) -> dict:
    """CPU seconds by kind of process between two process_cpu() snapshots (every process alive
    at the second, from zero where it started after the first; one that started and ended
    between them counts in its parent's reaped time), and the machine's busy seconds."""
    spent = Counter()
    for pid, (kind, seconds) in after.items():
        old = before.get(pid)
        spent[kind] += seconds - (old[1] if old and old[0] == kind else 0.0)
    return {"machine_busy": round(busy, 1), **{k: round(v, 1) for k, v in spent.items()}}


def cluster_row(nodes: int, answers: list[str], c: int, env: dict) -> dict:
    def measure(url: str) -> dict:
        warm = warm_up(url, nodes, c)
        started, cpu_before, busy_before = time.monotonic(), process_cpu(), machine_busy_seconds()
        with ThreadPoolExecutor(c) as pool:
            where = Counter(pool.map(lambda t: evaluate_once(url, t), answers))
        seconds = time.monotonic() - started
        cpu = cpu_spent(cpu_before, process_cpu(), machine_busy_seconds() - busy_before)
        not_run = {k: v for k, v in where.items()
                   if k == "service cache" or k.startswith("HTTP")}
        ran = sum(where.values()) - sum(not_run.values())
        return {"nodes": nodes, "evaluations": len(answers), "seconds": round(seconds, 2),
                "evaluations_per_minute": round(60 * len(answers) / seconds, 2),
                "warm_up_evaluations": warm, "cpu_seconds": cpu,
                "node_shares": {k: round(v / max(ran, 1), 3) for k, v in where.items()
                                if k not in not_run},
                "not_run": {k: round(v / len(answers), 3) for k, v in not_run.items()}}

    if nodes == 0:
        with service(env) as url:
            return measure(url)
    with ray_cluster(nodes, env) as address, service(env, address) as url:
        wait_for_nodes(url, address, nodes, env)
        return measure(url)


def fresh_node(c: int, env: dict) -> dict:
    """C concurrent verl calls in a new process on an empty cache, then on the cache it left."""
    cache = tempfile.mkdtemp(prefix="perfgym-fresh-node-")
    rows = []
    try:
        for state in ("fresh", "warm"):
            done = subprocess.run([sys.executable, __file__, "--verl-calls", str(c)],
                                  env={**env, "PERFGYM_CACHE_DIR": cache}, capture_output=True,
                                  text=True, timeout=1800)
            if done.returncode != 0:
                raise SystemExit(f"the {state} node's calls failed: {done.stderr[-600:]}")
            rows.append({"node": state, **json.loads(done.stdout.splitlines()[-1])})
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"rows": rows, "fresh_over_warm": round(rows[0]["seconds"] / rows[1]["seconds"], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rollouts", type=int, default=256)
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--frameworks", default="verl,openrlhf,verifiers")
    ap.add_argument("--nodes", default="0,1,2", help="cluster rows ('' for none)")
    ap.add_argument("--cluster-rollouts", type=int, default=64)
    ap.add_argument("--cached", action="store_true", help="repeat answers the cache holds")
    ap.add_argument("--fresh-node", action="store_true", help="verl's first --in-flight calls "
                    "on an empty cache against a warm one")
    ap.add_argument("--verl-calls", type=int, help=argparse.SUPPRESS)  # (a fresh_node child)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rl_load.json")
    args = ap.parse_args()
    if args.rollouts < 1 or args.in_flight < 1:
        ap.error("--rollouts and --in-flight are at least 1")
    if args.verl_calls:
        print(json.dumps(run_verl(rollouts(args.verl_calls, cached=False), args.verl_calls)))
        return
    home = tempfile.mkdtemp(prefix="perfgym-rl-load-")  # Ray's token and logs, apart
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HOME": home,
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    from perfgym.machine import machine_info
    machine_info()  # measured once, before any clock starts
    result = {"task": TASK, "label": json.loads(LABEL), "cached": args.cached,
              "reward_wait_s": float(os.environ.get("PERFGYM_REWARD_WAIT", 120)),
              "frameworks": [], "cluster": {"rows": []}}
    runners = {"verl": lambda a: run_verl(a, args.in_flight),
               "openrlhf": lambda a: run_openrlhf(a, args.in_flight, env),
               "verifiers": lambda a: run_verifiers(a, args.in_flight)}
    try:
        if args.fresh_node:
            result["fresh_node"] = fresh_node(args.in_flight, env)
            print(json.dumps(result["fresh_node"]), flush=True)
        for name in [f for f in args.frameworks.split(",") if f]:
            row = runners[name](rollouts(args.rollouts, args.cached))
            print(json.dumps(row), flush=True)
            result["frameworks"].append(row)
        for nodes in [int(n) for n in args.nodes.split(",") if n.strip()]:
            row = cluster_row(nodes, rollouts(args.cluster_rollouts, args.cached),
                              args.in_flight, env)
            print(json.dumps(row), flush=True)
            result["cluster"]["rows"].append(row)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
