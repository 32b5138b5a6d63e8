"""The C/OpenMP backend: build the candidate, audit it, link it with our harness, run it.

Builds and runs happen in a throwaway directory through the sandbox. The harness objects are
compiled once per (task signature, compiler) and reused.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from ... import sandbox
from ...checks.audit import ObjectFacts, audit_object, audit_preprocessed, inspect_object
from ...config import EvalConfig
from ...errors import HostError
from ...paths import cache_dir
from ...tasks import Task, TaskError, load_python_attr
from ...tasks.signature import C_TYPES, Signature

DIAGNOSTIC_LINES = 12  # compiler diagnostics kept for feedback prompts


class ToolchainError(HostError):
    """The host cannot build kernels (missing compiler); a user can fix it."""


@lru_cache(maxsize=None)
def compiler_version(compiler: str) -> str:
    path = shutil.which(compiler)
    if path is None:
        raise ToolchainError(f"compiler {compiler!r} not found: install it (apt-get install "
                             f"{'gcc' if compiler == 'gcc' else compiler}) or pass --cc")
    out = subprocess.run([path, "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0].strip() if out.stdout else compiler


EXCEPTION_ESCAPED = "the kernel threw an exception out of its entry"


@dataclass(frozen=True)
class Language:
    """How one source language is built: the compiler driver for a --cc choice, the -std flag,
    gcc's -x names and the shim that calls the entry from the C harness."""

    name: str  # gcc's -x name: "c" or "c++"
    std: str
    preprocessed: str  # gcc's -x name for the preprocessed source
    shim_file: str
    drivers: tuple[tuple[str, str], ...]  # (a --cc spelling, the driver for this language)

    def compiler(self, chosen: str) -> str:
        """The driver for this language given --cc (gcc for C++ means g++, g++-12 for C means
        gcc-12): one flag picks the toolchain whichever language the task is in."""
        directory, _, name = chosen.rpartition("/")
        base, _, suffix = name.partition("-")
        for spelling, driver in self.drivers:
            if base == spelling:
                return (f"{directory}/" if directory else "") + driver + \
                    (f"-{suffix}" if suffix else "")
        return chosen

    def flags(self, config: EvalConfig) -> list[str]:
        return [*config.build_flags(), self.std]


C = Language("c", "-std=gnu11", "cpp-output", "shim.c",
             (("gcc", "gcc"), ("g++", "gcc"), ("cc", "gcc"), ("clang", "clang"),
              ("clang++", "clang")))
CPP = Language("c++", "-std=gnu++17", "c++-cpp-output", "shim.cpp",
               (("gcc", "g++"), ("g++", "g++"), ("cc", "g++"), ("c++", "g++"),
                ("clang", "clang++"), ("clang++", "clang++")))


VECTOR_RESIZED = "the kernel changed the length of a std::vector it was given"


def struct_definitions(structs: dict, lang: Language) -> str:
    """The task's structs as the kernel must define them too (same names, fields, order)."""
    out = []
    for name, fields in structs.items():
        body = " ".join(f"{ctype} {field};" for field, ctype in fields)
        out.append(f"typedef struct {name} {{ {body} }} {name};" if lang is C else
                   f"struct {name} {{ {body} }};")
    return "".join(line + "\n" for line in out)


