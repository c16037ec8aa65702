"""Fault injection for the service tests: knobs read from the environment at start, never set in production.

``EDGEVOICE_FAULT_STALL_LISTENER_S=N``: N seconds after the loop starts, the listener thread blocks inside the voice
activity detector (as a hung engine would) until the process is told to stop, so it consumes no more microphone
audio. The service's watchdog must then kill and restart it (``tests/test_service_nspawn.py``).

``EDGEVOICE_FAULT_LLM``, ``EDGEVOICE_FAULT_TTS``, ``EDGEVOICE_FAULT_ASR`` = ``KIND@N[:SECONDS]``: the language model's
N-th reply, the synthesizer's N-th clause or the recognizer's N-th decode after the appliance is ready (``arm``)
fails: ``raise`` raises the stage's error; ``hang`` blocks SECONDS (not cancellable, as an engine stuck in native
code) and then goes on. The turn must end with the fallback phrase and the next one work (``tests/test_faults.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from edgevoice.errors import EdgeVoiceError, LanguageModelError, RecognizerError, SynthesizerError
from edgevoice.interfaces import Engines

log = logging.getLogger(__name__)

STALL_LISTENER = "EDGEVOICE_FAULT_STALL_LISTENER_S"


class StallingVad:
    """The real VAD until ``after_s`` seconds past the first frame, then a call that blocks until ``release``."""

    def __init__(self, vad: object, after_s: float, release: threading.Event) -> None:
        self._vad, self._after_s, self._release = vad, after_s, release
        self._start: float | None = None
        self.stalled = threading.Event()

    def probability(self, frame: object) -> float:
        now = time.monotonic()
        if self._start is None:
            self._start = now
        if now - self._start >= self._after_s:
            if not self.stalled.is_set():
                log.warning("fault injection: the listener stalls now (%s)", STALL_LISTENER)
                self.stalled.set()
            self._release.wait()
        return float(self._vad.probability(frame))  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._vad, name)


@dataclasses.dataclass(frozen=True)
class EngineFault:
    kind: str
    """"raise" or "hang"."""
    call: int
    """Which call (1-based, counted from :func:`arm`) fails."""
    seconds: float = 0.0


def parse_fault(name: str, text: str) -> EngineFault:
    """``KIND@N[:SECONDS]`` (see the module doc)."""
    kind, _, rest = text.partition("@")
    call, _, seconds = rest.partition(":")
    try:
        fault = EngineFault(kind.strip(), int(call), float(seconds or 0.0))
    except ValueError as exc:
        raise EdgeVoiceError(f"{name}={text!r}: expected KIND@N[:SECONDS]", code="fault_injection") from exc
    if fault.kind not in ("raise", "hang") or fault.call < 1:
        raise EdgeVoiceError(f"{name}={text!r}: KIND is raise or hang, N at least 1", code="fault_injection")
    return fault


class _Faulty:
    """An engine whose ``fault.call``-th armed call of ``method`` fails; everything else goes to the engine."""

    method = ""
    error: type[EdgeVoiceError] = EdgeVoiceError

    def __init__(self, engine: object, fault: EngineFault) -> None:
        self._engine, self._fault = engine, fault
        self.armed = False
        self.calls = 0

    def _trip(self) -> None:
        if not self.armed:
            return
        self.calls += 1
        if self.calls != self._fault.call:
            return
        log.warning("fault injection: %s call %d %ss", type(self._engine).__name__, self.calls, self._fault.kind)
        if self._fault.kind == "raise":
            raise self.error("injected fault", code="injected_fault")
        time.sleep(self._fault.seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class FaultyLlm(_Faulty):
    error = LanguageModelError

    def stream_reply(self, messages: Sequence[object], *, max_tokens: int) -> Iterator[str]:
        self._trip()
        yield from self._engine.stream_reply(messages, max_tokens=max_tokens)  # type: ignore[attr-defined]


class FaultySynth(_Faulty):
    error = SynthesizerError

    def synthesize(self, text: str) -> Iterator[object]:
        self._trip()
        yield from self._engine.synthesize(text)  # type: ignore[attr-defined]


class FaultyRecognizer(_Faulty):
    error = RecognizerError

    def transcribe(self, audio: object, **kwargs: Any) -> object:
        self._trip()
        return self._engine.transcribe(audio, **kwargs)  # type: ignore[attr-defined]


_ENGINE_FAULTS: tuple[tuple[str, str, type[_Faulty]], ...] = (
    ("EDGEVOICE_FAULT_LLM", "llm", FaultyLlm),
    ("EDGEVOICE_FAULT_TTS", "synthesizer", FaultySynth),
    ("EDGEVOICE_FAULT_ASR", "recognizer", FaultyRecognizer),
)


def inject_faults(engines: Engines, release: threading.Event, environ: Mapping[str, str] | None = None) -> Engines:
    """``engines`` with the faults the environment asks for (unchanged when it asks for none)."""
    env = os.environ if environ is None else environ
    changes: dict[str, object] = {}
    value = env.get(STALL_LISTENER)
    if value:
        log.warning("fault injection on: %s=%s", STALL_LISTENER, value)
        changes["vad"] = StallingVad(engines.vad, float(value), release)
    for name, field, wrapper in _ENGINE_FAULTS:
        if env.get(name):
            log.warning("fault injection on: %s=%s", name, env[name])
            changes[field] = wrapper(getattr(engines, field), parse_fault(name, env[name]))
    return dataclasses.replace(engines, **changes) if changes else engines  # type: ignore[arg-type]


def arm(engines: Engines) -> None:
    """Start counting calls (the appliance is ready: warm-up calls do not count)."""
    for field in ("llm", "synthesizer", "recognizer"):
        engine = getattr(engines, field)
        if isinstance(engine, _Faulty):
            engine.armed = True
