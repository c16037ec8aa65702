"""Small talk: the kinds and replies of edgevoice/data/en/small_talk.toml, the persona's fields, and the kiosk that
answers small talk at once in the persona while a question carrying small talk is still answered as a question."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from edgevoice import data
from edgevoice.bench.scoring import is_dont_know, is_small_talk_reply
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict
from edgevoice.errors import ConfigError
from edgevoice.events import ChatMessage
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.prompt import conversation
from edgevoice.kiosk.semantic import Embedder
from edgevoice.kiosk.small_talk import SmallTalk
from tests.fakes import concept_vectors

PERSONA = (
    "You are Otto, the friendly voice assistant in the lobby of the Hotel Seabright. Guests speak to you and hear "
    "your answer read aloud."
)
KNOWLEDGE = """\
Where is the cafe? The Driftwood Cafe is on the ground floor, next to the lifts.
When is breakfast served? From 7 to 10 am in the Tidewater Restaurant.
Is there wifi? Yes, the network is Seabright-Guest; the password is on your key card.
"""


class RecordingLlm:
    """A language model that records what it was asked and always says the same."""

    def __init__(self, reply: str = "I don't know that, please ask at the desk.") -> None:
        self.reply = reply
        self.asked: list[list[ChatMessage]] = []

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.asked.append(list(messages))
        yield self.reply

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        return 5


@pytest.fixture(scope="module")
def chat() -> SmallTalk:
    return SmallTalk.load(PERSONA)


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        ("Hello!", "greeting"),
        ("Good morning, Otto.", "greeting"),
        ("Hello, can you hear me?", "hearing_check"),
        ("Is this thing on?", "hearing_check"),
        ("Thank you.", "thanks"),
        ("Thanks a lot!", "thanks"),
        ("Thank you, that helps a lot.", "thanks"),
        ("Who are you?", "identity"),
        ("What's your name?", "identity"),
        ("Are you a robot?", "identity"),
        ("What can you do?", "abilities"),
        ("Can you help me?", "abilities"),
        ("How are you today?", "wellbeing"),
        ("Goodbye!", "goodbye"),
        ("Thanks, bye.", "goodbye"),
    ],
)
def test_each_kind_is_recognised(chat: SmallTalk, said: str, kind: str) -> None:
    found = chat.kind_of(said)
    assert found is not None and found.name == kind


@pytest.mark.parametrize(
    "said",
    [
        "Hi, where is the cafe?",
        "Thanks, and when is breakfast?",
        "Can you help me find the lifts?",
        "What are your opening hours?",
        "Are you open on Sundays?",
        "Who is the manager?",
        "Where can I say goodbye to my friends?",
        "Okay.",  # no small talk of a known kind: left to the model, as before
    ],
)
def test_a_question_that_carries_small_talk_is_no_small_talk(chat: SmallTalk, said: str) -> None:
    assert chat.kind_of(said) is None
    assert chat.reply(said) is None


def test_the_persona_fills_the_replies(chat: SmallTalk) -> None:
    assert chat.fields == {
        "name": "Otto",
        "role": "the friendly voice assistant in the lobby of the Hotel Seabright",
        "venue": "the Hotel Seabright",
    }
    assert chat.reply("Who are you?") == "I'm Otto, the friendly voice assistant in the lobby of the Hotel Seabright."
    assert "the Hotel Seabright" in (chat.reply("What can you do?") or "")


def test_replies_are_short_friendly_and_the_same_for_the_same_words(chat: SmallTalk) -> None:
    said_all = ("Hello!", "Can you hear me?", "Thank you!", "Who are you?", "What can you do?", "Bye!", "How are you?")
    for said in said_all:
        reply = chat.reply(said)
        assert reply is not None and is_small_talk_reply(reply) and not is_dont_know(reply), said
        assert chat.reply(said) == reply
        assert "{" not in reply


def test_a_persona_the_pattern_does_not_read_gets_the_replies_without_placeholders() -> None:
    chat = SmallTalk.load("Answer the visitors of the town museum kindly.")
    assert chat.fields == {}
    reply = chat.reply("Who are you?")
    assert reply is not None and "{" not in reply and is_small_talk_reply(reply)


def test_an_operator_file_replaces_the_phrases(tmp_path: Path) -> None:
    own = tmp_path / "small_talk.toml"
    own.write_text(
        "[persona]\npattern = '^You are (?P<name>[^,]+),'\n"
        "[kinds.greeting]\npatterns = ['moin( moin)?']\nreplies = ['Moin! I am {name}.', 'Moin!']\n",
        encoding="utf-8",
    )
    chat = SmallTalk.load(PERSONA, own)
    assert chat.reply("Moin moin!") == "Moin! I am Otto."
    assert chat.reply("Hello!") is None  # only the operator's kinds


@pytest.mark.parametrize(
    "text",
    [
        "[kinds.greeting]\npatterns = ['(unclosed']\nreplies = ['Hi!']\n",
        "[kinds.greeting]\npatterns = ['hi']\nreplies = ['Hi, {name}!']\n",  # no reply without placeholders
        "[kinds.greeting]\nreplies = ['Hi!']\n",
        "kinds = 'nothing'\n",
    ],
)
def test_a_bad_phrase_file_is_a_config_error_naming_it(tmp_path: Path, text: str) -> None:
    own = tmp_path / "talk.toml"
    own.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"talk\.toml"):
        SmallTalk.load(PERSONA, own)


def test_the_packaged_file_has_a_reply_without_placeholders_for_every_kind() -> None:
    kinds = data.table("en/small_talk.toml")["kinds"]
    assert {"greeting", "thanks", "identity", "abilities", "hearing_check", "goodbye", "wellbeing"} <= kinds.keys()
    for name, spec in kinds.items():
        assert any("{" not in r for r in spec["replies"]), name


def test_the_kiosk_answers_small_talk_at_once_without_the_model() -> None:
    kiosk = Kiosk(PERSONA, KNOWLEDGE)
    llm = RecordingLlm()
    grounded = kiosk.grounded(llm)
    for said in ("Hello, can you hear me?", "Thank you.", "Who are you?", "Goodbye!"):
        messages = conversation(kiosk.prefix, [], said)
        reply = "".join(grounded.stream_reply(messages, max_tokens=40))
        assert reply == kiosk.chat.reply(said) and not is_dont_know(reply)
        assert grounded.last_verdict is Verdict.SMALL_TALK
        assert grounded.prefill(messages) == 0  # nothing for the model to prepare
    assert llm.asked == []


def test_a_question_with_a_greeting_is_answered_as_a_question() -> None:
    kiosk = Kiosk(PERSONA, KNOWLEDGE)
    llm = RecordingLlm("The cafe is on the ground floor.")
    grounded = kiosk.grounded(llm)
    reply = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], "Hi, where is the cafe?"), max_tokens=40))
    assert "ground floor" in reply.lower()
    assert grounded.last_verdict in (Verdict.DIRECT, Verdict.MODEL)
    assert kiosk.ground("Hi, where is the cafe?").small_talk is None


def test_the_config_names_the_phrase_file(tmp_path: Path) -> None:
    own = tmp_path / "talk.toml"
    own.write_text("[kinds.greeting]\npatterns = ['ahoy']\nreplies = ['Ahoy!']\n", encoding="utf-8")
    config = config_from_dict({"kiosk": {"persona": PERSONA, "knowledge": KNOWLEDGE, "small_talk_file": str(own)}})
    kiosk = Kiosk.from_config(config)
    assert kiosk.ground("Ahoy!").small_talk == "Ahoy!"
    assert kiosk.ground("Hello!").small_talk is None


def test_the_config_check_reports_a_bad_phrase_file(tmp_path: Path) -> None:
    from edgevoice.config_check import check_config

    own = tmp_path / "talk.toml"
    own.write_text("[kinds.greeting]\npatterns = ['(hi']\nreplies = ['Hi!']\n", encoding="utf-8")
    config = config_from_dict({"kiosk": {"small_talk_file": str(own)}})
    assert sum(str(own) in str(e) for e in check_config(config, devices=False).errors) == 1
    own.write_text("[kinds.greeting]\npatterns = ['hi']\nreplies = ['Hi!']\n", encoding="utf-8")
    assert not any(str(own) in str(e) for e in check_config(config, devices=False).errors)


CONCEPTS = {
    "hearing": ("hear", "listening"),
    "thanks": ("thank", "grateful"),
    "toilets": ("toilet",),
    "cafe": ("cafe", "coffee"),
    "weather": ("weather", "rain"),
}


class ConceptEmbedder:
    """Text -> the normalised sum of the concepts whose words it holds (a last axis when none): cosine 1 between
    texts about the same things, 0 between texts about different things, 0.71 when one of two is shared."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return concept_vectors(CONCEPTS, texts)