# A const& std::vector input is a view of the harness's own array (no copy: a copy of a large
# input per call costs more than a memory-bound kernel, and its jitter, which the parent's clock
# sees, would pass for hidden work). The view is three pointers laid as libstdc++ lays a vector;
# the shim checks that layout at run time and copies when it differs. The view is never
# destroyed, and the harness's guard pages and input checks see through it.
_VECTOR_VIEW = """
template <class T> static bool pg_is_three_pointers() {
    std::vector<T> probe(3);
    probe.reserve(5);
    T *const *p = reinterpret_cast<T *const *>(&probe);
    return sizeof probe == 3 * sizeof(T *) && p[0] == probe.data() && p[1] == p[0] + 3 &&
           p[2] == p[0] + probe.capacity();
}
template <class T> struct pg_view {
    alignas(std::vector<T>) unsigned char raw[sizeof(std::vector<T>)];
    T **ptrs() { return reinterpret_cast<T **>(raw); }
    void set(void *data, long long n) {
        T **p = ptrs();
        p[0] = static_cast<T *>(data); p[1] = p[0] + n; p[2] = p[1];
    }
    bool intact(void *data, long long n) {
        T **p = ptrs();
        return p[0] == data && p[1] == p[0] + n && p[2] == p[1];
    }
    const std::vector<T> &get() { return *reinterpret_cast<const std::vector<T> *>(raw); }
};
"""


def _vector_param(p, a: int) -> tuple[list[str], str, list[str]]:
    """(declarations, the argument, what pg_after checks or copies) of vector parameter `p`
    in harness slot `a`. pg_in{a} fills it before a call."""
    resized = f'{{ fputs("{VECTOR_RESIZED}\\n", stderr); abort(); }}'
    if p.const and not p.extent and p.ctype != "bool":  # a view (vector<bool> is packed bits)
        t = p.ctype
        return ([f"static pg_view<{t}> pg_w{a};", f"static std::vector<{t}> pg_v{a};",
                 f"static const bool pg_alias{a} = pg_is_three_pointers<{t}>();",
                 f"static void pg_in{a}(void **arrays, const long long *counts) {{ "
                 f"if (pg_alias{a}) pg_w{a}.set(arrays[{a}], counts[{a}]); else {{ "
                 f"const {t} *p = (const {t} *)arrays[{a}]; pg_v{a}.assign(p, p + counts[{a}]); }} }}"],
                f"(pg_alias{a} ? pg_w{a}.get() : pg_v{a})",
                [f"    if (pg_alias{a} ? !pg_w{a}.intact(arrays[{a}], counts[{a}]) : "
                 f"pg_v{a}.size() != (size_t)counts[{a}]) {resized}",
                 f"    if (!pg_alias{a}) std::copy(pg_v{a}.begin(), pg_v{a}.end(), "
                 f"({t} *)arrays[{a}]);"])
    v = f"pg_v{a}"
    # bool through bytes: a poisoned output (bytes of 0x80-0xFF) reads as true, never as UB
    elem = "unsigned char" if p.ctype == "bool" else p.ctype
    fill = (f"std::copy(p, p + {p.extent}, {v}.begin());" if p.extent else
            f"{v}.assign(p, p + counts[{a}]);")
    after = [] if p.extent else [f"    if ({v}.size() != (size_t)counts[{a}]) {resized}"]
    return ([f"static {p.container} {v};",
             f"static void pg_in{a}(void **arrays, const long long *counts) {{ "
             f"(void)counts; const {elem} *p = (const {elem} *)arrays[{a}]; {fill} }}"],
            v, after + [f"    std::copy({v}.begin(), {v}.end(), ({p.ctype} *)arrays[{a}]);"])


