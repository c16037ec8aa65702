"""``edgevoice bench --quality``: how well the kiosk hears, answers and speaks, on questions about the sample venue.

1. Every question (:mod:`edgevoice.bench.quality_set`) is spoken by every voice (:mod:`edgevoice.bench.audio_set`),
   clean and with pink noise at 20 and 10 dB SNR, framed by pauses.
2. **Recognition**: voice activity detection, then each recognizer, with the venue-vocabulary prompt the kiosk uses
   and (for the default recognizer) without it: word error rate per condition, and how many of the venue's names
   in the questions came out right.
3. **Answers**: each language model answers the question text and every transcript of the default recognizer,
   through the kiosk's own path (grounding gate, cached prefix, clause chunker, speakable text): the share of
   right facts, of honest "I don't know" outside the knowledge, and the length of the replies.
4. **Round trip**: every distinct reply, normalized and spoken by the kiosk's voice, transcribed again.
5. **Phantoms**: clips without speech (silence, noise, hum, clicks, music) straight into the recognizer, with the
   phantom filters and without them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from edgevoice import data
from edgevoice.audio import SAMPLE_RATE
from edgevoice.bench.audio_set import VOICES, Voice, mix_at_snr, non_speech_clips, with_pauses
from edgevoice.bench.quality_answers import answer_all
from edgevoice.bench.quality_set import IN_KNOWLEDGE, OUT_OF_KNOWLEDGE, Question
from edgevoice.bench.scoring import corpus_wer, words
from edgevoice.config import Config
from edgevoice.interfaces import FloatAudio
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.listen.vad import find_speech, utterance_span
from edgevoice.models.store import ModelStore
from edgevoice.reply.speech_text import normalize_for_speech

__all__ = ["QualityOptions", "run_quality"]

CONDITIONS: tuple[float | None, ...] = (None, 20.0, 10.0)
"""Clean, then pink noise at these SNRs (dB)."""


def condition_name(snr: float | None) -> str:
    return "clean" if snr is None else f"{snr:g} dB"


@dataclass(frozen=True)
class QualityOptions:
    questions: tuple[Question, ...] = IN_KNOWLEDGE + OUT_OF_KNOWLEDGE
    voices: tuple[Voice, ...] = VOICES
    conditions: tuple[float | None, ...] = CONDITIONS
    asr_models: tuple[str, ...] = ()
    """Manifest names or paths; empty: the configured one, then the optional ones that are installed."""
    llm_models: tuple[str, ...] = ()
    compare_prompt: bool = True
    """Also recognize without the vocabulary prompt (default recognizer only)."""
    phantoms: bool = True
    seed: int = 0
    round_trip_draws: int = 10
    """Times each reply is synthesized for the round trip: the voice's noise (as the kiosk speaks) makes one
    rendering differ from the next, and the mean of a few renderings varies too much between runs."""

    def defaults_only(self, config: Config) -> QualityOptions:
        """Only the configured recognizer and language model."""
        return replace(self, asr_models=(config.models.asr,), llm_models=(config.models.llm,))


def quick_options() -> QualityOptions:
    """A few minutes' subset: one voice, clean and 10 dB, eight questions in the knowledge and four outside."""
    questions = IN_KNOWLEDGE[::3][:8] + OUT_OF_KNOWLEDGE[:2] + OUT_OF_KNOWLEDGE[8:10]
    return QualityOptions(
        questions=questions, voices=VOICES[:1], conditions=(None, 10.0), compare_prompt=False, round_trip_draws=3
    )


@dataclass
class Utterance:
    question: Question
    voice: str
    condition: str
    audio: FloatAudio = field(repr=False)
    snr_measured: float | None = None
    speech: tuple[int, int] | None = None
    """The span the voice activity detector found (first to last segment), or None."""


def sample_config(config: Config) -> Config:
    """The config with the sample venue as knowledge: the questions are about it, whatever the operator's venue."""
    kiosk = replace(config.kiosk, persona=data.sample_persona(), knowledge=data.sample_knowledge(), knowledge_file="")
    return replace(config, kiosk=kiosk)


def available_models(store: ModelStore, role: str, configured: str) -> tuple[str, ...]:
    """The configured model, then every other installed model of the manifest in the same role."""
    spec = store.manifest.find(configured)  # a former name is the same model as its current one
    current = spec.name if spec is not None else configured
    installed = [s.name for s in store.status() if s.role == role and s.installed and s.name != current]
    return (configured, *installed)


