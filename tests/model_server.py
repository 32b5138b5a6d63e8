"""`transformers serve`, a real OpenAI-compatible server, started on a free loopback port for
the tests that generate on one."""
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from service import free_port


@contextmanager
def transformers_serve(model: str | None = None, *flags: str):
    """Yield the server's address (`http://127.0.0.1:PORT`). With `model` it serves that model
    alone (pinned); without, it loads whichever model (a path) a request names."""
    exe = shutil.which("transformers") or str(Path(sys.executable).parent / "transformers")
    port = free_port()
    proc = subprocess.Popen([exe, "serve", *([model] if model else []), "--host", "127.0.0.1",
                             "--port", str(port), "--device", "cpu", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("transformers serve exited: "
                                + proc.stderr.read().decode()[-2000:])
                time.sleep(1)
        else:
            pytest.fail("transformers serve did not answer /health within 300 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