def shim_source(signature: Signature, lang: Language = C, structs: dict | None = None) -> str:
    """Source that casts the harness's generic arrays and sizes to the entry's parameters. For
    C++ the entry has C++ or C linkage (_cpp_entry_declarations), and an exception escaping it
    ends the run with a message
    (it must not unwind into the C harness). A std::vector parameter is filled by pg_before
    and copied back by pg_after, both outside the timed region: an output or in-place vector
    is a static vector (copied back, its length checked), a const& input a view of the
    harness's array (_VECTOR_VIEW)."""
    args, a, s = [], 0, 0
    before, after, fills = [], [], []
    for p in signature.params:
        if p.vector:
            decls, arg, checks = _vector_param(p, a)
            before += decls
            after += checks
            args.append(arg)
            fills.append(f"    pg_in{a}(arrays, counts);\n")
            a += 1
        elif p.pointer:
            args.append(f"({'const ' if p.const else ''}{p.ctype} *)arrays[{a}]")
            a += 1
        elif p.ctype in ("double", "float"):  # a floating scalar travels as its bits
            args.append(f"({p.ctype})pg_double(sizes[{s}])")
            s += 1
        else:
            args.append(f"({p.ctype})sizes[{s}]")
            s += 1

    def invoke(function: str) -> str:
        call = f"{function}({', '.join(args)});"
        # a value goes to the one-element output after the arrays
        return call if signature.ret == "void" else f"*({signature.ret} *)arrays[{a}] = {call}"
    bits = ("#include <string.h>\n"
            "static double pg_double(long long b) { double d; memcpy(&d, &b, 8); return d; }\n")
    types = struct_definitions(structs or {}, lang)
    if lang is C:
        return ("#include <stdbool.h>\n#include <stdint.h>\n#include <stddef.h>\n" + bits +
                types + f"{signature.c_decl()};\n"
                "void pg_call(void **arrays, const long long *sizes) {\n"
                f"    {invoke(signature.name)}\n}}\n"
                "void pg_before(void **arrays, const long long *counts) "
                "{ (void)arrays; (void)counts; }\n"
                "void pg_after(void **arrays, const long long *counts) "
                "{ (void)arrays; (void)counts; }\n")
    return ("#include <algorithm>\n#include <array>\n#include <complex>\n#include <vector>\n"
            "#include <stdint.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
            + bits + types +
            _VECTOR_VIEW + "".join(line + "\n" for line in before) +
            _cpp_entry_declarations(signature) +
            'extern "C" void pg_call(void **arrays, const long long *sizes) {\n'
            f"    try {{ if (::{signature.name}) {{ {invoke('::' + signature.name)} }}\n"
            f"          else {{ {invoke(C_ENTRY_NAMESPACE + '::' + signature.name)} }}\n"
            "    } catch (...) {\n"
            f'        fputs("{EXCEPTION_ESCAPED}\\n", stderr);\n'
            "        abort();\n    }\n}\n"
            'extern "C" void pg_before(void **arrays, const long long *counts) {\n'
            "    (void)arrays; (void)counts;\n" + "".join(fills) + "}\n"
            'extern "C" void pg_after(void **arrays, const long long *counts) {\n'
            "    (void)arrays; (void)counts;\n" + "".join(ln + "\n" for ln in after) + "}\n")


# The C++ shim's namespace for an entry the kernel defines with C linkage (extern "C")
C_ENTRY_NAMESPACE = "pg_c"


def _cpp_entry_declarations(signature: Signature) -> str:
    """A C++ kernel may give its entry C++ linkage (the mangled name) or C linkage (extern "C",
    the plain name): the shim declares both, weak, and calls the one the kernel defined (the
    audit lets the object define exactly one). Hidden visibility: the one left undefined
    resolves to 0 at link time, never to a shared library's symbol of that name at load."""
    params = ", ".join(p.decl() for p in signature.params)
    attrs = '__attribute__((weak, visibility("hidden")))'
    return (f"{signature.c_decl()} {attrs};\n"
            f'namespace {C_ENTRY_NAMESPACE} {{ extern "C" {attrs} '
            f"{signature.ret} {signature.name}({params}); }}\n")


@lru_cache(maxsize=1)
def _harness_source() -> str:
    return resources.files("perfgym.harness").joinpath("harness.c").read_text()