MEANING_TABLE = """\
[kinds.hearing_check]
patterns = ['can you hear me']
replies = ['Yes, I hear you.']
examples = ['Can you hear me?']
[kinds.thanks]
patterns = ['thank you']
replies = ['You are welcome.']
examples = ['Thank you.']
[kinds.greeting]
patterns = ['hello']
replies = ['Hello!']
[questions]
examples = ['Where are the toilets?']
[meaning]
min_similarity = 0.5
margin = 0.1
"""
MEANING_KNOWLEDGE = "Where is the cafe? The cafe is on the ground floor.\n"


@pytest.fixture
def by_meaning(tmp_path: Path) -> Kiosk:
    own = tmp_path / "talk.toml"
    own.write_text(MEANING_TABLE, encoding="utf-8")
    return Kiosk(PERSONA, MEANING_KNOWLEDGE, embedder=ConceptEmbedder(), small_talk_file=str(own))


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        ("Is anybody listening to me?", "hearing_check"),
        ("I'm so grateful.", "thanks"),
        ("Can you hear me?", "hearing_check"),
    ],
)
def test_a_rewording_no_pattern_holds_is_small_talk_by_meaning(by_meaning: Kiosk, said: str, kind: str) -> None:
    assert by_meaning.chat.by_meaning
    found = by_meaning.chat.kind_of(said, *by_meaning._meaning(said))
    assert found is not None and found.name == kind
    assert by_meaning.ground(said).small_talk == found.replies[0]
    assert by_meaning.small_talk(said)


