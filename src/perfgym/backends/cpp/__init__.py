"""The C++ backend: the C backend's pipeline (source rules, stage detectors, object audit,
harness, check call, timed run, verification) with g++/clang++, C++17, the standard headers
of containers, algorithms and numerics, and a shim that calls the entry with C++ linkage and
stops an exception at its boundary."""
from __future__ import annotations

from ...checks.source import CPP_HEADERS
from ..c import CBackend
from ..c import build as cbuild


class CppBackend(CBackend):
    language = "cpp"
    label = "C++/OpenMP"
    fences = ("cpp", "c++", "cxx", "cc")
    source = cbuild.CPP
    headers = CPP_HEADERS
    opening_headers = ("cstdlib", "cstring", "cmath", "omp.h")


BACKEND = CppBackend()