def harness_objects(task: Task, config: EvalConfig, lang: Language = C) -> list[Path]:
    """harness.o (always C) and shim.o (in the kernel's language) for this task's signature,
    built once and cached."""
    c_compiler, compiler = C.compiler(config.compiler), lang.compiler(config.compiler)
    sources = {"harness.c": (_harness_source(), c_compiler),
               lang.shim_file: (shim_source(task.signature, lang, task.structs), compiler)}
    key = hashlib.sha256("".join(text + compiler_version(cc)
                                 for text, cc in sources.values()).encode())
    out = cache_dir() / "harness" / key.hexdigest()[:16]
    objs = [out / "harness.o", out / "shim.o"]
    if all(o.is_file() for o in objs):
        return objs
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all(o.is_file() for o in objs):
            builds = {}  # both at once: a fresh node's first evaluation waits for them
            for name, (text, cc) in sources.items():
                (out / name).write_text(text)
                obj = name.split(".")[0] + ".o"
                builds[obj] = subprocess.Popen([cc, "-O2", "-fopenmp", "-c", name, "-o",
                                                f"{obj}.tmp"], cwd=out, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)
            errors = {obj: r.communicate()[1] for obj, r in builds.items()}
            for obj, r in builds.items():
                if r.returncode != 0:
                    raise ToolchainError(f"cannot build the perfgym harness: "
                                         f"{errors[obj][:500]}")
                (out / f"{obj}.tmp").rename(out / obj)
    return objs


@dataclass
class Build:
    ok: bool
    workdir: Path
    message: str = ""
    details: str = ""
    facts: ObjectFacts | None = None
    violation: str | None = None  # set when the object audit failed
    seconds: float = 0.0


_TARGET_MISMATCH = re.compile(r"target specific option mismatch|needs isa option|"
                              r"requires (?:ISA|target) |Illegal instruction", re.I)


def build(task: Task, code: str, config: EvalConfig, workdir: Path,
          lang: Language = C) -> Build:
    """Compile the candidate alone and link it with the harness (one sandboxed step: linking
    runs none of its code), then audit the object. Only an audited object is ever run."""
    (workdir / "candidate.c").write_text(code)  # the name the audit knows; -x says the language
    objs = harness_objects(task, config, lang)
    for obj in objs:
        shutil.copy(obj, workdir / obj.name)
    compiler = lang.compiler(config.compiler)
    cc = shutil.which(compiler) or compiler
    # Preprocess first: the audit reads the .i, where token pasting can no longer hide a name.
    # -dI echoes each #include gcc really followed, so the audit can tell its line markers from
    # ones the kernel wrote; the echoes are blanked out of the copy that is compiled.
    flag_list = lang.flags(config)
    flags = " ".join(flag_list)
    # The marker tells the parent the .i is written: it audits it while gcc compiles.
    compile_cmd = (f"{cc} {flags} -x {lang.name} -E -dI candidate.c -o candidate.i && "
                   f"echo {_PREPROCESSED} && "
                   "sed -e '/^#include/s/.*//' -e '/^#import/s/.*//' candidate.i > compiled.i && "
                   f"{cc} {flags} {report_flags(cc, config)} -x {lang.preprocessed} "
                   "-c compiled.i -o candidate.o")
    # Full RELRO: the GOT is read-only before the kernel runs, so it cannot hook the harness's
    # clock_gettime or the write() that announces its calls to the parent. The driver of the
    # kernel's language links (g++ brings the C++ runtime).
    link_cmd = f"{cc} -fopenmp -Wl,-z,relro,-z,now harness.o shim.o candidate.o -o run -lm"
    script = f"{compile_cmd} || exit {_COMPILE_FAILED}; {link_cmd} || exit {_LINK_FAILED}"
    limits = sandbox.Limits(wall_seconds=config.compile_timeout, cpu_seconds=120,
                            address_space=8 << 30, processes=64, file_size=512 << 20)
    audit = _PreprocessedAudit(workdir / "candidate.i", cc, flag_list)
    try:
        result = sandbox.run(["sh", "-c", script], workdir, limits, on_marker=audit.on_marker)
    finally:
        audit.stop()  # (on every path: the thread ends)
    seconds = result.wall
    diag = _first_diagnostics(result.stderr + result.stdout)
    if result.timed_out:
        return Build(False, workdir, f"the compiler did not finish within "
                     f"{config.compile_timeout:.0f} s", diag, seconds=seconds)
    if not result.ok and result.returncode != _LINK_FAILED:
        if _TARGET_MISMATCH.search(diag):
            msg = (f"uses instructions the target CPU (-march={config.march}) does not have; "
                   f"{isa_hint(config)}")
        else:
            first = next((ln for ln in diag.splitlines() if "error" in ln), diag.split("\n")[0])
            msg = "compile error: " + first
        return Build(False, workdir, msg, diag, seconds=seconds)

    facts = inspect_object(workdir / "candidate.o")
    entry = (_entry_symbol(facts, task.signature.name, objs[-1]) if lang is CPP
             else task.signature.name)
    violation = audit.verdict() or audit_object(facts, entry, cpp=lang is CPP)
    if violation:
        return Build(False, workdir, violation, facts=facts, violation=violation, seconds=seconds)
    if not result.ok:  # a link error of an object that passed the audit
        return Build(False, workdir, "link error: " + diag.split("\n")[0], diag, facts=facts,
                     seconds=seconds)
    return Build(True, workdir, facts=facts, seconds=seconds)


