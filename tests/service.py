"""`perfgym serve` started as a user starts it, on a free loopback port, for the tests that
talk to it over HTTP."""
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_service(*flags: str, token: str | None = None, env: dict | None = None,
                    timeout: float = 120):
    """Yield (process, url, client) of a `perfgym serve` that answers /health; stopped after."""
    from perfgym.client import RewardClient, RewardServiceError
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "perfgym.cli", "serve", "--port", str(port),
                             *flags],
                            env={**os.environ, **(env or {}),
                                 **({"PERFGYM_TOKEN": token} if token else {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    client = RewardClient(url, token, timeout=timeout)
    try:
        for _ in range(300):
            try:
                client.health()
                break
            except RewardServiceError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
        else:
            proc.kill()
        if proc.poll() is not None:
            raise RuntimeError(f"perfgym serve did not start: {proc.stdout.read().decode()}")
        yield proc, url, client
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
