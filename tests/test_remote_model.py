"""The language model on another machine: the OpenAI-compatible client against a fake server that fails in every way
a real one can, and the hedge with the local model (whichever first clause comes first is spoken)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from edgevoice.app import hedged_model
from edgevoice.audio.chunk import AudioChunk
from edgevoice.clock import ManualClock
from edgevoice.config.load import config_from_dict
from edgevoice.config_check import check_config, effective_config
from edgevoice.engines.openai_remote import REMOTE_ERRORS, RemoteChatModel, read_api_key
from edgevoice.errors import ConfigError, LanguageModelError
from edgevoice.events import Answered, ChatMessage, answered_record
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.prompt import DONT_KNOW
from edgevoice.listen.endpointing import TurnEndReason
from edgevoice.listen.turn import Turn
from edgevoice.live.cli import turn_record
from edgevoice.live.metrics import Metrics
from edgevoice.live.service import journal_fields
from edgevoice.reply.hedge import REMOTE_LATE, HedgedModel
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from edgevoice.trace import TurnTimeline
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth
from tests.openai_fake import FakeChatServer
from tests.test_config_check import good_config

QUESTION = [ChatMessage("system", "You are a kiosk."), ChatMessage("user", "Where is the cafe?")]
LOCAL_REPLY = "The Lighthouse Cafe is on the top floor."
WAIT_S = 10.0


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def remote(url: str, **kw: object) -> RemoteChatModel:
    return RemoteChatModel(url, model="big-model", api_key="sk-test", stall_s=0.5, **kw)  # type: ignore[arg-type]


class ScriptedModel:
    """A language model whose pieces each wait for a gate (an Event) when one is given; records whether its stream
    was closed before the end."""

    def __init__(self, pieces: Sequence[str], gates: dict[int, threading.Event] | None = None) -> None:
        self.pieces, self.gates = list(pieces), gates or {}
        self.calls = 0
        self.closed_early = False
        self.prefilled: list[list[ChatMessage]] = []
        self.before_piece: dict[int, threading.Event] = {}

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.calls += 1
        finished = False
        try:
            for i, piece in enumerate(self.pieces):
                if i in self.before_piece:
                    self.before_piece[i].set()
                if i in self.gates and not self.gates[i].wait(WAIT_S):
                    raise AssertionError("a gate was never opened")
                yield piece
            finished = True
        finally:
            self.closed_early = not finished

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        self.prefilled.append(list(messages))
        return 7


class FailingModel:
    def __init__(self, code: str, after: Sequence[str] = ()) -> None:
        self.code, self.after = code, list(after)

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        yield from self.after
        raise LanguageModelError("remote model: down", code=self.code)


def local_model() -> ScriptedModel:
    return ScriptedModel([w + " " for w in LOCAL_REPLY.split()])


def reply(model: HedgedModel) -> str:
    return "".join(model.stream_reply(QUESTION, max_tokens=32))


# -- the client against a fake server ------------------------------------------------------------------------------
def test_the_client_streams_a_reply_with_the_model_name_and_the_key() -> None:
    with FakeChatServer("ok") as server:
        model = remote(server.base_url)
        try:
            pieces = list(model.stream_reply(QUESTION, max_tokens=24))
        finally:
            model.close()
    assert "".join(pieces) == server.reply
    assert len(pieces) == len(server.reply.split())  # streamed piece by piece, not in one block
    body, headers = server.requests[0]
    assert body["stream"] is True and body["model"] == "big-model" and body["max_tokens"] == 24
    assert body["messages"] == [{"role": m.role, "content": m.content} for m in QUESTION]
    assert headers["Authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        ("http500", "llm_remote_http"),
        ("malformed", "llm_remote_malformed"),
        ("not_sse", "llm_remote_malformed"),
        ("stall", "llm_remote_stalled"),
        ("truncated", "llm_remote_failed"),
    ],
)
def test_each_server_fault_is_an_error_with_its_own_code(mode: str, code: str) -> None:
    with FakeChatServer(mode) as server:
        model = remote(server.base_url)
        try:
            with pytest.raises(LanguageModelError) as caught:
                list(model.stream_reply(QUESTION, max_tokens=24))
        finally:
            model.close()
    assert caught.value.code == code and code in REMOTE_ERRORS
    if mode == "http500":
        assert "HTTP 500" in caught.value.message and "model crashed" in caught.value.message


def test_a_server_that_is_not_there_is_unreachable() -> None:
    model = remote(f"http://127.0.0.1:{free_port()}/v1")
    try:
        with pytest.raises(LanguageModelError) as caught:
            list(model.stream_reply(QUESTION, max_tokens=8))
    finally:
        model.close()
    assert caught.value.code == "llm_remote_unreachable"


# -- the hedge -------------------------------------------------------------------------------------------------------
def test_a_remote_first_clause_within_the_budget_answers_alone() -> None:
    far = ScriptedModel(["Yes, ", "the cafe ", "is open."])
    near = local_model()
    model = HedgedModel(far, near, hedge_s=WAIT_S)
    try:
        assert reply(model) == "Yes, the cafe is open."
        assert model.answered_by == Answered("remote")
        assert near.calls == 0  # the local model never started
    finally:
        model.close()


def test_a_late_remote_is_cancelled_and_the_local_model_answers() -> None:
    never = threading.Event()
    far = ScriptedModel(["Yes, ", "it is."], gates={0: never})
    near = local_model()
    model = HedgedModel(far, near, hedge_s=0.05)
    try:
        assert reply(model) == LOCAL_REPLY + " "
        assert model.answered_by == Answered("local", REMOTE_LATE)
    finally:
        never.set()  # the reader thread sees the cancel at its next piece
        model.close()
    assert far.closed_early  # the remote's stream was abandoned, not read to its end


def test_a_failing_remote_lets_the_local_model_answer_without_waiting_for_the_budget() -> None:
    near = local_model()
    model = HedgedModel(FailingModel("llm_remote_unreachable"), near, hedge_s=600.0)
    try:
        assert reply(model) == LOCAL_REPLY + " "  # an hour-long budget: this returns only because nobody waited
        assert model.answered_by == Answered("local", "llm_remote_unreachable")
    finally:
        model.close()


def test_a_remote_with_no_text_counts_as_failed() -> None:
    model = HedgedModel(ScriptedModel([]), local_model(), hedge_s=600.0)
    try:
        assert reply(model) == LOCAL_REPLY + " "
        assert model.answered_by == Answered("local", "llm_remote_empty")
    finally:
        model.close()


def test_the_remote_wins_when_its_first_clause_beats_the_local_models() -> None:
    """Past the budget both run; the remote's first clause comes while the local model is still on its first words:
    the remote answers and the local model's stream is closed."""
    go = threading.Event()
    far = ScriptedModel(["Yes, ", "it is open."], gates={0: go})
    remote_sent = threading.Event()
    far.before_piece = {1: remote_sent}  # reached once the reader has queued the first clause
    near = ScriptedModel(["Well ", "I ", "think ", "that ", "the ", "cafe ", "might ", "be ", "open."])
    near.gates = {1: remote_sent}  # the local model's second word waits until the remote's clause is queued
    near.before_piece = {0: go}  # the local model's start lets the remote go
    model = HedgedModel(far, near, hedge_s=0.01)
    try:
        assert reply(model) == "Yes, it is open."
        assert model.answered_by == Answered("remote")
        assert near.calls == 1 and near.closed_early
    finally:
        model.close()