_COMPILE_FAILED, _LINK_FAILED = 101, 102
_PREPROCESSED = "@preprocessed"  # the build's marker line: candidate.i is complete


class _PreprocessedAudit:
    """audit_preprocessed of the build's .i in a thread of its own, started when the build's
    marker says gcc -E is done, so it runs while gcc compiles (it was 26% of an evaluation of a
    kernel that includes immintrin.h, read after the compile). `verdict()` takes its result
    only if the file still holds the text it audited, else audits the file as it is now: an
    early or forged marker costs time, never a check."""

    def __init__(self, path: Path, cc: str, flags: list[str]) -> None:
        self.path, self.cc, self.flags = path, cc, flags
        self.go, self.done = threading.Event(), threading.Event()
        self.audited: tuple[str, str | None] | None = None  # (text, its verdict)
        self.cancelled = False
        self.error: BaseException | None = None
        # started here, not from on_marker: the thread that reads markers runs at real-time
        # priority, which a thread it started would inherit
        threading.Thread(target=self._run, daemon=True, name="perfgym-audit").start()

    def on_marker(self, line: str) -> None:
        if line == _PREPROCESSED:
            self.go.set()

    def stop(self) -> None:
        """The build is over: a thread still waiting has nothing to audit (no marker: gcc -E
        failed) and ends; verdict() then audits the file itself."""
        if not self.go.is_set():
            self.cancelled = True
        self.go.set()

    def _run(self) -> None:
        self.go.wait()
        if self.cancelled:
            self.done.set()
            return
        try:
            text = self.path.read_text(errors="replace")
            self.audited = (text, audit_preprocessed(text, self.cc, self.flags))
        except FileNotFoundError:  # the build failed before gcc -E wrote it
            pass
        except BaseException as exc:  # raised in the build's thread by verdict()
            self.error = exc
        finally:
            self.done.set()

    def verdict(self) -> str | None:
        self.done.wait()
        if self.error is not None:
            raise self.error
        text = self.path.read_text(errors="replace")
        if self.audited is not None and self.audited[0] == text:
            return self.audited[1]
        return audit_preprocessed(text, self.cc, self.flags)


def report_flags(cc: str, config: EvalConfig) -> str:
    """gcc's vectorization report, written to candidate.vec beside the object when the
    vectorization profile is asked for (perfgym.profiling.vectorization reads it). The flags
    change no code gcc emits."""
    if "vectorization" not in config.profile or "clang" in Path(cc).name:
        return ""
    return "-fopt-info-vec-optimized-missed=candidate.vec"


def _entry_symbol(facts: ObjectFacts, name: str, shim: Path) -> str:
    """The symbol a C++ kernel's entry must be: the mangled name the shim calls
    (_Z<length><name><parameters>), or the plain name when the kernel defines its entry
    extern "C" (the shim calls either)."""
    defined = {d.rsplit(":", 1)[0] for d in facts.defined_globals}
    mangled = _shim_entry(shim, name)
    return name if name in defined and mangled not in defined else mangled


