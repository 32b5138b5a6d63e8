"""Each sandbox layer against a raw hostile program (no static checks in the way): the layers
must hold on their own, because static checks are only as good as their lists."""
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from perfgym import sandbox
from perfgym.sandbox import Limits, isolation, make_workdir, processes_of_uid

ROOT_ONLY = pytest.mark.skipif(not isolation().own_uid, reason="not root: the own-uid and namespace layers exist only when perfgym runs as root")


def build(workdir: Path, source: str) -> None:
    (workdir / "prog.c").write_text(source)
    subprocess.run(["gcc", "-O1", "prog.c", "-o", "prog"], cwd=workdir, check=True)


def sandbox_pids() -> list[int]:
    return [p for u in range(sandbox.UID_BASE, sandbox.UID_BASE + sandbox.UID_SLOTS)
            for p in processes_of_uid(u)]


@pytest.fixture
def workdir():
    d = make_workdir()
    yield d
    subprocess.run(["rm", "-rf", str(d)])


def test_infinite_loop_with_escaped_child_is_killed(workdir):
    # The child leaves the process group (setsid); the uid sweep must still find it.
    build(workdir, """
        #include <unistd.h>
        int main(void) { if (fork() == 0) { setsid(); for (;;) {} } for (;;) {} }""")
    start = time.monotonic()
    r = sandbox.run(["./prog"], workdir, Limits(wall_seconds=1.0))
    assert r.timed_out and time.monotonic() - start < 5
    if isolation().own_uid:
        assert sandbox_pids() == []


@ROOT_ONLY
def test_fork_bomb_hits_the_process_limit(workdir):
    build(workdir, """
        #include <unistd.h>
        #include <stdio.h>
        int main(void) { int n = 0; for (int i = 0; i < 100000; i++) if (fork() >= 0) n++;
                         else { printf("fork failed after %d\\n", n); return 0; } return 1; }""")
    r = sandbox.run(["./prog"], workdir, Limits(wall_seconds=5.0, processes=32))
    assert "fork failed" in r.stdout
    assert sandbox_pids() == []


def test_memory_limit(workdir):
    build(workdir, """
        #include <stdlib.h>
        #include <stdio.h>
        int main(void) { char *p = malloc((size_t)100 << 30); puts(p ? "got it" : "refused");
                         return 0; }""")
    r = sandbox.run(["./prog"], workdir, Limits(address_space=1 << 30))
    assert r.stdout.strip() == "refused"


def test_output_flood_is_capped_and_killed(workdir):
    build(workdir, '#include <stdio.h>\nint main(void) { for (;;) puts("flood flood flood"); }')
    r = sandbox.run(["./prog"], workdir, Limits(wall_seconds=10, output_bytes=4096))
    assert r.output_overflow and not r.timed_out
    assert len(r.stdout) + len(r.stderr) <= 4096


