"""The venue benchmark (``edgevoice bench --quality --venue``): the venue loader on every venue, the scorer on
hand-made replies, follow-ups asked with their history, the command line; one run with the real default models."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from edgevoice.bench.cli import venues
from edgevoice.bench.quality_set import IN_KNOWLEDGE, OUT_OF_KNOWLEDGE
from edgevoice.bench.scoring import invented_values, is_small_talk_reply
from edgevoice.bench.venue import KINDS, Question, Venue, load_venue, parse_questions, sample_venue, venue_dirs
from edgevoice.bench.venue_quality import Conversations, answer_venue, score_reply, summarize
from edgevoice.cli import build_parser
from edgevoice.cli_parser import UsageError
from edgevoice.config import AsrConfig, Config
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.errors import ConfigError
from edgevoice.events import ChatMessage, Transcript
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.knowledge import parse_knowledge
from edgevoice.kiosk.prompt import ASK_AGAIN, DONT_KNOW

ROOT = Path(__file__).resolve().parents[1]
VENUE_DIRS = venue_dirs(ROOT / "venues")


def test_there_are_four_venues() -> None:
    assert [d.name for d in VENUE_DIRS] == ["campus", "cityhall", "hotel", "library"]


@pytest.mark.parametrize("directory", VENUE_DIRS, ids=lambda d: d.name)
def test_loader_reads_every_venue(directory: Path) -> None:
    venue = load_venue(directory)
    assert venue.name == directory.name
    assert len(parse_knowledge(venue.knowledge)) >= 20
    assert venue.persona and "\n" not in venue.persona.strip()
    assert {q.kind for q in venue.questions} == set(KINDS)
    dev, test = venue.in_split("dev"), venue.in_split("test")
    assert len(dev) + len(test) == len(venue.questions) == len(venue.in_split("both")) >= 60
    quick = venue.in_split("dev", per_kind=2)
    assert [q.kind for q in quick] == [k for k in KINDS for _ in range(2)] and {q.split for q in quick} == {"dev"}
    for q in venue.questions:
        assert (q.kind == "follow_up") == bool(q.after)
        if q.after:
            assert venue.question(q.after).split == q.split
        assert (q.kind == "small_talk") == bool(q.small_talk)


def test_sample_venue_is_the_old_question_set_with_kinds_and_splits() -> None:
    venue = sample_venue()
    kinds = [q.kind for q in venue.questions]
    assert kinds.count("fact") == 28 and kinds.count("out") == 8 and kinds.count("near_miss") == 8
    assert all(q.in_knowledge == (q.kind == "fact") for q in venue.questions)
    for kind in ("fact", "out", "near_miss"):
        splits = [q.split for q in venue.questions if q.kind == kind]
        assert splits == ["dev", "test"] * (len(splits) // 2)
    assert IN_KNOWLEDGE[0].id == "hours-saturday" and OUT_OF_KNOWLEDGE[0].id == "football"
    assert OUT_OF_KNOWLEDGE[8].id == "whale-age"  # the near misses after the far questions


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[[question]]\nid = "a"\ntext = "Hi?"\nkind = "chat"\nfacts = []\nsplit = "dev"', "kind 'chat'"),
        ('[[question]]\nid = "a"\ntext = "Hi?"\nkind = "out"\nfacts = []\nsplit = "train"', "split 'train'"),
        ('[[question]]\nid = "a"\ntext = "Hi?"\nkind = "out"\nfacts = []', "missing key 'split'"),
        (
            '[[question]]\nid = "a"\ntext = "And Sundays?"\nkind = "follow_up"\nfacts = [["x"]]\nsplit = "dev"\n'
            'after = "b"',
            "follows 'b'",
        ),
    ],
)
def test_bad_questions_file_names_the_question(toml: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_questions(toml, "q.toml")


def test_a_directory_without_knowledge_is_refused(tmp_path: Path) -> None:
    (tmp_path / "questions.toml").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"knowledge\.md"):
        load_venue(tmp_path)


KNOWLEDGE = "When do you close? We close at 5 pm.\nHow much is a day pass? A day pass costs 4 euros."
HOURS = Question("close", "When do you close?", (("5 pm", "17:00"),), kind="fact")
SATURDAY = Question("sat", "And on Saturdays?", (("5 pm",),), kind="follow_up", after="close")
PARKING = Question("park", "How much is parking?", kind="near_miss")
HELLO = Question("hi", "Hello, can you hear me?", kind="small_talk", small_talk="hearing_check")


def test_a_small_talk_refusal_scores_nothing() -> None:
    refused = score_reply(HELLO, "I don't know that, please ask at the desk.", KNOWLEDGE)
    answered = score_reply(HELLO, "Yes, I can hear you! How can I help?", KNOWLEDGE)
    assert (refused["right"], answered["right"]) == (False, True)
    assert not is_small_talk_reply("")
    assert not is_small_talk_reply("Hello there. I am the kiosk. I know the hours. I know the prices.")


def test_an_invented_price_is_counted_and_a_known_time_is_not() -> None:
    honest = score_reply(PARKING, "I don't know the parking price; a day pass costs four euros.", KNOWLEDGE)
    invented = score_reply(PARKING, "Parking costs 6 euros a day, and we close at five p m.", KNOWLEDGE)
    assert honest == {"right": True, "invented": [], "asked_again": False}
    assert invented == {"right": False, "invented": ["six"], "asked_again": False}
    assert invented_values("We close at 17:00.", KNOWLEDGE) == []  # "5 pm" and "17:00" sound the same
    assert invented_values("Open 24 hours, one of the best.", KNOWLEDGE) == ["twenty four"]
    items = [
        {"kind": "near_miss", "right": False, "invented": ["six"]},
        {"kind": "fact", "right": True, "invented": []},
    ]
    row = summarize(items)
    assert (row["invented"], row["right_facts_percent"], row["dont_know_percent"], row["n"]) == (1, 100.0, 0.0, 2)
    assert row["small_talk_percent"] is None


def test_a_follow_up_is_asked_after_its_question_in_one_conversation() -> None:
    venue = Venue("v", KNOWLEDGE, "You are Kim.", (HOURS, SATURDAY, PARKING))
    asked: list[tuple[str, ...]] = []

    def ask(heard: tuple[Transcript, ...]) -> list[tuple[str, str]]:
        texts = tuple(t.text for t in heard)
        asked.append(texts)
        replies = {
            ("When do you close?",): "We close at 5 pm.",
            ("When do you close?", "And on Saturdays?"): "On Saturdays too, at 5 pm.",
        }
        # the follow-up alone has no subject: only its history makes it answerable
        return [(replies.get(texts[: i + 1], "I don't know."), "model") for i in range(len(texts))]

    texts = {q.id: Transcript(q.text) for q in venue.questions}
    items = answer_venue(venue, venue.questions, "written", "", texts, ask)
    assert asked == [("When do you close?",), ("When do you close?", "And on Saturdays?"), ("How much is parking?",)]
    by_id = {i["id"]: i for i in items}
    assert by_id["sat"]["right"] and by_id["sat"]["before"] == {
        "heard": "When do you close?",
        "reply": "We close at 5 pm.",
    }
    assert by_id["park"]["right"] and not any(i["invented"] for i in items)


class Recorder:
    """A language model that says "Noted." and keeps the messages of every request."""

    def __init__(self) -> None:
        self.requests: list[list[ChatMessage]] = []

    def stream_reply(self, messages, *, max_tokens):  # type: ignore[no-untyped-def]
        self.requests.append(list(messages))
        yield "Noted."


def test_a_conversations_questions_reach_the_model_with_the_exchanges_before_them() -> None:
    kiosk = Kiosk(sample_persona(), sample_knowledge(), direct_answers=False)
    llm = Recorder()
    ask = Conversations(Config(), kiosk, kiosk.grounded(llm))  # type: ignore[arg-type]
    questions = ("Is there a cafe?", "When does it open?")
    assert [reply for reply, _ in ask.ask(questions)] == ["Noted.", "Noted."]
    first, second = ([m.content for m in r[len(kiosk.prefix) :]] for r in llm.requests)
    assert len(first) == 1 and first[0].endswith(questions[0])
    assert second[:2] == [questions[0], "Noted."] and second[2].endswith(questions[1])
    ask.ask(("Where is the shop?",))  # a new conversation: nothing of the last one
    assert len(llm.requests[-1]) == len(kiosk.prefix) + 1


def test_cli_takes_venues_split_voices_and_written_only() -> None:
    args = build_parser().parse_args(
        ["bench", "--quality", "--venue", "venues/library", "--venue", "sample", "--split", "dev", "--written-only",
         "--voice", "espeak-en-us"]
    )  # fmt: skip
    assert args.quality and args.written_only and args.split == "dev"
    assert args.venue == ["venues/library", "sample"] and args.voice == ["espeak-en-us"]
    default = build_parser().parse_args(["bench", "--quality"])
    assert (default.venue, default.split, default.written_only, default.full) == ([], "both", False, False)
    with pytest.raises(UsageError, match="invalid choice: 'train'"):  # the command line reports it (docs/cli.md)
        build_parser().parse_args(["bench", "--quality", "--split", "train"])


def test_venue_names_on_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert [v.name for v in venues([])] == ["sample"]
    assert [v.name for v in venues(["all"])] == ["sample", "campus", "cityhall", "hotel", "library"]
    assert [v.name for v in venues(["venues/hotel"])] == ["hotel"]


@pytest.mark.models
def test_written_dev_split_of_one_venue_with_the_default_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from edgevoice.cli import main as cli_main

    out = tmp_path / "report.json"
    assert cli_main(["bench", "--quality", "--venue", str(ROOT / "venues/library"), "--split", "dev",
                     "--quick", "--written-only", "--report", str(out), "--json"]) == 0  # fmt: skip
    report = json.loads(out.read_text(encoding="utf-8"))
    printed = capsys.readouterr()
    assert json.loads(printed.out) == report and "library" in printed.err  # the report on stdout, the table on stderr
    [row] = report["rows"]
    assert (row["venue"], row["split"], row["input"], row["n"]) == ("library", "dev", "written", 8)
    assert set(row["by_kind"]) == set(KINDS)
    for key in ("right_facts_percent", "dont_know_percent", "small_talk_percent"):
        assert 0 <= row[key] <= 100
    assert 0 <= row["invented"] <= row["n"]
    assert len(report["items"]) == 8 and sum(bool(i["reply"]) for i in report["items"]) >= 7


def test_asked_again_is_honest_but_answers_nothing() -> None:
    unknown = Question("peru", "What is the capital of Peru?", kind="out")
    fact, chat = HOURS, HELLO
    assert score_reply(unknown, ASK_AGAIN, KNOWLEDGE) == {"right": True, "invented": [], "asked_again": True}
    assert not score_reply(fact, ASK_AGAIN, KNOWLEDGE)["right"]
    assert not score_reply(chat, ASK_AGAIN, KNOWLEDGE)["right"]  # a greeting asked for again was not answered
    assert summarize([{"kind": "out", "right": True, "invented": [], "asked_again": True}])["asked_again"] == 1


def test_an_unsure_question_the_knowledge_does_not_answer_is_asked_for_again_once() -> None:
    kiosk = Kiosk(sample_persona(), sample_knowledge(), direct_answers=False)
    llm = Recorder()
    ask = Conversations(Config(), kiosk, kiosk.grounded(llm))  # type: ignore[arg-type]
    unsure = Transcript("What is the capital of Peru?", confidence=0.3)
    sure = Transcript("What is the capital of Peru?", confidence=0.9)
    assert ask.ask((unsure, unsure)) == [(ASK_AGAIN, "unheard"), (DONT_KNOW, "gate")]  # then the refusal
    assert ask.ask((sure,)) == [(DONT_KNOW, "gate")]
    assert ask.ask((Transcript("What is the capital of Peru?"),)) == [(DONT_KNOW, "gate")]  # typed: no confidence
    assert ask.ask((unsure, sure, unsure)) == [(ASK_AGAIN, "unheard"), (DONT_KNOW, "gate"), (ASK_AGAIN, "unheard")]
    assert not llm.requests  # the gate decides all of it
    # a question the knowledge answers as heard is answered, however unsure the words
    assert ask.ask((Transcript("Is there a cafe?", confidence=0.3),)) == [("Noted.", "model")]
    off = Conversations(replace(Config(), asr=AsrConfig(unsure_below=0.0)), kiosk, kiosk.grounded(llm))  # type: ignore[arg-type]
    assert off.ask((unsure,)) == [(DONT_KNOW, "gate")]


class Streamed:
    """A language model that gives a set reply in pieces, as a model streams it."""

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces

    def stream_reply(self, messages, *, max_tokens):  # type: ignore[no-untyped-def]
        yield from self.pieces


@pytest.mark.parametrize("sure", [True, False])
def test_the_models_refusal_of_an_unsure_question_is_asked_for_again_too(sure: bool) -> None:
    kiosk = Kiosk(sample_persona(), sample_knowledge(), direct_answers=False)
    refusal = Streamed("I don't", " know that,", " please ask", " at the desk.")
    ask = Conversations(Config(), kiosk, kiosk.grounded(refusal))  # type: ignore[arg-type]
    heard = Transcript("Is there a cafe?", confidence=0.9 if sure else 0.3)  # the gate passes it to the model
    assert ask.ask((heard,)) == [(DONT_KNOW, "model") if sure else (ASK_AGAIN, "unheard")]
    answer = Streamed("I don't", " know the menu,", " but the cafe is on the top floor.")
    ask = Conversations(Config(), kiosk, kiosk.grounded(answer))  # type: ignore[arg-type]
    [(reply, _)] = ask.ask((heard,))
    assert reply.startswith("I don't know the menu")  # the refusal's opening, but no refusal: said as it came