@lru_cache(maxsize=64)
def _shim_entry(shim: Path, name: str) -> str:
    """The mangled name under which the shim calls the entry with C++ linkage (from the
    shim's object, cached by its content-keyed path: the compiler's mangling, not ours)."""
    prefix = f"_Z{len(name)}{name}"
    return next((u for u in sorted(inspect_object(shim).undefined) if u.startswith(prefix)),
                prefix)


def isa_hint(config: EvalConfig) -> str:
    from ...cpuinfo import isa_flags
    flags = isa_flags()
    vec = [f for f in ("avx512f", "avx2", "avx", "asimd", "sve") if f in flags]
    if config.march != "native":
        return (f"kernels here are built for -march={config.march}; use only instructions it "
                "has (plain C auto-vectorizes)")
    return f"this CPU has {', '.join(vec) or 'no vector extensions'}; use only those"


def _first_diagnostics(text: str) -> str:
    lines = [_strip_path(ln) for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[:DIAGNOSTIC_LINES])


def _strip_path(line: str) -> str:
    return re.sub(r"/\S*/(candidate\.[co])", r"\1", line)


# ---- running ------------------------------------------------------------------------------


@dataclass
class InputSets:
    """The two input sets of one evaluation: name -> array for every input array. (Only the
    first for a run that stops after the check call: write_manifest names no file for the
    second, and a harness asked for the whole protocol on it fails to read its inputs.)"""

    sets: list[dict[str, np.ndarray]]


