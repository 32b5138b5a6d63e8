"""--low-memory: the trainer gives freed memory back to the system (perfgym.train.allocator:
blocks freed inside glibc's heap otherwise stay resident) and GRPO uses smaller tiles in TRL's
LM head (perfgym.train.lm_head_tiles)."""
import subprocess
import sys

import pytest

TRAIN_EXTRA = "the train extra is not installed: pip install 'perfgym[train]'"

# 48 blocks of 20 MiB, each written, then all freed but the last (which pins the heap's top
# when the blocks come from the heap); prints the resident MiB before and after the frees.
# A 30 MiB block freed first raises glibc's mmap threshold past 20 MiB (its cap is 32 MiB), as
# a training step's big tensors do.
PROGRAM = """
import ctypes, sys
from perfgym.train.allocator import return_freed_memory
if sys.argv[1] == "fixed":
    assert return_freed_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
big = libc.malloc(30 << 20); ctypes.memset(big, 1, 30 << 20); libc.free(big)
blocks = [libc.malloc(20 << 20) for _ in range(48)]
for b in blocks:
    ctypes.memset(b, 1, 20 << 20)
before = rss()
for b in blocks[:-1]:
    libc.free(b)
print(before, rss())
"""


def resident(mode: str) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], check=False, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split())
    return before, after


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="not Linux: the mmap threshold is glibc's malloc's")
def test_freed_blocks_leave_the_process_once_the_threshold_is_fixed():
    before, after = resident("default")
    assert before > 900 and after > 900  # glibc's default: 940 MiB freed, still resident
    before, after = resident("fixed")
    assert before > 900 and after < 200  # each block its own mapping, unmapped when freed


def test_the_trainers_fix_the_threshold_only_when_asked_and_before_they_build(monkeypatch):
    from types import SimpleNamespace

    from perfgym.train import grpo, sft
    monkeypatch.setattr(grpo, "shrink_lm_head_tiles", lambda: True)  # (its own test below)
    for module in (grpo, sft):
        calls = []
        monkeypatch.setattr(module, "return_freed_memory", lambda: calls.append("fixed"))
        monkeypatch.setattr(module, "build", lambda *a, **k: (_ for _ in ()).throw(
            RuntimeError(f"built after {calls}")))
        with pytest.raises(RuntimeError, match=r"built after \['fixed'\]"):
            module.train(SimpleNamespace(low_memory=True))
        calls.clear()
        with pytest.raises(RuntimeError, match=r"built after \[\]"):  # glibc's own by default
            module.train(SimpleNamespace(low_memory=False))


def test_low_memory_is_a_flag_of_both_trainers():
    from typer.testing import CliRunner

    from perfgym.cli import app
    for command in ("grpo", "sft"):
        out = CliRunner().invoke(app, ["train", command, "--help"], terminal_width=200)
        assert "--low-memory" in out.output


def test_low_memory_grpo_shrinks_trls_lm_head_tiles(monkeypatch):
    pytest.importorskip("trl", reason=TRAIN_EXTRA)
    from types import SimpleNamespace

    import trl.kernels.chunked_logprob as chunked
    import trl.trainer.utils as trl_utils

    from perfgym.train import grpo
    monkeypatch.setattr(chunked, "TOKEN_CHUNK_SIZE", chunked.TOKEN_CHUNK_SIZE)  # restored after
    monkeypatch.setattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE",
                        trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE)
    monkeypatch.setattr(grpo, "return_freed_memory", lambda: True)
    monkeypatch.setattr(grpo, "build", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("built")))
    trls_own = (chunked.TOKEN_CHUNK_SIZE, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE)
    with pytest.raises(RuntimeError, match="built"):
        grpo.train(SimpleNamespace(low_memory=False))
    assert (chunked.TOKEN_CHUNK_SIZE, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE) == trls_own
    with pytest.raises(RuntimeError, match="built"):
        grpo.train(SimpleNamespace(low_memory=True))
    assert (chunked.TOKEN_CHUNK_SIZE, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE) == (1024, 8192)


def test_smaller_tiles_give_the_same_log_probabilities(monkeypatch):
    pytest.importorskip("trl", reason=TRAIN_EXTRA)
    import torch
    import trl.kernels.chunked_logprob as chunked

    from perfgym.train.lm_head_tiles import shrink_lm_head_tiles
    torch.manual_seed(0)
    hidden, weight = torch.randn(300, 16), torch.randn(5000, 16)
    targets = torch.randint(0, 5000, (300,))

    def log_probs(tokens, vocabulary):
        monkeypatch.setattr(chunked, "TOKEN_CHUNK_SIZE", tokens)
        return chunked.ChunkedLogProbFunction.apply(hidden, weight, None, targets, 1.0,
                                                    vocabulary, None, 1.0, ("log_probs",))[0]
    expected = torch.log_softmax(hidden @ weight.T, dim=-1)[torch.arange(300), targets]
    assert torch.allclose(log_probs(4096, 32768), expected, atol=1e-4)
    assert torch.allclose(log_probs(64, 512), expected, atol=1e-4)  # many tiles, same sums
    import trl.trainer.utils as trl_utils
    monkeypatch.setattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE",  # (restored after the test)
                        trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE)
    assert shrink_lm_head_tiles() and chunked.TOKEN_CHUNK_SIZE == 1024
    assert trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE == 8192
