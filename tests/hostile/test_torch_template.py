"""Workers forked from the batch's torch template (backends/torch/template.py): a candidate
that leaves a thread, a patched module, a file, an environment variable, a cache entry or a
process behind reaches no later candidate, a candidate cannot reach the template or keep any
privilege of it, a forked worker keeps every limit, and a template that cannot fork leaves the
verdicts as they were."""
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfgym import EvalConfig, Status, get_task, sandbox
from perfgym.backends.torch import template as template_module
from perfgym.backends.torch import warm
from perfgym.executors.local import Request, evaluate_many
from perfgym.tasks.selfcheck import reference_as_candidate

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
needs_fork = pytest.mark.skipif(
    not sandbox.can_fork_workers(),
    reason="workers are forked from a template only where perfgym runs as root with every "
           "isolation layer (own uid, network and /tmp, death with the driver)")

QUICK = EvalConfig(use_cache=False, trials=2, max_time=0.2, max_samples=5, min_samples=3,
                   torch_timeout=60.0, require_custom_kernel=False)
WALL = QUICK.replace(extra={"static_rules": False})  # the attacks meet the sandbox, not a filter

# Everything it can leave behind, at import; its own answer is right (relu without torch.relu).
LEAVER = '''
import os, subprocess, threading, time, torch, torch.nn as nn
for d in ("/tmp", "/dev/shm", "/var/tmp", os.environ["HOME"]):
    try:
        open(os.path.join(d, "perfgym-leak"), "w").write("memo")
    except OSError:
        pass
os.makedirs(os.path.join(os.environ["HOME"], ".triton", "cache"), exist_ok=True)
open(os.path.join(os.environ["HOME"], ".triton", "cache", "perfgym-leak"), "w").write("memo")
torch.relu = lambda x: x * 0          # a patch of the module every worker imports
torch.Tensor.relu = lambda self: self * 0
torch._perfgym_leak = {"memo": 1}     # a memo on it
os.environ["PERFGYM_LEAK"] = "1"
threading.Thread(target=time.sleep, args=(300,), name="perfgym-leaker", daemon=True).start()
subprocess.Popen(["sleep", "299.5"], start_new_session=True)  # a process that left its session
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
'''

# Looks for all of it; answers wrong (zeros) if it finds any.
SEES = '''
import os, threading, torch
def leaked():
    found = [d for d in ("/tmp", "/dev/shm", "/var/tmp", os.environ["HOME"])
             if os.path.exists(os.path.join(d, "perfgym-leak"))]
    if os.path.exists(os.path.join(os.environ["HOME"], ".triton", "cache", "perfgym-leak")):
        found.append("triton cache")
    if hasattr(torch, "_perfgym_leak") or torch.relu(torch.tensor([1.0])).item() != 1.0:
        found.append("torch patched")
    if os.environ.get("PERFGYM_LEAK"):
        found.append("environment")
    if any(t.name == "perfgym-leaker" for t in threading.enumerate()):
        found.append("thread")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read() == b"sleep\\x00299.5\\x00":
                found.append("process")
        except OSError:
            pass
    return found
'''
CHECKER = SEES + '''
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0 if leaked() else torch.clamp_min(x, 0.0)
'''
# The control: the same checks, in the process that left it all, find it (WRONG_ANSWER).
SELF_CHECK = LEAVER + SEES + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0 if leaked() else torch.clamp_min(x, 0.0)
'''

# Tries to reach the template and to keep or regain a privilege; answers wrong if anything
# worked (or a limit is missing), right otherwise.
ATTACKER = '''
import ctypes, os, resource, signal, torch, torch.nn as nn
won = []
parent = os.getppid()
for attempt, call in (("kill the template", lambda: os.kill(parent, signal.SIGKILL)),
                      ("stop the template", lambda: os.kill(parent, signal.SIGSTOP)),
                      ("read its memory", lambda: open(f"/proc/{parent}/mem", "rb").read(1)),
                      ("read its environ", lambda: open(f"/proc/{parent}/environ").read()),
                      ("setuid 0", lambda: os.setuid(0)),
                      ("setgid 0", lambda: os.setgid(0)),
                      ("join its mounts", lambda: os.open(f"/proc/{parent}/ns/mnt", 0)),
                      ("write its workdir", lambda: open(os.path.join(
                          os.readlink(f"/proc/{parent}/cwd"), "perfgym-pwned"), "w"))):
    try:
        call()
        won.append(attempt)
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, parent, 0, 0) == 0:  # PTRACE_ATTACH
    won.append("ptrace the template")
status = open("/proc/self/status").read()
for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
    if int(status.split(f"\\n{field}:", 1)[1].split()[0], 16):
        won.append(field)
if "NoNewPrivs:\\t1" not in status or os.getuid() == 0 or os.getgroups():
    won.append("privileges kept")
for limit in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_NPROC,
              resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE):
    if resource.getrlimit(limit)[1] == resource.RLIM_INFINITY:
        won.append(f"no limit {limit}")
if open("/proc/self/net/dev").read().count(":") > 1:  # only lo: no network of the host's
    won.append("network")