def make_inputs(task: Task, size: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One input set: from the task's generator when it has one, else uniform in [low, high)."""
    if task.generator:
        arrays = load_python_attr(str(task.directory / task.generator), "make_inputs")(rng, **size)
        for a in task.arrays.values():
            if a.role == "out":
                continue
            got = arrays.get(a.name)
            want = task.shape(a.name, size)
            if got is None or got.shape != want or got.dtype != a.numpy:
                raise TaskError(f"{task.directory / task.generator}: make_inputs must return "
                                f"{a.name} as {a.dtype} {want}, got "
                                f"{None if got is None else (got.dtype, got.shape)}")
        return {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    arrays = {}
    for a in task.arrays.values():
        if a.role == "out":
            continue
        shape = task.shape(a.name, size)
        low, high = task.bounds(a.name, size)
        if a.dtype.startswith("float"):
            arrays[a.name] = rng.uniform(low, high, size=shape).astype(a.dtype, copy=False)
        elif a.dtype.startswith("complex"):
            arrays[a.name] = (rng.uniform(low, high, size=shape) +
                              1j * rng.uniform(low, high, size=shape)).astype(a.dtype)
        elif a.dtype == "bool":
            arrays[a.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif a.fields:  # each field drawn as an array of its type would be
            arrays[a.name] = np.zeros(shape, a.numpy)
            for field, ctype in a.fields:
                kind = np.dtype(C_TYPES[ctype])
                arrays[a.name][field] = (rng.uniform(low, high, size=shape) if kind.kind == "f"
                                         else rng.integers(0, 2, size=shape) if kind.kind == "b"
                                         else rng.integers(int(low), int(high), size=shape))
        else:
            arrays[a.name] = rng.integers(int(low), int(high), size=shape).astype(a.dtype)
    return arrays


def pointer_order(task: Task) -> list[str]:
    """The harness's arrays: the entry's pointer parameters, then the return value's slot."""
    return [p.name for p in task.signature.params if p.array] + \
        ([task.returns] if task.returns else [])


def size_order(task: Task) -> list[str]:
    return [p.name for p in task.signature.params if not p.array]


# Flops a call does per input element, from which two secret timed calls (the probes) get
# inputs drawn anew. Between other calls one element of each input changes; a kernel that keeps
# its last inputs and answer can find that element in one pass over the inputs and correct its
# answer for it, exactly: in a matrix product ~1/N of the work, right every call (the hostile
# `tests/hostile/reuse/`: 31x naive on dgemm, 15x on pdist). On the probes it must do the whole
# work, and measure.reuse_problem compares their times with the others'. Fresh inputs for every
# call would cost a pass over the inputs between calls, as much as a fast kernel's call at
# these intensities; below this one (dot, dgemv, transpose, a stencil's few flops) such a
# kernel's pass over the inputs already costs what the call does.
FRESH_INTENSITY = 16


def fresh_inputs(task: Task, size: dict[str, int]) -> bool:
    """Whether the probe calls at `size` get inputs drawn anew (FRESH_INTENSITY)."""
    elements = sum(int(np.prod(task.shape(name, size))) for name in pointer_order(task)
                   if task.arrays[name].role != "out" and task.arrays[name].perturb == "element")
    return elements > 0 and task.flop_count(size) >= FRESH_INTENSITY * elements


# Late checks (harness.c's late_keep): the answers of a uniform sample of LATE_K of the timed
# calls past the chosen one and the probes are written out as they are made (at most
# LATE_BYTES a run), and the parent checks them. They pay where a stale answer (a copy of the
# last call's outputs) costs far less than the call: the inputs are LATE_INTENSITY times the
# outputs or more, or the call does LATE_INTENSITY flops an output byte (dgemv, dgemm, dot, a
# histogram). Where a call does little more than write its outputs (a scan, a transpose, a
# stencil) a stale copy saves little, and writing answers out costs what a call does:
# prefix_sum's 32 MB, beside a hog, tipped an honest run's CPU witness into "tampering".
LATE_K = 4
LATE_BYTES = 256 << 20
LATE_INTENSITY = 4


def late_checks(task: Task, size: dict[str, int]) -> bool:
    """Whether the harness keeps late calls' answers at `size` (LATE_INTENSITY)."""
    given = task.array_bytes(size, [n for n in pointer_order(task)
                                    if task.arrays[n].role != "out"])
    written = task.array_bytes(size, task.outputs)
    return written > 0 and (given >= LATE_INTENSITY * written
                            or task.flop_count(size) >= LATE_INTENSITY * written)


def perturbation(task: Task, size: dict[str, int], name: str, fresh: bool
                 ) -> tuple[int, float, float]:
    """How the harness changes array `name` before each call (the manifest's mode, low and
    high; the parent repeats it: replay.py): 0 not at all, 1 one element, 2 one diagonal
    element, 3 one element, and every element drawn again before a probe call (`fresh`)."""
    spec = task.arrays[name]
    perturb = {"none": 0, "element": 1, "diagonal": 2}[spec.perturb]
    if perturb == 1 and fresh:
        perturb = 3  # every element drawn again before a probe call: see fresh_inputs
    low, high = task.bounds(name, size)
    if spec.numpy.kind == "b":  # perturbed to 0 or 1, never to a byte that is no bool
        low, high = 0, 2
    return perturb, low, high


def write_manifest(task: Task, size: dict[str, int], inputs: InputSets, config: EvalConfig,
                   workdir: Path, harness_seed: int) -> None:
    lines = [f"seed {harness_seed}",
             f"warmup {config.warmup_min} {config.warmup_time}",
             f"samples {config.min_samples} {config.max_samples} {config.max_time} "
             f"{config.median_precision}",
             f"late {LATE_K if late_checks(task, size) else 0} {LATE_BYTES}"]
    names = size_order(task)
    values = [size[n] if n not in task.scalars else  # a double's bits, for the shim
              int(np.float64(task.scalars[n]).view(np.int64)) for n in names]
    lines.append(f"sizes {len(names)} " + " ".join(str(v) for v in values))
    order = pointer_order(task)
    lines.append(f"arrays {len(order)}")
    fresh = fresh_inputs(task, size)
    for i, name in enumerate(order):
        spec = task.arrays[name]
        dtype = spec.numpy
        count = int(np.prod(task.shape(name, size)))
        # a set not made reads as /dev/null: no kernel can create it, and its 0 bytes fail
        files = ["/dev/null", "/dev/null"]
        for s, data in enumerate(inputs.sets):
            files[s] = f"in{s + 1}_{i}.bin"
            if spec.role != "out":
                data[name].tofile(workdir / files[s])
        perturb, low, high = perturbation(task, size, name, fresh)
        # 0 input, 1 output poisoned before each call (NaN; random bytes for integers), 2 output
        # zeroed before each call, 3 in place (restored to its input before each call)
        kind = {"in": 0, "inout": 3}.get(spec.role, 2 if spec.init == "zero" else 1)
        lines.append(f"array {kind} {'fc'.find(dtype.kind) + 1} "
                     f"{perturb} {dtype.itemsize} {count} 64 {low!r} {high!r} "
                     f"{files[0]} {files[1]}")
    (workdir / "manifest.txt").write_text("\n".join(lines) + "\n")


# The harness's own work on the arrays, outside the kernel's calls (inputs read, outputs,
# snapshots and late answers written, fresh memory touched first), in seconds per byte of the
# task's arrays: on top of --timeout, so a kernel is not timed out by the bookkeeping around
# it. The naive transpose at 4096 x 4096 (256 MB of arrays) spent 6 s of an 8 s run outside
# its calls on a 2-core AMD EPYC VM, where the first touch of fresh memory ran at 113-370 MB/s,
# and timed out in a CI run; this allows about twice that.
HARNESS_SECONDS_PER_BYTE = 50e-9


def harness_allowance(task: Task, size: dict[str, int]) -> float:
    """Seconds of the harness's own work a run is allowed beyond --timeout."""
    return HARNESS_SECONDS_PER_BYTE * task.total_bytes(size)


def run_limits(task: Task, size: dict[str, int], config: EvalConfig) -> sandbox.Limits:
    total = task.total_bytes(size)
    own = harness_allowance(task, size)
    return sandbox.Limits(
        wall_seconds=config.timeout + own,
        cpu_seconds=int(config.timeout * config.n_threads + own) + 5,
        address_space=max(4 << 30, 10 * total + (1 << 30) + config.n_threads * (64 << 20)),
        file_size=max(64 << 20, 2 * total),
        processes=max(64, 4 * config.n_threads),
        # the harness's progress markers ("@t 17\n" per timed call, a few more) on top of the cap
        output_bytes=(64 << 10) + 24 * (config.max_samples + 16))


def run_env(config: EvalConfig) -> dict[str, str]:
    return {"OMP_NUM_THREADS": str(config.n_threads), "OMP_PROC_BIND": "close",
            "OMP_PLACES": "cores", "OMP_DYNAMIC": "false", "OMP_STACKSIZE": "8M"}


def run(task: Task, size: dict[str, int], config: EvalConfig, workdir: Path,
        check_only: bool = False, go_fd: int | None = None, wait_seconds: float = 0.0,
        on_start=None, on_marker=None) -> sandbox.RunResult:
    """The harness in the sandbox: the whole protocol, or with `check_only` one call on the
    first input set (its outputs in out1_*.bin). With `go_fd` (a pipe's read end) it loads,
    says "@r 0" and waits for the word on it before the protocol (prestart.PrestartedRun); its
    wall limit grows by `wait_seconds` for the wait."""
    argv = ["./run", "manifest.txt"] + (["check"] if check_only else
                                         ["go", str(go_fd)] if go_fd is not None else [])
    limits = run_limits(task, size, config)
    if wait_seconds:
        limits = dataclasses.replace(limits, wall_seconds=limits.wall_seconds + wait_seconds)
    return sandbox.run(argv, workdir, limits, env=run_env(config),
                       pass_fds=() if go_fd is None else (go_fd,), on_start=on_start,
                       on_marker=on_marker)
