"""A kernel memory: verified kernels from runs, the tasks' experts and pair datasets, kept in
SQLite and retrieved by similarity of task and code for the prompts of other tasks."""
from .index import canonical_tokens, fingerprint, terms
from .store import Kernel, KernelMemory, MemoryStoreError, default_path, verified_or_why

__all__ = ["Kernel", "KernelMemory", "MemoryStoreError", "canonical_tokens", "default_path",
           "fingerprint", "terms", "verified_or_why"]
