"""Venue knowledge: parsing (lines, Markdown, TOML), retrieval, the grounding gate, retrieval mode, the wrapper."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import edgevoice
from edgevoice import data
from edgevoice.bench.quality_set import IN_KNOWLEDGE, OUT_OF_KNOWLEDGE, Question
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.errors import ConfigError
from edgevoice.events import ChatMessage
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.knowledge import Entry, compile_knowledge, estimate_tokens, parse_knowledge, venue_vocabulary
from edgevoice.kiosk.number_words import as_digits
from edgevoice.kiosk.prompt import DONT_KNOW, EXAMPLE_FACTS, EXAMPLES, conversation
from edgevoice.kiosk.retrieval import STOP_WORDS, BM25Index, terms

SAMPLE_KNOWLEDGE = sample_knowledge()
SAMPLE_PERSONA = sample_persona()

# Development questions about the sample venue: the gate's threshold and the prompt were chosen on these, never on
# the benchmark's questions (edgevoice/data/sample_venue/questions.toml).
DEV_IN: tuple[Question, ...] = (
    Question("d-open", "When do you open in the morning?", (("10 am",),)),
    Question("d-sunday", "Is the museum open on Sunday?", (("yes", "10 am", "6 pm"),)),
    Question("d-student", "How much is a student ticket?", (("9 euros",),)),
    Question("d-kids", "Is it free for kids?", (("free", "yes"),)),
    Question("d-pass", "How much is the annual pass?", (("40 euros",),)),
    Question("d-cloak", "Is there a cloakroom?", (("ground floor", "main entrance"),)),
    Question("d-restroom", "Where are the restrooms?", (("every floor", "lifts"),)),
    Question("d-coffee", "Is there a place to get coffee?", (("Lighthouse", "top floor"),)),
    Question("d-gift", "Is there a gift shop?", (("exit", "ground floor"),)),
    Question("d-whale", "Where is the whale?", (("first floor",),)),
    Question("d-wreck", "What floor is the shipwreck gallery on?", (("second floor",),)),
    Question("d-special", "What is the current special exhibition?", (("Maps of the Sea",),)),
    Question("d-tours", "When are the tours?", (("11 am",), ("3 pm",))),
    Question("d-audio", "Do you have audio guides in German?", (("yes", "3 euros"),)),
    Question("d-step", "Is there step-free access?", (("main entrance", "step free", "yes"),)),
    Question("d-flash", "Can I use flash photography?", (("without flash", "no flash", "no", "not"),)),
    Question("d-net", "Do you have free internet?", (("HarbourMuseum", "no password", "yes"),)),
    Question("d-getthere", "How do I get to the museum?", (("line 4", "tram"),)),
    Question("d-park", "Where can I park?", (("Quay Street",),)),
    Question("d-umbrella", "I forgot my umbrella somewhere, who can help?", (("cloakroom",),)),
    # second round, added after the first benchmark run showed paraphrases the first round lacked (days the
    # knowledge does not name, verbs like "put" or "reach"); written fresh, none taken from the benchmark
    Question("d-wednesday", "Can I visit on a Wednesday evening?", (("6 pm", "closes"),)),
    Question("d-friday", "What time do you shut on Fridays?", (("6 pm",),)),
    Question("d-till", "Till what time can I come in?", (("half an hour",),)),
    Question("d-suitcase", "Is there somewhere to store my suitcase?", (("cloakroom", "lockers"),)),
    Question("d-cost", "What does it cost to get in?", (("14 euros",),)),
    Question("d-store", "Where's the gift store?", (("exit",),)),
    Question("d-level", "Which level is the whale hall on?", (("first floor",),)),
    Question("d-wifi-here", "Do you have wifi here?", (("HarbourMuseum", "no password", "yes"),)),
    Question("d-reach", "How do I reach you by tram?", (("line 4",),)),
    Question("d-parking-cost", "Is parking expensive?", (("3 euros",),)),
    Question("d-wallet", "I've lost my wallet.", (("cloakroom",),)),
    Question("d-knee", "My child fell and hurt his knee.", (("first aid", "information desk"),)),
    Question("d-tour-start", "Where do the tours leave from?", (("main entrance",),)),
    Question("d-maps-on", "Is the exhibition about maps still on?", (("March",),)),
)
DEV_OUT: tuple[Question, ...] = (
    Question("d-tokyo", "What's the time in Tokyo?"),
    Question("d-sing", "Can you sing a song?"),
    Question("d-pharmacy", "Where is the nearest pharmacy?"),
    Question("d-smoking", "Is smoking allowed?"),
    Question("d-joke", "Tell me a joke."),
    Question("d-lighthouse", "How tall is the lighthouse?"),
    Question("d-discover", "Who discovered the shipwreck?"),
    Question("d-party", "Can I book a birthday party at the museum?"),
    Question("d-wifi-speed", "How fast is the wifi?"),
    Question("d-cafe-discount", "Are there student discounts in the cafe?"),
    Question("d-dogs", "Are dogs allowed?"),
    Question("d-atm", "Where is the nearest cash machine?"),
    Question("d-taxi", "Can you order me a taxi?"),
    Question("d-history", "What is the history of the harbour?"),
    Question("d-director", "Who is the director of the museum?"),
    Question("d-visitors", "How many visitors come each year?"),
    Question("d-pushchair", "Can I bring a pushchair?"),
)

# Third round, written for semantic matching (edgevoice/kiosk/semantic.py): paraphrases that share few words with
# their entry, and questions outside the knowledge, near misses among them (a detail the entry does not give). Its
# thresholds were chosen on all three rounds; none of these is taken from the benchmark either.
DEV_IN_3: tuple[Question, ...] = (
    Question("d-closed-day", "What days are you closed?", (("Monday",),)),
    Question("d-late-day", "Are you open late on any day?", (("Thursday",), ("9 pm",))),
    Question(
        "d-stop-letting", "How long before closing do you stop letting people in?", (("half an hour", "30 minutes"),)
    ),
    Question("d-fee", "What's the entrance fee?", (("14 euros",),)),
    Question("d-pensioner", "Do pensioners get a reduction?", (("9 euros",),)),
    Question("d-whole-year", "Can I buy a ticket that is valid for the whole year?", (("40 euros",),)),
    Question("d-season", "Is there a season ticket?", (("40 euros",),)),
    Question("d-jacket", "Where do I drop off my jacket?", (("cloakroom",),)),
    Question("d-lockers", "Are there lockers?", (("ground floor", "lockers"),)),
    Question("d-wash-hands", "Where can I wash my hands?", (("every floor", "lifts"),)),
    Question("d-lunch", "I'm hungry, is there anywhere to have lunch?", (("Lighthouse", "top floor"),)),
    Question("d-drink", "Where can I get a drink?", (("Lighthouse", "top floor"),)),
    Question("d-gifts", "Can I buy gifts here?", (("exit",),)),
    Question("d-bones", "Where can I see the big whale bones?", (("first floor",),)),
    Question("d-sunken", "Where are the sunken ships displayed?", (("second floor",),)),
    Question("d-now-on", "Which exhibition is on right now?", (("Maps of the Sea",),)),
    Question("d-map-until", "How long does the map exhibition run?", (("March 30",),)),
    Question("d-show-around", "Can someone show us around?", (("11 am", "3 pm"),)),
    Question("d-tour-cost", "Do tours cost extra?", (("5 euros",),)),
    Question(
        "d-headphones", "Can I listen to commentary on headphones while I walk around?", (("3 euros", "audio guide"),)
    ),
    Question("d-guide-langs", "Which languages is the audio guide in?", (("German",),)),
    Question(
        "d-disabled", "Is the building suitable for disabled visitors?", (("step-free", "step free", "wheelchair"),)
    ),
    Question("d-borrow-chair", "Can I borrow a wheelchair?", (("cloakroom",),)),
    Question("d-photography", "Is photography permitted?", (("flash",),)),
    Question("d-online", "Can I get online here?", (("HarbourMuseum", "no password"),)),
    Question("d-network-name", "What's the name of the wireless network?", (("HarbourMuseum",),)),
    Question("d-which-stop", "Which stop should I get off at?", (("Harbour Square",),)),
    Question("d-walk", "How far is it from the tram stop?", (("two minutes",),)),
    Question("d-car", "Where can I leave my car?", (("Quay Street",),)),
    Question("d-left-jacket", "My son left his scarf here yesterday, where can we look for it?", (("cloakroom",),)),
    Question("d-found-wallet", "I found someone's purse, who should I hand it to?", (("cloakroom",),)),
    Question("d-cut-finger", "I cut my finger, can someone help me?", (("first aid", "information desk"),)),
    Question("d-injured", "Who can help if somebody gets injured?", (("first aid",),)),
)
DEV_OUT_3: tuple[Question, ...] = (
    Question("d-restaurant-town", "What's the best restaurant in town?"),
    Question("d-airport", "How do I get to the airport?"),
    Question("d-translate", "Can you translate this into Spanish?"),
    Question("d-math", "What is two plus two?"),
    Question("d-ferry", "When does the next ferry leave?"),
    Question("d-sim", "Where can I buy a SIM card?"),
    Question("d-concerts", "Are there any concerts this weekend?"),
    Question("d-wedding", "Can I get married at the museum?"),
    Question("d-prayer", "Is there a prayer room?"),
    Question("d-charge-phone", "Can I charge my phone somewhere?"),
    Question("d-baby-change", "Is there a baby changing room?"),
    Question("d-species", "What species is the whale?"),
    Question("d-coffee-price", "How much is a coffee in the cafe?"),
    Question("d-book-online", "Can I book tickets online?"),
    Question("d-family", "Is there a family ticket?"),
    Question("d-wreck-depth", "How deep was the shipwreck found?"),
    Question("d-ev-charge", "Where can I charge my electric car?"),
    Question("d-locker-count", "How many lockers are there?"),
    Question("d-quiet", "Is there a quiet room where I can rest?"),
    Question("d-cafe-terrace", "Does the cafe have a terrace?"),
)


def test_dev_and_benchmark_questions_are_different() -> None:
    bench = {q.text.lower() for q in IN_KNOWLEDGE + OUT_OF_KNOWLEDGE}
    dev = [q.text.lower() for q in DEV_IN + DEV_OUT + DEV_IN_3 + DEV_OUT_3]
    assert not bench & set(dev) and len(set(dev)) == len(dev)


@pytest.fixture(scope="module")
def kiosk() -> Kiosk:
    return Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE)


# --- parsing -----------------------------------------------------------------------------------------------------


def test_question_and_answer_lines_compile_back_unchanged() -> None:
    entries = parse_knowledge(SAMPLE_KNOWLEDGE)
    assert len(entries) == len(SAMPLE_KNOWLEDGE.strip().splitlines())
    assert entries[0] == Entry(
        "When is the museum open?",
        "Tuesday to Sunday from 10 am to 6 pm, and on Thursdays until 9 pm. It is closed on Mondays.",
    )
    assert compile_knowledge(entries) == SAMPLE_KNOWLEDGE.strip()


def test_markdown_headings_bullets_terms_and_qa_pairs() -> None:
    text = """# Harbour City Museum

