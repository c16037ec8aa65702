"""Semantic matching in the kiosk's grounding (edgevoice/kiosk/semantic.py, Matcher.ground): the wiring on a fake
encoder, and (marked ``models``) the decisions all-MiniLM-L6-v2 gives on the development questions of
tests/test_knowledge.py, where its thresholds were chosen (never on the benchmark's questions)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edgevoice.app import build_kiosk
from edgevoice.bench.quality_set import Question
from edgevoice.bench.scoring import invented_values, is_dont_know
from edgevoice.config import Config
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.prompt import DONT_KNOW, DONT_KNOW_BUT, conversation
from edgevoice.kiosk.semantic import SemanticIndex, venue_name_pattern
from tests.fakes import concept_vectors
from tests.test_knowledge import DEV_IN, DEV_IN_3, DEV_NEAR, DEV_OUT, DEV_OUT_3, RecordingLlm

SAMPLE_KNOWLEDGE = sample_knowledge()
SAMPLE_PERSONA = sample_persona()

# --- the wiring, on a fake encoder ------------------------------------------------------------------------------------

CONCEPTS = {
    "photo": ("photo", "picture", "camera", "snapshot"),
    "toilet": ("toilet", "restroom", "washroom"),
    "where": ("where", "floor"),
    "flash": ("flash", "without"),
    "weather": ("weather", "rain"),
}


class ConceptEmbedder:
    """Text -> the normalised sum of the concepts whose words it contains (a last axis when none): cosine 1 between
    texts about the same things, 0 between texts about different things."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return concept_vectors(CONCEPTS, texts)


FAKE_KNOWLEDGE = "Can I take photos? Yes, without flash.\nWhere are the toilets? On every floor.\n"


def test_a_paraphrase_the_words_miss_passes_and_an_unrelated_question_is_stopped() -> None:
    embedder = ConceptEmbedder()
    words_only = Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE)
    kiosk = Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE, embedder=embedder)
    # entries embedded once, in one batch; then the small-talk examples, in one more
    assert len(embedder.calls) == 2 and len(embedder.calls[0]) == 6
    assert "Can you hear me?" in embedder.calls[1]
    question = "Is a snapshot OK?"  # no word of the knowledge; the concept of its first entry
    assert not words_only.ground(question).known
    grounding = kiosk.ground(question)
    assert grounding.known and grounding.similarity == pytest.approx(1.0)
    assert grounding.entries[0].question == "Can I take photos?"
    # shares "take" with the knowledge, but its meaning is elsewhere: stopped by meaning
    assert words_only.ground("Can I take the rain with me?").known
    assert not kiosk.ground("Can I take the rain with me?").known
    # the question's vector is kept: grounding it again costs no forward pass
    kiosk.ground(question)
    assert sum(question in call for call in embedder.calls) == 1


def test_the_gate_can_still_be_turned_off_and_small_talk_still_passes() -> None:
    off = Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE, embedder=ConceptEmbedder(), grounding_threshold=0.0)
    assert off.ground("What's the weather tomorrow?").known
    assert Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE, embedder=ConceptEmbedder()).ground("Hello!").known


def test_the_venue_name_is_neutral_in_meaning() -> None:
    pattern = venue_name_pattern(["Ada", "Harbour City Museum"])
    assert pattern is not None
    assert pattern.sub("here", "Who runs the museum? The Harbour City Museum's shop.") == "Who runs here? here shop."
    assert pattern.sub("here", "Ada, is the museum shop open?") == "Ada, is here shop open?"  # one-word names stay
    assert venue_name_pattern(["Ada"]) is None
    index = SemanticIndex(ConceptEmbedder(), [], venue_names=["Harbour City Museum"])
    assert index.neutral("Where is the museum cafe?") == "Where is here cafe?"


