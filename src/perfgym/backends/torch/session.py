"""One evaluation of a PyTorch candidate, driven from the parent: the trust model in code.

The candidate's process is compromised: anything it can write, patch or read is a claim. So
  * the reference runs in a worker of its own, which never sees candidate code; a third worker
    makes every input from a seed the parent draws (secretly), and the parent forwards them;
  * outputs come back over a pipe the parent owns and are compared here, at the reference's
    dtype and shape, against the reference's outputs;
  * one ModelNew instance serves every trial and every timed call (a memo on the instance
    answers stale values for fresh inputs), and one more is built fresh for a last trial (a memo
    at module level answers stale values there);
  * every timed call gets fresh inputs and its output is checked, so replaying is never faster;
  * each call is timed twice: by the worker (perf_counter, or CUDA events on a GPU) and by the
    parent around the whole exchange. The reference's exchanges measure the channel's own
    overhead; a candidate whose parent-seen time exceeds its claim by much more than that
    overhead is rejected for tampering, and a sample whose exchange took longer than nine in
    ten of the reference's is charged the excess, so work hidden after the worker's clock stops
    is paid for.
Reference and candidate calls alternate round by round, so drift on a busy machine hits both.
"""
from __future__ import annotations

import itertools
import math
import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from ...config import EvalConfig
from ...outcome import median_halfwidth, sign_test_rank
from .tolerance import Judge, judge_for, mismatches
from .channel import Tensor, Worker, WorkerDied, parse_metas

KERNELBENCH_SEED = 42
STREAM_BYTES = 64 << 20  # outputs are compared in chunks this size: no 1 GiB copy held twice
# Tampering: the candidate's typical exchange overhead (its lower quartile: a liar's excess is
# there on every call, a busy machine's only on some) may exceed the reference's upper quartile
# by this factor, plus these seconds, plus this share of its own claimed time, before its clock
# is disbelieved. Smaller hidden work is not rejected but charged (see cross_check).
TAMPER_FACTOR, TAMPER_SLACK, TAMPER_SHARE = 2.0, 2e-3, 0.1
# Below this many candidate calls a quartile is one busy moment, not a habit: the disagreement
# is then charged, never judged (a 1 GiB output timed once was once called tampering).
TAMPER_MIN_CALLS = 3
# A candidate's timed calls may be this much faster than its traced kernels replayed (noise,
# and the replay's own allocations) before they are charged the replay's time.
REPLAY_SHARE = 0.8