def run_quality(
    config: Config,
    store: ModelStore,
    options: QualityOptions = QualityOptions(),
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the benchmark; return the report (plain data, JSON-ready)."""
    from edgevoice.app import build_kiosk
    from edgevoice.app_engines import open_plain_voice, open_vad

    config = sample_config(config)
    kiosk = build_kiosk(config)
    asr_names = options.asr_models or available_models(store, "asr", config.models.asr)
    llm_names = options.llm_models or available_models(store, "llm", config.models.llm)
    started = time.perf_counter()

    progress(f"speaking {len(options.questions)} questions x {len(options.voices)} voices")
    utterances = speak_questions(config, store, options)
    vad = open_vad(config, store, threads=1)
    try:
        for u in utterances:
            u.speech = utterance_span(
                find_speech(vad, u.audio, config.vad, sample_rate=SAMPLE_RATE),
                int(config.asr.max_seconds * SAMPLE_RATE),
            )
    finally:
        vad.close()

    report: dict[str, Any] = {
        "questions": {"in_knowledge": sum(q.in_knowledge for q in options.questions)},
        "voices": [v.name for v in options.voices],
        "conditions": [condition_name(c) for c in options.conditions],
        "snr_measured_db": snr_summary(utterances),
        "asr_prompt": kiosk.asr_prompt(config.asr.initial_prompt),
        "gate": {
            "threshold": config.kiosk.grounding_threshold,
            "retrieval": kiosk.retrieval,
            "semantic": kiosk.semantic is not None,
        },
    }
    report["questions"]["out_of_knowledge"] = len(options.questions) - report["questions"]["in_knowledge"]
    report["recognition"], transcripts = recognize_all(store, config, kiosk, asr_names, utterances, options, progress)
    inputs = [("text", q, q.text) for q in options.questions]
    inputs += [(u.condition, u.question, t) for u, t in zip(utterances, transcripts, strict=True)]
    report["answers"], replies = answer_all(store, config, kiosk, llm_names, inputs, progress)
    tts = open_plain_voice(config, store, length_scale=config.tts.length_scale)  # the kiosk's own speed
    try:
        report["round_trip"] = round_trip(
            store, config, asr_names, tts, sorted(replies), progress, draws=options.round_trip_draws
        )
    finally:
        tts.close()
    if options.phantoms:
        report["phantoms"] = phantoms(store, config, kiosk, asr_names, options.seed, progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def speak_questions(config: Config, store: ModelStore, options: QualityOptions) -> list[Utterance]:
    from edgevoice.app_engines import open_plain_voice
    from edgevoice.engines.piper_onnx import PiperSynthesizer

    sessions: dict[float, PiperSynthesizer] = {}

    def synthesize(text: str, length_scale: float) -> tuple[FloatAudio, int]:
        key = round(length_scale, 3)
        if key not in sessions:
            sessions[key] = open_plain_voice(config, store, length_scale=key, noise_scale=0.0, noise_w=0.0)
        tts = sessions[key]
        return np.concatenate(list(tts.synthesize(normalize_for_speech(text)))), tts.sample_rate

    out = []
    try:
        for qi, q in enumerate(options.questions):
            for vi, voice in enumerate(options.voices):
                clean = with_pauses(voice.render(synthesize, q.text))
                for ci, snr in enumerate(options.conditions):
                    if snr is None:
                        out.append(Utterance(q, voice.name, "clean", clean))
                        continue
                    rng = np.random.default_rng([options.seed, qi, vi, ci])
                    mixed, measured = mix_at_snr(clean, snr, rng)
                    out.append(Utterance(q, voice.name, condition_name(snr), mixed, measured))
    finally:
        for tts in sessions.values():
            tts.close()
    return out


def snr_summary(utterances: Sequence[Utterance]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for u in utterances:
        if u.snr_measured is not None:
            out.setdefault(u.condition, []).append(u.snr_measured)
    return {c: [round(min(v), 2), round(max(v), 2)] for c, v in out.items()}


def open_recognizer(store: ModelStore, config: Config, name: str, *, phantom_filters: bool = True) -> Any:
    """Recognizer ``name`` with ``[asr]``'s threads and language, the whole audio context and no prompt of its own
    (the benchmark gives each transcription its prompt)."""
    from edgevoice import app_engines

    return app_engines.open_recognizer(
        config, store, name=name, audio_ctx=0, initial_prompt="", phantom_filters=phantom_filters
    )


def recognize_all(
    store: ModelStore,
    config: Config,
    kiosk: Kiosk,
    asr_names: Sequence[str],
    utterances: Sequence[Utterance],
    options: QualityOptions,
    progress: Callable[[str], None],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Recognition rows (one per recognizer and prompt); the kiosk's transcripts from the first recognizer."""
    rows: list[dict[str, Any]] = []
    kiosk_transcripts: list[str] = []
    names = [n.lower() for n in kiosk.vocabulary]
    for index, name in enumerate(asr_names):
        prompts = [kiosk.asr_prompt(config.asr.initial_prompt)]
        if index == 0 and options.compare_prompt:  # the configured prompt against the other choice
            other = "" if prompts[0] else (", ".join(kiosk.vocabulary) + "." if kiosk.vocabulary else "")
            if other != prompts[0]:
                prompts.append(other)
        rec = open_recognizer(store, config, name)
        try:
            for prompt in prompts:
                progress(f"recognizing with {name} ({'venue prompt' if prompt else 'no prompt'})")
                texts, seconds = [], []
                for u in utterances:
                    t = time.perf_counter()
                    text = (
                        ""
                        if u.speech is None
                        else rec.transcribe(u.audio[u.speech[0] : u.speech[1]], prompt=prompt).text
                    )
                    seconds.append(time.perf_counter() - t)
                    texts.append(text)
                rows.append(recognition_row(name, prompt, utterances, texts, seconds, names, options))
                if index == 0 and prompt == prompts[0]:
                    kiosk_transcripts = texts
        finally:
            rec.close()
    return rows, kiosk_transcripts


def recognition_row(
    model: str,
    prompt: str,
    utterances: Sequence[Utterance],
    texts: Sequence[str],
    seconds: Sequence[float],
    names: Sequence[str],
    options: QualityOptions,
) -> dict[str, Any]:
    wer: dict[str, float] = {}
    for snr in options.conditions:
        c = condition_name(snr)
        pairs = [(u.question.text, t) for u, t in zip(utterances, texts, strict=True) if u.condition == c]
        wer[c] = round(100 * corpus_wer(pairs), 2)
    name_hits = name_total = 0
    for u, t in zip(utterances, texts, strict=True):
        said = " ".join(words(t))
        for n in names:
            if " ".join(words(n)) in " ".join(words(u.question.text)):
                name_total += 1
                name_hits += f" {' '.join(words(n))} " in f" {said} "
    return {
        "model": model,
        "prompt": "venue" if prompt else "none",
        "wer_percent": wer,
        "names_right_percent": round(100 * name_hits / name_total, 1) if name_total else None,
        "no_speech_found": sum(u.speech is None for u in utterances),
        "ms_per_utterance": round(1000 * statistics.mean(seconds), 1) if seconds else 0.0,
    }


def round_trip(
    store: ModelStore,
    config: Config,
    asr_names: Sequence[str],
    tts: Any,
    replies: Sequence[str],
    progress: Callable[[str], None],
    *,
    draws: int = 1,
) -> list[dict[str, Any]]:
    """Each reply as the kiosk speaks it (normalized, its own voice settings), ``draws`` times (the voice's noise
    makes each rendering different), transcribed back; the WER is over all renderings."""
    from edgevoice.audio.files import to_model_rate

    progress(f"round trip of {len(replies)} replies x {draws}")
    spoken = [normalize_for_speech(r) for r in replies for _ in range(draws)]
    audio = [to_model_rate(np.concatenate(list(tts.synthesize(s))), tts.sample_rate, SAMPLE_RATE) for s in spoken]
    rows = []
    for name in asr_names:
        rec = open_recognizer(store, config, name)
        try:
            heard = [rec.transcribe(a).text for a in audio]
        finally:
            rec.close()
        pairs = list(zip(spoken, heard, strict=True))
        worst = sorted(pairs, key=lambda p: -corpus_wer([p]))[:5]
        rows.append(
            {
                "recognizer": name,
                "replies": len(replies),
                "draws": draws,
                "wer_percent": round(100 * corpus_wer(pairs), 2),
                "draw_wer_percent": [round(100 * corpus_wer(pairs[d::draws]), 2) for d in range(draws)],
                "worst": [{"said": s, "heard": h} for s, h in worst if corpus_wer([(s, h)]) > 0],
            }
        )
    return rows


def phantoms(
    store: ModelStore,
    config: Config,
    kiosk: Kiosk,
    asr_names: Sequence[str],
    seed: int,
    progress: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Text produced on clips without speech, by each recognizer with and without the phantom filters."""
    clips = non_speech_clips(np.random.default_rng(seed + 1))
    prompt = kiosk.asr_prompt(config.asr.initial_prompt)
    rows = []
    for name in asr_names:
        progress(f"phantoms with {name}")
        for setup, filters in {"filters on": True, "filters off": False}.items():
            rec = open_recognizer(store, config, name, phantom_filters=filters)
            try:
                texts = {clip: rec.transcribe(audio, prompt=prompt).text for clip, audio in clips.items()}
            finally:
                rec.close()
            invented = {clip: text for clip, text in texts.items() if text.strip()}
            rows.append({"model": name, "setup": setup, "clips": len(clips), "with_text": invented})
    return rows