def test_semantic_off_or_no_model_installed_leaves_the_words_to_decide(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config()
    with caplog.at_level(logging.INFO, logger="edgevoice.app"):
        off = build_kiosk(replace(config, kiosk=replace(config.kiosk, semantic=False)))
    assert off.semantic is None and "semantic matching off ([kiosk] semantic = false)" in caplog.text
    caplog.clear()
    empty = replace(config, models=replace(config.models, dir=str(tmp_path)))  # a models directory without it
    with caplog.at_level(logging.WARNING, logger="edgevoice.app"):
        missing = build_kiosk(empty)
    assert missing.semantic is None
    assert "semantic matching off" in caplog.text and "edgevoice models install all-minilm-l6-v2" in caplog.text
    lexical = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE)
    for question in ("Am I OK to take a picture?", "Where is the whale?", "Can I bring my dog?"):
        assert missing.ground(question) == lexical.ground(question)


# --- all-MiniLM-L6-v2 on the development questions --------------------------------------------------------------------


@pytest.fixture(scope="module")
def semantic() -> Kiosk:
    return build_kiosk(Config())


@pytest.fixture(scope="module")
def words() -> Kiosk:
    return Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE)


def _right(question: Question, text: str) -> bool:
    return all(any(fact.lower() in text.lower() for fact in group) for group in question.facts)


FAR_IN = {"d-pensioner", "d-found-wallet", "d-cut-finger"}
"""Development questions in the knowledge too far in meaning from their entry for the gate (0.26, 0.42, 0.25:
"pensioners" for seniors, a purse found for lost property, a cut finger for first aid)."""
UNANSWERED_IN = {"d-till", "d-knee", "d-show-around"}
"""... and those taken for near misses: the best entry's answer is far from them. Three more were until the venue
vocabulary learnt "online", "wash hands" and "hungry" (:data:`~edgevoice.kiosk.retrieval.SYNONYMS`): their words
now find their entry outright, and they are answered directly."""


@pytest.mark.models
def test_the_gate_lets_paraphrases_through(semantic: Kiosk, words: Kiosk) -> None:
    assert semantic.semantic is not None
    stopped = {q.id for q in DEV_IN + DEV_IN_3 if not semantic.ground(q.text).known}
    assert stopped == FAR_IN | UNANSWERED_IN
    by_words = {q.id for q in DEV_IN + DEV_IN_3 if not words.ground(q.text).known}
    # "pensioners" and "reduction" are the seniors' price by words, though far from it in meaning
    assert by_words == FAR_IN - {"d-pensioner"} | {"d-stop-letting", "d-bones", "d-headphones", "d-left-jacket"}


@pytest.mark.models
def test_the_gate_stops_unrelated_questions_and_near_misses(semantic: Kiosk, words: Kiosk) -> None:
    for q in DEV_OUT:
        if q.id not in DEV_NEAR:
            assert not semantic.ground(q.text).known, q.id  # stopped by words, stopped by meaning
    # Changed decision: near misses the words had to let through (DEV_NEAR, for the model to decline) are now
    # stopped when their entry's answer is far from them; the two that still pass are far from every answer.
    assert {q.id for q in DEV_OUT if semantic.ground(q.text).known} == {"d-lighthouse", "d-tokyo"}
    stopped = {q.id for q in DEV_OUT_3 if not semantic.ground(q.text).known}
    assert {"d-translate", "d-wedding", "d-prayer", "d-quiet", "d-math", "d-species", "d-family"} <= stopped
    # asking a price or a number their entry does not give (edgevoice/kiosk/answer_types.py); the model got both
    # wrong ("the cafe costs 40 euros", "there are 4 lockers")
    assert {"d-coffee-price", "d-locker-count"} <= stopped
    assert len(stopped) == 15
    assert words.ground("What is two plus two?").known  # "two" is in the knowledge; nothing else is


@pytest.mark.models
def test_entries_are_ranked_by_meaning_better_than_by_words(semantic: Kiosk, words: Kiosk) -> None:
    questions = DEV_IN + DEV_IN_3

    def first_right(kiosk: Kiosk) -> int:
        groundings = [(q, kiosk.ground(q.text)) for q in questions]
        return sum(bool(g.entries) and _right(q, g.entries[0].line()) for q, g in groundings)

    assert first_right(semantic) >= 59 and first_right(semantic) >= first_right(words) + 5


