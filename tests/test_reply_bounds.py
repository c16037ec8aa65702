"""Every reply is bounded on the kiosk itself, whatever the model sends: in characters, clauses, pieces and seconds
(edgevoice/reply/bounds.py), on the stage alone and through the responder with a local model that never ends a
sentence."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from edgevoice.clock import ManualClock
from edgevoice.events import ChatMessage, Cut, Transcript
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.reply.audio_cache import spoken_pieces
from edgevoice.reply.bounds import ReplyBounds, ReplyLimit, closed
from edgevoice.reply.chunker import MAX_WORDS
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeRecognizer, FakeSynth

RUNAWAY = "Tickets cost fourteen euros for adults, " * 100
"""The issue's reply: a hundred clauses and no full stop."""
BOUNDS = ReplyBounds(max_tokens=80, max_clauses=8, max_seconds=20.0)


def limited(pieces: Sequence[str], bounds: ReplyBounds = BOUNDS) -> tuple[ReplyLimit, str]:
    """The stage fed ``pieces`` as the responder feeds it (until a cut), and the text it let through."""
    limit = ReplyLimit(bounds, ManualClock())
    text = ""
    for piece in pieces:
        text += limit.feed(piece)
        if limit.cut is not None:
            return limit, text
    return limit, text + limit.finish()


# -- the stage -------------------------------------------------------------------------------------------------------
def test_a_reply_within_its_bounds_passes_unchanged_in_one_piece_or_word_by_word() -> None:
    reply = "Yes, the cafe is open from 9.50 to 5 pm. A coffee costs 1,200 pesos, or 3 euros!"
    for pieces in ([reply], [w + " " for w in reply.split()], list(reply)):
        limit, text = limited(pieces, ReplyBounds(max_tokens=1024))  # a piece a character: more than 80
        assert text.strip() == reply and limit.cut is None
        assert limit.clauses == 4  # "Yes," "pm." "pesos," "euros!": 9.50 and 1,200 end nothing


@pytest.mark.parametrize("split", ["one piece", "word by word", "char by char"])
def test_a_reply_without_a_full_stop_ends_at_its_last_clause_with_one(split: str) -> None:
    pieces = {
        "one piece": [RUNAWAY],
        "word by word": [w + " " for w in RUNAWAY.split()],
        "char by char": list(RUNAWAY[:2000]),
    }[split]
    limit, text = limited(pieces, ReplyBounds(max_tokens=1024, max_clauses=8))
    assert limit.cut is Cut.CLAUSES and limit.clauses == 8
    assert text.strip() == ("Tickets cost fourteen euros for adults, " * 8).strip()[:-1] + "."
    assert text.count(",") == 7


def test_a_reply_that_ends_with_its_last_allowed_clause_is_not_cut() -> None:
    limit, text = limited(["One, two, three."], ReplyBounds(max_clauses=3))
    assert text == "One, two, three." and limit.cut is None
    limit, text = limited(["One, two, three, four"], ReplyBounds(max_clauses=3))
    assert text == "One, two, three. " and limit.cut is Cut.CLAUSES


def test_words_without_any_mark_count_a_clause_every_max_words() -> None:
    words = [f"w{i} " for i in range(10 * MAX_WORDS)]
    limit, text = limited(words, ReplyBounds(max_tokens=1024, max_clauses=8))
    assert limit.cut is Cut.CLAUSES
    assert text.split() == [f"w{i}" for i in range(8 * MAX_WORDS - 1)] + [f"w{8 * MAX_WORDS - 1}."]


def test_ten_megabytes_in_one_piece_are_never_looked_at_past_the_character_bound() -> None:
    giant = "a" * 10_000_000  # one "word": nothing to say
    limit, text = limited([giant])
    assert limit.cut is Cut.CHARS and text == "" and limit.chars == BOUNDS.max_chars
    words = "adults and " * 1_000_000  # no clause mark for 20 words at a time; bounds that let chars come first
    limit, text = limited([words], ReplyBounds(max_tokens=8, max_clauses=40))
    assert limit.cut is Cut.CHARS and len(text) <= 64 and text.endswith(" ") and not text.rstrip().endswith("adul")


def test_the_pieces_are_bounded_by_max_tokens() -> None:
    limit, text = limited(["la "] * 1000, ReplyBounds(max_tokens=10, max_clauses=40))
    assert limit.cut is Cut.TOKENS and limit.pieces == 11 and text == "la " * 10


def test_a_reply_read_for_longer_than_max_seconds_is_cut() -> None:
    clock = ManualClock()

    def slow() -> Iterator[str]:
        while True:
            clock.advance(1.0)
            yield ""  # a model that sends nothing speakable (a grounded model holding its pieces back)

    limit = ReplyLimit(BOUNDS, clock)
    for piece in slow():
        limit.feed(piece)
        if limit.cut is not None:
            break
    assert limit.cut is Cut.SECONDS and clock.now() - limit.started == 21.0  # the first piece after 20 s


def test_closed_ends_a_clause_as_a_sentence() -> None:
    assert closed("for adults,") == "for adults."
    assert closed('she said "yes,"') == 'she said "yes."'
    assert closed("for adults") == "for adults."
    assert closed("Open daily!") == "Open daily!"
    assert closed("for adults — ") == "for adults."
    assert closed("—") == "" and closed("  ") == ""


# -- the responder, a local model that never ends a sentence ---------------------------------------------------------
class RunawayModel:
    """A local model that streams its reply forever, word by word, ignoring ``max_tokens``."""

    def __init__(self, words: str, clock: ManualClock, per_piece: float = 0.0) -> None:
        self.words, self.clock, self.per_piece = words.split(), clock, per_piece
        self.pieces = 0
        self.closed = False

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        try:
            while True:
                for word in self.words:
                    self.clock.advance(self.per_piece)
                    self.pieces += 1
                    yield word + " "
        finally:
            self.closed = True


