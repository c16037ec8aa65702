"""The one tokenizer (:mod:`edgevoice.words`) and the edit distances built on rapidfuzz: outputs on tricky inputs,
and the same words as the expressions each caller used before on every text of the sample venue and the benchmark."""

from __future__ import annotations

import re

import pytest

from edgevoice.bench.quality_set import IN_KNOWLEDGE, OUT_OF_KNOWLEDGE
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.kiosk.answer_types import AnswerType, asked_type
from edgevoice.kiosk.knowledge import parse_knowledge
from edgevoice.kiosk.retrieval import near, terms
from edgevoice.words import fold, word_spans, words


def _texts() -> list[str]:
    out = [sample_persona()]
    for entry in parse_knowledge(sample_knowledge()):
        out += [entry.question, entry.answer, *entry.keywords]
    for q in IN_KNOWLEDGE + OUT_OF_KNOWLEDGE:
        out += [q.text, *(spelling for group in q.facts for spelling in group)]
    return out


TEXTS = _texts()


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("Step-free? It’s 10 o'clock.", ["step-free", "it's", "10", "o'clock"]),
        ("The CAFÉ’s crème brûlée", ["the", "cafe's", "creme", "brulee"]),
        ("visitors' 'quoted' -dash- a--b", ["visitors", "quoted", "dash", "a", "b"]),
        ("Wi-Fi, 3rd floor; €14.50 at 10am", ["wi-fi", "3rd", "floor", "14", "50", "at", "10am"]),
        ("", []),
        ("?! — …", []),
    ],
)
def test_written_words(text: str, written: list[str]) -> None:
    assert words(text) == written


def test_hyphens_can_part_words_and_spoken_words_keep_only_letters_and_apostrophes() -> None:
    assert words("A step-free, well-lit room", hyphens=False) == ["a", "step", "free", "well", "lit", "room"]
    assert words("The visitors’ 3D map, 'hello'", spoken=True) == ["the", "visitors'", "d", "map", "'hello'"]
    assert words("Café", spoken=True) == ["caf"]  # a transcript's words are compared as written


def test_word_spans_give_each_word_its_place_in_the_text() -> None:
    text = "Can I borrow Wilcher’s chair? Café!"
    spans = word_spans(text)
    assert [w for _, _, w in spans] == ["can", "i", "borrow", "wilcher's", "chair", "caf"]
    assert [text[a:b] for a, b, _ in spans] == ["Can", "I", "borrow", "Wilcher’s", "chair", "Caf"]


def test_fold_is_idempotent_on_the_sample_texts() -> None:
    for text in TEXTS:
        assert fold(fold(text)) == fold(text)


def test_the_same_words_as_each_callers_former_expression() -> None:
    retrieval = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
    grounded = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
    sounds = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")
    for text in TEXTS:
        lowered = text.lower().replace("’", "'")
        assert words(text) == retrieval.findall(lowered), text
        assert words(text, hyphens=False) == grounded.findall(lowered), text
        assert [(a, b) for a, b, _ in word_spans(text)] == [m.span() for m in sounds.finditer(text)], text
        assert asked_type(text) is asked_type_before(text), text


def asked_type_before(question: str) -> AnswerType | None:
    from edgevoice.kiosk import answer_types

    text = " ".join(question.lower().replace("’", "'").split())
    return next((kind for kind, pattern in answer_types._ASKS if pattern.search(text)), None)


def test_terms_stem_fold_and_join_synonyms() -> None:
    assert terms("Where’s the Café? Tickets, opening") == terms("where is the cafe ticket open")
    assert terms("Is it step free?") == terms("Is it step-free?")


@pytest.mark.parametrize(
    ("a", "b", "is_near"),
    [
        ("photograph", "photography", True),  # one begins the other
        ("harbor", "harbour", True),  # one letter
        ("ticket", "tickets", True),
        ("museum", "musuem", False),  # two letters in a short word
        ("skeleton", "skelteon", True),  # two letters in a long word
        ("whale", "shale", False),  # another first letter
        ("cat", "cap", False),  # too short to tell
        ("wheelchair", "wheelbarrow", False),
    ],
)
def test_near_words(a: str, b: str, is_near: bool) -> None:
    assert near(a, b) is is_near
    assert near(b, a) is is_near