def test_a_remote_reply_shorter_than_its_first_clause_ends_the_reply() -> None:
    """The end was taken while waiting for the first clause: the reply must not wait for another."""
    model = HedgedModel(ScriptedModel(["Yes."]), local_model(), hedge_s=WAIT_S)
    done = threading.Event()
    text: list[str] = []

    def read() -> None:
        text.append(reply(model))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert done.wait(WAIT_S), "the reply never ended"
    finally:
        model.close()
    assert text == ["Yes."] and model.answered_by == Answered("remote")


def test_a_remote_failing_after_its_first_clause_ends_the_reply_there() -> None:
    model = HedgedModel(FailingModel("llm_remote_stalled", after=["Yes, ", "the cafe "]), local_model(), hedge_s=60)
    try:
        assert reply(model) == "Yes, the cafe "
        assert model.answered_by == Answered("remote", "llm_remote_stalled")
    finally:
        model.close()


def test_interrupt_stops_a_reply_waiting_for_the_remote() -> None:
    never = threading.Event()
    far = ScriptedModel(["Yes."], gates={0: never})
    model = HedgedModel(far, local_model(), hedge_s=600.0)
    stream = model.stream_reply(QUESTION, max_tokens=8)
    errors: list[LanguageModelError] = []

    def consume() -> None:
        try:
            list(stream)
        except LanguageModelError as exc:
            errors.append(exc)

    worker = threading.Thread(target=consume)
    worker.start()
    model.interrupt()
    worker.join(WAIT_S)
    never.set()
    model.close()
    assert not worker.is_alive()
    assert [e.code for e in errors] == ["llm_interrupted"]


def test_the_cache_calls_go_to_the_local_model() -> None:
    near = local_model()
    model = HedgedModel(ScriptedModel(["Yes."]), near, hedge_s=1.0)
    assert model.prefill(QUESTION) == 7 and near.prefilled == [QUESTION]
    model.close()


