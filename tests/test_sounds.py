"""Misheard venue words (edgevoice/kiosk/sounds.py): the phonetic distance, the replacements proposed with espeak-ng's
phonemes (bundled with piper-tts, no model needed), and the kiosk's rule for taking one (on a fake encoder; the
real one is in tests/test_semantic.py)."""

from __future__ import annotations

import pytest

from edgevoice.data import sample_persona
from edgevoice.engines.piper_onnx import espeak_phonemes
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.retrieval import STOP_WORDS
from edgevoice.kiosk.sounds import SoundLexicon, Stopped, phonetic_distance
from tests.test_semantic import FAKE_KNOWLEDGE, ConceptEmbedder

SAMPLE_PERSONA = sample_persona()


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("tɹæm", "tɹæm", 0.0),
        ("tɹæm", "tɹæn", 0.5),  # nasals: near
        ("wɑʃ", "wɑtʃ", 1.0),  # one consonant more
        ("mæt", "mæp", 1.0),  # t and p: not near
        ("bid", "bæd", 0.5),  # vowels: near
        ("fæst", "fst", 0.5),  # a vowel dropped
        ("", "ab", 1.5),
    ],
)
def test_phonetic_distance(a: str, b: str, distance: float) -> None:
    assert phonetic_distance(a, b) == distance
    assert phonetic_distance(b, a) == distance


@pytest.fixture(scope="module")
def lexicon() -> SoundLexicon:
    words = ["tram", "wheelchair", "wifi", "cloakroom", "audio", "entrance fee", "shop", "stop", "floor"]
    return SoundLexicon(words, espeak_phonemes(), known=STOP_WORDS | {"entrance", "reach"})


@pytest.mark.parametrize(
    ("heard", "meant"),
    [
        ("How do I reach you by Tran?", "How do I reach you by tram?"),
        ("Can I borrow Wilcher?", "Can I borrow wheelchair?"),
        ("Do you have wife I here?", "Do you have wifi here?"),  # two words heard for one
        ("Is there a club room?", "Is there a cloakroom?"),
        ("What's the entrance B?", "What's the entrance fee?"),  # a phrase replaces as many words
        ("Which four is it on?", "Which floor is it on?"),
    ],
)
def test_a_misheard_venue_word_is_proposed_first(lexicon: SoundLexicon, heard: str, meant: str) -> None:
    assert lexicon.candidates(heard)[0].apply(heard) == meant


def test_no_replacement_for_venue_words_stop_words_far_sounds_or_another_first_sound(lexicon: SoundLexicon) -> None:
    assert lexicon.candidates("Where is the tram stop?") == []  # all the venue's own words
    assert lexicon.candidates("Can you sing a song?") == []  # nothing sounds near
    assert all(m.word != "audio" for m in lexicon.candidates("Tell me that Joe"))  # "Joe" ends like "audio"
    assert all(m.word != "entrance fee" for m in lexicon.candidates("What's the B?"))  # one word for two
    assert len(lexicon.candidates("stob stob stob stob stob stob stob", limit=3)) == 3


def test_the_first_mend_that_holds_is_taken_and_the_decision_is_cached(lexicon: SoundLexicon) -> None:
    heard = "Which four is it on? Is there a club room?"
    nearest = [m.apply(heard) for m in lexicon.candidates(heard)]
    assert len(nearest) >= 2
    asked: list[str] = []

    def holds(text: str) -> bool:
        asked.append(text)
        return text == nearest[1]

    assert lexicon.first_mend(heard, holds) == nearest[1]
    assert asked == nearest[:2]  # nearest first, and no further once one holds
    assert lexicon.first_mend(heard, holds) == nearest[1]
    assert len(asked) == 2  # decided once
    assert lexicon.first_mend("Where is the tram stop?", holds) is None  # nothing to mend


def toy_phonemes(text: str) -> str:
    """Spelling as sound: enough for the kiosk's rule, without espeak."""
    return text.lower()


def test_the_kiosk_takes_a_mend_only_when_it_makes_an_outright_answer_and_a_closer_meaning() -> None:
    kiosk = Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE, embedder=ConceptEmbedder(), phonemize=toy_phonemes)
    heard = "Is there a toylet?"  # no word of the knowledge, nothing in meaning: "I don't know" as heard
    grounding = kiosk.ground(heard)
    assert grounding.question == "Is there a toilet?"
    assert grounding.direct == "On every floor."
    assert kiosk.ground(heard) == grounding  # the decision is kept
    # the same with the mend off, or without meaning to consent
    plain = Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE, embedder=ConceptEmbedder())
    assert plain.sounds is None and plain.ground(heard).question == heard and not plain.ground(heard).known
    assert Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE, phonemize=toy_phonemes).sounds is None
    # a question answered outright as heard is left alone
    assert kiosk.ground("Can I take photos?").question == "Can I take photos?"


def test_a_lexicon_made_in_the_background_asks_before_each_call_and_stops() -> None:
    """Made beside the voice (the background embedding), the lexicon asks ``go_on`` before each call to espeak-ng,
    which the voice shares: a turn waits on one call at most, and a close stops it."""
    calls: list[str] = []
    asked = []

    def phonemize(text: str) -> str:
        calls.append(text)
        return toy_phonemes(text)

    def go_on() -> bool:
        asked.append(len(calls))
        return len(asked) < 2  # the second look finds the kiosk closing

    words = [f"word{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(450)]  # three calls of 200 words
    with pytest.raises(Stopped, match="phonemized 200 of 450"):
        SoundLexicon(words, phonemize, go_on=go_on)
    assert asked == [0, 1] and len(calls) == 1
    assert len(SoundLexicon(words, phonemize, go_on=lambda: True).words) == 450