@pytest.mark.parametrize(
    "said",
    [
        "Hello, can you hear me? Where are the toilets?",  # as close to a question's example as to small talk
        "Hello, is anybody listening? Where can I get a coffee?",  # as close to an entry
        "Will it rain later?",  # close to nothing
    ],
)
def test_a_question_is_no_small_talk_by_meaning(by_meaning: Kiosk, said: str) -> None:
    assert by_meaning.chat.kind_of(said, *by_meaning._meaning(said)) is None
    assert by_meaning.ground(said).small_talk is None
    assert not by_meaning.small_talk(said)


def test_the_entries_outweigh_small_talk_by_meaning(by_meaning: Kiosk) -> None:
    chat = by_meaning.chat
    vector = ConceptEmbedder().embed(["I'm grateful"])[0]
    assert chat.kind_of("I'm grateful", vector, nearest_entry=0.3) is not None
    assert chat.kind_of("I'm grateful", vector, nearest_entry=0.95) is None  # an entry as close: a question


def test_without_an_encoder_only_the_patterns_decide(tmp_path: Path) -> None:
    own = tmp_path / "talk.toml"
    own.write_text(MEANING_TABLE, encoding="utf-8")
    kiosk = Kiosk(PERSONA, MEANING_KNOWLEDGE, small_talk_file=str(own))
    assert not kiosk.chat.by_meaning
    assert kiosk.ground("Is anybody listening to me?").small_talk is None
    assert kiosk.ground("Can you hear me?").small_talk == "Yes, I hear you."


