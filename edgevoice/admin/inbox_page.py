"""The review inbox's section of the admin page: each question with what the kiosk said and the entries it ranked
first, and plain HTML forms for the operator's actions (attach, new entry, rightly refused, delete; delete all).
No script: every action is also a JSON endpoint (docs/admin.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PAGE_ITEMS", "REASON_NAMES", "inbox_section"]

PAGE_ITEMS = 100
"""The most recent items shown on the page (``GET /api/review`` lists them all)."""
REASON_NAMES = {
    "refused": "refused",
    "asked_again": "asked to say it again",
    "low_margin": "answered with a low margin",
}


def _attr(value: object) -> str:
    return escape(str(value), quote=True)


def _entry_choices(item_id: int, ranked: Sequence[Mapping[str, object]]) -> str:
    """A radio button for each entry ranked first (one edited since cannot be chosen), and one for another entry."""
    out = []
    first = True
    for n, entry in enumerate(ranked):
        ident = f"inbox-{item_id}-key-{n}"
        current = bool(entry.get("current"))
        checked = " checked" if current and first else ""
        first = first and not current
        note = "" if current else " <em>(edited or deleted since)</em>"
        out.append(
            f'<label for="{ident}"><input type="radio" id="{ident}" name="key" value="{_attr(entry["key"])}"'
            f"{checked}{'' if current else ' disabled'}> {escape(str(entry['question']))}{note}</label><br>"
        )
    other = f"inbox-{item_id}-other"
    checked = " checked" if first else ""
    out.append(
        f'<label for="{other}-pick"><input type="radio" id="{other}-pick" name="key" value="other"{checked}> '
        f'another entry:</label> <input id="{other}" name="other" list="inbox-entries" size="40" '
        f'aria-label="another entry: its question">'
    )
    return "".join(out)


def _when(iso: str) -> str:
    """The moment ``iso`` ("2026-12-07T08:46:41Z") as the page says it: "2026-12-07 08:46 UTC"."""
    return f"{iso.replace('T', ' ')[:16]} UTC"


def _item(item: Mapping[str, object]) -> str:
    ident = int(str(item["id"]))
    question = str(item["question"])
    reason = REASON_NAMES.get(str(item["reason"]), str(item["reason"]))
    verdict = f" ({escape(str(item['verdict']))})" if item.get("verdict") else ""
    times = int(str(item.get("times", 1)))
    asked = f"asked {times} times, last" if times > 1 else "asked"
    ranked = item.get("ranked") or []
    assert isinstance(ranked, Sequence)
    action = f"/inbox/{ident}"
    return (
        f'<li id="inbox-item-{ident}" class="item"><p class="asked"><q>{escape(question)}</q> {escape(reason)}'
        f"{verdict}; {asked} {escape(_when(str(item['last_at'])))}</p>"
        f"<p>The kiosk said: <q>{escape(str(item['reply']))}</q></p>"
        f'<form method="post" action="{action}/attach" class="attach"><fieldset><legend>Attach as another way of '
        f"asking an entry</legend>{_entry_choices(ident, ranked)}<br>"
        f'<label>as <input name="question" value="{_attr(question)}" size="50"></label> '
        '<button type="submit">Attach</button></fieldset></form>'
        f'<form method="post" action="{action}/add" class="add"><fieldset><legend>Answer it in a new entry</legend>'
        f'<label>Question <input name="question" value="{_attr(question)}" size="50"></label><br>'
        f'<label>Answer <textarea name="answer" rows="2" required></textarea></label> '
        '<button type="submit">Add entry</button></fieldset></form>'
        f'<form method="post" action="{action}/settle" class="inline"><button type="submit">Rightly refused'
        "</button></form> "
        f'<form method="post" action="{action}/delete" class="inline"><button type="submit" class="quiet">Delete'
        "</button></form></li>"
    )


def inbox_section(
    listing: Mapping[str, object],
    entries: Sequence[tuple[str, str]],
    *,
    keep_days: int,
    message: str = "",
    error: bool = False,
) -> str:
    """The section for ``listing`` (:meth:`edgevoice.admin.inbox.Inbox.listing`); ``entries``: each entry's key and
    question, offered when the right entry is none of those ranked first. Empty when the inbox is off."""
    if not listing.get("enabled"):
        return ""
    items = listing.get("items") or []
    assert isinstance(items, Sequence)
    note = f'<div class="{"error" if error else "ok"}" id="inbox-message">{escape(message)}</div>' if message else ""
    shown = items[:PAGE_ITEMS]
    more = f" (the {PAGE_ITEMS} most recent shown)" if len(items) > PAGE_ITEMS else ""
    options = "".join(f'<option value="{_attr(k)}">{escape(q)}</option>' for k, q in entries)
    body = (
        '<form method="post" action="/inbox/clear"><button type="submit" class="danger">Delete all</button></form>'
        f'<ol class="inbox">{"".join(_item(i) for i in shown)}</ol><datalist id="inbox-entries">{options}</datalist>'
        if shown
        else "<p>Nothing to review.</p>"
    )
    return (
        f'<section id="inbox"><h2>Review inbox: {len(items)} questions{more}</h2>{note}'
        "<p>Questions the kiosk refused, asked again or answered with a low margin: text only, numbers masked, "
        f"each kept {keep_days} days after it was last asked.</p>{body}</section>"
    )