## Opening hours
- **Tuesday to Sunday**: 10 am to 6 pm
- Closed on Mondays.

## Tickets
Adults pay 14 euros.
Children go free, see [prices](https://example.org/prices).

Q: Can I take photos?
A: Yes, *without* flash.

```
ignored code
```
Parking: the Quay Street car park.
"""
    assert parse_knowledge(text) == [
        Entry("Opening hours, Tuesday to Sunday", "10 am to 6 pm"),
        Entry("Opening hours", "Closed on Mondays."),
        Entry("Tickets", "Adults pay 14 euros. Children go free, see prices."),
        Entry("Can I take photos?", "Yes, without flash."),
        Entry("Tickets, Parking", "the Quay Street car park."),
    ]
    lines = compile_knowledge(parse_knowledge(text)).splitlines()
    assert lines[:4] == [
        "Opening hours, Tuesday to Sunday: 10 am to 6 pm",
        "Opening hours: Closed on Mondays.",
        "Tickets: Adults pay 14 euros. Children go free, see prices.",
        "Can I take photos? Yes, without flash.",
    ]
    assert not any(mark in "\n".join(lines) for mark in ("**", "](", "#", "*without*"))


def test_toml_qa_tables_with_keywords() -> None:
    text = """
[[qa]]
question = "Where are the toilets?"
answer = "On every floor, next to the lifts."
keywords = ["restroom", "loo"]

[[qa]]
answer = "The museum was founded in 1892."
"""
    entries = parse_knowledge(text)
    assert entries == [
        Entry("Where are the toilets?", "On every floor, next to the lifts.", ("restroom", "loo")),
        Entry("", "The museum was founded in 1892."),
    ]
    assert compile_knowledge(entries) == (
        "Where are the toilets? On every floor, next to the lifts.\nThe museum was founded in 1892."
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[qa]]\nquestion = 'Q?'\n", "needs an answer"),
        ("[[qa]]\nanswer = 'A.'\nkeywords = 'x'\n", "keywords must be a list"),
        ("[[qa]]\nanswer = 'A.'\nhint = 1\n", "unknown key 'hint'"),
        ("title = 'x'\n[[qa]]\nanswer = 'A.'\n", "unknown key 'title'"),
        ("[[qa]]\nanswer = \n", "not valid TOML"),
    ],
)
def test_bad_toml_knowledge_is_a_config_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_knowledge(text)


def test_venue_vocabulary_is_names_not_sentence_starts_days_or_months() -> None:
    vocabulary = venue_vocabulary(parse_knowledge(SAMPLE_KNOWLEDGE), also=[SAMPLE_PERSONA])
    for name in ("Harbour City Museum", "Lighthouse Cafe", "Maps of the Sea", "HarbourMuseum", "Quay Street"):
        assert name in vocabulary
    for not_a_name in ("Tuesday", "Mondays", "March", "Yes", "Take", "Where", "The"):
        assert not_a_name not in vocabulary


def test_token_estimate_is_close_to_the_tokenizer() -> None:
    # Qwen2.5's tokenizer gives 431 +- 10 % for the sample venue; the estimate only decides prompt vs retrieval
    assert 380 <= estimate_tokens(SAMPLE_KNOWLEDGE) <= 480


# --- retrieval -----------------------------------------------------------------------------------------------------


def test_terms_join_forms_and_synonyms() -> None:
    assert terms("Where are the restrooms?") == terms("Where is the toilet") == ["toilet"]
    assert terms("Is it opening? Opens? Closed?") == ["hour", "hour", "hour"]
    assert terms("The café's Wi-Fi") == ["cafe", "wifi"]
    assert terms("Do you have first aid?") == ["firstaid"]
    # a recognizer's spelling of a hyphenated word is the same concept
    assert terms("Is there step free access? Wi fi?") == terms("Is there step-free access? Wi-Fi?")
    assert terms("Can I get online? Where can I wash my hands?") == ["wifi", "toilet"]
    assert terms("Is there a season ticket?") == terms("Is there an annual pass?")[1:] == ["pass"]


def test_bm25_ranks_the_entry_that_answers() -> None:
    index = BM25Index(["The shop is at the exit.", "Toilets are next to the lifts.", "The cafe is on the top floor."])
    best = index.search("Where can I find a restroom?")
    assert best[0].index == 1 and best[0].coverage == 1.0
    assert [m.index for m in index.search("coffee and a gift")] in ([0, 2], [2, 0])
    assert index.search("Can I bring my dog?") == []
    partial = index.search("Is the cafe vegan?")[0]
    assert partial.index == 2 and 0.0 < partial.coverage < 0.5


def test_near_spellings_and_word_forms_still_match() -> None:
    index = BM25Index(["The Harbour Square stop.", "Photos without flash."])
    assert index.search("harbor square")[0].coverage == 1.0
    assert index.search("photography")[0].index == 1
    assert index.search("dog")[0:1] == []


# --- the grounding gate: tuned on the development questions only ----------------------------------------------------


@pytest.mark.parametrize("question", DEV_IN, ids=lambda q: q.id)
def test_gate_lets_questions_about_the_venue_through(kiosk: Kiosk, question: Question) -> None:
    assert kiosk.ground(question.text).known


DEV_NEAR = {
    "d-lighthouse",
    "d-wifi-speed",
    "d-cafe-discount",
    "d-tokyo",
    "d-visitors",
}
"""Outside the knowledge, but sharing a name or topic with it: the gate lets them through, the model declines.
("Who discovered the shipwreck?" was one; it asks a person, which no entry names, and the gate stops it now.)"""


@pytest.mark.parametrize("question", [q for q in DEV_OUT if q.id not in DEV_NEAR], ids=lambda q: q.id)
def test_gate_stops_questions_the_knowledge_does_not_cover(kiosk: Kiosk, question: Question) -> None:
    assert not kiosk.ground(question.text).known


@pytest.mark.parametrize("question", [q for q in DEV_OUT if q.id in DEV_NEAR], ids=lambda q: q.id)
def test_near_misses_reach_the_model(kiosk: Kiosk, question: Question) -> None:
    assert kiosk.ground(question.text).known


def test_small_talk_passes_the_gate_and_the_gate_can_be_off() -> None:
    assert Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE).ground("Hello!").known
    off = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE, grounding_threshold=0.0)
    assert off.ground("Who won the football match?").known


class RecordingLlm:
    def __init__(self, reply: str = "The shop is at the exit.") -> None:
        self.reply = reply
        self.prompts: list[list[ChatMessage]] = []
        self.prefilled: list[list[ChatMessage]] = []

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.prompts.append(list(messages))
        yield self.reply

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        self.prefilled.append(list(messages))
        return 7

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return 3


def test_grounded_model_answers_dont_know_without_the_model(kiosk: Kiosk) -> None:
    llm = RecordingLlm()
    grounded = kiosk.grounded(llm)
    reply = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], "Can I bring my dog?"), max_tokens=40))
    assert reply == DONT_KNOW and llm.prompts == []
    assert grounded.last_grounding is not None and not grounded.last_grounding.known
    assert grounded.prefill(conversation(kiosk.prefix, [], "Can I bring my dog?")) == 0 and llm.prefilled == []


def test_grounded_model_passes_known_questions_and_everything_else_through() -> None:
    kiosk = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE, direct_answers=False, hint_entries=0)
    llm = RecordingLlm()
    grounded = kiosk.grounded(llm)
    messages = conversation(kiosk.prefix, [], "Is there a gift shop?")
    assert "".join(grounded.stream_reply(messages, max_tokens=40)) == llm.reply
    assert llm.prompts == [messages]  # the knowledge is in the cached prefix and no hint: the question as it is
    assert grounded.prefill(messages) == 7 and llm.prefilled == [messages]
    assert grounded.prefill(kiosk.prefix) == 7  # no question last: a plain prefill
    assert grounded.count_tokens(messages) == 3  # delegated
    with pytest.raises(AttributeError):
        grounded.forget_messages  # noqa: B018  (the wrapped model has none, so neither has the wrapper)


def test_large_knowledge_is_retrieved_per_question_and_the_prefix_stays_fixed() -> None:
    extra = "\n".join(f"What is exhibit {i}? Exhibit {i} is a model ship from harbour number {i}." for i in range(300))
    big = Kiosk(
        SAMPLE_PERSONA, SAMPLE_KNOWLEDGE + extra, knowledge_budget_tokens=1000, retrieve_entries=3, direct_answers=False
    )
    assert big.retrieval
    assert "Lighthouse Cafe" not in big.prefix[0].content  # no facts in the system prompt
    llm = RecordingLlm()
    grounded = big.grounded(llm)
    first = conversation(big.prefix, [], "Where can I get a coffee?")
    "".join(grounded.stream_reply(first, max_tokens=40))
    "".join(grounded.stream_reply(conversation(big.prefix, [], "Where are the toilets?"), max_tokens=40))
    sent_first, sent_second = llm.prompts
    assert sent_first[: len(big.prefix)] == sent_second[: len(big.prefix)] == big.prefix  # cached prefix unchanged
    question = sent_first[-1].content
    assert question.endswith("Question: Where can I get a coffee?")
    assert "The Lighthouse Cafe is on the top floor" in question
    assert question.count("\n") <= 3 + 3  # at most retrieve_entries facts
    assert all(m.role in ("system", "user", "assistant") for m in big.prefix)
    assert "Venue facts:" in big.prefix[1].content  # the example turns show the same shape


def test_the_sample_venue_fits_the_prompt_and_each_question_brings_its_best_entry() -> None:
    hinted = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE)
    assert not hinted.retrieval and "Lighthouse Cafe" in hinted.prefix[0].content
    turn = hinted.user_turn("Is there a gift shop?", hinted.ground("Is there a gift shop?"))
    assert turn == "Venue facts:\nIs there a shop? The museum shop is at the exit on the ground floor.\n\n" + (
        "Question: Is there a gift shop?"
    )
    assert Config().kiosk.hint_entries == 1
    plain = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE, hint_entries=0)
    assert plain.user_turn("Is there a gift shop?", plain.ground("Is there a gift shop?")) == "Is there a gift shop?"


def test_venue_examples_come_from_the_knowledge() -> None:
    kiosk = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE, venue_examples=2, hint_entries=0)
    turns = [m.content for m in kiosk.prefix[1:]]
    assert turns[0] == "When is the museum open?" and turns[1].startswith("Tuesday to Sunday")
    assert DONT_KNOW in turns
    hinted = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE, venue_examples=2)  # the example turns show the hint's shape
    assert [m.content for m in hinted.prefix[1:3]] == [
        "Venue facts:\nWhen is the museum open? " + turns[1] + "\n\nQuestion: When is the museum open?",
        turns[1],
    ]


# --- data files ------------------------------------------------------------------------------------------------------


def test_the_sample_venue_and_the_word_lists_are_read_from_the_data_files() -> None:
    assert Config().kiosk.persona == SAMPLE_PERSONA and SAMPLE_PERSONA.startswith("You are Ada")
    assert Config().kiosk.knowledge == SAMPLE_KNOWLEDGE and len(parse_knowledge(SAMPLE_KNOWLEDGE)) == 20
    assert {"the", "where's", "inside"} <= STOP_WORDS and "toilet" not in STOP_WORDS
    assert terms("Where is the restroom?") == ["toilet"] and terms("I want to wash my hands") == ["toilet"]
    assert EXAMPLES[1] == ("Who won the football match yesterday?", DONT_KNOW)
    assert EXAMPLE_FACTS[EXAMPLES[0][0]] == (" ".join(EXAMPLES[0]),)
    assert len(IN_KNOWLEDGE) == 28 and len(OUT_OF_KNOWLEDGE) == 16


@pytest.mark.parametrize(
    "name",
    [
        "en/stop_words.txt",
        "en/not_names.txt",
        "en/reply_filler.txt",
        "en/synonyms.toml",
        "en/answer_types.toml",
        "en/secrets.txt",
        "en/instructions.txt",
        "en/prompt.toml",
        "sample_venue/questions.toml",
        "sample_venue/selftest_utterances.toml",
        "sample_venue/engine_bench.toml",
    ],
)
def test_each_data_file_says_what_it_is_for(name: str) -> None:
    assert data.text(name).startswith("# ")
    assert data.words(name) if name.endswith(".txt") else data.table(name)


def test_the_verdict_names_are_the_strings_the_benchmark_prints() -> None:
    assert [v.value for v in Verdict] == ["model", "gate", "direct", "unsupported", "echo", "unheard", "small talk"]


# --- configuration ---------------------------------------------------------------------------------------------------


def test_kiosk_keys_are_validated_and_a_toml_file_is_read(tmp_path: Path) -> None:
    facts = tmp_path / "venue.toml"
    facts.write_text('[[qa]]\nquestion = "Is there a shop?"\nanswer = "Yes, at the exit."\n', encoding="utf-8")
    config = config_from_dict({"kiosk": {"knowledge_file": str(facts), "grounding_threshold": 0.3}})
    kiosk = Kiosk.from_config(config)
    assert kiosk.entries == [Entry("Is there a shop?", "Yes, at the exit.")]
    assert kiosk.grounding_threshold == 0.3
    with pytest.raises(ConfigError, match=r"kiosk.grounding_threshold = 2.0: must be between 0.0 and 1.0"):
        config_from_dict({"kiosk": {"grounding_threshold": 2.0}})
    with pytest.raises(ConfigError, match=r"kiosk\.retrieve_entries"):
        config_from_dict({"kiosk": {"retrieve_entries": 0}})


def test_recognizer_prompt_is_the_venue_vocabulary_when_asked_unless_configured() -> None:
    kiosk = Kiosk.from_config(config_from_dict({"kiosk": {"vocabulary_prompt": True}}))
    assert kiosk.asr_prompt("").startswith("Ada, Harbour City Museum, Lighthouse Cafe")
    assert kiosk.asr_prompt("My own words.") == "My own words."
    off = Kiosk.from_config(Config())  # off by default: it costs recognition time on the reply's path
    assert off.asr_prompt("") == "" and off.asr_prompt("My own words.") == "My own words."


def test_a_partly_covered_question_gets_its_reply_checked_against_the_knowledge(kiosk: Kiosk) -> None:
    question = "How tall is the whale skeleton?"  # the knowledge says where it is, not how tall
    assert kiosk.ground(question).known and kiosk.ground(question).coverage < 1.0
    invented = kiosk.grounded(RecordingLlm("The whale skeleton is 25 metres long and 120 years old."))
    pieces = list(invented.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=40))
    assert "".join(pieces) == DONT_KNOW and invented.last_verdict is Verdict.UNSUPPORTED
    honest = kiosk.grounded(RecordingLlm("The whale skeleton is in the whale hall on the first floor."))
    reply = "".join(honest.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=40))
    assert (
        reply == "The whale skeleton is in the whale hall on the first floor." and honest.last_verdict is Verdict.MODEL
    )


class WordByWordLlm(RecordingLlm):
    """Streams its reply a word at a time, as a model does, and records how far it got."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.given = 0

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.prompts.append(list(messages))
        for i, word in enumerate(self.reply.split(" ")):
            self.given += 1
            yield word if i == 0 else " " + word


def test_a_checked_reply_speaks_each_supported_sentence_as_soon_as_it_is_complete(kiosk: Kiosk) -> None:
    question = "How tall is the whale skeleton?"
    llm = WordByWordLlm("It is in the whale hall on the first floor. It is 25 metres long. It is old.")
    grounded = kiosk.grounded(llm)
    pieces = []
    for piece in grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=40):
        pieces.append(piece)
        if piece.strip():
            spoken_after = llm.given  # the first sentence came out before the model went on
            break
    assert pieces[-1] == "It is in the whale hall on the first floor."
    assert spoken_after == 10  # its ten words, not one more
    rest = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=40))
    # the invented second sentence ends the reply there: the supported first one stays, nothing after it
    assert rest == "It is in the whale hall on the first floor." and grounded.last_verdict is Verdict.UNSUPPORTED


