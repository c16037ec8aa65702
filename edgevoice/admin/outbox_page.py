"""The admin page's outbox section: how many notifications of the kiosk's actions wait, how many failed, and the
latest of each (docs/actions.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape

__all__ = ["outbox_section"]


def _when(value: object) -> str:
    return (
        datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if isinstance(value, (int, float))
        else ""
    )


def _table(rows: Sequence[Mapping[str, object]]) -> str:
    if not rows:
        return "<p>none</p>"
    body = "".join(
        f"<tr><td>{escape(_when(r.get('created')))}</td><td>{escape(str(r.get('action', '')))}</td>"
        f"<td>{escape(str(r.get('sink', '')))}</td><td>{escape(str(r.get('attempts', '')))}</td>"
        f"<td>{escape(str(r.get('error', '')))}</td><td><code>{escape(str(r.get('id', '')))}</code></td></tr>"
        for r in rows
    )
    head = "".join(f"<th>{h}</th>" for h in ("queued", "action", "to", "tries", "last error", "id"))
    return f"<table><tr>{head}</tr>{body}</table>"


def outbox_section(summary: Mapping[str, object]) -> str:
    pending, failed = summary.get("pending_rows", []), summary.get("failed_rows", [])
    assert isinstance(pending, Sequence) and isinstance(failed, Sequence)
    return (
        '<section id="outbox"><h2>Notifications</h2>'
        f"<p>{escape(str(summary.get('pending', 0)))} waiting, {escape(str(summary.get('failed', 0)))} failed, "
        f"{escape(str(summary.get('delivered', 0)))} delivered.</p>"
        f"<h3>Waiting</h3>{_table(pending)}<h3>Failed</h3>{_table(failed)}</section>"
    )