# -- the hedge over HTTP, each fault: the local model answers, no traceback ---------------------------------------
@pytest.mark.parametrize(
    ("mode", "code"),
    [
        (None, "llm_remote_unreachable"),
        ("stall", "llm_remote_stalled"),
        ("http500", "llm_remote_http"),
        ("malformed", "llm_remote_malformed"),
    ],
)
def test_every_server_fault_leaves_the_answer_to_the_local_model(
    mode: str | None, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The budget is longer than the stall timeout, so the stalled stream is given up before the hedge fires."""
    caplog.set_level(logging.INFO)
    if mode is None:
        model = HedgedModel(remote(f"http://127.0.0.1:{free_port()}/v1"), local_model(), hedge_s=WAIT_S)
        text = reply(model)
        model.close()
    else:
        with FakeChatServer(mode) as server:
            model = HedgedModel(remote(server.base_url), local_model(), hedge_s=WAIT_S)
            text = reply(model)
            model.close()
    assert text == LOCAL_REPLY + " "
    assert model.answered_by == Answered("local", code)
    assert not [r for r in caplog.records if r.exc_info]  # logged as a warning with its reason, no traceback
    assert any(code in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_stream_that_stops_after_its_first_clause_ends_the_reply_with_what_was_said() -> None:
    with FakeChatServer("cut", reply="Yes, the cafe is open.") as server:
        model = HedgedModel(remote(server.base_url), local_model(), hedge_s=WAIT_S)
        text = reply(model)
        model.close()
    assert text == "Yes, the"
    assert model.answered_by == Answered("remote", "llm_remote_stalled")


# -- configuration ---------------------------------------------------------------------------------------------------
def test_the_openai_backend_needs_a_url_and_never_holds_the_key() -> None:
    ok = config_from_dict({"llm": {"backend": "openai", "base_url": "http://gpu:8080/v1", "api_key_env": "GPU_KEY"}})
    assert ok.llm.backend == "openai" and ok.llm.hedge_ms == 800
    for bad, says in [
        ({"backend": "openai"}, "llm.base_url: must be set"),
        ({"base_url": "gpu:8080"}, "http:// or https://"),
        ({"base_url": "http://me:secret@gpu/v1"}, "must not hold credentials"),
        ({"api_key_env": "sk-1234-abcd"}, "must name an environment variable"),
        ({"api_key_env": "K", "api_key_file": "/k"}, "not both"),
        ({"hedge_ms": -1}, "between 0 and 30000"),
    ]:
        with pytest.raises(ConfigError, match=says):
            config_from_dict({"llm": bad})


def test_the_key_comes_from_a_file_or_the_environment(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    assert read_api_key(key_file=str(key_file), key_env="") == "sk-from-file"
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert read_api_key(key_file="${CREDENTIALS_DIRECTORY}/key", key_env="") == "sk-from-file"
    monkeypatch.setenv("EDGEVOICE_TEST_KEY", "sk-from-env")
    assert read_api_key(key_file="", key_env="EDGEVOICE_TEST_KEY") == "sk-from-env"
    assert read_api_key(key_file="", key_env="") is None
    monkeypatch.delenv("EDGEVOICE_TEST_KEY")
    with pytest.raises(ConfigError, match="EDGEVOICE_TEST_KEY"):
        read_api_key(key_file="", key_env="EDGEVOICE_TEST_KEY")
    with pytest.raises(ConfigError, match="cannot read"):
        read_api_key(key_file=str(tmp_path / "missing"), key_env="")


# -- the turn record -------------------------------------------------------------------------------------------------
def answer_turn(question: str, llm_reply: str, base_url: str) -> dict[str, object]:
    """One turn through the kiosk's grounding and the responder, with the hedge's remote at ``base_url``; its record
    as `edgevoice run --json` prints it."""
    config = config_from_dict({"kiosk": {"semantic": False, "direct_answers": False, "hint_entries": 0}})
    kiosk = Kiosk.from_config(config)
    clock = ManualClock()
    hedged = HedgedModel(remote(base_url), FakeLlm(llm_reply, clock), hedge_s=WAIT_S)
    synth = FakeSynth(clock)
    responder = Responder(
        FakeRecognizer(question, clock),  # type: ignore[arg-type]
        kiosk.grounded(hedged),
        synth,  # type: ignore[arg-type]
        kiosk.prefix,
        max_tokens=40,
        max_sentences=2,
        clock=clock,
    )
    chunks: list[np.ndarray] = []

    def emit(chunk: np.ndarray) -> int:
        chunks.append(chunk)
        return sum(len(c) for c in chunks)

    try:
        trace = responder.respond(np.zeros(16000, np.float32), ReplyTrace(1, committed=0.0), threading.Event(), emit)
    finally:
        hedged.close()
    turn = Turn(1, AudioChunk(np.zeros(16000, np.float32)), 1.0, 1.2, 0.0, TurnEndReason.COMPLETE)
    return turn_record(trace, turn, TurnTimeline(1), synth.sample_rate)


def test_the_turn_record_names_who_answered() -> None:
    question = "Where is the cafe?"
    with FakeChatServer("ok", reply="The cafe is on the ground floor.") as server:
        record = answer_turn(question, LOCAL_REPLY, server.base_url)
    assert record["llm"] == "remote" and record["llm_remote_error"] is None
    assert record["reply"] == "The cafe is on the ground floor." and record["verdict"] == "model"
    down = answer_turn(question, LOCAL_REPLY, f"http://127.0.0.1:{free_port()}/v1")
    assert down["llm"] == "local" and down["llm_remote_error"] == "llm_remote_unreachable"
    assert down["reply"] == LOCAL_REPLY and down["error"] is None and down["fallback"] is None
    json.dumps(down)  # a JSON line as it is


def test_a_question_the_kiosk_answers_by_itself_names_no_model() -> None:
    record = answer_turn("What is the capital of Peru?", LOCAL_REPLY, f"http://127.0.0.1:{free_port()}/v1")
    assert record["llm"] is None and record["reply"] == DONT_KNOW and record["verdict"] == "gate"
    assert record["confidence"] is None  # the fake recognizer does not say how sure it is


def test_the_metrics_count_replies_by_the_model_that_answered() -> None:
    metrics = Metrics()
    metrics.observe(TurnTimeline(1), answered_by=Answered("remote"))
    metrics.observe(TurnTimeline(2), answered_by=Answered("local", "llm_remote_unreachable"))
    metrics.observe(TurnTimeline(3), answered_by=Answered("local", "llm_remote_unreachable"))
    metrics.observe(TurnTimeline(4))  # the kiosk answered by itself: no model counted
    text = metrics.exposition().decode()
    assert 'edgevoice_llm_replies_total{remote_error="",source="remote"} 1.0' in text
    assert 'edgevoice_llm_replies_total{remote_error="llm_remote_unreachable",source="local"} 2.0' in text


def test_the_journal_gets_who_answered_as_fields() -> None:
    record = {"event": "turn", "turn": 2, "stages_ms": {}, "voice_to_voice_ms": 700.0}
    _, fields = journal_fields(record | answered_record(Answered("local", "llm_remote_http")), transcripts=False)
    assert fields["LLM"] == "local" and fields["LLM_REMOTE_ERROR"] == "llm_remote_http"
    _, fields = journal_fields(record | answered_record(None), transcripts=False)
    assert "LLM" not in fields and "LLM_REMOTE_ERROR" not in fields


def test_the_app_builds_the_hedge_from_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEVOICE_TEST_KEY", "sk-fleet")
    with FakeChatServer("ok", reply="Yes, it is.") as server:
        llm = {"backend": "openai", "base_url": server.base_url, "model": "big", "api_key_env": "EDGEVOICE_TEST_KEY"}
        model = hedged_model(config_from_dict({"llm": llm | {"hedge_ms": 5000}}), local_model())
        try:
            assert reply(model) == "Yes, it is." and model.answered_by == Answered("remote")
        finally:
            model.close()
    body, headers = server.requests[0]
    assert headers["Authorization"] == "Bearer sk-fleet" and body["model"] == "big" and model.hedge_s == 5.0
    monkeypatch.delenv("EDGEVOICE_TEST_KEY")
    with pytest.raises(ConfigError, match="EDGEVOICE_TEST_KEY"):
        hedged_model(config_from_dict({"llm": llm}), local_model())


def test_config_check_reads_the_key_and_print_shows_where_it_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = {"backend": "openai", "base_url": "http://gpu:8080/v1", "api_key_env": "EDGEVOICE_TEST_KEY"}
    monkeypatch.delenv("EDGEVOICE_TEST_KEY", raising=False)
    config = good_config(tmp_path, llm=llm)
    assert [e.message for e in check_config(config, devices=False).errors] == [
        "llm.api_key_env = 'EDGEVOICE_TEST_KEY': that environment variable is not set"
    ]
    monkeypatch.setenv("EDGEVOICE_TEST_KEY", "sk-fleet")
    assert check_config(config, devices=False).ok and not check_config(config, devices=False).warnings
    slow = good_config(tmp_path, llm=llm | {"hedge_ms": 5000})
    assert [w for w in check_config(slow, devices=False).warnings if "llm.hedge_ms = 5000" in w]
    printed = effective_config(config)["llm"]
    assert printed["api_key_env"] == "EDGEVOICE_TEST_KEY" and "sk-fleet" not in json.dumps(printed)