def _spoken(grounded: object, question: str, prefix: Sequence[ChatMessage]) -> list[str]:
    return [p for p in grounded.stream_reply(conversation(prefix, [], question), max_tokens=40) if p]  # type: ignore[attr-defined]


@pytest.mark.parametrize("question", ["Where do I ask about a lost umbrella?", "I lost my umbrella, who can help?"])
def test_a_refusal_that_names_the_place_its_entry_gives_is_spoken_as_that_place(kiosk: Kiosk, question: str) -> None:
    # streamed (fully covered) and checked (partly covered): both reach the lost-property entry first
    assert kiosk.ground(question).entries[0].question == "Where is lost property?"
    llm = WordByWordLlm(
        "I don't know that, please ask at the cloakroom on the ground floor. It is next to the main entrance."
    )
    grounded = kiosk.grounded(llm)
    pieces = _spoken(grounded, question, kiosk.prefix)
    # nothing of the refusal was ever handed on: the first words out are the mended sentence
    assert pieces[0] == "Please ask at the cloakroom on the ground floor."
    assert "".join(pieces) == "Please ask at the cloakroom on the ground floor. It is next to the main entrance."
    assert grounded.last_verdict is Verdict.MODEL


def test_a_refusal_that_names_another_place_becomes_the_plain_refusal_and_ends_the_reply(kiosk: Kiosk) -> None:
    question = "Where do I ask about a lost umbrella?"
    grounded = kiosk.grounded(WordByWordLlm("I don't know that, please ask at the gift shop counter. Have a nice day."))
    assert "".join(_spoken(grounded, question, kiosk.prefix)) == DONT_KNOW
    plain = kiosk.grounded(WordByWordLlm(f"{DONT_KNOW} Sorry!"))
    assert "".join(_spoken(plain, question, kiosk.prefix)) == DONT_KNOW


