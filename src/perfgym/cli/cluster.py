"""`perfgym cluster`: a Ray cluster of benchmark nodes."""
from __future__ import annotations

import json
from typing import Optional

import typer
from rich.table import Table

from .common import UserError, _guard, app, console


cluster_app = typer.Typer(help="Start and inspect a Ray cluster for benchmarking.",
                          no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")


@cluster_app.command("up")
@_guard
def cluster_up(head: bool = typer.Option(False, help="start a head node"),
               address: Optional[str] = typer.Option(None, help="join the head at this address"),
               bench: bool = typer.Option(False, help="mark this node as a benchmark node"),
               port: int = typer.Option(6379), cpus: Optional[int] = typer.Option(None)) -> None:
    """Start a Ray node with the right resources (`ray start` underneath)."""
    import shutil as _shutil
    import subprocess as _subprocess
    if head == bool(address):
        raise UserError("give either --head or --address HEAD:PORT")
    ray_cli = _shutil.which("ray")
    if ray_cli is None:
        raise UserError("ray is not installed: pip install 'perfgym[cluster]'")
    argv = [ray_cli, "start", "--disable-usage-stats"]
    argv += ["--head", f"--port={port}", "--include-dashboard=false"] if head else [
        f"--address={address}"]
    if bench:
        argv.append('--resources={"bench_node": 1}')
    if cpus is not None:
        argv.append(f"--num-cpus={cpus}")
    r = _subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise UserError(f"ray start failed: {(r.stderr or r.stdout).strip().splitlines()[-1]}")
    console.print(f"started a {'head' if head else 'worker'} node"
                  f"{' (benchmark node)' if bench else ''}", highlight=False)


@cluster_app.command("status")
@_guard
def cluster_status(address: str = typer.Option("auto"),
                   as_json: bool = typer.Option(False, "--json")) -> None:
    """The cluster's live nodes, their CPUs and which are benchmark nodes."""
    try:
        import ray
    except ImportError:
        raise UserError("ray is not installed: pip install 'perfgym[cluster]'")
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except ConnectionError as exc:
        raise UserError(f"no Ray cluster at {address}: {exc}") from None
    nodes = [{"node": n["NodeID"], "address": n["NodeManagerAddress"],
              "cpus": n["Resources"].get("CPU", 0),
              "bench": n["Resources"].get("bench_node", 0) > 0}
             for n in ray.nodes() if n["Alive"]]
    if as_json:
        print(json.dumps(nodes, indent=2))
        return
    table = Table("node", "address", "CPUs", "benchmark node")
    for n in nodes:
        table.add_row(n["node"][:12], n["address"], f"{n['cpus']:g}", "yes" if n["bench"] else "")
    console.print(table)