class Verdict(Exception):
    """The candidate failed; status name and message for the Outcome."""

    def __init__(self, status: str, message: str, details: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.details = status, message, details


class ReferenceFailed(Exception):
    """The task's own Model or get_inputs failed: the task's fault, never the candidate's."""


class ReferenceDied(ReferenceFailed):
    """The reference worker exited before it reported: a broken host, or a broken task."""


@dataclass
class Call:
    worker_seconds: float
    parent_seconds: float
    outputs: list[Tensor]


@dataclass
class Samples:
    worker: list[float] = field(default_factory=list)
    parent: list[float] = field(default_factory=list)

    def overhead(self) -> list[float]:
        return [p - w for w, p in zip(self.worker, self.parent)]


def secret_seed() -> int:
    return secrets.randbits(31)


class Session:
    def __init__(self, problem: Worker, reference: Worker | None, candidate: Worker,
                 config: EvalConfig, kernelbench: bool = False,
                 replayer: Worker | None = None) -> None:
        self.problem, self.ref, self.cand, self.replayer = problem, reference, candidate, replayer
        self.config = config
        self.kernelbench = kernelbench
        if kernelbench:
            self.seed = lambda: KERNELBENCH_SEED  # KernelBench's fixed seed: reproducible
        elif config.seed is not None:
            self.seed = itertools.count(config.seed, 7919).__next__
        else:
            self.seed = secret_seed
        self.judges: list[Judge] = []
        # the reference's last trial (slot, args, inputs, outputs, their judges) and the outputs
        # that were the same on every trial of one instance so far (_watch_constant)
        self._last_trial: tuple | None = None
        self.constant_outputs: set[int] | None = None
        self.program: tuple[dict, list[Tensor], str] | None = None  # traced, with its kernels
        # where the parent checks the replayer's kernels (protocol.py): request -> verdict
        self.check_kernel = None

    # ---- talking to the two workers ----
    def _ref(self, header: dict, tensors: list[Tensor] = (),
             worker: Worker | None = None) -> tuple[dict, list[Tensor]]:
        worker = worker or self.ref
        reply = worker.request(header, tensors)
        if "error" in reply:
            raise ReferenceFailed(f"the task's reference failed ({reply.get('stage')}): "
                                  f"{str(reply['error'])[:300]}")
        return reply, [worker.read(t) for t in parse_metas(reply)]

    def _cand(self, header: dict, tensors: list[Tensor] = ()) -> dict:
        reply = self.cand.request(header, tensors)
        if "error" in reply:
            raise Verdict("RUNTIME_ERROR", f"{_first_line(reply['error'])} "
                          f"(running ModelNew: {reply.get('stage')})",
                          str(reply.get("traceback", ""))[-4000:])
        return reply

    def problem_ready(self) -> dict:
        """The problem worker imported the problem: the sizes it shrank, memory checked."""
        reply = self._task_header(self.problem)
        check_memory(reply.get("footprint"))
        return reply.get("shrunk", {})

    def _task_header(self, worker: Worker) -> dict:
        try:
            reply = worker.header()
        except WorkerDied:
            raise ReferenceDied(f"the {worker.role} worker died while importing the problem") \
                from None
        if "error" in reply:
            raise ReferenceFailed(f"the problem file cannot be imported: {reply['error'][:300]}")
        return reply

    def ready(self, reference_ready: bool = False) -> None:
        """The reference (unless `reference_ready`: a warm one, whose header an earlier session
        read) and candidate workers imported their code."""
        if not reference_ready:
            self._task_header(self.ref)
        reply = self.cand.header()
        if "error" in reply:
            raise Verdict("COMPILE_ERROR", f"{_first_line(reply['error'])} "
                          "(importing the candidate)", str(reply.get("traceback", ""))[-4000:])

    def build(self, slot: str, seed: int) -> None:
        reply, tensors = self._ref({"op": "init_args"}, worker=self.problem)
        args = reply["args"]
        self._ref({"op": "build", "slot": slot, "seed": seed, "args": args}, tensors)
        self._cand({"op": "build", "slot": slot, "seed": seed, "args": args}, tensors)

    def inputs(self) -> tuple[list, list[Tensor]]:
        reply, tensors = self._ref({"op": "inputs", "seed": self.seed()}, worker=self.problem)
        return reply["args"], tensors

    def call_reference(self, slot: str, args, tensors) -> Call:
        t0 = time.perf_counter()
        reply, outs = self._ref({"op": "call", "slot": slot, "args": args}, tensors)
        parent = time.perf_counter() - t0
        return Call(float(reply.get("seconds", 0.0)), parent, outs)

    def _candidate_metas(self, reply: dict, want: list[Tensor], extra: int) -> list[Tensor]:
        """The candidate's claimed outputs, held against the reference's before reading."""
        metas = parse_metas(reply)
        n = reply.get("outputs")
        if n != len(want) or len(metas) != len(want) + extra:
            raise Verdict("WRONG_ANSWER", f"forward returned {n} outputs, the reference "
                          f"{len(want)}")
        for i, (got, ref) in enumerate(zip(metas, want)):
            if got.shape != ref.shape:
                raise Verdict("WRONG_ANSWER", f"output {i} has shape {got.shape}, the "
                              f"reference's is {ref.shape}")
            if got.dtype != ref.dtype:
                raise Verdict("WRONG_ANSWER", f"output {i} is {got.dtype} but the reference's "
                              f"is {ref.dtype}: outputs keep the reference's dtype")
        return metas

    # ---- correctness ----
    def trial(self, slot: str, label: str) -> None:
        """One call on fresh inputs; the candidate's outputs are streamed and compared."""
        args, tensors = self.inputs()
        ref = self.call_reference(slot, args, tensors)
        self.judges = [judge_for(t.array(), t.dtype) for t in ref.outputs]
        self._watch_constant(slot, args, tensors, ref.outputs)
        reply = self._cand({"op": "call", "slot": slot, "args": args, "return_inputs": True},
                           tensors)
        metas = self._candidate_metas(reply, ref.outputs, len(tensors))
        for i, (got, want, judge) in enumerate(zip(metas, ref.outputs, self.judges)):
            flat = want.array().reshape(-1)
            bad, first = 0, -1
            for offset, chunk in self.cand.stream(got, STREAM_BYTES):
                n, at = mismatches(chunk, flat[offset:offset + chunk.size], judge)
                if n and first < 0:
                    first, value = offset + at, float(chunk[at])
                bad += n
            if bad:
                raise Verdict("WRONG_ANSWER", f"wrong answer {label}: "
                              + _where(i, want, first, value, bad, judge))
        for i, (got, sent) in enumerate(zip(metas[len(ref.outputs):], tensors)):
            if got.meta() != sent.meta() or self.cand.read(got).data != sent.data:
                raise Verdict("WRONG_ANSWER", f"the candidate modified input {i} ({label}); "
                              "inputs are read-only")

    def _watch_constant(self, slot: str, args, tensors: list[Tensor],
                        outputs: list[Tensor]) -> None:
        """Narrow `constant_outputs` to the outputs this trial's reference gave as the last
        trial's did, on other inputs to the same instance. (KernelBench's protocol draws every
        trial from one seed: inputs that do not differ show nothing.)"""
        last, self._last_trial = self._last_trial, (slot, args, tensors, outputs, self.judges)
        if last is None or last[0] != slot or (last[1] == args and all(
                a.meta() == b.meta() and a.data == b.data for a, b in zip(last[2], tensors))):
            return
        same = {i for i, (was, now, judge) in enumerate(zip(last[3], outputs, last[4]))
                if was.meta() == now.meta() and mismatches(
                    now.array().reshape(-1), was.array().reshape(-1), judge)[0] == 0}
        self.constant_outputs = same if self.constant_outputs is None \
            else self.constant_outputs & same

    def correctness(self, trials: int) -> None:
        self.build("A", self.seed())
        for k in range(trials):
            self.trial("A", f"in trial {k + 1} of {trials}")
        if self.constant_outputs:
            # a kernel can compute such an output once, when it is built, and hand it back on
            # every call: every trial passes, nothing is computed, and the speedup is unbounded
            i = min(self.constant_outputs)
            raise ReferenceFailed(
                f"the reference's output {i} was the same on all {trials} trials, each on other "
                "inputs: it does not depend on the inputs, so a kernel that computes it once and "
                "returns it passes without computing; this task cannot score a kernel (give its "
                "Model an output that depends on get_inputs())")
        self.build("B", self.seed())
        self.trial("B", "on a freshly built ModelNew")

    # ---- the kernel program (harness/kernel_program.py says what it shows) ----
    def kernel_program(self, kernels: str, cuda: bool = False) -> None:
        """Forward traced without its inputs' values, then replayed by the replayer on those
        inputs: its answer there must be the reference's. Traced on instance B (built for the
        last trial), so the instance that is timed is called exactly as before. `cuda`: the
        answer hands CUDA sources to load_inline; if that ran, no replay can stand for it."""
        args, tensors = self.inputs()
        try:
            if cuda and self._cand({"op": "extensions"}).get("load_inline"):
                raise Verdict("LIBRARY_VIOLATION", "no kernel evidence: CUDA code built with "
                              "load_inline runs host code that no replay can hold to the rules, "
                              "so its kernels cannot be shown to compute the answer (write the "
                              "kernels in Triton)")
            reply = self.cand.request({"op": "trace", "slot": "B", "args": args,
                                       "metas": [t.meta() for t in tensors]})
            if "error" in reply:
                raise Verdict("LIBRARY_VIOLATION", "decoy check: forward cannot be traced on its "
                              f"inputs' shapes alone ({_first_line(reply['error'])}); the gym "
                              "traces forward without values to see your kernels compute the "
                              "answer, so forward may not read tensor values on the host",
                              str(reply.get("traceback", ""))[-4000:])
            constants = [self.cand.read(t) for t in parse_metas(reply)]
        except WorkerDied as exc:
            raise Verdict("LIBRARY_VIOLATION", "decoy check: the candidate's worker stopped "
                          f"answering when asked for forward's kernel program ({exc})") from None
        if not isinstance(reply.get("program"), dict):
            raise Verdict("LIBRARY_VIOLATION", "decoy check: no kernel program came back")
        self.program = (reply["program"], constants, kernels)
        ref = self.call_reference("B", args, tensors)
        self._replayer(lambda: self._stage(args, tensors))
        self._replayer(self._run)
        self._check_replay(self._replayer(self._replayed), ref.outputs, "")

    def replay_seconds(self, repeat: int = 3) -> float:
        """The median time of the traced program, replayed `repeat` times, by this process's
        clock around each replay less the channel's round trip (the replayer's own clock runs
        where the candidate's kernels run). Each replay gets fresh inputs and its outputs are
        checked: a kernel that does its work once and skips it after (a flag kept in a weight)
        leaves the last inputs' answer, or nothing, where this one's must be."""
        trip = None
        plain, every = [], []
        for k in range(repeat):
            args, tensors = self.inputs()
            ref = self.call_reference("B", args, tensors)  # (B: the traced instance, its weights)
            self._replayer(lambda: self._stage(args, tensors))
            if trip is None:
                trip = min(self._replayer(self._ping) for _ in range(3))
            seconds, checked = self._replayer(self._run)
            self._check_replay(self._replayer(self._replayed), ref.outputs,
                               f" (timed replay {k + 1} of {repeat}, fresh inputs)")
            every.append(max(0.0, seconds - trip))
            if not checked:  # (a run that waited for a kernel check is not the kernels' time)
                plain.append(every[-1])
        return float(np.median(plain or every))

    def _replayer(self, step):
        try:
            return step()
        except WorkerDied as exc:
            raise Verdict("RUNTIME_ERROR", f"your kernels crashed when replayed ({exc})") \
                from None

    def _replay_reply(self, reply: dict) -> dict:
        if "refused" in reply:
            raise Verdict("LIBRARY_VIOLATION", f"decoy: {str(reply['refused'])[:400]}")
        if "error" in reply:
            raise Verdict("LIBRARY_VIOLATION", "decoy check: forward's kernel program fails "
                          f"when replayed without your Python ({_first_line(reply['error'])})",
                          str(reply.get("traceback", ""))[-4000:])
        return reply

    def _stage(self, args, tensors) -> None:
        program, constants, kernels = self.program
        self._replay_reply(self.replayer.request(
            {"op": "stage", "program": program, "kernels": kernels, "args": args,
             "constants": len(constants)}, [*constants, *tensors]))

    def _ping(self) -> float:
        t0 = time.perf_counter()
        self.replayer.request({"op": "ping", "nonce": 0})
        return time.perf_counter() - t0

    def _run(self) -> tuple[float, bool]:
        """One replay of the staged program: (seconds by this clock, whether it waited for a
        kernel check)."""
        t0 = time.perf_counter()
        reply, checked = self.replayer.request({"op": "run"}), False
        while "check" in reply:  # a kernel to be checked before its first launch
            checked = True
            reply = self.replayer.request({"op": "checked", **self._check(reply["check"])})
        seconds = time.perf_counter() - t0
        self._replay_reply(reply)
        return seconds, checked

    def _replayed(self) -> list[Tensor]:
        reply = self._replay_reply(self.replayer.request({"op": "outputs"}))
        return [self.replayer.read(t) for t in parse_metas(reply)]

    def _check_replay(self, outs: list[Tensor], want: list[Tensor], which: str) -> None:
        if [t.meta() for t in outs] != [t.meta() for t in want]:
            raise Verdict("LIBRARY_VIOLATION", "decoy: the kernels forward launches give "
                          f"outputs {[t.meta() for t in outs]} when replayed without your "
                          f"Python{which}; the reference's are {[t.meta() for t in want]}")
        for i, (got, ref) in enumerate(zip(outs, want)):
            judge = judge_for(ref.array(), ref.dtype)
            bad, first = mismatches(got.array().reshape(-1), ref.array().reshape(-1), judge)
            if bad:
                raise Verdict("LIBRARY_VIOLATION", "decoy: the kernels forward launches do not "
                              f"compute its answer (replayed without your Python{which}: "
                              + _where(i, ref, first, float(got.array().reshape(-1)[first]),
                                       bad, judge)
                              + "); forward's own answer came from outside them")

    def _check(self, request) -> dict:
        """The verdict on one of the replayer's kernel checks: Triton's front end on a kernel
        of the source the parent read (never one the replayer sends), or {"self": why} where
        the replayer is to check it in a process of its own."""
        if self.check_kernel is None:
            return {"self": "no checker here"}
        if not (isinstance(request, dict) and isinstance(request.get("name"), str)
                and isinstance(request.get("signature"), dict)
                and isinstance(request.get("constexprs"), dict)):
            raise WorkerDied("the replayer asked for a check the parent cannot read")
        return self.check_kernel({k: request[k] for k in ("name", "signature", "constexprs")})

    # ---- timing ----
    def time(self) -> "TimingResult":
        policy = self.config
        ref_s, cand_s = Samples(), Samples()
        same_inputs = self.inputs() if self.kernelbench else None
        for _ in range(max(1, policy.warmup_min)):  # untimed: first-call costs on both sides
            args, tensors = same_inputs or self.inputs()
            ref = self.call_reference("A", args, tensors)
            self._candidate_call(args, tensors, ref.outputs)  # sizes held to the reference's
        started = time.monotonic()
        max_samples = 100 if self.kernelbench else policy.max_samples
        min_samples = 100 if self.kernelbench else policy.min_samples
        rounds = 0
        while True:
            args, tensors = same_inputs or self.inputs()
            if rounds % 2 == 0:
                ref = self.call_reference("A", args, tensors)
                cand = self._candidate_call(args, tensors, ref.outputs)
            else:
                # the candidate first: its output shape is checked against the last round's
                cand = self._candidate_call(args, tensors, ref.outputs)
                ref = self.call_reference("A", args, tensors)
            self._check_timed(cand, ref, rounds + 1)
            for s, c in ((ref_s, ref), (cand_s, cand)):
                s.worker.append(c.worker_seconds)
                s.parent.append(c.parent_seconds)
            rounds += 1
            if rounds >= max_samples:
                break
            if (rounds >= min_samples and not self.kernelbench
                    and median_halfwidth(sorted(cand_s.worker)) <= policy.median_precision):
                break
            if (time.monotonic() - started > policy.max_time and rounds >= 3
                    and not self.kernelbench):
                break
        return cross_check(ref_s, cand_s)

    def _candidate_call(self, args, tensors, like: list[Tensor]) -> Call:
        t0 = time.perf_counter()
        reply = self._cand({"op": "call", "slot": "A", "args": args}, tensors)
        metas = self._candidate_metas(reply, like, 0)
        outs = [self.cand.read(t) for t in metas]
        parent = time.perf_counter() - t0
        return Call(_seconds(reply), parent, outs)

    def _check_timed(self, cand: Call, ref: Call, number: int) -> None:
        for i, (got, want) in enumerate(zip(cand.outputs, ref.outputs)):
            if got.meta() != want.meta():
                raise Verdict("WRONG_ANSWER", f"timed call {number}: output {i} is "
                              f"{got.dtype}{got.shape}, the reference's {want.dtype}{want.shape}")
            bad, first = mismatches(got.array().reshape(-1), want.array().reshape(-1),
                                    self.judges[i])
            if bad:
                raise Verdict("WRONG_ANSWER", f"wrong answer on timed call {number} (fresh "
                              "inputs; every timed output is checked): " + _where(
                                  i, want, first, float(got.array().reshape(-1)[first]), bad,
                                  self.judges[i]))


def available_memory() -> int:
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) * 1024