@pytest.mark.models
def test_direct_answers_by_meaning_are_right_and_never_given_outside_the_knowledge(
    semantic: Kiosk, words: Kiosk
) -> None:
    direct = {q.id: semantic.ground(q.text).direct for q in DEV_IN + DEV_IN_3}
    wrong = {i: answer for i, answer in direct.items() if answer is not None and not _right(_by_id(i), answer)}
    assert wrong == {}
    by_words = sum(words.ground(q.text).direct is not None for q in DEV_IN + DEV_IN_3)
    assert sum(a is not None for a in direct.values()) >= max(35, by_words + 10)  # 41 and 26 when written
    # paraphrases that share few words with their entry
    for i in ("d-stop-letting", "d-headphones", "d-map-until", "d-guide-langs", "d-now-on", "d-level"):
        assert direct[i] is not None, i
    assert [q.id for q in DEV_OUT + DEV_OUT_3 if semantic.ground(q.text).direct is not None] == []


def _by_id(question_id: str) -> Question:
    return next(q for q in DEV_IN + DEV_IN_3 if q.id == question_id)


@pytest.mark.models
@pytest.mark.parametrize(
    ("question", "known"),
    [
        ("How old is the whale skeleton?", False),  # 0.85 from its entry, but 0.17 further from the answer
        ("How tall is the whale skeleton?", False),
        ("How many ships are in the museum?", False),
        ("Is there a lift?", True),  # the lifts are in the toilets' answer: the model's to say
        ("Do children have to pay?", True),
    ],
)
def test_no_direct_answer_to_near_misses_and_unclear_matches(semantic: Kiosk, question: str, known: bool) -> None:
    grounding = semantic.ground(question)
    assert grounding.known is known and grounding.direct is None


@pytest.mark.models
def test_the_lenient_gate_leaves_near_misses_to_the_model_and_still_stops_unrelated_questions(semantic: Kiosk) -> None:
    config = Config()
    lenient = build_kiosk(replace(config, kiosk=replace(config.kiosk, gate="lenient")))
    near_miss = "How old is the whale skeleton?"  # 0.85 from its entry, but its answer says where it stands
    assert not semantic.ground(near_miss).known
    grounding = lenient.ground(near_miss)
    assert grounding.known and grounding.direct is None  # the model's to decline, with the entry before it
    assert not lenient.ground("What is two plus two?").known


@pytest.mark.models
def test_a_question_the_words_found_two_entries_for_gets_the_one_it_means(semantic: Kiosk, words: Kiosk) -> None:
    # Changed decision: by words "Are there guided tours in English?" had two entries answering about equally well
    # (tours and audio guide both say "English": test_questions_no_entry_answers_outright_go_to_the_model); by
    # meaning the tours are clearly it (0.85 against 0.45), and their answer says yes, in English, and when.
    question = "Are there guided tours in English?"
    assert words.ground(question).direct is None
    assert (
        semantic.ground(question).direct == "Yes, in English at 11 am and 3 pm, 5 euros, starting at the main entrance."
    )


@pytest.mark.models
def test_the_grounded_model_speaks_a_paraphrases_answer_at_once(semantic: Kiosk) -> None:
    llm = RecordingLlm()
    grounded = semantic.grounded(llm)
    messages = conversation(semantic.prefix, [], "How long before closing do you stop letting people in?")
    assert "".join(grounded.stream_reply(messages, max_tokens=40)) == "Half an hour before closing."
    assert llm.prompts == [] and grounded.last_verdict is Verdict.DIRECT
    stopped = conversation(semantic.prefix, [], "What is two plus two?")
    assert "".join(grounded.stream_reply(stopped, max_tokens=40)) == DONT_KNOW and grounded.last_verdict is Verdict.GATE