def test_a_bad_meaning_rule_is_a_config_error(tmp_path: Path) -> None:
    own = tmp_path / "talk.toml"
    own.write_text(MEANING_TABLE.replace("margin = 0.1", "margin = 'wide'"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"talk\.toml"):
        SmallTalk.load(PERSONA, own)


def test_a_greeting_with_a_question_answers_the_question() -> None:
    kiosk = Kiosk(PERSONA, KNOWLEDGE + "Where are the toilets? On every floor, beside the lifts.\n")
    llm = RecordingLlm("The toilets are on every floor.")
    grounded = kiosk.grounded(llm)
    said = "Hello, can you hear me? Where are the toilets?"
    reply = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], said), max_tokens=40))
    assert "every floor" in reply
    assert grounded.last_verdict in (Verdict.DIRECT, Verdict.MODEL)


def test_thanks_after_an_answer_gets_a_short_reply() -> None:
    kiosk = Kiosk(PERSONA, KNOWLEDGE)
    llm = RecordingLlm()
    grounded = kiosk.grounded(llm)
    history = [
        ChatMessage("user", "Where is the cafe?"),
        ChatMessage("assistant", "The Driftwood Cafe is on the ground floor, next to the lifts."),
    ]
    for said in ("Thank you!", "Thanks, that helps."):
        reply = "".join(grounded.stream_reply(conversation(kiosk.prefix, history, said), max_tokens=40))
        assert is_small_talk_reply(reply) and not is_dont_know(reply), said
        assert grounded.last_verdict is Verdict.SMALL_TALK
    assert llm.asked == []


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    from edgevoice.app import load_embedder

    return load_embedder(Config())


PARAPHRASES = [
    ("Are you able to hear what I say?", "hearing_check"),
    ("Is this microphone picking me up?", "hearing_check"),
    ("Am I speaking to a computer?", "identity"),
    ("Are you a person or a program?", "identity"),
    ("What sort of questions do you answer?", "abilities"),
    ("How do I ask you something?", "abilities"),
    ("You doing alright?", "wellbeing"),
    ("Okay, I'll be going now.", "goodbye"),
    ("Right, see you around!", "goodbye"),
    ("Cool, thank you!", "thanks"),
    ("That helped me a lot, thanks.", "thanks"),
    ("Hi, nice to see you.", "greeting"),
]
"""Small talk worded as none of the packaged patterns and examples is."""


@pytest.mark.models
def test_the_real_encoder_finds_rewordings_of_each_kind(minilm: Embedder) -> None:
    kiosk = Kiosk(PERSONA, KNOWLEDGE, embedder=minilm)
    for said, kind in PARAPHRASES:
        assert kiosk.chat._by_patterns(said) is None, said  # a rewording, not a pattern's
        found = kiosk.chat.kind_of(said, *kiosk._meaning(said))
        assert found is not None and found.name == kind, said
    assert kiosk.ground("Hi, where is the cafe?").small_talk is None


@pytest.mark.models
def test_the_real_encoder_takes_no_venue_question_for_small_talk(minilm: Embedder) -> None:
    """Every question of every benchmark venue that is not small talk, both halves: none is taken for small talk."""
    from edgevoice.bench.cli import venues

    for venue in venues(["all"]):
        kiosk = Kiosk(venue.persona, venue.knowledge, embedder=minilm)
        assert kiosk.semantic is not None
        asked = [q for q in venue.questions if q.kind != "small_talk"]
        vectors = minilm.embed([kiosk.semantic.neutral(q.text) for q in asked])  # one batch: the test stays short
        taken = []
        for q, vector in zip(asked, vectors, strict=True):
            nearest = float(np.maximum(kiosk.semantic.questions @ vector, kiosk.semantic.with_answers @ vector).max())
            if kiosk.chat.kind_of(q.text, vector, nearest) is not None:
                taken.append(q.text)
        assert taken == [], venue.name
