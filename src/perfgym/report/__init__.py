"""Reports on a run directory: PNG plots and a Markdown summary."""
from .plots import write_plots
from .summary import write_summary

__all__ = ["write_plots", "write_summary"]