class Position:
    """The playback position of a reply that is not played: samples emitted so far."""

    def __init__(self) -> None:
        self.samples = 0

    def emit(self, audio: np.ndarray) -> int:
        self.samples += len(audio)
        return self.samples


def answer(model: object, clock: ManualClock, **bounds: float) -> tuple[ReplyTrace, Responder, FakeSynth]:
    synth = FakeSynth(clock)
    responder = Responder(
        FakeRecognizer("", clock, seconds=0.0), model, synth, prefix_messages("You are a test.", "Tickets: 14 euros."),  # type: ignore[arg-type]
        max_tokens=80, max_sentences=2, clock=clock, **bounds,  # type: ignore[arg-type]
    )  # fmt: skip
    trace = ReplyTrace(1, committed=clock.now())
    done = threading.Event()

    def run() -> None:
        responder.respond_to(Transcript("How much are tickets?"), trace, threading.Event(), Position().emit)
        done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert done.wait(60), "the reply never ended"  # a hang guard only: the bounds are asserted in counts
    return trace, responder, synth


def test_a_local_model_that_never_ends_a_sentence_is_cut_after_max_clauses() -> None:
    clock = ManualClock()
    model = RunawayModel(RUNAWAY, clock)
    trace, responder, synth = answer(model, clock)
    assert trace.cut == "clauses" and model.closed
    assert model.pieces <= 8 * 6 + 1  # stopped reading once the eighth clause was through
    assert trace.reply.count(",") == 7 and trace.reply.endswith("for adults.")
    assert " ".join(synth.texts).endswith("for adults.")
    responder.commit(trace, None)
    assert responder.history[-1].content == trace.reply  # the history keeps what was spoken


def test_a_local_model_that_goes_on_without_any_mark_is_cut_by_its_pieces() -> None:
    clock = ManualClock()
    model = RunawayModel("and then", clock)
    trace, _, _ = answer(model, clock, max_clauses=40)
    assert trace.cut == "tokens" and model.pieces == 81
    assert len(trace.reply.split()) == 80 and trace.reply.endswith("and then.")


def test_a_slow_model_is_cut_after_max_reply_s_by_the_injected_clock() -> None:
    clock = ManualClock()
    model = RunawayModel("and then", clock, per_piece=1.0)
    trace, _, _ = answer(model, clock, max_clauses=40, max_reply_s=5.0)
    assert trace.cut == "seconds" and model.pieces == 6
    assert trace.reply.split() == ["and", "then", "and", "then", "and."]


def test_a_reply_within_its_bounds_is_not_marked_cut() -> None:
    clock = ManualClock()

    class Short:
        def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
            yield from ["Tickets ", "cost ", "fourteen ", "euros, ", "children ", "go ", "free."]

    trace, _, _ = answer(Short(), clock)
    assert trace.cut is None and trace.reply == "Tickets cost fourteen euros, children go free."


def test_presynthesis_makes_a_known_reply_only_as_far_as_it_would_be_spoken() -> None:
    pieces = spoken_pieces(RUNAWAY, max_sentences=2, bounds=BOUNDS)
    assert " ".join(pieces).count("adults") == 8 and pieces[-1].endswith("for adults.")
    assert sum(len(p) for p in pieces) < BOUNDS.max_chars


def test_the_bounds_come_from_the_configuration() -> None:
    from edgevoice.config.load import config_from_dict

    config = config_from_dict({"llm": {"max_tokens": 40}, "kiosk": {"max_clauses": 5, "max_reply_s": 9.0}})
    responder = Responder(
        FakeRecognizer("", ManualClock()), RunawayModel("a", ManualClock()), FakeSynth(ManualClock()), [],  # type: ignore[arg-type]
        max_tokens=config.llm.max_tokens, max_sentences=2, clock=ManualClock(),
        max_clauses=config.kiosk.max_clauses, max_reply_s=config.kiosk.max_reply_s,
    )  # fmt: skip
    assert responder.bounds == ReplyBounds(max_tokens=40, max_clauses=5, max_seconds=9.0)
    assert responder.bounds.max_chars == 320
    default = config_from_dict({})
    assert ReplyBounds() == ReplyBounds(default.llm.max_tokens, default.kiosk.max_clauses, default.kiosk.max_reply_s)


def test_the_local_model_stopped_at_max_tokens_says_so_and_its_reply_ends_cleanly(store) -> None:  # type: ignore[no-untyped-def]
    from edgevoice.config import Config
    from edgevoice.engines.llamacpp import LlamaCppModel
    from edgevoice.models.configured import resolve

    llm = LlamaCppModel(resolve(store, "llm", Config().models.llm), n_ctx=2048, threads=2)
    clock = ManualClock()
    prompt = [ChatMessage("system", "You are a museum guide who answers at great length.")]
    responder = Responder(
        FakeRecognizer("", clock, seconds=0.0), llm, FakeSynth(clock), prompt, max_tokens=10, max_sentences=5,  # type: ignore[arg-type]
        clock=clock,
    )  # fmt: skip
    trace = ReplyTrace(1, committed=0.0)
    try:
        question = Transcript("Tell me the whole history of the museum, every detail, from the very beginning.")
        responder.respond_to(question, trace, threading.Event(), Position().emit)
    finally:
        llm.close()
    assert llm.last_cut is Cut.TOKENS and trace.cut == "tokens"
    assert trace.reply and trace.reply[-1] in ".!?" and len(trace.reply) <= 10 * 8
