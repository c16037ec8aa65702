"""A fake appliance for the admin page's tests, and a kiosk whose knowledge file the tests rewrite."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from starlette.testclient import TestClient

from edgevoice.admin.app import create_app
from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.app import build_assistant
from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict
from edgevoice.converse import Assistant
from edgevoice.events import ChatMessage, Transcript
from edgevoice.interfaces import Engines, FloatAudio
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth, FakeVad

OLD_FACTS = "What time do you open? We open at nine in the morning.\n"
NEW_FACTS = "What time do you open? We open at ten in the morning.\nIs there a cloakroom? Yes, by the entrance.\n"
HOSTS = ServedHosts.for_listen("unix:/run/edgevoice/admin.sock")
"""The names the page answers to in :func:`admin_client`'s requests (``base_url``: http://localhost)."""
SELFTEST_REPORT = '{"verdict": "pass", "verdict_on": "total", "budget_ms": 500}'


class FakeActivation:
    """An activation whose mode takes triggers (``accepts``) or not, as edgevoice.live.activation's."""

    def __init__(self, accepts: bool = True) -> None:
        self.accepts = accepts
        self.triggered = 0

    def trigger(self) -> bool:
        self.triggered += self.accepts
        return self.accepts


class FakeAppliance:
    """The admin page's :class:`~edgevoice.admin.app.Appliance`, its knowledge in ``path`` (None: inline)."""

    def __init__(self, path: Path | None, *, log_transcripts: bool = False, reload_error: Exception | None = None):
        self.log_transcripts = log_transcripts
        self.knowledge_path = path
        self.reloads = 0
        self.loaded = path.read_text() if path is not None else OLD_FACTS
        self.reload_error = reload_error
        self.activation: FakeActivation | None = None
        self.records: list[Mapping[str, object]] = [
            {
                "turn": 1,
                "transcript": "when do you open",
                "reply": "We open at nine.",
                "voice_to_voice_ms": 412.0,
                "stages_ms": {"recognition": 120.5, "first_token": 80.0},
            }
        ]

    def status(self) -> Mapping[str, object]:
        return {
            "state": "listening",
            "ready": True,
            "uptime_s": 42,
            "models": {"asr": {"name": "whisper-tiny.en", "sha256": "0123456789ab"}},
            "xruns": {"output_underruns": 3, "echo_attenuation_db": 21.5},
        }

    def turns(self) -> Sequence[Mapping[str, object]]:
        return self.records

    def knowledge_text(self) -> str:
        return self.knowledge_path.read_text() if self.knowledge_path is not None else OLD_FACTS

    def reload_knowledge(self) -> object:
        if self.reload_error is not None:
            raise self.reload_error
        assert self.knowledge_path is not None
        self.reloads += 1
        self.loaded = self.knowledge_path.read_text()
        return None

    def trigger(self) -> bool:
        return self.activation is not None and self.activation.trigger()


class HeldLlm(FakeLlm):
    """A fake model whose reply waits, after its first word, until :attr:`release` is set."""

    def __init__(self, reply: str, clock: ManualClock) -> None:
        super().__init__(reply, clock)
        self.started = threading.Event()
        self.release = threading.Event()

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        for i, piece in enumerate(super().stream_reply(messages, max_tokens=max_tokens)):
            if i == 1:
                self.started.set()
                assert self.release.wait(10), "the test never released the reply"
            yield piece


def kiosk_config(path: Path, *, semantic: bool) -> Config:
    return config_from_dict({"kiosk": {"knowledge_file": str(path), "semantic": semantic, "mend_misheard": False}})


def fake_assistant(config: Config, llm: FakeLlm) -> Assistant:
    clock = ManualClock()
    engines = Engines(vad=FakeVad(), recognizer=FakeRecognizer("", clock), llm=llm, synthesizer=FakeSynth(clock))
    return build_assistant(config, engines, clock=clock)


def answer(assistant: Assistant, question: str, turn: int = 1) -> ReplyTrace:
    """The assistant's reply to a transcribed question."""
    trace = ReplyTrace(turn, committed=0.0)
    queued = [0]

    def emit(audio: FloatAudio) -> int:  # the output stream's position after ``audio``, as a playback ring gives it
        queued[0] += len(audio)
        return queued[0]

    assistant.responder.respond_to(Transcript(question), trace, threading.Event(), emit)
    assistant.responder.commit(trace, None)
    return trace


def admin_client(
    appliance: FakeAppliance, *, token: str | None = None, selftest: SelftestRunner | None = None
) -> TestClient:
    """The admin app on ``appliance``, asked in process as http://localhost (a self-test that passes at once)."""
    runner = selftest or SelftestRunner(lambda folder: [sys.executable, "-c", f"print({SELFTEST_REPORT!r})"])
    return TestClient(create_app(appliance, runner, hosts=HOSTS, token=token), base_url="http://localhost")
