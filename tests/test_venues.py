"""The extra venues under venues/ (issue 16): knowledge that parses, and question sets that follow the schema in
venues/README.md and agree with their knowledge. Data checks only: no models."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from edgevoice.bench.entry_labels import right_entry
from edgevoice.bench.scoring import has_fact
from edgevoice.bench.venue import Venue, load_venue, sample_venue
from edgevoice.kiosk.knowledge import Entry, parse_knowledge

VENUES = Path(__file__).resolve().parents[1] / "venues"
VENUE_DIRS = sorted(p for p in VENUES.iterdir() if (p / "questions.toml").is_file())

MIN_PER_KIND = {
    "fact": 14,
    "paraphrase": 12,
    "neighbour": 6,
    "number": 8,
    "follow_up": 4,
    "out": 8,
    "near_miss": 8,
    "small_talk": 6,
}
ANSWERABLE = frozenset({"fact", "paraphrase", "neighbour", "number", "follow_up"})
SMALL_TALK = frozenset({"greeting", "thanks", "identity", "hearing_check", "goodbye"})
REQUIRED_KEYS = frozenset({"id", "text", "kind", "facts", "split"})
OPTIONAL_KEYS = frozenset({"after", "small_talk", "entry"})

# Words a paraphrase may share with its entry: function words and the verbs every question uses.
_STOP = frozenset(
    """a an the and or but if of to in on at by for from with without into onto about as is are was were be been
    am do does did done don doesn can could may might must shall should will would have has had i me my mine we us
    our you your it its this that these those there here what which who whom whose when where why how not no yes
    any some all every each one get got go going want need like please just also ever much many too very so than
    then""".split()  # noqa: SIM905
)


def _knowledge_file(venue: Path) -> Path:
    files = [venue / name for name in ("knowledge.md", "knowledge.toml") if (venue / name).is_file()]
    assert len(files) == 1, f"{venue.name}: needs exactly one of knowledge.md, knowledge.toml"
    return files[0]


def _knowledge_text(venue: Path) -> str:
    return _knowledge_file(venue).read_text(encoding="utf-8")


def _questions(venue: Path) -> list[dict[str, Any]]:
    with (venue / "questions.toml").open("rb") as f:
        data = tomllib.load(f)
    assert set(data) == {"question"}, f"{venue.name}: only [[question]] tables allowed at the top"
    return data["question"]


def _stems(text: str) -> set[str]:
    """Content words of ``text``, crudely stemmed (``charging`` = ``charge``, ``lockers`` = ``locker``)."""
    out = set()
    for word in re.findall(r"[a-z]+", text.lower().replace("'s", "")):
        if word in _STOP or len(word) < 3:
            continue
        for suffix in ("ing", "es", "ed", "s", "e"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out


def _says(entry: Entry, spelling: str) -> bool:
    return spelling.lower() in entry.search_text().lower()


def test_there_are_venues() -> None:
    assert len(VENUE_DIRS) >= 3
    assert (VENUES / "README.md").is_file()


@pytest.mark.parametrize("venue", VENUE_DIRS, ids=lambda p: p.name)
def test_knowledge_parses(venue: Path) -> None:
    entries = parse_knowledge(_knowledge_text(venue))
    assert 20 <= len(entries) <= 40, f"{venue.name}: {len(entries)} entries"
    for entry in entries:
        assert entry.question.strip(), f"{venue.name}: an entry without a question or topic: {entry.answer!r}"
        assert entry.answer.strip()
    persona = (venue / "persona.txt").read_text(encoding="utf-8").strip()
    assert persona
    assert 1 <= persona.count(". ") + 1 <= 2, f"{venue.name}: the persona is one or two sentences"


@pytest.mark.parametrize("venue", VENUE_DIRS, ids=lambda p: p.name)
def test_question_schema(venue: Path) -> None:
    questions = _questions(venue)
    ids = [q.get("id") for q in questions]
    assert len(ids) == len(set(ids)), f"{venue.name}: repeated ids {[i for i, n in Counter(ids).items() if n > 1]}"
    by_id = {q["id"]: q for q in questions}
    for q in questions:
        where = f"{venue.name}/{q.get('id')}"
        keys = set(q)
        assert keys >= REQUIRED_KEYS, f"{where}: missing {sorted(REQUIRED_KEYS - keys)}"
        assert keys <= REQUIRED_KEYS | OPTIONAL_KEYS, f"{where}: unknown {sorted(keys - REQUIRED_KEYS - OPTIONAL_KEYS)}"
        assert isinstance(q["id"], str) and re.fullmatch(r"[a-z0-9][a-z0-9-]*", q["id"]), where
        assert isinstance(q["text"], str) and q["text"].strip(), where
        assert q["kind"] in MIN_PER_KIND, f"{where}: kind {q['kind']!r}"
        assert q["split"] in ("dev", "test"), f"{where}: split {q['split']!r}"
        facts = q["facts"]
        assert isinstance(facts, list), where
        for group in facts:
            assert isinstance(group, list) and group, f"{where}: an empty fact group"
            assert all(isinstance(s, str) and s.strip() for s in group), f"{where}: a blank spelling"
        assert bool(facts) == (q["kind"] in ANSWERABLE), f"{where}: facts go with exactly {sorted(ANSWERABLE)}"
        if q["kind"] == "follow_up":
            after = q.get("after")
            assert after in by_id and after != q["id"], f"{where}: after={after!r} is not another question's id"
            assert by_id[after]["split"] == q["split"], f"{where}: the question before it is in the other split"
        else:
            assert "after" not in q, f"{where}: after is only for follow_up"
        if "entry" in q:
            assert facts and isinstance(q["entry"], str) and q["entry"].strip(), f"{where}: entry names a fact's entry"
        if q["kind"] == "small_talk":
            assert q.get("small_talk") in SMALL_TALK, f"{where}: small_talk={q.get('small_talk')!r}"
        else:
            assert "small_talk" not in q, f"{where}: small_talk is only for kind small_talk"


@pytest.mark.parametrize("venue", VENUE_DIRS, ids=lambda p: p.name)
def test_counts_and_balance(venue: Path) -> None:
    questions = _questions(venue)
    assert len(questions) >= 64
    kinds = Counter(q["kind"] for q in questions)
    for kind, least in MIN_PER_KIND.items():
        assert kinds[kind] >= least, f"{venue.name}: {kinds[kind]} {kind} questions, needs {least}"
        splits = Counter(q["split"] for q in questions if q["kind"] == kind)
        assert abs(splits["dev"] - splits["test"]) <= 1, f"{venue.name}: {kind} split {dict(splits)}"


@pytest.mark.parametrize("venue", VENUE_DIRS, ids=lambda p: p.name)
def test_facts_are_in_the_knowledge(venue: Path) -> None:
    text = _knowledge_text(venue).lower()
    missing = [
        f"{q['id']}: {group}"
        for q in _questions(venue)
        for group in q["facts"]
        if not any(spelling.lower() in text for spelling in group)
    ]
    assert not missing, f"{venue.name}: fact groups with no spelling in the knowledge: {missing}"


@pytest.mark.parametrize("venue", VENUE_DIRS, ids=lambda p: p.name)
def test_paraphrases_share_no_content_word(venue: Path) -> None:
    """A paraphrase shares no content word with its entry: it tests understanding, not word matching. Its entry:
    every entry that holds, of each fact group, the first spelling the knowledge uses."""
    text = _knowledge_text(venue)
    entries = parse_knowledge(text)
    clashes = []
    for q in _questions(venue):
        if q["kind"] != "paraphrase":
            continue
        spellings = [next(s for s in group if s.lower() in text.lower()) for group in q["facts"]]
        targets = [e for e in entries if all(_says(e, s) for s in spellings)]
        assert targets, f"{venue.name}/{q['id']}: no single entry holds all its facts"
        shared = set().union(*(_stems(q["text"]) & _stems(e.search_text()) for e in targets))
        if shared:
            clashes.append(f"{q['id']}: {sorted(shared)}")
    assert not clashes, f"{venue.name}: paraphrases sharing words with their entry: {clashes}"


@pytest.mark.parametrize("venue", [*VENUE_DIRS, None], ids=lambda p: p.name if p else "sample")
def test_every_question_with_facts_names_exactly_one_entry_that_holds_them(venue: Path | None) -> None:
    """The right entry (issue 33): the label of a miss the scripted operator attaches, and the entry a direct
    read-out must be. A question with facts resolves to exactly one entry (``entry = "..."`` where the facts fit
    several), and that entry holds its facts; one without facts has none."""
    loaded: Venue = load_venue(venue) if venue else sample_venue()
    entries = parse_knowledge(loaded.knowledge)
    for q in loaded.questions:
        index = right_entry(q, entries)  # raises when the facts fit several entries and no label settles it
        if not q.facts:
            assert index is None, f"{loaded.name}/{q.id}: a question without facts has no entry"
            continue
        assert index is not None
        assert has_fact(entries[index].line(), q.facts), f"{loaded.name}/{q.id}: its entry lacks its facts"
