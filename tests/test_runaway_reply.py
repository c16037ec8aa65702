"""A remote model that does not stop: a reply without a full stop in one chunk, ten megabytes of reply, a line that
never ends, a stream that trickles forever. Over real HTTP on loopback (tests/openai_fake.py): the reply spoken is
bounded in characters and clauses, the client stops reading and closes the response, and the turn ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pytest

from edgevoice.clock import ManualClock
from edgevoice.engines.openai_remote import RemoteChatModel, line_bytes
from edgevoice.errors import LanguageModelError
from edgevoice.events import Answered, Cut, reply_chars
from edgevoice.reply.hedge import HedgedModel
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth
from tests.openai_fake import FakeChatServer, chunk
from tests.test_remote_model import LOCAL_REPLY, QUESTION, answer_turn
from tests.test_reply_bounds import Position

RUNAWAY = "Tickets cost fourteen euros for adults, " * 100
"""The issue's reply: 3,999 characters, a hundred clauses, no full stop."""
TEN_MB = 10_000_000
GUARD_S = 60.0
"""How long a test waits for a turn that should end at once: a guard against a hang, not a measure."""


class TickingClock:
    """A clock that moves one second each time it is read: the remote client reads it once a chunk."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 1.0
        return self.t


def finished() -> list[bytes]:
    return [chunk(finish="stop"), b"data: [DONE]\n\n"]


def in_one_chunk(reply: str) -> Callable[[], Iterable[bytes]]:
    return lambda: [chunk(reply), *finished()]


def flood() -> Iterator[bytes]:
    """Ten megabytes of reply in pieces of a thousand characters, without a clause mark."""
    piece = "tickets cost fourteen euros for adults and " * 23
    for _ in range(TEN_MB // len(piece)):
        yield chunk(piece)
    yield from finished()


def endless_line() -> Iterator[bytes]:
    """One line of ten megabytes that never ends."""
    yield b'data: {"choices": [{"index": 0, "delta": {"content": "'
    for _ in range(TEN_MB // 65536):
        yield b"a" * 65536


def keep_alive(stop: threading.Event) -> Callable[[], Iterable[bytes]]:
    """Comments only, forever: each resets the client's stall timeout, and no event ever comes."""

    def script() -> Iterator[bytes]:
        while not stop.wait(0.005):
            yield b": still thinking\n\n"

    return script


def remote(url: str, **kw: object) -> RemoteChatModel:
    return RemoteChatModel(url, model="big-model", stall_s=2.0, **kw)  # type: ignore[arg-type]


def hedged_turn(server: FakeChatServer, **remote_kw: object) -> tuple[ReplyTrace, FakeSynth, Responder]:
    """One turn through the responder and the hedge (the remote at ``server``), run on a thread with a guard."""
    clock = ManualClock()
    synth = FakeSynth(clock)
    model = HedgedModel(remote(server.base_url, **remote_kw), FakeLlm(LOCAL_REPLY, clock), hedge_s=GUARD_S)
    responder = Responder(
        FakeRecognizer("How much are tickets?", clock), model, synth, [],  # type: ignore[arg-type]
        max_tokens=80, max_sentences=2, clock=clock,
    )  # fmt: skip
    trace = ReplyTrace(1, committed=0.0)
    done = threading.Event()

    def run() -> None:
        try:
            responder.respond(np.zeros(1600, np.float32), trace, threading.Event(), Position().emit)
        finally:
            done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    ended = done.wait(GUARD_S)
    model.close()
    assert ended, "the turn never ended"
    return trace, synth, responder


def test_a_reply_without_a_full_stop_in_one_chunk_is_spoken_to_its_clause_bound() -> None:
    with FakeChatServer("script", script=in_one_chunk(RUNAWAY)) as server:
        trace, synth, responder = hedged_turn(server)
    assert trace.answered_by == Answered("remote") and trace.cut == "clauses"
    assert trace.reply == ("Tickets cost fourteen euros for adults, " * 8).strip()[:-1] + "."
    assert len(synth.texts) <= 8 and sum(len(t) for t in synth.texts) < reply_chars(80)
    responder.commit(trace, None)
    assert responder.history[-1].content == trace.reply


def test_the_turn_record_says_the_reply_was_cut_and_why() -> None:
    """The issue's configuration: the kiosk's grounding (the sample venue: adults 14 euros), the hedge, the server
    sending the runaway reply in one chunk. Asked for 40 tokens, the client reads 320 characters of it and closes the
    response: the reply is cut by its characters."""
    with FakeChatServer("script", script=in_one_chunk(RUNAWAY)) as server:
        record = answer_turn("How much are tickets?", LOCAL_REPLY, server.base_url)
    assert record["llm"] == "remote" and record["cut"] == "chars"
    reply = str(record["reply"])
    assert reply.count("adults") <= 8 and reply.endswith("adults.") and len(reply) < reply_chars(40)


