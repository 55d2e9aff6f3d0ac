"""Reports of a run: a self-contained HTML page, a Markdown CI comment, JUnit XML, and the history.

Everything reads the RESULTS file a run writes (``load_results``; shards merged with
``merge_results``) and the HISTORY file of past runs (``load_history``, ``append_history``).
jinja2 and matplotlib (the ``report`` extra) are only needed by ``render_html``.
"""

from pathlib import Path

from harness.report.html import render_html
from harness.report.junit import render_junit, write_junit
from harness.report.markdown import render_markdown, write_markdown
from harness.report.model import (
    ReportError,
    append_history,
    history_entry,
    load_history,
    load_results,
    merge_results,
    summarize,
    validate_results,
)



def write_reports(results: dict, history: list[dict], out_dir: Path) -> None:
    """Render the three reports of a run into ``out_dir``: report.html, summary.md, junit.xml."""
    out_dir = Path(out_dir)
    render_html(results, history, out_dir / "report.html")
    write_markdown(results, out_dir / "summary.md", history)
    write_junit(results, out_dir / "junit.xml")


__all__ = [
    "ReportError",
    "append_history",
    "history_entry",
    "load_history",
    "load_results",
    "merge_results",
    "render_html",
    "render_junit",
    "render_markdown",
    "summarize",
    "validate_results",
    "write_junit",
    "write_markdown",
    "write_reports",
]