@pytest.mark.parametrize(
    "reply",
    [
        "I think the cloakroom on the ground floor has it.",  # begins like the refusal, then is not one
        "Ask at the cloakroom on the ground floor.",
        "I don't",  # the stream ended inside the opening
    ],
)
def test_a_reply_that_is_not_a_refusal_passes_unchanged(kiosk: Kiosk, reply: str) -> None:
    grounded = kiosk.grounded(WordByWordLlm(reply))
    assert "".join(_spoken(grounded, "Where do I ask about a lost umbrella?", kiosk.prefix)) == reply


def test_a_checked_reply_that_only_echoes_the_question_gives_way_to_the_best_entrys_answer(kiosk: Kiosk) -> None:
    question = "Is photography allowed?"
    grounded = kiosk.grounded(WordByWordLlm("Yes, photography is allowed. Enjoy your visit."))
    assert "".join(_spoken(grounded, question, kiosk.prefix)) == "Yes, without flash."
    assert grounded.last_verdict is Verdict.ECHO
    informed = kiosk.grounded(WordByWordLlm("Yes, photography is allowed without flash."))
    assert "".join(_spoken(informed, question, kiosk.prefix)) == "Yes, photography is allowed without flash."
    assert informed.last_verdict is Verdict.MODEL


def test_a_streamed_reply_that_says_the_visitors_words_back_gives_way_to_the_best_entrys_answer(kiosk: Kiosk) -> None:
    # "do children have to pay?" heard as a statement at 10 dB
    heard = "Each children have to pay."
    assert kiosk.ground(heard).coverage == 1.0
    grounded = kiosk.grounded(WordByWordLlm("Each children have to pay. Enjoy your visit."))
    pieces = _spoken(grounded, heard, kiosk.prefix)
    assert pieces == [kiosk.ground(heard).entries[0].answer]  # the tickets entry: "... children under 12 free ..."
    assert grounded.last_verdict is Verdict.ECHO
    cut = kiosk.grounded(WordByWordLlm("Each children have to"))  # the reply ended inside the echo
    assert _spoken(cut, heard, kiosk.prefix) == pieces and cut.last_verdict is Verdict.ECHO