def check_memory(footprint: dict | None) -> None:
    """Refuse, before anything is allocated, a problem this machine cannot hold: the reference
    worker, the candidate worker and the parent each hold an input set and an output set (the
    parent two outputs during a timed call), plus the bytes in flight."""
    if not footprint:
        return
    need = 3 * footprint["inputs"] + 4 * footprint["outputs"]
    have = available_memory()
    if need > 0.8 * have:
        raise ReferenceFailed(
            f"needs about {need / 2**30:.1f} GiB (inputs {footprint['inputs'] / 2**30:.2f} GiB, "
            f"outputs {footprint['outputs'] / 2**30:.2f} GiB, held by three processes) but "
            f"{have / 2**30:.1f} GiB is available: pass --input-budget to shrink it")


def _first_line(error) -> str:
    return (str(error).splitlines() or ["(no message)"])[0][:300]


def _seconds(reply: dict) -> float:
    s = reply.get("seconds")
    try:  # a forged claim may be any JSON: 10**400 overflows a float
        return float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) else math.nan
    except OverflowError:
        return math.inf


def _where(i: int, want: Tensor, first: int, value: float, bad: int, judge: Judge) -> str:
    ref = want.array().reshape(-1)
    index = [int(k) for k in np.unravel_index(first, want.shape)] if want.shape else []
    return (f"output {i}{index} = {value:.6g} but the reference gives {float(ref[first]):.6g} "
            f"({bad} of {ref.size} elements off; {judge.describe()})")


