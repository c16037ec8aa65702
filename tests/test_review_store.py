"""The review inbox's store: masked before stored, kept at most keep_days and max_items, mode 0600, deletable in one
action, a question rightly refused never kept again (and its text gone), a corrupt file replaced by a fresh inbox."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from edgevoice.config.served import ReviewConfig
from edgevoice.review.masking import mask_text
from edgevoice.review.service import open_review
from edgevoice.review.store import DAY_S, FILE_NAME, Ranked, ReviewStore, default_review_dir


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def store_in(directory: Path, clock: Clock, *, keep_days: int = 14, max_items: int = 500) -> ReviewStore:
    return ReviewStore(directory, keep_days=keep_days, max_items=max_items, now=clock)


def add(store: ReviewStore, question: str, reason: str = "refused", reply: str = "I don't know that.") -> int | None:
    return store.add(
        question,
        reason=reason,
        verdict="gate",
        reply=reply,
        ranked=[Ranked("0123456789ab", "When do you open?")],
        margin=0.02,
    )


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        ("my number is 06 12 34 56 78, call me", "my number is [number], call me"),
        ("card 4111-1111-1111-1111 was stolen", "card [number] was stolen"),
        ("ring +44 20 7946 0958", "ring [number]"),
        ("passport AB1234567", "passport AB[number]"),
        ("it is zero six one two three four five six", "it is [number]"),
        ("born 12/05/1990", "born [number]"),
        ("write to jo.doe@example.com", "write to [email]"),
        # prices, times, years, rooms and counts stay readable
        ("does it cost 14 euros?", "does it cost 14 euros?"),
        ("are you open at 9:30 or 10.45?", "are you open at 9:30 or 10.45?"),
        ("room 101 in 2026, 1,200 seats, 12345 visitors", "room 101 in 2026, 1,200 seats, 12345 visitors"),
        ("two euros per hour", "two euros per hour"),
    ],
)
def test_numbers_that_identify_someone_are_masked(said: str, stored: str) -> None:
    assert mask_text(said) == stored


def test_the_file_is_the_services_alone_and_holds_no_unmasked_number(tmp_path: Path) -> None:
    store = store_in(tmp_path / "review", Clock())
    assert add(store, "Can I leave my number 0612345678 at the desk?") is not None
    store.close()
    path = tmp_path / "review" / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert b"0612345678" not in path.read_bytes()
    (item,) = store_in(tmp_path / "review", Clock()).items()
    assert item.question == "Can I leave my number [number] at the desk?"


def test_a_file_made_readable_by_others_is_made_0600_again(tmp_path: Path) -> None:
    store_in(tmp_path, Clock()).close()
    os.chmod(tmp_path / FILE_NAME, 0o644)
    store_in(tmp_path, Clock()).close()
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600


def test_the_same_question_is_one_item_counted(tmp_path: Path) -> None:
    clock = Clock()
    store = store_in(tmp_path, clock)
    first = add(store, "Is there a cash point?")
    clock.t += 60
    again = add(store, "is there a  CASH point", reason="asked_again")
    assert first == again
    (item,) = store.items()
    assert item.times == 2 and item.reason == "asked_again" and item.question == "is there a CASH point"
    assert item.ranked == (Ranked("0123456789ab", "When do you open?"),) and item.margin == pytest.approx(0.02)
    assert item.last_at - item.first_at == 60


def test_items_are_kept_keep_days_since_last_asked(tmp_path: Path) -> None:
    clock = Clock()
    store = store_in(tmp_path, clock, keep_days=14)
    add(store, "Is there a cash point?")
    clock.t += 10 * DAY_S
    add(store, "Somewhere quiet to pray?")
    clock.t += 5 * DAY_S  # the first is 15 days old, the second 5
    assert [i.question for i in store.items()] == ["Somewhere quiet to pray?"]
    store.close()
    clock.t += 10 * DAY_S  # pruned at open, before anything is read
    store = store_in(tmp_path, clock, keep_days=14)
    assert len(store) == 0


def test_at_most_max_items_the_oldest_go_first(tmp_path: Path) -> None:
    clock = Clock()
    store = store_in(tmp_path, clock, max_items=3)
    for n in range(5):
        clock.t += 1
        add(store, f"question number {n}")
    assert [i.question for i in store.items()] == ["question number 4", "question number 3", "question number 2"]
    store.close()
    assert len(store_in(tmp_path, clock, max_items=2)) == 2  # a smaller limit is applied at open


def test_rightly_refused_is_not_kept_again_and_leaves_no_text(tmp_path: Path) -> None:
    store = store_in(tmp_path, Clock())
    item = add(store, "What's the exchange rate of the dollar today?")
    assert item is not None and store.settle(item)
    assert store.items() == []
    assert add(store, "what's the exchange rate of the dollar today") is None  # the same question
    assert add(store, "Is there a cash point?") is not None  # another
    store.close()
    assert b"exchange rate" not in (tmp_path / FILE_NAME).read_bytes(), "its text was left in the file"
    assert not store_in(tmp_path, Clock()).settle(item)  # settled once


def test_delete_one_and_delete_all(tmp_path: Path) -> None:
    store = store_in(tmp_path, Clock())
    one = add(store, "Is there a cash point?")
    two = add(store, "Somewhere quiet to pray?")
    settled = add(store, "What's the weather tomorrow?")
    assert one is not None and two is not None and settled is not None
    assert store.settle(settled)
    assert store.delete(one) and not store.delete(one)
    assert [i.id for i in store.items()] == [two]
    assert store.clear() == 1
    assert store.items() == []
    assert add(store, "What's the weather tomorrow?") is not None, "delete all forgets the marks as well"
    store.close()
    data = (tmp_path / FILE_NAME).read_bytes()
    assert b"cash point" not in data and b"quiet to pray" not in data


def test_a_corrupt_file_gives_a_warning_and_a_fresh_inbox(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"this is not a database, it was cut short " * 100)
    with caplog.at_level(logging.WARNING):
        store = store_in(tmp_path, Clock())
    assert "cannot be read" in caplog.text and "a fresh inbox begun" in caplog.text
    assert store.items() == []
    assert add(store, "Is there a cash point?") is not None and len(store) == 1


def test_a_truncated_database_gives_a_fresh_inbox(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = store_in(tmp_path, Clock())
    for n in range(200):
        add(store, f"question number {n} about something long enough to fill a few pages of the file")
    store.close()
    path = tmp_path / FILE_NAME
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with caplog.at_level(logging.WARNING):
        store = store_in(tmp_path, Clock())
    assert "a fresh inbox begun" in caplog.text
    assert len(store) == 0 and add(store, "Is there a cash point?") is not None


def test_the_state_directory_is_the_services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "STATE_DIRECTORY", "/var/lib/edgevoice/debug:/var/lib/edgevoice/knowledge:/var/lib/edgevoice/review"
    )
    assert default_review_dir() == Path("/var/lib/edgevoice/review")
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_review_dir() == tmp_path / "edgevoice" / "review"


def test_off_keeps_nothing_and_removes_a_former_inbox(tmp_path: Path) -> None:
    assert open_review(ReviewConfig(enabled=False, dir=str(tmp_path))) is None
    assert not (tmp_path / FILE_NAME).exists()
    store = open_review(ReviewConfig(enabled=True, dir=str(tmp_path)))
    assert store is not None
    add(store, "Is there a cash point?")
    store.close()
    assert open_review(ReviewConfig(enabled=False, dir=str(tmp_path))) is None
    assert not (tmp_path / FILE_NAME).exists()


def test_a_directory_it_cannot_make_leaves_the_kiosk_without_an_inbox(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING):
        assert open_review(ReviewConfig(enabled=True, dir=str(blocker / "review"))) is None
    assert "nothing is kept this run" in caplog.text


def test_config_check_speaks_of_an_inbox_nobody_can_use(tmp_path: Path) -> None:
    from edgevoice.config.load import config_from_dict
    from edgevoice.config_check import check_config

    on = {"enabled": True, "dir": str(tmp_path)}
    report = check_config(config_from_dict({"review": on, "admin": {"listen": "off"}}), devices=False)
    assert any("no page shows" in w for w in report.warnings) and any("knowledge_file" in w for w in report.warnings)
    (tmp_path / FILE_NAME).mkdir()
    report = check_config(config_from_dict({"review": on}), devices=False)
    assert any(e.code == "config_invalid" and "is not a file" in e.message for e in report.errors)
    quiet = check_config(config_from_dict({"admin": {"listen": "off"}}), devices=False)
    assert not any("review" in w for w in quiet.warnings)
