"""``edgevoice bench --quality --venue DIR``: right facts, honest don't-know, small talk and invented facts on any
venue, per split, written and spoken.

Each venue (:mod:`edgevoice.bench.venue`) becomes the kiosk's knowledge and persona; its questions are answered
through the kiosk's real reply path (:func:`edgevoice.bench.quality_answers.conversation_responder`). A follow-up is
asked in one conversation right after its ``after`` question; every other question in a fresh one. Spoken: each
question said by voices that are not the kiosk's (:mod:`edgevoice.bench.voices`), clean and in pink noise, found by
the voice activity detector and transcribed by the configured recognizer with the kiosk's prompt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.bench.audio_set import mix_at_snr, with_pauses
from edgevoice.bench.quality_answers import conversation_responder, respond
from edgevoice.bench.scoring import has_fact, invented_values, is_dont_know, is_small_talk_reply
from edgevoice.bench.subjects import Subjects
from edgevoice.bench.venue import ANSWERABLE, DONT_KNOW, KINDS, Question, Venue
from edgevoice.bench.voices import DEFAULT_VOICES
from edgevoice.config import Config
from edgevoice.events import Transcript
from edgevoice.kiosk.knowledge import Entry, parse_knowledge
from edgevoice.kiosk.prompt import ASK_AGAIN
from edgevoice.models.store import ModelStore

__all__ = ["VenueOptions", "run_venues", "score_reply", "summarize", "venue_rows"]

WRITTEN = "written"
ALL_VOICES = "all"


@dataclass(frozen=True)
class VenueOptions:
    split: str = "both"
    """``dev``, ``test`` or ``both``."""
    written_only: bool = False
    voices: tuple[str, ...] = DEFAULT_VOICES
    conditions: tuple[float | None, ...] = (None, 10.0)
    """Clean, then pink noise at these SNRs (dB)."""
    seed: int = 0
    per_kind: int = 0
    """Only the first that many questions of each kind in each split (0: all)."""


def condition_name(snr: float | None) -> str:
    return "clean" if snr is None else f"{snr:g} dB"


def venue_config(config: Config, venue: Venue) -> Config:
    """``config`` with the venue as the kiosk's knowledge and persona."""
    kiosk = replace(config.kiosk, persona=venue.persona, knowledge=venue.knowledge, knowledge_file="")
    return replace(config, kiosk=kiosk)


def score_reply(question: Question, reply: str, knowledge: str) -> dict[str, Any]:
    """Whether ``reply`` is right for its question's kind, and the values in it the knowledge never states.

    Asked to say it again (:data:`~edgevoice.kiosk.prompt.ASK_AGAIN`), the visitor has no fact and no reply to
    their small talk, but nothing untrue: right only for a question the knowledge does not answer."""
    asked_again = reply == ASK_AGAIN
    if question.kind in ANSWERABLE:
        right = has_fact(reply, question.facts)
    elif question.kind in DONT_KNOW:
        right = asked_again or is_dont_know(reply)
    else:
        right = not asked_again and is_small_talk_reply(reply)
    return {"right": right, "invented": invented_values(reply, knowledge), "asked_again": asked_again}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _pct(n: int, total: int) -> float | None:
    return round(100 * n / total, 1) if total else None


