"""Where the kernel sits under the roofline: the evaluation already measured the rate, the
fraction of the FMA peak and of the roof that applies (backends/c/measure.py roofline); this
says it in words, with the arithmetic intensity that decides which roof it is."""
from __future__ import annotations

NAME = "roofline"


def unavailable(ctx) -> str | None:
    o = ctx.outcome
    if not o.ok:
        return f"no timing ({o.status.value})"
    if o.fraction_of_roofline is None:
        return "the machine's peak or bandwidth is not measured (run `perfgym machine`)"
    return None


def run(ctx) -> list[str]:
    o, task, size = ctx.outcome, ctx.task, ctx.size
    flops, nbytes = task.flop_count(size), task.byte_count(size)
    m = o.machine or {}
    lines = []
    if flops and nbytes:
        lines.append(f"arithmetic intensity {flops / nbytes:.2f} FLOP/byte: {o.bound}-bound "
                     f"on this machine (peak {m.get('peak_gflops') or 0:.0f} GFLOP/s, "
                     f"bandwidth {m.get('bandwidth_gbs') or 0:.0f} GB/s)")
    rate = f"{o.gflops:.2f} GFLOP/s" if o.gflops is not None else f"{o.gbps:.2f} GB/s"
    text = f"{rate} is {o.fraction_of_roofline * 100:.1f}% of the {o.bound} roof"
    if o.fraction_of_peak is not None:
        text += f" ({o.fraction_of_peak * 100:.1f}% of the FMA peak)"
    lines.append(text)
    room = 1 / o.fraction_of_roofline if o.fraction_of_roofline > 0 else float("inf")
    if room >= 2:
        lines.append(f"up to {room:.0f}x headroom under the roof"
                     + ("; more reuse per byte (blocking) lifts a memory-bound kernel"
                        if o.bound == "memory" and flops else ""))
    else:
        lines.append("near the roof: little left to gain at this size")
    return lines