def test_a_first_sentence_is_held_only_while_it_could_echo_the_question(kiosk: Kiosk) -> None:
    question = "Do children have to pay?"
    llm = WordByWordLlm("No, children under 12 are free, and adults pay 14 euros.")
    grounded = kiosk.grounded(llm)
    stream = grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=40)
    first = next(piece for piece in stream if piece)
    # "No," alone could still become "No, children have to pay.": it goes out with the clause that says more
    assert first == "No, children under 12 are free," and llm.given == 6
    assert "".join([first, *stream]) == llm.reply and grounded.last_verdict is Verdict.MODEL
    # a first sentence that is the question said back gives way to the best entry's answer
    going_on = kiosk.grounded(WordByWordLlm("Do children pay? No, children under 12 are free."))
    assert "".join(_spoken(going_on, question, kiosk.prefix)) == kiosk.ground(question).entries[0].answer
    assert going_on.last_verdict is Verdict.ECHO
    # a whole sentence that only begins like the question's first word is its own ("yes" is not "yesterday")
    yes = kiosk.grounded(WordByWordLlm("Yes. The cloakroom keeps lost things."))
    said = "Yesterday I lost my umbrella."
    assert "".join(_spoken(yes, said, kiosk.prefix)) == "Yes. The cloakroom keeps lost things."
    assert "".join(_spoken(kiosk.grounded(WordByWordLlm("Yes")), said, kiosk.prefix)) == "Yes"
    # words with nothing to look up (no small talk of a known kind) are said back, and that is no echo
    okay = kiosk.grounded(WordByWordLlm("Okay! How can I help you?"))
    assert "".join(_spoken(okay, "Okay!", kiosk.prefix)) == "Okay! How can I help you?"
    assert okay.last_verdict is Verdict.MODEL