@ROOT_ONLY
def test_no_network(workdir):
    # A listener on the host's loopback: the sandbox must not reach it.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    build(workdir, f"""
        #include <stdio.h>
        #include <sys/socket.h>
        #include <netinet/in.h>
        #include <arpa/inet.h>
        int main(void) {{ int s = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {{0}}; a.sin_family = AF_INET; a.sin_port = htons({port});
            a.sin_addr.s_addr = inet_addr("127.0.0.1");
            puts(connect(s, (struct sockaddr *)&a, sizeof a) == 0 ? "connected" : "blocked");
            return 0; }}""")
    r = sandbox.run(["./prog"], workdir)
    server.close()
    assert r.stdout.strip() == "blocked"


@ROOT_ONLY
def test_cannot_read_secrets_or_write_outside(workdir):
    marker = Path(tempfile.gettempdir()) / "perfgym-sandbox-escape"
    marker.unlink(missing_ok=True)
    build(workdir, f"""
        #include <stdio.h>
        int main(void) {{
            printf("shadow:%s\\n", fopen("/etc/shadow", "r") ? "read" : "denied");
            printf("root:%s\\n", fopen("/root/perfgym-escape", "w") ? "written" : "denied");
            FILE *t = fopen("{marker}", "w"); if (t) {{ fputs("x", t); fclose(t); }}
            printf("here:%s\\n", fopen("inside.txt", "w") ? "written" : "denied");
            return 0; }}""")
    r = sandbox.run(["./prog"], workdir)
    assert "shadow:denied" in r.stdout and "root:denied" in r.stdout
    assert "here:written" in r.stdout  # its own directory is writable
    assert not marker.exists()  # /tmp inside was a throwaway tmpfs
    assert not Path("/root/perfgym-escape").exists()


@ROOT_ONLY
def test_runs_as_unprivileged_uid(workdir):
    r = sandbox.run(["id", "-u"], workdir)
    uid = int(r.stdout)
    assert sandbox.UID_BASE <= uid < sandbox.UID_BASE + sandbox.UID_SLOTS


def test_environment_is_scrubbed(workdir, monkeypatch):
    monkeypatch.setenv("PERFGYM_SECRET_TOKEN", "hunter2")
    r = sandbox.run(["env"], workdir)
    assert "hunter2" not in r.stdout and "PATH=" in r.stdout


def test_cpu_limit(workdir):
    build(workdir, "int main(void) { for (;;) {} }")
    r = sandbox.run(["./prog"], workdir, Limits(wall_seconds=20, cpu_seconds=1))
    assert r.killed_by in ("SIGXCPU", "SIGKILL") and not r.timed_out


def test_concurrent_runs_get_distinct_uids(workdir):
    if not isolation().own_uid:
        pytest.skip("not root: sandbox uids exist only when perfgym runs as root")
    from concurrent.futures import ThreadPoolExecutor
    dirs = [make_workdir() for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:
        uids = list(pool.map(lambda d: sandbox.run(["sh", "-c", "id -u; sleep 0.3"], d).stdout,
                             dirs))
    for d in dirs:
        subprocess.run(["rm", "-rf", str(d)])
    assert len(set(uids)) == 4


@ROOT_ONLY
def test_an_exposed_directory_with_blanks_in_its_name_is_bound_read_only(workdir, tmp_path):
    """The mounts are one fstab: a path with a space, a tab or a backslash must reach mount as
    that path (octal escapes), bound read-only, with /tmp still shadowed; and a removed fstab
    is written again, not a reason for every sandbox to fail."""
    import shutil
    host = Path(tempfile.mkdtemp(prefix="perfgym odd\tname\\", dir="/tmp"))
    try:
        host.chmod(0o755)
        (host / "data.txt").write_text("shown\n")
        (host / "data.txt").chmod(0o644)
        inside = sandbox.expose_path(host)
        script = (f"cat '{inside}/data.txt'; touch '{inside}/new' 2>/dev/null && echo WROTE; "
                  f"ls /tmp | wc -l")
        for _ in range(2):
            r = sandbox.run(["sh", "-c", script], workdir, Limits(wall_seconds=10), expose=[host])
            assert r.ok, r.stderr
            assert r.stdout.split() == ["shown", "0"]  # read, not written; an empty /tmp
            assert not (host / "new").exists()
            shutil.rmtree(sandbox.FSTAB_DIR)  # the second run writes it again
    finally:
        shutil.rmtree(host, ignore_errors=True)


@ROOT_ONLY
def test_shadows_are_turned_off_not_skipped_where_one_is_already_mounted():
    """One `mount -a` makes the shadows, and mount -a skips an entry already mounted: where
    this process's table already holds a perfgym shadow (perfgym run inside one), isolation()
    must say the directories are not shadowed rather than let them be skipped unseen."""
    import sys
    probe = ("from perfgym import sandbox; i = sandbox.isolation(); "
             "print(i.private_tmp, '|'.join(i.notes))")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                        'mount -t tmpfs perfgym-shadow /var/tmp && exec "$0" -c "$1"',
                        sys.executable, probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    private, _, notes = r.stdout.strip().partition(" ")
    assert private == "False" and "already in this process's table" in notes
