"""Other ways of asking an entry (Entry.asked) in the matcher: they count as the entry's own question by meaning and
by words, a question said again gets its entry's answer, and they never weaken the near-miss rule. On an encoder
whose cosines the test sets."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.matching import Matcher
from edgevoice.kiosk.retrieval import document, terms
from edgevoice.kiosk.semantic import SemanticIndex

pytestmark = pytest.mark.unit

DIMS = 256


def _axis(i: int) -> np.ndarray:
    v = np.zeros(DIMS, np.float32)
    v[i] = 1.0
    return v


A, B, C, D = (_axis(i) for i in range(4))
WHALE = Entry("Where is the whale skeleton?", "In the whale hall on the first floor.")
BONES = "Can I see the big bones?"
NEAR_MISS = "Is the whale skeleton real?"
VECTORS = {
    WHALE.answer: A,
    WHALE.question: 0.6 * A + 0.8 * B,  # its answer at 0.6
    BONES: 0.2 * A + float(np.sqrt(1 - 0.04)) * C,  # a rewording its answer fits less well (0.2)
    # close to the entry's question (0.8), further from its answer (0.3) than that question is: a near miss; far
    # from the asked question (0.06)
    NEAR_MISS: 0.3 * A + 0.775 * B + float(np.sqrt(1 - 0.09 - 0.775**2)) * D,
}


class TableEmbedder:
    """The vectors of :data:`VECTORS`; any other text a unit vector drawn from its hash (near 0 to everything)."""

    identity = "table-encoder v1"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return np.stack([self.vector(t) for t in texts]).astype(np.float32) if texts else np.zeros((0, DIMS))

    def vector(self, text: str) -> np.ndarray:
        if text in VECTORS:
            v = VECTORS[text]
        else:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(DIMS)
        return (v / np.linalg.norm(v)).astype(np.float32)


OTHER = Entry("Is there a cloakroom?", "Yes, next to the shop.")
ATM = Entry("Is there an ATM?", "Yes, by the main entrance.")


def _matcher(*entries: Entry, **options: object) -> Matcher:
    return Matcher(list(entries), frozenset(), embedder=TableEmbedder(), **options)  # type: ignore[arg-type]


def test_a_question_said_as_an_entry_was_asked_gets_that_entry() -> None:
    question = "Where can I get cash out?"  # no word and no meaning of the entry's own
    before = _matcher(ATM, OTHER).ground(question)
    assert not before.known
    learned = Entry(ATM.question, ATM.answer, asked=(question,))
    grounding = _matcher(learned, OTHER).ground(question)
    assert grounding.known and grounding.entries[0] == learned
    assert grounding.direct == ATM.answer
    # by its words alone too: the asked question's words join the entry's document
    words = Matcher([learned, OTHER], frozenset()).ground("where do I get some cash out")
    assert words.known and words.entries[0] == learned
    assert not Matcher([ATM, OTHER], frozenset()).ground("where do I get some cash out").known


def test_an_asked_question_is_a_question_not_an_answer_for_the_near_miss_rule() -> None:
    plain = _matcher(WHALE, OTHER)
    assert not plain.ground(NEAR_MISS).known  # the near miss, as the entry stands
    learned = Entry(WHALE.question, WHALE.answer, asked=(BONES,))
    matcher = _matcher(learned, OTHER)
    # the asked question fits the answer less well than the entry's own does; it is the reference only for
    # questions closest to it, so the near miss is still one
    near = matcher.ground(NEAR_MISS)
    assert not near.known and near.direct is None
    # ... and the asked question itself, said again, is answered by its entry: its own reference, not the entry's
    assert plain.ground(BONES).known is False
    said = matcher.ground(BONES)
    assert said.known and said.direct == WHALE.answer


def test_similarity_is_the_closest_question_and_relevance_is_against_it() -> None:
    learned = Entry(WHALE.question, WHALE.answer, asked=(BONES,))
    index = SemanticIndex(TableEmbedder(), [learned, OTHER])
    similarity, relevance = index.similarities(BONES)
    assert similarity[0] == pytest.approx(1.0) and relevance[0] == pytest.approx(0.0, abs=1e-6)
    similarity, relevance = index.similarities(NEAR_MISS)
    assert similarity[0] == pytest.approx(0.8, abs=1e-3)
    assert relevance[0] == pytest.approx(0.3 - 0.6, abs=1e-3)  # against the entry's own question, not 0.3 - 0.2


def test_asked_questions_are_embedded_when_the_knowledge_is_loaded_and_kept(tmp_path: Path) -> None:
    learned = Entry(WHALE.question, WHALE.answer, asked=(BONES,))
    first = TableEmbedder()
    Matcher([learned, OTHER], frozenset(), embedder=first, embedding_cache=tmp_path)
    assert BONES in first.embedded
    again = TableEmbedder()
    matcher = Matcher([learned, OTHER], frozenset(), embedder=again, embedding_cache=tmp_path)
    assert again.embedded == []  # all from the cache
    matcher.ground(BONES)
    assert again.embedded == [BONES]  # the visitor's question, once: nothing of the knowledge per question
    assert BONES in SemanticIndex.texts([learned])


def test_an_entry_asked_many_ways_brings_each_new_word_once() -> None:
    entry = Entry("Is there an ATM?", "Yes, by the main entrance.", asked=("Is there a cash machine?", "Any cash?"))
    counted = terms(document(entry))
    assert counted.count("cash") == 1 and "machin" in counted
    assert document(Entry("Q?", "A.")) == Entry("Q?", "A.").search_text()


def test_an_asked_question_of_the_same_kind_vouches_for_its_answer() -> None:
    painter = Entry("Tell me about the panorama.", "Anna Berg painted it in 1890.")
    asked = Entry(painter.question, painter.answer, asked=("Who made the panorama?",))
    question = "Who made the big panorama painting?"
    assert not Matcher([painter, OTHER], frozenset()).ground(question).known
    assert Matcher([asked, OTHER], frozenset()).ground(question).known


# --- the scripted operator of `edgevoice bench --quality --learn` ----------------------------------------------------

LEARN_KNOWLEDGE = (
    "When do you close? We close at 5 pm.\nIs there an ATM? Yes, by the main entrance.\n"
    "Is there a cash desk? Yes, at the exit.\n"
)


def _item(qid: str, kind: str, right: bool, heard: str, voice: str = "written") -> dict[str, object]:
    return {"venue": "v", "id": qid, "kind": kind, "right": right, "heard": heard, "voice": voice, "split": "dev",
            "input": "written", "stage": "before", "invented": [], "asked_again": False}  # fmt: skip


def test_the_scripted_operator_attaches_each_miss_as_heard_to_its_right_entry() -> None:
    from edgevoice.bench.venue import Question, Venue
    from edgevoice.bench.venue_learning import review
    from edgevoice.kiosk.grounding import Kiosk
    from edgevoice.kiosk.knowledge import parse_knowledge

    questions = (
        Question("cash", "Where's a cash point?", (("main entrance",),), "paraphrase"),
        Question("close", "When do you close?", (("5 pm",),)),
        Question("sun", "And on Sundays?", (("5 pm",),), "follow_up", after="close"),
        Question("exit", "What is at the exit?", (("Yes",),)),  # fits two entries: no label settles it
        Question("dog", "Can I bring my dog?", kind="out"),
    )
    venue = Venue("v", LEARN_KNOWLEDGE, "You are Kim.", questions)
    entries = parse_knowledge(LEARN_KNOWLEDGE)
    day1 = [
        _item("cash", "paraphrase", False, "where is a cash point"),  # heard, not as written
        _item("close", "fact", True, "When do you close?"),
        _item("sun", "follow_up", False, "And on Sundays?"),
        _item("exit", "fact", False, "What is at the exit?"),
        _item("dog", "out", False, "Can I bring my dog?"),
    ]
    done = review(venue, entries, day1)
    assert done.asked == {entries[1].key: ("where is a cash point",)}
    assert (done.attached, done.follow_ups, done.unlabelled) == (1, 1, 1)
    kiosk = Kiosk("You are Kim.", LEARN_KNOWLEDGE, asked=done.asked)
    assert kiosk.entries[1].asked == ("where is a cash point",) and kiosk.entries[0].asked == ()
    assert kiosk.ground("where is a cash point").entries[0] == kiosk.entries[1]


def test_the_stages_are_summed_per_venue_and_pooled() -> None:
    from edgevoice.bench.venue_learning import format_learning, stage_rows

    items = [
        {**_item("a", "fact", False, "a"), "venue": "one"},
        {**_item("a", "fact", True, "a"), "venue": "one", "stage": "reviewed", "split": "test"},
        {**_item("b", "fact", True, "b"), "venue": "two", "stage": "reviewed", "split": "test"},
    ]
    rows = stage_rows(items)
    pooled = [r for r in rows if r["venue"] == "pooled"]
    assert [(r["stage"], r["split"], r["n"], r["right_facts_percent"]) for r in pooled] == [
        ("before", "dev", 1, 0.0),
        ("reviewed", "test", 2, 100.0),
    ]
    report = {"models": {"asr": "w", "llm": "l"}, "rows": rows, "reviews": [], "seconds": 1.0}
    assert "pooled     reviewed" in format_learning(report)