def test_an_echo_is_a_reply_with_nothing_the_question_did_not_bring(kiosk: Kiosk) -> None:
    assert kiosk.check.echoes("Yes, the museum is open late on any day.", "Are you open late on any day?")
    assert kiosk.check.echoes("Yes, photographs are permitted.", "Is photography permitted?")  # near spellings count
    assert not kiosk.check.echoes("It is open until 9 pm on Thursdays.", "Are you open late on any day?")
    assert not kiosk.check.echoes(DONT_KNOW, "Are you open late on any day?")  # a refusal says nothing: not an echo


@pytest.mark.parametrize(
    "invented",
    [
        "It is 99 euros, founded in 1700.",
        "Adults pay fourteen euros, and the museum was built in nineteen twelve.",  # numbers in words are values too
        "Adults pay ninety nine euros.",
    ],
)
def test_a_fully_covered_questions_reply_is_checked_too(kiosk: Kiosk, invented: str) -> None:
    question = "How much are tickets?"
    assert kiosk.ground(question).coverage == 1.0
    grounded = kiosk.grounded(RecordingLlm(invented))
    reply = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=40))
    assert grounded.last_verdict is Verdict.UNSUPPORTED
    assert not set(re.findall(r"\d+", as_digits(reply))) - {"14"}, reply  # no value but the entry's own
    for right in ("Adults pay 14 euros, and children under 12 are free.", "Adults pay fourteen euros."):
        honest = kiosk.grounded(RecordingLlm(right))
        said = "".join(honest.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=40))
        assert said == right and honest.last_verdict is Verdict.MODEL