if os.getsid(0) != os.getpid():
    won.append("shares a session")
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0 if won else torch.clamp_min(x, 0.0)
'''

LOUD = ("import sys, torch.nn as nn\nsys.stdout.write('x' * (4 << 20))\nsys.stdout.flush()\n"
        "class ModelNew(nn.Module):\n    def forward(self, x): return x\n")
SLEEPER = ("import time, torch.nn as nn\nclass ModelNew(nn.Module):\n"
           "    def forward(self, x):\n        time.sleep(30)\n        return x\n")


@pytest.fixture
def forks(monkeypatch):
    """(template pid, role) of every worker forked from a template, in order."""
    seen: list[tuple[int, str]] = []
    fork = template_module.Template._fork

    def counted(self, request, fds):
        pid = fork(self, request, fds)
        seen.append((self.pid, request["role"]))
        return pid
    monkeypatch.setattr(template_module.Template, "_fork", counted)
    return seen


def statuses(outs):
    return [o.status for o in outs]


def judged_as_alone():
    """A right and a wrong answer judged in one batch get the verdicts each gets alone."""
    relu = get_task("relu")
    same = reference_as_candidate(relu.source)
    wrong = ("import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n"
             "    def forward(self, x): return torch.relu(x) + 1.0\n")
    outs = evaluate_many([Request(relu, t, config=WALL) for t in (same, wrong)])
    assert statuses(outs) == [Status.OK, Status.WRONG_ANSWER], [o.message for o in outs]


@needs_fork
def test_nothing_a_candidate_leaves_reaches_the_next(forks, sandbox_use):
    relu = get_task("relu")
    outs = evaluate_many([Request(relu, t, config=WALL) for t in (LEAVER, CHECKER, SELF_CHECK)])
    assert statuses(outs) == [Status.OK, Status.OK, Status.WRONG_ANSWER], \
        [o.message for o in outs]
    # all three were forked workers, from one template
    assert [role for _, role in forks].count("candidate") >= 3
    assert len({pid for pid, _ in forks}) == 1
    assert not sandbox_use.processes_left()


@needs_fork
def test_a_candidate_cannot_reach_the_template_or_keep_a_privilege(forks, sandbox_use):
    relu = get_task("relu")
    same = reference_as_candidate(relu.source)
    outs = evaluate_many([Request(relu, t, config=WALL) for t in (ATTACKER, same)])
    assert statuses(outs) == [Status.OK, Status.OK], [o.message for o in outs]
    # the template that forked the attacker forked the next candidate too
    assert len({pid for pid, _ in forks}) == 1 and len(forks) >= 2
    assert not sandbox_use.processes_left()


@needs_fork
def test_a_forked_worker_keeps_the_output_cap_and_the_deadline(forks, sandbox_use):
    relu = get_task("relu")
    same = reference_as_candidate(relu.source)
    config = WALL.replace(torch_timeout=15.0)
    outs = evaluate_many([Request(relu, t, config=config) for t in (LOUD, SLEEPER, same)])
    assert statuses(outs) == [Status.RUNTIME_ERROR, Status.TIMEOUT, Status.OK], \
        [o.message for o in outs]
    assert [role for _, role in forks].count("candidate") >= 3
    assert not sandbox_use.processes_left()


@needs_fork
def test_a_template_that_cannot_fork_leaves_the_verdicts_as_they_were(monkeypatch, forks):
    def refuse(self, request, fds):
        raise template_module.TemplateUnavailable("refused by the test")
    monkeypatch.setattr(template_module.Template, "_fork", refuse)
    monkeypatch.setattr(template_module, "FALLBACKS", template_module.collections.Counter())
    judged_as_alone()
    assert not forks  # every worker started the usual way
    # and each start the usual way is counted, by role: a template that never serves is seen
    roles = {role for role, why in template_module.FALLBACKS if why == "refused by the test"}
    assert {"candidate worker", "problem worker", "reference worker"} <= roles, \
        template_module.FALLBACKS


@needs_fork
def test_the_expert_and_its_kernel_evidence_pass_in_forked_workers(forks):
    """A Triton answer's replayer (forked too) runs Triton's front end on each kernel from
    the worker's own files: the expert is judged as it is in fresh workers."""
    needs_triton()
    relu = get_task("relu")
    config = QUICK.replace(require_custom_kernel=True)
    forked = evaluate_many([Request(relu, relu.expert.read_text(), config=config)])[0]
    assert forked.status is Status.OK, forked.message
    assert {"candidate", "replayer"} <= {role for _, role in forks}


def test_where_workers_cannot_be_forked_no_template_starts_and_workers_start_as_before(
        monkeypatch, forks):
    """A host without every isolation layer (not root, or no namespaces) never forks: the
    pool gives no template, and a batch's verdicts come from workers started the usual way."""
    monkeypatch.setattr(sandbox, "can_fork_workers", lambda: False)
    with warm.batch() as pool:
        assert pool.template({"OMP_NUM_THREADS": "1"}, None) is None
    judged_as_alone()
    assert not forks


# ---- kernel checks forked from a "checks" template (Triton's front end imported once) ----

ESCAPE = (Path(__file__).parent / "gpu" / "kernel_escape_import.py").read_text()


@pytest.fixture
def front_end_only(monkeypatch):
    """The parent's kernel-language check (triton_language.py) off, so that the escape reaches
    the front-end checks behind it, which must refuse it on their own."""
    from perfgym.backends.torch import triton_language
    monkeypatch.setattr(triton_language, "check_file", lambda tree: None)


@pytest.fixture
def checks(monkeypatch):
    """The verdict of every kernel check the parent asked a "checks" template for."""
    seen: list[dict] = []
    check = template_module.Template.check_kernel

    def recorded(self, kernels, request, env):
        verdict = check(self, kernels, request, env)
        seen.append(verdict)
        return verdict
    monkeypatch.setattr(template_module.Template, "check_kernel", recorded)
    return seen


def needs_triton():
    pytest.importorskip("triton", reason="the gpu extra is not installed: "
                                         "pip install 'perfgym[gpu]'")


@needs_fork
def test_forked_kernel_checks_pass_the_expert_and_refuse_a_kernel_that_escapes(
        checks, forks, front_end_only):
    """The escape reaches NumPy from a kernel body through __import__, which the interpreter
    would run; the forked checker's front end refuses it as a fresh checker process does."""
    needs_triton()
    relu = get_task("relu")
    config = QUICK.replace(require_custom_kernel=True)
    outs = evaluate_many([Request(relu, relu.expert.read_text(), config=config),
                          Request(relu, ESCAPE, config=config.replace(
                              extra={"static_rules": False}))])
    assert outs[0].status is Status.OK, outs[0].message
    assert outs[1].status is Status.LIBRARY_VIOLATION and "Triton language" in outs[1].message, \
        outs[1].message
    assert {"ok": True} in checks and any("refused" in v for v in checks), checks
    assert "check" in {role for _, role in forks}


@needs_fork
def test_where_the_checker_gives_no_verdict_the_replayer_checks_alone(monkeypatch, forks,
                                                                       front_end_only):
    needs_triton()
    monkeypatch.setattr(template_module.Template, "check_kernel",
                        lambda self, kernels, request, env: {"self": "refused by the test"})
    relu = get_task("relu")
    config = QUICK.replace(require_custom_kernel=True)
    outs = evaluate_many([Request(relu, relu.expert.read_text(), config=config),
                          Request(relu, ESCAPE, config=config.replace(
                              extra={"static_rules": False}))])
    assert statuses(outs) == [Status.OK, Status.LIBRARY_VIOLATION], [o.message for o in outs]
    assert "Triton language" in outs[1].message


@needs_fork
def test_a_checker_fails_closed(sandbox_use, front_end_only):
    """A check that cannot run (a request without a signature, kernels that end the checker
    with status 0 as they import) is never a pass."""
    needs_triton()
    from perfgym.backends.torch.kernel_source import kernel_module
    from perfgym.backends.torch.protocol import worker_env
    from perfgym.sandbox_python import sandbox_python
    relu = get_task("relu")
    kernels = kernel_module(relu.expert.read_text())
    py = sandbox_python()
    env = {**worker_env(QUICK, Path("/"), "cpu", py), "TRITON_INTERPRET": "0"}
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    good = {"name": "relu_kernel", "signature": signature, "constexprs": {"BLOCK": 1024}}
    escape = kernel_module(ESCAPE)
    with warm.batch() as pool:
        checker = pool.template(env, py, kind="checks")
        assert checker is not None
        for kernels_given, request in ((kernels, {"name": "relu_kernel"}),
                                       ("raise SystemExit(0)\n", good)):
            verdict = checker.check_kernel(kernels_given, request, env)
            assert "ok" not in verdict and verdict, verdict
        assert checker.check_kernel(kernels, good, env) == {"ok": True}
        refused = checker.check_kernel(escape, {**good, "name": "relu_kernel"}, env)
        assert "refused" in refused, refused
    assert not sandbox_use.processes_left()


def test_the_parent_checks_only_a_kernel_of_the_source_it_read():
    """The replayer names a kernel and its argument types; the source is the parent's own, and
    a request it cannot read ends the session as a dead worker's would."""
    from perfgym.backends.torch.channel import WorkerDied
    from perfgym.backends.torch.session import Session
    asked = []
    parent = SimpleNamespace(check_kernel=lambda request: asked.append(request) or {"ok": True})
    request = {"name": "k", "signature": {"x": "*fp32"}, "constexprs": {},
               "kernels": "import os", "source": "import os"}
    assert Session._check(parent, request) == {"ok": True}
    assert asked == [{"name": "k", "signature": {"x": "*fp32"}, "constexprs": {}}]
    for forged in ([1], {"name": 1, "signature": {}, "constexprs": {}}, {"name": "k"}):
        with pytest.raises(WorkerDied):
            Session._check(parent, forged)
    assert Session._check(SimpleNamespace(check_kernel=None), request) == \
        {"self": "no checker here"}
