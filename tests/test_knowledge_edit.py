"""Other ways of asking an entry: the "Also asked" lines of the Markdown and line formats, and writing ways of asking
and new entries into a knowledge text in its own format (edgevoice/kiosk/knowledge_edit.py)."""

from __future__ import annotations

import pytest

from edgevoice.kiosk.knowledge import Entry, parse_knowledge


def test_an_also_asked_line_gives_the_entry_before_it_other_ways_of_asking() -> None:
    text = (
        "Is there a cash machine? At the Coast Bank across the street.\n"
        "Also asked: is there a cash point? | where can I get **cash**?\n"
        "Where are the toilets? On every floor.\n"
    )
    assert parse_knowledge(text, warnings=[]) == [
        Entry(
            "Is there a cash machine?",
            "At the Coast Bank across the street.",
            asked=("is there a cash point?", "where can I get cash?"),
        ),
        Entry("Where are the toilets?", "On every floor."),
    ]


@pytest.mark.parametrize(
    "lines",
    [
        "## Money\n- Cash machine: at the Coast Bank.\n  - Also asked: cash point?\n",  # a nested bullet
        "## Money\n- Cash machine: at the Coast Bank.\n\n**Also asked:** cash point?\n",  # a blank line between
        "## Money\nQ: Cash machine\nA: at the Coast Bank.\nalso ASKED : cash point?\n",  # any case
        "## Money\nCash machine:\n at the Coast Bank.\nOther ways of asking: cash point?\n",  # after a paragraph
        "## Money\n| Service | Where |\n|---|---|\n| Cash machine | at the Coast Bank. |\nAlso asked: cash point?\n",
    ],
)
def test_also_asked_works_after_every_kind_of_entry(lines: str) -> None:
    entries = parse_knowledge(lines, warnings=[])
    assert len(entries) == 1 and entries[0].asked == ("cash point?",)
    assert "cash point" not in entries[0].line() and "cash point" not in entries[0].search_text()


def test_an_also_asked_line_is_never_an_entry_nor_part_of_a_paragraph() -> None:
    entries = parse_knowledge("The cafe is on the ground floor\nand opens at 9.\nAlso asked: coffee?\n", warnings=[])
    assert entries == [Entry("", "The cafe is on the ground floor and opens at 9.", asked=("coffee?",))]


def test_a_bar_inside_a_way_of_asking_is_written_escaped() -> None:
    entries = parse_knowledge("Wifi? Yes.\nAlso asked: is it a\\|b? | c\n", warnings=[])
    assert entries[0].asked == ("is it a|b?", "c")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("Also asked: cash point?\nWifi? Yes.\n", 1),  # nothing before it
        ("Wifi? Yes.\n## Money\nAlso asked: cash point?\n", 3),  # a heading between
        ("Wifi? Yes.\nQ: Cash?\nAlso asked: cash point?\nA: At the bank.\n", 3),  # inside a Q:/A: pair
    ],
)
def test_an_unattached_also_asked_line_is_warned_about_and_left_out(text: str, line: int) -> None:
    warnings: list[str] = []
    entries = parse_knowledge(text, source="venue.md", warnings=warnings)
    assert all(not e.asked for e in entries) and all("cash point" not in e.line() for e in entries)
    assert len(warnings) == 1 and warnings[0].startswith(f"venue.md: line {line}: 'Also asked' with no entry")