@pytest.mark.parametrize(
    ("question", "reply", "supported"),
    [
        ("How tall is the lighthouse?", "The lighthouse is 10 meters tall.", False),
        ("Who is the director of the museum?", "The director of the museum is Dr. John Smith.", False),
        ("What is the history of the harbour?", "The museum was founded in 1965.", False),
        ("Which level is the whale hall on?", "The whale hall is on the first floor.", True),
        ("Where do the tours leave from?", "Guided tours start at the main entrance at 11 am and 3 pm.", True),
        ("I forgot my umbrella, who can help?", "Ask at the cloakroom, where lost property is kept.", True),
    ],
)
def test_reply_support(kiosk: Kiosk, question: str, reply: str, supported: bool) -> None:
    evidence = kiosk.ground(question).entries
    assert kiosk.check.supported(reply, question, evidence) is supported, kiosk.check.unsupported(reply, question)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Where is the whale skeleton?", "In the whale hall on the first floor."),
        ("Is there a cafe in the museum?", "The Lighthouse Cafe is on the top floor, open from 10 am to 5 pm."),
        ("Can I take photos inside?", "Yes, without flash."),
        (
            "Where can I leave my backpack?",
            "In the free cloakroom and lockers on the ground floor, next to the main entrance.",
        ),
        ("Where do I park?", "The Quay Street car park is next door, 3 euros per hour."),
    ],
)
def test_a_question_one_entry_answers_outright_gets_its_answer_without_the_model(
    kiosk: Kiosk, question: str, answer: str
) -> None:
    llm = RecordingLlm()
    grounded = kiosk.grounded(llm)
    messages = conversation(kiosk.prefix, [], question)
    assert "".join(grounded.stream_reply(messages, max_tokens=40)) == answer
    assert llm.prompts == [] and grounded.last_verdict is Verdict.DIRECT
    assert grounded.prefill(messages) == 0  # nothing for the model to prepare either


