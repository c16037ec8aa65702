"""The admin page's HTML: one page of four sections (status, last turns, knowledge, self-test) and the login form.
Plain HTML forms, no script: it works in any browser, and every action also has a JSON endpoint (docs/admin.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

NO_TRANSCRIPT = "—"
"""Shown instead of what was said when ``[debug] log_transcripts`` is off."""

_STYLE = """
body{font-family:sans-serif;margin:0;background:#f4f5f7;color:#222}
header{background:#1f3a5f;color:#fff;padding:12px 24px;font-size:20px}
main{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px;padding:16px 24px}
section{background:#fff;border:1px solid #ccd;border-radius:6px;padding:12px 16px;overflow-x:auto}
h2{margin:0 0 8px;font-size:16px;color:#1f3a5f}
table{border-collapse:collapse;font-size:13px;width:100%}
td,th{border-bottom:1px solid #e3e3e8;padding:3px 6px;text-align:left;vertical-align:top}
textarea{width:100%;height:260px;font-family:monospace;font-size:12px}
button{background:#1f6f43;color:#fff;border:0;border-radius:4px;padding:6px 14px;font-size:14px}
.error{background:#fde8e8;border:1px solid #c33;padding:6px;white-space:pre-wrap}
.ok{background:#e6f6ea;border:1px solid #2a8;padding:6px}
pre{font-size:12px;white-space:pre-wrap}
#inbox{grid-column:1/-1}
#inbox ol{padding-left:20px}
#inbox li{border-bottom:1px solid #e3e3e8;padding:6px 0}
#inbox fieldset{border:1px solid #ccd;border-radius:4px;margin:6px 0}
#inbox form.inline{display:inline}
#inbox textarea{height:auto}
button.quiet{background:#667}
button.danger{background:#a33}
"""


def _rows(pairs: Sequence[tuple[str, object]]) -> str:
    return "".join(f"<tr><th>{escape(k)}</th><td>{escape(_text(v))}</td></tr>" for k, v in pairs)


def _text(value: object) -> str:
    if value is None:
        return NO_TRANSCRIPT
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _document(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def status_section(status: Mapping[str, object]) -> str:
    flat = [(k, v) for k, v in status.items() if not isinstance(v, Mapping)]
    models = status.get("models", {})
    xruns = status.get("xruns", {})
    assert isinstance(models, Mapping) and isinstance(xruns, Mapping)
    model_rows = "".join(
        f"<tr><td>{escape(str(role))}</td><td>{escape(str(m.get('name', '')))}</td>"
        f"<td><code>{escape(str(m.get('sha256', '')))}</code></td></tr>"
        for role, m in models.items()
        if isinstance(m, Mapping)
    )
    return (
        '<section id="status"><h2>Status</h2>'
        f"<table>{_rows(flat)}</table>"
        f"<h2>Models</h2><table><tr><th>role</th><th>model</th><th>sha256</th></tr>{model_rows}</table>"
        f"<h2>Audio</h2><table>{_rows(list(xruns.items()))}</table></section>"
    )


def turns_section(turns: Sequence[Mapping[str, object]], stage_names: Sequence[str]) -> str:
    head = "".join(f"<th>{escape(s)}</th>" for s in stage_names)
    body = []
    for t in reversed(turns):
        stages = t.get("stages_ms") or {}
        assert isinstance(stages, Mapping)
        cells = "".join(f"<td>{escape(_text(stages.get(s)))}</td>" for s in stage_names)
        body.append(
            f"<tr><td>{escape(_text(t.get('turn')))}</td><td>{escape(_text(t.get('transcript')))}</td>"
            f"<td>{escape(_text(t.get('reply')))}</td><td>{escape(_text(t.get('voice_to_voice_ms')))}</td>{cells}</tr>"
        )
    rows = "".join(body) or f'<tr><td colspan="{4 + len(stage_names)}">no turn yet</td></tr>'
    return (
        '<section id="turns"><h2>Last turns (ms)</h2><table><tr><th>turn</th><th>visitor</th><th>reply</th>'
        f"<th>voice-to-voice</th>{head}</tr>{rows}</table></section>"
    )


def knowledge_section(path: str | None, text: str, message: str = "", error: bool = False, base: str = "") -> str:
    """The editor; ``base``: the version of the file ``text`` was made from, sent back with it (a save meanwhile is
    not written over)."""
    note = (
        f'<div class="{"error" if error else "ok"}" id="knowledge-message">{escape(message)}</div>' if message else ""
    )
    if path is None:
        return (
            '<section id="knowledge"><h2>Knowledge</h2><p>The knowledge is written in the configuration '
            "([kiosk] knowledge); set <code>[kiosk] knowledge_file</code> to edit it here.</p>"
            f"<pre>{escape(text)}</pre></section>"
        )
    return (
        f'<section id="knowledge"><h2>Knowledge: {escape(path)}</h2>{note}'
        f'<form method="post" action="/knowledge"><input type="hidden" name="sha256" value="{escape(base)}">'
        f'<textarea name="text" spellcheck="false" aria-label="the knowledge file">{escape(text)}</textarea>'
        '<p><button type="submit">Save and reload</button></p></form></section>'
    )


def selftest_section(state: Mapping[str, object]) -> str:
    if state.get("running"):
        body = "<p>The self-test is running…</p>"
    else:
        button = '<form method="post" action="/selftest"><button type="submit">Run the self-test</button></form>'
        last = ""
        if state.get("runs"):
            last = (
                f"<p>Last run: <b>{escape(_text(state.get('verdict')))}</b> in {escape(_text(state.get('seconds')))} s"
                f"</p><pre>{escape(_text(state.get('summary')))}</pre>"
            )
        body = button + last
    return f'<section id="selftest"><h2>Self-test</h2>{body}</section>'


def admin_page(title: str, sections: Sequence[str]) -> str:
    return _document(title, f"<header>{escape(title)}</header><main>{''.join(sections)}</main>")


def login_page(failed: bool) -> str:
    note = '<div class="error">That token is not the one configured.</div>' if failed else ""
    return _document(
        "edgevoice admin: log in",
        '<header>edgevoice admin</header><main><section id="login"><h2>Log in</h2>'
        f'{note}<form method="post" action="/login"><input type="password" name="token" autofocus> '
        '<button type="submit">Log in</button></form></section></main>',
    )