def summarize(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The shares of right replies (answerable kinds: right facts; out and near_miss: honest don't-know;
    small_talk), replies with an invented value, and every kind's own share."""

    def share(kinds: Sequence[str] | frozenset[str]) -> float | None:
        chosen = [i for i in items if i["kind"] in kinds]
        return _pct(sum(i["right"] for i in chosen), len(chosen))

    return {
        "n": len(items),
        "right_facts_percent": share(ANSWERABLE),
        "dont_know_percent": share(DONT_KNOW),
        "small_talk_percent": share(["small_talk"]),
        "invented": sum(bool(i["invented"]) for i in items),
        "asked_again": sum(bool(i.get("asked_again")) for i in items),
        "wrong_entry": sum(bool(i.get("wrong_entry")) for i in items),
        "wrong_subject": sum(bool(i.get("wrong_subject")) for i in items),
        "told_near_miss": sum(bool(i.get("told_near_miss")) for i in items),
        "by_kind": {
            k: {"n": sum(i["kind"] == k for i in items), "right_percent": share([k])}
            for k in KINDS
            if any(i["kind"] == k for i in items)
        },
    }


class Conversations:
    """Asks the kiosk whole conversations through its reply path: a fresh history for each."""

    def __init__(self, config: Config, kiosk: Any, grounded: Any) -> None:
        self.responder, self.clock = conversation_responder(config, kiosk, grounded)
        self.grounded = grounded
        self._done: dict[tuple[Transcript, ...], list[tuple[str, str]]] = {}
        self._read: dict[tuple[Transcript, ...], list[Entry | None]] = {}

    def ask(self, texts: tuple[Transcript, ...]) -> list[tuple[str, str]]:
        """(reply, who gave it) for each transcript, asked in turn in one conversation."""
        if texts not in self._done:
            self.responder.history.clear()
            done, read = [], []
            for i, t in enumerate(texts):
                done.append(respond(self.responder, self.grounded, self.clock, t, i))
                read.append(getattr(self.grounded, "last_read_out", None))
            self._done[texts], self._read[texts] = done, read
        return self._done[texts]

    def read_outs(self, texts: tuple[Transcript, ...]) -> list[Entry | None]:
        """The entry each reply of :meth:`ask` read out as the operator wrote it (None: no read-out)."""
        self.ask(texts)
        return self._read[texts]


def run_venues(
    config: Config,
    store: ModelStore,
    venues: Sequence[Venue],
    options: VenueOptions = VenueOptions(),
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Every venue, written and (unless written only) spoken; the report as plain data, JSON-ready."""
    started = time.perf_counter()
    report: dict[str, Any] = {
        "split": options.split,
        "voices": [] if options.written_only else list(options.voices),
        "conditions": [] if options.written_only else [condition_name(c) for c in options.conditions],
        "models": {"asr": config.models.asr, "llm": config.models.llm},
        "rows": [],
        "items": [],
    }
    for venue in venues:
        items = run_venue(config, store, venue, options, progress)
        report["items"] += items
        report["rows"] += venue_rows(venue.name, items)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def venue_rows(venue: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary rows of one venue's items: per split and input, spoken inputs once for all voices together
    (voice ``all``) and then once per voice."""
    rows: list[dict[str, Any]] = []
    for split in ("dev", "test"):
        for input_name in dict.fromkeys(i["input"] for i in items):
            chosen = [i for i in items if i["split"] == split and i["input"] == input_name]
            voices = list(dict.fromkeys(i["voice"] for i in chosen))
            groups = [(WRITTEN if input_name == WRITTEN else ALL_VOICES, chosen)]
            if input_name != WRITTEN and len(voices) > 1:
                groups += [(v, [i for i in chosen if i["voice"] == v]) for v in voices]
            for voice, group in groups:
                if group:
                    rows.append({"venue": venue, "split": split, "input": input_name, "voice": voice,
                                 **summarize(group)})  # fmt: skip
    return rows


def run_venue(
    config: Config, store: ModelStore, venue: Venue, options: VenueOptions, progress: Callable[[str], None]
) -> list[dict[str, Any]]:
    """One scored item per question and input (written; each voice and condition)."""
    from edgevoice.app import build_kiosk
    from edgevoice.app_engines import open_llm

    config = venue_config(config, venue)
    questions = venue.in_split(options.split, options.per_kind)
    kiosk = build_kiosk(config, store=store)
    heard: dict[tuple[str, str], dict[str, Transcript]] = {
        (WRITTEN, ""): {q.id: Transcript(q.text) for q in venue.questions}
    }
    if not options.written_only:
        heard |= transcribe_venue(config, store, kiosk, venue, questions, options, progress)
    llm = open_llm(config, store, n_gpu_layers=0)  # the quality benchmark answers on the CPU
    items: list[dict[str, Any]] = []
    try:
        grounded = kiosk.grounded(llm)
        llm.prefill(kiosk.prefix)
        ask = Conversations(config, kiosk, grounded)
        for (voice, condition), texts in heard.items():
            progress(f"{venue.name}: answering {len(questions)} questions ({voice} {condition})".rstrip())
            items += answer_venue(venue, questions, voice, condition, texts, ask.ask, ask.read_outs)
    finally:
        llm.close()
    return items


def answer_venue(
    venue: Venue,
    questions: Sequence[Question],
    voice: str,
    condition: str,
    texts: dict[str, Transcript],
    ask: Callable[[tuple[Transcript, ...]], list[tuple[str, str]]],
    read_outs: Callable[[tuple[Transcript, ...]], list[Entry | None]] | None = None,
) -> list[dict[str, Any]]:
    """Each question as ``texts`` has it (id -> written or heard transcript), scored: a follow-up in one conversation
    after its ``after`` question, every other question alone. ``ask`` answers a conversation: (reply, by) a turn;
    ``read_outs`` the entry each turn read out (:mod:`edgevoice.bench.subjects`; None: none known)."""
    subjects = Subjects.of(parse_knowledge(venue.knowledge))
    items: list[dict[str, Any]] = []
    for q in questions:
        chain = (venue.question(q.after), q) if q.after else (q,)
        heard = tuple(texts[x.id] for x in chain)
        answers = ask(heard)
        reply, by = answers[-1]
        read_out = read_outs(heard)[-1] if read_outs is not None else None
        item = {
            "venue": venue.name, "id": q.id, "kind": q.kind, "split": q.split,
            "input": WRITTEN if voice == WRITTEN else f"spoken {condition}", "voice": voice,
            "question": q.text, "heard": texts[q.id].text, "confidence": _rounded(texts[q.id].confidence),
            "reply": reply, "by": by,
            **score_reply(q, reply, venue.knowledge),
            **subjects.judge(q, reply, by, read_out),
        }  # fmt: skip
        if q.after:
            item["before"] = {"heard": texts[q.after].text, "reply": answers[0][0]}
        items.append(item)
    return items


def transcribe_venue(
    config: Config,
    store: ModelStore,
    kiosk: Any,
    venue: Venue,
    questions: Sequence[Question],
    options: VenueOptions,
    progress: Callable[[str], None],
) -> dict[tuple[str, str], dict[str, Transcript]]:
    """(voice, condition) -> question id -> what the recognizer heard; the questions that follow-ups come after
    are spoken too."""
    from edgevoice.app_engines import open_plain_voice, open_vad
    from edgevoice.bench.quality import open_recognizer
    from edgevoice.bench.voices import voice_speaker
    from edgevoice.engines.piper_onnx import PiperSynthesizer
    from edgevoice.listen.vad import find_speech, utterance_span
    from edgevoice.reply.speech_text import normalize_for_speech

    needed = {q.id: q for q in questions} | {q.after: venue.question(q.after) for q in questions if q.after}
    sessions: dict[float, PiperSynthesizer] = {}

    def piper(text: str, length_scale: float) -> tuple[np.ndarray, int]:
        key = round(length_scale, 3)
        if key not in sessions:
            sessions[key] = open_plain_voice(config, store, length_scale=key, noise_scale=0.0, noise_w=0.0)
        tts = sessions[key]
        return np.concatenate(list(tts.synthesize(normalize_for_speech(text)))), tts.sample_rate

    vad = open_vad(config, store, threads=1)
    rec = open_recognizer(store, config, config.models.asr)
    prompt = kiosk.asr_prompt(config.asr.initial_prompt)
    out: dict[tuple[str, str], dict[str, Transcript]] = {}
    try:
        for vi, name in enumerate(options.voices):
            speak = voice_speaker(name, piper)
            progress(f"{venue.name}: {len(needed)} questions spoken by {name}")
            clean = {qid: with_pauses(speak(q.text)) for qid, q in needed.items()}
            for ci, snr in enumerate(options.conditions):
                texts = out.setdefault((name, condition_name(snr)), {})
                for qi, (qid, audio) in enumerate(clean.items()):
                    if snr is not None:
                        audio, _ = mix_at_snr(audio, snr, np.random.default_rng([options.seed, vi, ci, qi]))
                    span = utterance_span(
                        find_speech(vad, audio, config.vad, sample_rate=SAMPLE_RATE),
                        int(config.asr.max_seconds * SAMPLE_RATE),
                    )
                    heard = Transcript("") if span is None else rec.transcribe(audio[span[0] : span[1]], prompt=prompt)
                    texts[qid] = heard
    finally:
        rec.close()
        vad.close()
        for tts in sessions.values():
            tts.close()
    return out