@pytest.mark.parametrize(
    "question",
    [
        "How old is the whale skeleton?",  # a near miss: the entry does not say
        "How many ships are in the museum?",  # "ships" only nearly spells "shop"
        "Is there a lift?",  # the lifts are in the toilets' answer, not what that entry is about
        "Are there guided tours in English?",  # two entries (tours, audio guide) answer about equally well
        "Do children have to pay?",
    ],
)
def test_questions_no_entry_answers_outright_go_to_the_model(kiosk: Kiosk, question: str) -> None:
    assert kiosk.ground(question).direct is None


def test_no_name_of_the_sample_venue_is_written_in_the_package_code() -> None:
    """The sample venue lives in data files: its names (capitalised words inside a sentence, not the calendar's or a
    language's) appear in no module of the package, so no rule can be fitted to it by name."""
    common = {"English", "French", "German", "March", "Mondays", "Sunday", "Thursdays", "Square", "Street"}
    names = set()
    for line in SAMPLE_KNOWLEDGE.splitlines():
        names |= {m.group(1) for m in re.finditer(r"(?<![.?!]\s)(?<!^)\b([A-Z][a-zA-Z]{4,})", line)}
    names -= common
    assert {"Harbour", "Lighthouse"} <= names
    package = Path(edgevoice.__file__).parent
    found = {
        (str(path.relative_to(package)), name)
        for path in package.rglob("*.py")
        for name in names
        if re.search(rf"\b{name}\b", path.read_text(encoding="utf-8"), re.I)
    }
    assert found == set()


def test_a_question_grounded_again_is_not_matched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # the speculative prefill grounds a transcript at the pause, the reply the same one at the commit
    kiosk = Kiosk(SAMPLE_PERSONA, SAMPLE_KNOWLEDGE)
    matched: list[str] = []
    ground = kiosk.matcher.ground
    monkeypatch.setattr(kiosk.matcher, "ground", lambda q: matched.append(q) or ground(q))
    first = kiosk.ground("Where is the whale?")
    assert kiosk.ground("Where is the whale?") is first and matched == ["Where is the whale?"]
    assert kiosk.ground("Is there a gift shop?").entries != first.entries
    for i in range(40):  # only the last few questions are kept
        kiosk.ground(f"Is room {i} open?")
    kiosk.ground("Where is the whale?")
    assert matched.count("Where is the whale?") == 2
