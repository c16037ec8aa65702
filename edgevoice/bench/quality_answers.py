"""The answer half of the quality benchmark: each language model answers through the kiosk's own reply path."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.bench.quality_set import Question
from edgevoice.bench.scoring import has_fact, has_markup, is_dont_know, sentence_count, words
from edgevoice.clock import MonotonicClock
from edgevoice.config import Config
from edgevoice.events import Transcript
from edgevoice.interfaces import FloatAudio
from edgevoice.kiosk.grounding import GroundedModel, Kiosk
from edgevoice.models.store import ModelStore
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace

__all__ = ["answer_all", "answer_inputs", "conversation_responder", "respond"]


class _Silent:
    """A synthesizer that speaks nothing audible: the answer benchmark needs the reply text, not its sound."""

    sample_rate = SAMPLE_RATE

    def synthesize(self, text: str) -> Iterator[FloatAudio]:
        yield np.zeros(1, dtype=np.float32)


def answer_all(
    store: ModelStore,
    config: Config,
    kiosk: Kiosk,
    llm_names: Sequence[str],
    inputs: Sequence[tuple[str, Question, str]],
    progress: Callable[[str], None],
) -> tuple[list[dict[str, Any]], set[str]]:
    """One row per language model; the distinct replies of them all.

    ``inputs``: (kind, question, text) with kind ``"text"`` (the question as written) or a listening condition
    (the question as the recognizer heard it there)."""
    from edgevoice.app_engines import open_llm

    rows, replies = [], set()
    for name in llm_names:
        progress(f"answering with {name}")
        llm = open_llm(config, store, name=name, n_gpu_layers=0)  # the quality benchmark answers on the CPU
        try:
            grounded = kiosk.grounded(llm)
            llm.prefill(kiosk.prefix)
            answered = answer_inputs(config, kiosk, grounded, sorted({text for _, _, text in inputs}))
        finally:
            llm.close()
        replies |= {reply for reply, _, _ in answered.values() if reply}
        rows.append(answer_row(name, inputs, answered))
    return rows, replies


def answer_inputs(
    config: Config, kiosk: Kiosk, grounded: GroundedModel, texts: Sequence[str]
) -> dict[str, tuple[str, str, float]]:
    """Reply, who gave it (``model``, ``gate``, ``unsupported``: the model's reply was replaced, ``no speech``) and
    seconds, for each distinct question text."""
    responder, clock = conversation_responder(config, kiosk, grounded)
    out: dict[str, tuple[str, str, float]] = {}
    for i, text in enumerate(texts):
        responder.history.clear()  # every question on its own, as a new visitor asks it
        started = clock.now()
        reply, verdict = respond(responder, grounded, clock, text, i)
        out[text] = (reply, verdict, clock.now() - started)
    return out


def conversation_responder(config: Config, kiosk: Kiosk, grounded: GroundedModel) -> tuple[Responder, MonotonicClock]:
    """The kiosk's responder around ``grounded``, speaking silently; its ``history`` is the conversation."""
    clock = MonotonicClock()
    responder = Responder(
        _NoRecognizer(), grounded, _Silent(), kiosk.prefix, max_tokens=config.llm.max_tokens,
        max_sentences=config.kiosk.max_sentences, clock=clock, unsure_below=config.asr.unsure_below,
        max_clauses=config.kiosk.max_clauses, max_reply_s=config.kiosk.max_reply_s,
    )  # fmt: skip
    return responder, clock


def respond(
    responder: Responder, grounded: GroundedModel, clock: MonotonicClock, heard: str | Transcript, index: int = 0
) -> tuple[str, str]:
    """The reply to ``heard`` (a text, or a transcript with the recognizer's confidence) in the responder's
    conversation so far, and who gave it (see :func:`answer_inputs`); the exchange joins the conversation, as a
    played reply does in the kiosk."""
    transcript = heard if isinstance(heard, Transcript) else Transcript(heard)
    trace = ReplyTrace(index, committed=clock.now())
    responder.respond_to(transcript, trace, threading.Event(), _Counter().emit)
    responder.commit(trace, None)
    said = grounded.last_verdict
    return trace.reply, "no speech" if transcript.is_empty else said.value if said is not None else ""


class _Counter:
    """The playback position of a reply that is not played: samples emitted so far."""

    def __init__(self) -> None:
        self.samples = 0

    def emit(self, chunk: FloatAudio) -> int:
        self.samples += len(chunk)
        return self.samples


class _NoRecognizer:
    sample_rate = SAMPLE_RATE

    def transcribe(self, audio: FloatAudio, *, prompt: str = "") -> Transcript:
        raise AssertionError("the answer benchmark gives the responder transcripts")


def answer_row(
    model: str,
    inputs: Sequence[tuple[str, Question, str]],
    answered: dict[str, tuple[str, str, float]],
) -> dict[str, Any]:
    by_input: dict[str, Any] = {}
    for kind in dict.fromkeys(k for k, _, _ in inputs):
        rows = [(q, *answered[t]) for k, q, t in inputs if k == kind]
        inside = [(q, r) for q, r, _, _ in rows if q.in_knowledge]
        outside = [r for q, r, _, _ in rows if not q.in_knowledge]
        by_input[kind] = {
            "right_fact_percent": _pct(sum(has_fact(r, q.facts) for q, r in inside), len(inside)),
            "dont_know_percent": _pct(sum(is_dont_know(r) for r in outside), len(outside)),
            "false_dont_know_percent": _pct(sum(is_dont_know(r) for _, r in inside), len(inside)),
            "gated_out_of_knowledge_percent": _pct(
                sum(v == "gate" for q, _, v, _ in rows if not q.in_knowledge), len(outside)
            ),
            "replaced_percent": _pct(sum(v == "unsupported" for _, _, v, _ in rows), len(rows)),
            "direct_percent": _pct(sum(v == "direct" for q, _, v, _ in rows if q.in_knowledge), len(inside)),
        }
    spoken = [(q, *answered[t]) for k, q, t in inputs if k != "text"]
    replies = [r for _, r, _, _ in spoken if r]
    inside = [(q, r) for q, r, _, _ in spoken if q.in_knowledge]
    outside = [r for q, r, _, _ in spoken if not q.in_knowledge]
    errors = [
        {"question": q.text, "reply": r}
        for kind, q, t in inputs
        if kind == "text"
        for r in [answered[t][0]]
        if (has_fact(r, q.facts) if q.in_knowledge else is_dont_know(r)) is False
    ]
    generated = [s for _, _, verdict, s in spoken if verdict != "gate"]
    return {
        "model": model,
        "by_input": by_input,
        "spoken": {
            "right_fact_percent": _pct(sum(has_fact(r, q.facts) for q, r in inside), len(inside)),
            "dont_know_percent": _pct(sum(is_dont_know(r) for r in outside), len(outside)),
        },
        "reply_words_mean": round(statistics.mean(len(words(r)) for r in replies), 1) if replies else 0.0,
        "reply_sentences_mean": round(statistics.mean(sentence_count(r) for r in replies), 2) if replies else 0.0,
        "reply_sentences_max": max((sentence_count(r) for r in replies), default=0),
        "replies_with_markup": sum(has_markup(r) for r in replies),
        "seconds_per_generated_reply": round(statistics.mean(generated), 2) if generated else 0.0,
        "text_errors": errors,
        "items": [
            {"input": kind, "id": q.id, "heard": t, "reply": answered[t][0], "by": answered[t][1]}
            for kind, q, t in inputs
        ],
    }


def _pct(n: int, total: int) -> float | None:
    return round(100 * n / total, 1) if total else None