def test_a_reply_the_server_stopped_at_max_tokens_is_cut_and_closed() -> None:
    """A well-behaved server stops at ``max_tokens`` in mid-word and says ``finish_reason: "length"``: the reply is
    recorded as cut by its tokens and ends after its last whole word with a full stop, as a local model's does."""
    pieces = ["Adults pay fourteen euros", " and children under twelve go fr"]
    script = [*(chunk(p) for p in pieces), chunk(finish="length"), b"data: [DONE]\n\n"]
    with FakeChatServer("script", script=lambda: script) as server:
        trace, synth, _ = hedged_turn(server)
    assert trace.answered_by == Answered("remote") and trace.cut == "tokens"
    assert trace.reply == "Adults pay fourteen euros and children under twelve go." and "fr" not in " ".join(
        synth.texts
    )


def test_ten_megabytes_of_reply_are_read_only_to_the_character_bound() -> None:
    with FakeChatServer("script", script=flood) as server:
        trace, _, _ = hedged_turn(server)
        assert server.client_left.wait(GUARD_S)  # the client closed the response: the rest was never read
    assert trace.answered_by == Answered("remote") and trace.cut == "chars"
    assert len(trace.reply) <= reply_chars(80) and trace.reply.endswith("for.")  # "adults" may have been cut


def test_the_client_alone_stops_at_its_bounds_and_says_which() -> None:
    with FakeChatServer("script", script=flood) as server:
        model = remote(server.base_url)
        try:
            text = "".join(model.stream_reply(QUESTION, max_tokens=16))
        finally:
            model.close()
    assert len(text) == reply_chars(16) and model.last_cut is Cut.CHARS
    pieces = ["la "] * 1000
    with FakeChatServer("script", script=lambda: [*(chunk(p) for p in pieces), *finished()]) as server:
        model = remote(server.base_url)
        try:
            got = list(model.stream_reply(QUESTION, max_tokens=16))
        finally:
            model.close()
    assert got == ["la "] * 16 and model.last_cut is Cut.TOKENS


def test_a_line_that_never_ends_is_not_held_and_the_local_model_answers() -> None:
    with FakeChatServer("script", script=endless_line) as server:
        model = remote(server.base_url)
        try:
            with pytest.raises(LanguageModelError) as caught:
                list(model.stream_reply(QUESTION, max_tokens=80))
        finally:
            model.close()
        assert server.client_left.wait(GUARD_S)
        assert caught.value.code == "llm_remote_oversized" and str(line_bytes(80)) in caught.value.message
        trace, _, _ = hedged_turn(server)
    assert trace.answered_by == Answered("local", "llm_remote_oversized") and trace.reply == LOCAL_REPLY


def test_a_server_that_only_keeps_the_connection_alive_is_given_up_after_max_reply_s() -> None:
    stop = threading.Event()
    with FakeChatServer("script", script=keep_alive(stop)) as server:
        model = remote(server.base_url, clock=TickingClock(), max_reply_s=5.0)
        result: list[str] = []
        cuts: list[Cut | None] = []

        def read() -> None:
            result.extend(model.stream_reply(QUESTION, max_tokens=80))
            cuts.append(model.last_cut)  # the cut of the reply read on this thread

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(GUARD_S)
        stop.set()
        model.close()
        assert not reader.is_alive(), "the reply never ended"
        assert result == [] and cuts == [Cut.SECONDS]
        stop.clear()
        trace, _, _ = hedged_turn(server, clock=TickingClock(), max_reply_s=5.0)
        stop.set()
    assert trace.answered_by == Answered("local", "llm_remote_empty") and trace.reply == LOCAL_REPLY


def test_a_reply_that_trickles_forever_is_cut() -> None:
    stop = threading.Event()

    def trickle() -> Iterator[bytes]:
        while not stop.wait(0.001):
            yield chunk(" and then")

    with FakeChatServer("script", script=trickle) as server:
        trace, _, _ = hedged_turn(server)
        stop.set()
    assert trace.answered_by == Answered("remote") and trace.cut is not None
    assert trace.reply.endswith(".") and len(trace.reply) <= reply_chars(80)


def test_a_stream_of_events_without_text_is_given_up_after_its_bytes() -> None:
    """Role chunks forever: no piece ever comes (so neither the character bound nor the stall timeout is reached)."""
    stop = threading.Event()

    def empty_events() -> Iterator[bytes]:
        while not stop.is_set():
            yield chunk(role="assistant")

    with FakeChatServer("script", script=empty_events) as server:
        trace, _, _ = hedged_turn(server)
        stop.set()
    assert trace.answered_by == Answered("local", "llm_remote_oversized") and trace.reply == LOCAL_REPLY