@dataclass
class TimingResult:
    new: list[float]  # charged per-call seconds of the candidate
    ref: list[float]
    channel_overhead: float  # median parent-seen minus worker-seen seconds, reference calls
    candidate_overhead: float  # the same for the candidate
    parent_new: list[float]
    worker_new: list[float]


def charge_replay(timing: TimingResult, floor: float, flags: list[str]) -> TimingResult:
    """A forward that claims to be faster than the kernels it launches cost when replayed is
    charged their cost: its time came from something else (PyTorch in its own process)."""
    median = float(np.median(timing.new))
    if median > 0 and median < REPLAY_SHARE * floor:
        scale = floor / median
        timing.new = [t * scale for t in timing.new]
        if "charged_replay_time" not in flags:  # (once, over the CPU's replicate sessions)
            flags.append("charged_replay_time")
    return timing


def cross_check(ref: Samples, cand: Samples) -> TimingResult:
    """Hold the candidate's claimed times against the parent's clock (see module docstring)."""
    for w, p in zip(cand.worker, cand.parent):
        if not (math.isfinite(w) and w >= 0):
            raise Verdict("WRONG_ANSWER", f"tampering: the worker reported a call time of {w!r}")
        if w > p + 1e-4:
            raise Verdict("WRONG_ANSWER", f"tampering: the worker reported a call of "
                          f"{w * 1e3:.3f} ms, longer than the {p * 1e3:.3f} ms the parent saw "
                          "for the whole exchange")
    overhead = float(np.median(ref.overhead()))
    cand_overhead = float(np.median(cand.overhead()))
    allowed = (TAMPER_FACTOR * float(np.percentile(ref.overhead(), 75)) + TAMPER_SLACK
               + TAMPER_SHARE * float(np.median(cand.worker)))
    if len(cand.parent) >= TAMPER_MIN_CALLS and \
            float(np.percentile(cand.overhead(), 25)) > allowed:
        raise Verdict("WRONG_ANSWER", f"tampering: the worker's clock says "
                      f"{np.median(cand.worker) * 1e3:.3f} ms per call but the parent saw "
                      f"{np.median(cand.parent) * 1e3:.3f} ms; beyond the channel's own "
                      f"{overhead * 1e3:.3f} ms that is {cand_overhead * 1e3:.3f} ms of work "
                      f"outside the timed region (allowed {allowed * 1e3:.3f} ms)")

    # Work hidden outside the worker's clock is charged where the exchange took longer than
    # nine in ten of the reference's did: honest jitter moves a tenth of the samples (the same
    # on both sides, so the medians stay put), systematic hidden work moves them all.
    usual = float(np.percentile(ref.overhead(), 90))

    def charged(s: Samples) -> list[float]:
        return [w + max(0.0, (p - w) - usual) for w, p in zip(s.worker, s.parent)]
    return TimingResult(charged(cand), charged(ref), overhead, cand_overhead,
                        list(cand.parent), list(cand.worker))


def speedup_lower_bound(ref: list[float], new: list[float], alpha: float = 0.001) -> float:
    """One-sided (1 - alpha) lower confidence bound (99.9%: a busy machine's bursts are not
    quite exchangeable noise) on the median of the paired ratios
    ref_i / new_i (a sign test: distribution-free). 0 when the rounds are too few to bound it,
    so a speedup is called "faster" only when the measurements show it, not the noise."""
    ratios = sorted(r / n for r, n in zip(ref, new) if n > 0)
    k = sign_test_rank(len(ratios), alpha)
    return ratios[k - 1] if k > 0 else 0.0
