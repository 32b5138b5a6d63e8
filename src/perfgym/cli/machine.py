"""`perfgym machine`: this machine's ISA, cores, peaks and bandwidth."""
from __future__ import annotations

import json
import typer
from rich.table import Table

from .. import machine as machine_mod
from .common import _guard, app, console


@app.command("machine")
@_guard
def machine_cmd(refresh: bool = typer.Option(False, help="measure again instead of the cache"),
                cc: str = typer.Option("gcc", help="C compiler"),
                as_json: bool = typer.Option(False, "--json", help="print as JSON")) -> None:
    """This machine: ISA, cores, measured frequency, FMA peak and BLAS dgemm GFLOP/s."""
    from .. import sandbox_python
    with console.status("measuring this machine (cached afterwards; again while disturbed)"):
        info = machine_mod.machine_info(cc, refresh=refresh)
        info = {**info, "blas_dgemm_gflops": machine_mod.blas_dgemm_gflops()}
    with console.status("starting the sandboxed Python"):
        py = sandbox_python.report()
    if as_json:
        print(json.dumps({**info, "sandbox_python": py}, indent=2))
        return
    fp = info["fingerprint"]
    from .. import sandbox
    rows = [("CPU", fp["cpu"]), ("cores", str(fp["cores"])), ("ISA", " ".join(fp["isa"])),
            ("caches", " ".join(f"{k} {v}" for k, v in fp["caches"].items())),
            ("compiler", fp["compiler"]),
            ("frequency", (f"{info['freq_ghz']:.2f} GHz (measured)" if info.get("freq_ghz")
                           else "not measured on this architecture")
             + (f"; rated {info['rated_ghz']:.2f} GHz" if info.get("rated_ghz") else "")),
            ("FMA peak, 1 core", f"{info['peak_gflops_1core']:.1f} GFLOP/s"),
            ("FMA peak, all cores", f"{info['peak_gflops']:.1f} GFLOP/s (FP64), "
                                    f"{info['peak_gflops_fp32']:.1f} GFLOP/s (FP32)"),
            ("memory bandwidth", f"{info['bandwidth_gbs']:.1f} GB/s (STREAM triad, all cores)"),
            ("bandwidth by footprint", "  ".join(f"{b / 2**20:g} MiB: {g:.0f}"
                                                 for b, g in info["bandwidth_curve"])),
            ("BLAS dgemm (NumPy, n=1024)", f"{info['blas_dgemm_gflops']:.1f} GFLOP/s"),
            ("ISA bound (no kernel is faster)", f"{info['isa_bound_gflops']:.1f} GFLOP/s "
             f"(FP64), {info['isa_bound_gflops_fp32']:.1f} GFLOP/s (FP32)"),
            ("probe", "\n".join(machine_mod.probe_report(info)) or
             f"consistent ({len(info['probe']['attempts'])} measurement(s))"),
            ("sandbox", sandbox.isolation().describe()),
            ("sandboxed Python", (f"starts, imports {', '.join(py['modules']) or 'nothing asked'}"
                                  if py["starts"] else f"[bold red]BROKEN[/] {py['error']}")
             + "".join(f"\n  binds {host} (read-only)" for host in py.get("binds", {}))),
            ("fingerprint", f"{fp['id']} (measured {info['measured_at']})")]
    table = Table(show_header=False)
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)
