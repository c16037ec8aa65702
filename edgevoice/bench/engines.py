"""Engine benchmarks: each stage's engine alone, on this box, with its knobs varied side by side.

- recognition: whisper.cpp time and real-time factor per utterance, by ``audio_ctx`` and threads, with the WER;
- language model: prompt (prefill) and generation tokens/s, time to first token cold (nothing cached) and with the
  kiosk's prefix cached (the live case), by threads and ``n_batch``;
- synthesis: Piper's first-audio time and real-time factor, by threads;
- voice activity: Silero time per 32 ms frame, Smart Turn time per verdict.

Every figure is the median of ``repeats`` runs after one warm-up run; ratios compare the variants of one run only.
The spoken inputs are the self-test's bundled utterances (the same audio everywhere, so boxes compare).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgevoice import data
from edgevoice.audio import SAMPLE_RATE
from edgevoice.config import Config
from edgevoice.events import ChatMessage
from edgevoice.interfaces import FloatAudio
from edgevoice.models.store import ModelStore
from edgevoice.selftest.utterances import UTTERANCES

Progress = Callable[[str], None]
QUESTION: str = data.table("sample_venue/engine_bench.toml")["question"]
CLAUSE: str = data.table("sample_venue/engine_bench.toml")["clause"]
FIRST_CLAUSE_TOKENS = 8
"""Tokens of a first clause (six words and their punctuation): the generation the first audio waits for."""


@dataclass(frozen=True)
class EngineOptions:
    repeats: int = 5
    asr_threads: tuple[int, ...] = (1, 2)
    asr_audio_ctx: tuple[int, ...] = (0, 512, 768, 1500)
    """0: sized to each utterance (edgevoice's default); 1500: Whisper's whole 30 s window."""
    llm_threads: tuple[int, ...] = (1, 2)
    llm_batch: tuple[int, ...] = (256,)
    tts_threads: tuple[int, ...] = (1, 2)
    utterances: int = 4
    generate_tokens: int = 32

    @staticmethod
    def quick() -> EngineOptions:
        """Fewer repeats and variants: a smoke run (tests, a first look)."""
        return EngineOptions(
            repeats=2, asr_threads=(2,), asr_audio_ctx=(0, 1500), llm_threads=(2,), tts_threads=(1,), utterances=2
        )


def median_ms(values: Sequence[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


def timed(action: Callable[[], object], repeats: int) -> list[float]:
    """Seconds per run of ``action``, after one warm-up run."""
    action()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        action()
        out.append(time.perf_counter() - t)
    return out


# -- recognition ----------------------------------------------------------------------------------------------------
def spoken_clips(n: int) -> list[tuple[str, FloatAudio]]:
    """The first ``n`` bundled utterances: (text, 16 kHz audio)."""
    return [(u.text, u.audio()) for u in UTTERANCES[:n]]


def measure_asr(
    recognizer: Any, clips: Sequence[tuple[str, FloatAudio]], threads: int, audio_ctx: int, repeats: int
) -> dict[str, Any]:
    """One recognizer setting on ``clips``: median time per utterance, real-time factor, WER."""
    from edgevoice.bench.scoring import corpus_wer

    recognizer.threads, recognizer.audio_ctx = threads, audio_ctx
    seconds = sum(len(a) for _, a in clips) / SAMPLE_RATE
    texts: list[str] = []

    def run() -> None:
        texts[:] = [recognizer.transcribe(a).text for _, a in clips]

    times = timed(run, repeats)
    return {
        "threads": threads,
        "audio_ctx": audio_ctx or "auto",
        "ms_per_utterance": round(median_ms(times) / len(clips), 1),
        "rtf": round(statistics.median(times) / seconds, 4),
        "wer": round(corpus_wer([(ref, hyp) for (ref, _), hyp in zip(clips, texts, strict=True)]), 3),
    }


def open_recognizer(config: Config, store: ModelStore) -> Any:
    """The configured recognizer with no prompt; :func:`measure_asr` sets its threads and audio context."""
    from edgevoice import app_engines

    return app_engines.open_recognizer(config, store, threads=2, audio_ctx=0, initial_prompt="")


def bench_asr(config: Config, store: ModelStore, options: EngineOptions, progress: Progress) -> list[dict[str, Any]]:
    clips = spoken_clips(options.utterances)
    recognizer = open_recognizer(config, store)
    rows = []
    try:
        for threads in options.asr_threads:
            for audio_ctx in options.asr_audio_ctx:
                rows.append(measure_asr(recognizer, clips, threads, audio_ctx, options.repeats))
                progress(f"asr threads={threads} audio_ctx={audio_ctx or 'auto'}: {rows[-1]['ms_per_utterance']} ms")
    finally:
        recognizer.close()
    return with_ratios(rows, "ms_per_utterance")


# -- language model -------------------------------------------------------------------------------------------------
def kiosk_prefix(config: Config) -> list[ChatMessage]:
    from edgevoice.kiosk.grounding import Kiosk

    return list(Kiosk.from_config(config).prefix)


def first_token_s(stream: Iterator[str]) -> float:
    t = time.perf_counter()
    for _ in stream:
        return time.perf_counter() - t
    return time.perf_counter() - t


def repeat(action: Callable[[], float], repeats: int) -> list[float]:
    """``action`` returns its own measured seconds; one warm-up run first."""
    action()
    return [action() for _ in range(repeats)]


def measure_llm(
    config: Config,
    store: ModelStore,
    *,
    threads: int,
    n_batch: int,
    n_gpu_layers: int,
    repeats: int,
    generate_tokens: int = 32,
    cold: bool = True,
) -> dict[str, Any]:
    """One language-model setting: first token cold (nothing cached: the model's first turn after a restart) and
    with the kiosk's prefix cached (every later turn), prefill and generation tokens/s, and the estimated time to a
    first clause (first token + ``FIRST_CLAUSE_TOKENS`` - 1 generated)."""
    from edgevoice.app_engines import open_llm

    prefix = kiosk_prefix(config)
    question = [*prefix, ChatMessage("user", QUESTION)]
    previous = [*prefix, ChatMessage("user", "Is there a lift?")]
    other = [ChatMessage("system", "x")]
    # the speed of one fixed sampling (the adapter's defaults), whatever [llm] samples with
    llm = open_llm(
        config,
        store,
        threads=threads,
        n_batch=n_batch,
        n_gpu_layers=n_gpu_layers,
        temperature=0.0,
        top_p=0.9,
        repeat_penalty=1.1,
    )
    try:
        n_prefix = len(llm.tokens(prefix, generation_prompt=False))

        def cold_ttft() -> float:
            llm.prefill(other)  # nothing of the kiosk's prompt left in the cache
            return first_token_s(llm.stream_reply(question, max_tokens=1))

        def cached_ttft() -> float:
            llm.prefill(previous)  # the live case: the prefix cached, another question after it
            return first_token_s(llm.stream_reply(question, max_tokens=1))

        def prefill() -> float:
            llm.prefill(other)
            t = time.perf_counter()
            llm.prefill(prefix)
            return time.perf_counter() - t

        def generate() -> tuple[float, int]:
            llm.prefill(previous)
            stream = llm.stream_reply(question, max_tokens=generate_tokens)
            next(stream)  # the first token includes the question's prefill
            t, n = time.perf_counter(), 0
            for _ in stream:
                n += 1
            return time.perf_counter() - t, n

        cached_s = repeat(cached_ttft, repeats)
        prefill_s = repeat(prefill, max(1, repeats // 2))
        generated = [generate() for _ in range(repeats)]
        rates = [n / s for s, n in generated if n and s > 0]
        rate = statistics.median(rates) if rates else None
        row: dict[str, Any] = {
            "threads": threads,
            "n_batch": n_batch,
            "n_gpu_layers": n_gpu_layers,
            "prefix_tokens": n_prefix,
            "ttft_cold_ms": median_ms(repeat(cold_ttft, max(1, repeats // 2))) if cold else None,
            "ttft_cached_ms": median_ms(cached_s),
            "prompt_tokens_per_s": round(n_prefix / statistics.median(prefill_s), 1),
            "generation_tokens_per_s": None if rate is None else round(rate, 1),
            "first_clause_ms": None
            if rate is None
            else round(median_ms(cached_s) + (FIRST_CLAUSE_TOKENS - 1) / rate * 1000, 1),
        }
        return row
    finally:
        llm.close()


def bench_llm(config: Config, store: ModelStore, options: EngineOptions, progress: Progress) -> list[dict[str, Any]]:
    rows = []
    for threads in options.llm_threads:
        for n_batch in options.llm_batch:
            rows.append(
                measure_llm(
                    config,
                    store,
                    threads=threads,
                    n_batch=n_batch,
                    n_gpu_layers=config.llm.n_gpu_layers,
                    repeats=options.repeats,
                    generate_tokens=options.generate_tokens,
                )
            )
            r = rows[-1]
            progress(
                f"llm threads={threads} n_batch={n_batch}: first token {r['ttft_cached_ms']} ms cached, "
                f"{r['ttft_cold_ms']} ms cold; {r['generation_tokens_per_s']} tokens/s"
            )
    return with_ratios(rows, "first_clause_ms")


# -- synthesis ------------------------------------------------------------------------------------------------------
def measure_tts(config: Config, store: ModelStore, *, threads: int, provider: str, repeats: int) -> dict[str, Any]:
    """One voice setting on one clause: time to its first audio, and the real-time factor of the whole clause."""
    from edgevoice.app_engines import open_plain_voice
    from edgevoice.reply.speech_text import normalize_for_speech

    text = normalize_for_speech(CLAUSE)
    tts = open_plain_voice(config, store, threads=threads, provider=provider)
    try:

        def first() -> float:
            t = time.perf_counter()
            next(iter(tts.synthesize(text)))
            return time.perf_counter() - t

        audio_s: list[float] = []

        def whole() -> float:
            t = time.perf_counter()
            n = sum(len(chunk) for chunk in tts.synthesize(text))
            audio_s.append(n / tts.sample_rate)
            return time.perf_counter() - t

        first_s = repeat(first, repeats)
        whole_s = repeat(whole, repeats)
    finally:
        tts.close()
    return {
        "threads": threads,
        "provider": provider,
        "first_audio_ms": median_ms(first_s),
        "rtf": round(statistics.median(whole_s) / statistics.median(audio_s), 4),
    }


def bench_tts(config: Config, store: ModelStore, options: EngineOptions, progress: Progress) -> list[dict[str, Any]]:
    rows = []
    for threads in options.tts_threads:
        rows.append(measure_tts(config, store, threads=threads, provider=config.tts.provider, repeats=options.repeats))
        progress(f"tts threads={threads}: first audio {rows[-1]['first_audio_ms']} ms, rtf {rows[-1]['rtf']}")
    return with_ratios(rows, "first_audio_ms")


# -- voice activity and end of turn ---------------------------------------------------------------------------------
def bench_vad(config: Config, store: ModelStore, options: EngineOptions, progress: Progress) -> dict[str, Any]:
    out = measure_vad(config, store, threads=config.vad.threads, repeats=options.repeats)
    progress(f"vad {out['vad_ms_per_frame']} ms per 32 ms frame; smart turn {out['smart_turn_ms']} ms")
    return out


def measure_vad(config: Config, store: ModelStore, *, threads: int, repeats: int) -> dict[str, Any]:
    """Silero's time per 32 ms frame and Smart Turn's per verdict, with ``threads`` ONNX Runtime threads each."""
    from edgevoice.app_engines import open_turn_model, open_vad
    from edgevoice.engines.silero_onnx import SileroVad

    audio = UTTERANCES[0].audio()
    frames = [audio[i : i + 512] for i in range(0, len(audio) - 511, 512)]
    vad = open_vad(config, store, threads=threads)
    turn = open_turn_model(config, store, threads=threads)
    try:

        def all_frames(v: SileroVad = vad) -> None:
            v.reset()
            for f in frames:
                v.probability(f)

        vad_s = timed(all_frames, repeats)
        turn_s = timed(lambda: turn.probability_complete(audio), repeats)
    finally:
        vad.close()
        turn.close()
    return {
        "threads": threads,
        "vad_ms_per_frame": round(median_ms(vad_s) / len(frames), 3),
        "vad_frame_ms": 32,
        "smart_turn_ms": median_ms(turn_s),
    }


def with_ratios(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Each row's ``key`` relative to the fastest row (1.0 = fastest)."""
    values = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    best = min(values) if values else None
    out = []
    for r in rows:
        value = r.get(key)
        out.append(r | {"ratio": round(value / best, 2) if best and isinstance(value, int | float) else None})
    return out


@dataclass
class EngineReport:
    asr: list[dict[str, Any]] = field(default_factory=list)
    llm: list[dict[str, Any]] = field(default_factory=list)
    tts: list[dict[str, Any]] = field(default_factory=list)
    vad: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"asr": self.asr, "llm": self.llm, "tts": self.tts, "vad": self.vad}


def run_engines(
    config: Config, store: ModelStore, options: EngineOptions, progress: Progress = lambda _m: None
) -> EngineReport:
    return EngineReport(
        asr=bench_asr(config, store, options, progress),
        llm=bench_llm(config, store, options, progress),
        tts=bench_tts(config, store, options, progress),
        vad=bench_vad(config, store, options, progress),
    )


def format_engines(report: EngineReport) -> str:
    def table(title: str, rows: list[dict[str, Any]]) -> list[str]:
        if not rows:
            return []
        keys = list(rows[0])
        widths = [max(len(k), *(len(str(r.get(k))) for r in rows)) for k in keys]
        out = [title, "  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True))]
        out += ["  ".join(str(r.get(k)).rjust(w) for k, w in zip(keys, widths, strict=True)) for r in rows]
        return [*out, ""]

    lines = table("recognition (whisper.cpp), per bundled utterance", report.asr)
    lines += table("language model (llama.cpp)", report.llm)
    lines += table("synthesis (Piper), one clause", report.tts)
    if report.vad:
        lines.append(
            f"voice activity: Silero {report.vad['vad_ms_per_frame']} ms per 32 ms frame; "
            f"Smart Turn {report.vad['smart_turn_ms']} ms per verdict"
        )
    return "\n".join(lines)