@pytest.mark.models
def test_a_near_miss_hears_what_its_entry_does_say_after_the_refusal(semantic: Kiosk) -> None:
    llm = RecordingLlm()
    grounded = semantic.grounded(llm)
    whale = conversation(semantic.prefix, [], "How old is the whale skeleton?")
    reply = "".join(grounded.stream_reply(whale, max_tokens=40))
    assert reply == f"{DONT_KNOW_BUT} In the whale hall on the first floor." and grounded.last_verdict is Verdict.GATE
    assert is_dont_know(reply) and llm.prompts == []
    # "Is there a cafe? Yes, ..." loses its "yes": it does not answer a price
    cafe = semantic.refusal(semantic.ground("How much is a coffee in the cafe?"))
    assert cafe.startswith(f"{DONT_KNOW_BUT} The Lighthouse Cafe is on the top floor")
    assert not invented_values(cafe, SAMPLE_KNOWLEDGE)


@pytest.mark.models
@pytest.mark.parametrize(
    "question",
    [
        "What is the capital of Canada?",  # far from every entry
        "What is the wifi password of the staff network?",  # close to the Wi-Fi entry, but a secret
    ],
)
def test_a_question_far_from_the_knowledge_or_after_a_secret_hears_the_plain_refusal(
    semantic: Kiosk, question: str
) -> None:
    grounding = semantic.ground(question)
    assert not grounding.known and grounding.entries
    assert semantic.refusal(grounding) == DONT_KNOW


@pytest.mark.models
def test_with_direct_answers_off_a_near_miss_hears_the_plain_refusal() -> None:
    config = Config()
    kiosk = build_kiosk(replace(config, kiosk=replace(config.kiosk, direct_answers=False)))
    grounding = kiosk.ground("How old is the whale skeleton?")
    assert not grounding.known and kiosk.refusal(grounding) == DONT_KNOW


# Heard by tiny.en in the spoken development questions (a voice of edgevoice/bench/audio_set.py, clean, 20 or 10 dB).
MISHEARD_IN = {
    "How do I reach you by Tran?": ("tram", "tram line 4"),
    "How far is it from the trans stop?": ("tram", "tram line 4"),
    "Can I borrow Wilcher?": ("wheelchair", "wheelchairs can be borrowed"),
    "Do you have wife I hear?": ("wi-fi", "HarbourMuseum"),
    "Where can I watch my hands?": ("wash", "every floor"),
}
MISHEARD_LEFT = (
    "When does the next fairy leave?",  # "free" would be an answer for a question outside the knowledge
    "When does the next very lead?",  # "leave": no closer in meaning
    "Tell me that Joe",  # "Joe" does not start like "audio"
    "Is the exhibition about Matt still on?",  # "station": not a word of the exhibition's entry
    "Can I charge my phone somewhere?",
    "Where is the nearest cash machine?",
)


@pytest.mark.models
@pytest.mark.parametrize("heard", sorted(MISHEARD_IN))
def test_a_misheard_venue_word_is_mended_when_an_entry_then_answers_outright(semantic: Kiosk, heard: str) -> None:
    word, fact = MISHEARD_IN[heard]
    plain = build_kiosk(replace(Config(), kiosk=replace(Config().kiosk, mend_misheard=False)))
    assert plain.ground(heard).direct is None
    grounding = semantic.ground(heard)
    assert word in grounding.question.lower() and grounding.direct is not None and fact in grounding.direct


@pytest.mark.models
@pytest.mark.parametrize("heard", MISHEARD_LEFT)
def test_a_mend_that_changes_the_subject_or_brings_no_meaning_is_not_taken(semantic: Kiosk, heard: str) -> None:
    grounding = semantic.ground(heard)
    assert grounding.question == heard


@pytest.mark.models
def test_written_development_questions_are_not_mended_into_other_answers(semantic: Kiosk) -> None:
    for question in DEV_OUT + DEV_OUT_3:
        assert semantic.ground(question.text).question == question.text, question.id
    for question in DEV_IN + DEV_IN_3:
        grounding = semantic.ground(question.text)
        if grounding.question != question.text:
            assert grounding.direct is not None and _right(question, grounding.direct), question.id
