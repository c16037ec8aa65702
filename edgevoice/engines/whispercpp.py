"""Speech recognition with whisper.cpp, through pywhispercpp's binding: the one adapter for whisper.cpp.

Why ``pywhispercpp``: it ships a maintained manylinux wheel bundling whisper.cpp and exposes ``audio_ctx``,
``no_context`` and ``single_segment``; ``audio_ctx`` sized to the utterance is what makes short commands fast. The
alternatives considered are in docs/decisions/.

The adapter calls pywhispercpp's binding module (``_pywhispercpp``) rather than its ``Model`` class: ``Model``
ignores whisper.cpp's return codes, and a model argument that is not a file makes it download one.

Whisper invents text on silence and noise ("you", "Thank you.", "[BLANK_AUDIO]", subtitle credits). Defences, in
order: very short or digitally silent audio and white-like noise never reach the model; whisper.cpp drops a window
whose no-speech probability exceeds ``no_speech_threshold`` (see :meth:`WhisperCppRecognizer._params`); known
phantom phrases, pure sound tags and an initial prompt echoed back are removed. A phantom phrase that visitors also
say ("Thank you.") is removed only when the audio's energy shows too little speech for words to have been said
(:mod:`edgevoice.engines.speech_evidence`): a "thank you" that was said is kept. ``Transcript.filtered`` says which
defence fired. These are a second line: the pipeline's voice activity detector is the first.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import numpy as np
import numpy.typing as npt

from edgevoice import data
from edgevoice.audio import SAMPLE_RATE
from edgevoice.engines.audio_screen import NOISE_FLATNESS, screen_audio
from edgevoice.engines.speech_evidence import speech_evidence
from edgevoice.errors import ConfigError, ModelMissingError, RecognizerError
from edgevoice.events import Transcript
from edgevoice.models.whisper_ggml import inspect_ggml

__all__ = [
    "DEFAULT_PHANTOM_PHRASES",
    "SAID_PHANTOM_PHRASES",
    "WhisperCppRecognizer",
    "audio_ctx_for",
    "looks_looped",
    "phantom_reason",
    "whisper_languages",
]

ENCODER_FRAMES_PER_SECOND = 50  # 100 mel frames per second, halved by the encoder's stride-2 convolution
AUDIO_CTX_STEP = 64
AUDIO_CTX_MARGIN = 32  # 0.64 s of context after the speech
AUDIO_CTX_MIN = 256  # below this, tiny.en looped on sub-second words ("Yes. Yes. Yes. ...")
AUDIO_CTX_MIN_PROMPTED = 512  # a prompt made loops likelier in a short window
PAD_SECONDS = 0.3  # silence added on both sides: tiny.en lost a first word spoken at sample 0
TOKENS_PER_SECOND = 10  # decode budget; speech needs ~4 (timestamps included), a loop needs more

_PHANTOMS = data.table("en/phantom_phrases.toml")
SAID_PHANTOM_PHRASES: frozenset[str] = frozenset(_PHANTOMS["unless_spoken"])
"""Phantom phrases that visitors also say ("thank you"): dropped only on a turn with too little speech in its audio
(:func:`~edgevoice.engines.speech_evidence.speech_evidence`); ``edgevoice/data/en/phantom_phrases.toml``."""
DEFAULT_PHANTOM_PHRASES: frozenset[str] = frozenset(_PHANTOMS["never"]) | SAID_PHANTOM_PHRASES
"""Whole transcripts (normalised: lower case, no punctuation) that Whisper produces on non-speech."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TAG = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|[♪♫♬♩]+")
_CREDITS = re.compile(
    r"\b(subtitles?|subtitled|captions?|captioned|transcription|transcribed|translated|translation)"
    r"(\s+\w+)?\s+(by|from)\b|amara\.org|\buntertitel\b|\bsous-titr|\bsubt[ií]tulos\b",
    re.IGNORECASE,
)


def normalise(text: str) -> str:
    """Lower case, punctuation and symbols removed, whitespace collapsed."""
    kept = (" " if unicodedata.category(ch)[0] in "PSZC" else ch for ch in text.lower())
    return " ".join("".join(kept).split())


PROMPT_ECHO_WORDS = 4
"""A transcript of at least this many words found word for word in the initial prompt is the prompt echoed back."""


def phantom_reason(text: str, phrases: frozenset[str] = DEFAULT_PHANTOM_PHRASES, prompt: str = "") -> str | None:
    """Why ``text`` looks like a Whisper phantom (``"credits"``, ``"sound_tag"``, ``"phrase:<words>"``,
    ``"prompt_echo"``: the initial prompt, or a run of it, repeated on noise), or None."""
    if _CREDITS.search(text):
        return "credits"
    words = normalise(_TAG.sub(" ", text))
    if not words:
        return "sound_tag" if text.strip() else None
    if words in phrases:
        return f"phrase:{words}"
    if prompt and len(words.split()) >= PROMPT_ECHO_WORDS and f" {words} " in f" {normalise(prompt)} ":
        return "prompt_echo"
    return None


def looks_looped(text: str, repeats: int = 3, longest_unit: int = 8) -> bool:
    """True if the decoder looks stuck: a sentence twice in a row (with or without a full stop between: the whole
    text one run of words said twice), or 1..``longest_unit`` words ``repeats`` times."""
    sentences = [s for s in (normalise(part) for part in _SENTENCE_END.split(text)) if s]
    if any(a == b for a, b in itertools.pairwise(sentences)) or _said_twice(text) is not None:
        return True
    words = normalise(text).split()
    for size in range(1, longest_unit + 1):
        for i in range(len(words) - repeats * size + 1):
            unit = words[i : i + size]
            if all(words[i + k * size : i + (k + 1) * size] == unit for k in range(1, repeats)):
                return True
    return False


def collapse_repeated_sentences(text: str) -> str:
    """Drop a sentence that repeats the one before it: a short encoder window often makes Whisper say the whole
    utterance twice ("How much is it? How much is it?"), which costs far less to mend than to decode again."""
    parts = [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]
    kept: list[str] = []
    for part in parts:
        if not kept or normalise(part) != normalise(kept[-1]):
            kept.append(part)
    collapsed = " ".join(kept)
    return _said_twice(collapsed) or collapsed


def _said_twice(text: str, shortest: int = 3) -> str | None:
    """The first half of ``text`` when the whole of it is one run of at least ``shortest`` words said twice with no
    full stop between ("5 euros starting at the main entrance 5 euros starting at the main entrance"), else None."""
    tokens = text.split()
    half = len(tokens) // 2
    if len(tokens) % 2 or half < shortest:
        return None
    first, second = " ".join(tokens[:half]), " ".join(tokens[half:])
    return first.rstrip(",;:") if normalise(first) == normalise(second) else None


def audio_ctx_for(n_samples: int, n_audio_ctx: int = 1500, *, minimum: int = AUDIO_CTX_MIN) -> int:
    """Encoder context (1 unit = 20 ms) covering ``n_samples`` at 16 kHz plus a margin, in steps of 64.

    ``ceil(seconds * 50) + 32`` rounded up to a multiple of 64, at least ``minimum``, at most ``n_audio_ctx``
    (1500 = Whisper's whole 30 s window).
    """
    frames = math.ceil(n_samples * ENCODER_FRAMES_PER_SECOND / SAMPLE_RATE) + AUDIO_CTX_MARGIN
    return min(n_audio_ctx, max(minimum, math.ceil(frames / AUDIO_CTX_STEP) * AUDIO_CTX_STEP))


_load_lock = threading.Lock()


class WhisperCppRecognizer:
    """whisper.cpp speech-to-text for one ggml model file (a :class:`~edgevoice.interfaces.Recognizer`).

    ``audio_ctx=0`` sizes the encoder window to each utterance (:func:`audio_ctx_for`); a positive value is used
    as given (1500 = Whisper's whole 30 s window). Decoding is deterministic: greedy, temperature 0 without
    fallback, no context carried between calls, one segment, non-speech tokens suppressed. A shortened window
    sometimes makes Whisper repeat itself, so the decode is capped at ``TOKENS_PER_SECOND`` and a looped or
    capped result is decoded once more with the whole window. ``noise_flatness=None`` disables the noise gate.
    """

    sample_rate: int = SAMPLE_RATE

    def __init__(
        self,
        model_path: Path,
        *,
        threads: int = 2,
        audio_ctx: int = 0,
        language: str = "en",
        initial_prompt: str = "",
        no_speech_threshold: float = 0.6,
        noise_flatness: float | None = NOISE_FLATNESS,
        phantom_phrases: Iterable[str] = DEFAULT_PHANTOM_PHRASES,
        said_phrases: Iterable[str] = SAID_PHANTOM_PHRASES,
    ) -> None:
        model_path = Path(model_path)
        if not model_path.is_file():  # never hand pywhispercpp a name: it would try to download a model
            raise ModelMissingError(f"whisper model not found: {model_path}")
        info = inspect_ggml(model_path)  # a corrupt file fails here, not inside the native loader
        if threads < 1:
            raise ConfigError(f"asr threads must be >= 1, got {threads}")
        if not 0 <= audio_ctx <= info.hparams.n_audio_ctx:
            raise ConfigError(f"asr audio_ctx must be in [0, {info.hparams.n_audio_ctx}], got {audio_ctx}")
        if not 0.0 < no_speech_threshold <= 1.0:
            raise ConfigError(f"asr no_speech_threshold must be in (0, 1], got {no_speech_threshold}")
        if noise_flatness is not None and not 0.0 < noise_flatness < 1.0:
            raise ConfigError(f"asr noise_flatness must be in (0, 1) or None, got {noise_flatness}")
        if language != "en" and not info.hparams.is_multilingual:
            raise ConfigError(f"asr language {language!r}: {model_path} is an English-only model (use 'en')")
        self.model_path = model_path
        self.hparams = info.hparams
        self.threads = threads
        self.audio_ctx = audio_ctx
        self.language = language
        self.initial_prompt = initial_prompt
        self.no_speech_threshold = no_speech_threshold
        self.noise_flatness = noise_flatness
        self.phantom_phrases = frozenset(normalise(p) for p in phantom_phrases)
        self.said_phrases = frozenset(normalise(p) for p in said_phrases)
        """Phantom phrases kept when the audio holds speech (see the module's doc)."""
        self._lock = threading.Lock()
        self._pw: ModuleType = _binding()
        self._ctx: object | None = self._load()

    def _load(self) -> object:
        pw = self._pw
        # whisper.cpp reports loading through a process-wide log callback: discard it while loading, then restore
        # the default (a Python callback left installed crashes the interpreter at exit). Only warnings, errors
        # and, with language="auto", the detected language reach stderr afterwards; nothing goes to stdout.
        with _load_lock:
            pw.whisper_log_set(_discard_log)
            try:
                ctx = pw.whisper_init_from_file_with_params(str(self.model_path), pw.whisper_context_default_params())
            except Exception as exc:
                raise RecognizerError(f"whisper.cpp failed to load {self.model_path}: {exc}") from exc
            finally:
                pw.whisper_log_set(None)
        if ctx is None:
            raise RecognizerError(f"whisper.cpp failed to load {self.model_path}")
        return ctx

    def _params(self, audio_ctx: int, prompt: str, max_tokens: int) -> object:
        pw = self._pw
        p = pw.whisper_full_default_params(pw.whisper_sampling_strategy.WHISPER_SAMPLING_GREEDY)
        p.n_threads = self.threads
        p.audio_ctx = audio_ctx
        p.language = self.language
        p.translate = False
        p.no_context = True
        p.single_segment = True
        p.max_tokens = max_tokens
        p.suppress_blank = True
        p.suppress_nst = True
        p.temperature = 0.0
        p.temperature_inc = 0.0  # no sampling fallback: the same audio always gives the same text
        p.print_progress = False
        p.print_realtime = False
        p.print_timestamps = False
        p.print_special = False
        # whisper.cpp drops a window when no_speech_prob > no_speech_thold AND avg_logprob < logprob_thold. A
        # logprob threshold above any log-probability lets the no-speech probability decide alone: phantom text on
        # noise can come out confident (unpadded white noise gave "I'm going to go." through the AND).
        p.no_speech_thold = self.no_speech_threshold
        p.logprob_thold = 1.0
        if prompt:
            p.initial_prompt = prompt
        return p

    def transcribe_partial(self, audio: npt.NDArray[np.float32], *, prompt: str = "") -> Transcript:
        """A quick look at speech still in progress: one short-window decode, never the full-window retry."""
        return self.transcribe(audio, prompt=prompt, retry=False)

    def transcribe(self, audio: npt.NDArray[np.float32], *, prompt: str = "", retry: bool = True) -> Transcript:
        """Transcribe mono float32 audio at 16 kHz; phantom outputs come back empty with ``filtered`` set.

        A looping short-window decode is mended (repeated sentence dropped) or, with ``retry``, decoded again with
        the whole window."""
        samples, screened = screen_audio(audio, self.noise_flatness)
        if screened is not None:
            return screened
        heard = samples
        pad = np.zeros(int(PAD_SECONDS * SAMPLE_RATE), dtype=np.float32)
        samples = np.concatenate([pad, samples, pad])
        full = self.hparams.n_audio_ctx
        prompt = prompt or self.initial_prompt
        minimum = AUDIO_CTX_MIN_PROMPTED if prompt else AUDIO_CTX_MIN
        ctx_size = self.audio_ctx or audio_ctx_for(samples.size, full, minimum=minimum)
        max_tokens = math.ceil(samples.size / SAMPLE_RATE * TOKENS_PER_SECOND) + 8
        text, n_tokens, confidence = self._decode(samples, ctx_size, prompt, max_tokens)
        if text is not None and ctx_size < full and (n_tokens >= max_tokens or looks_looped(text)):
            mended = collapse_repeated_sentences(text)
            if (n_tokens < max_tokens and not looks_looped(mended)) or not retry:
                text = mended
            else:
                text, n_tokens, confidence = self._decode(samples, full, prompt, max_tokens)
        if text is None:
            # pywhispercpp 1.5.1 does not expose the probability itself: all we know is that it exceeded the threshold.
            return Transcript(text="", no_speech_prob=self.no_speech_threshold, filtered="no_speech")
        reason = phantom_reason(text, self.phantom_phrases, prompt)
        if reason is not None and reason.removeprefix("phrase:") in self.said_phrases and speech_evidence(heard).spoken:
            reason = None  # "Thank you." that was said, not made up
        if reason is not None:
            return Transcript(text="", filtered=reason)
        return Transcript(text=text, confidence=confidence)

    def _decode(
        self, samples: npt.NDArray[np.float32], ctx_size: int, prompt: str, max_tokens: int
    ) -> tuple[str | None, int, float | None]:
        """(text, tokens decoded, confidence) of one whisper_full run; text is None when whisper.cpp judged it no
        speech. The confidence is the geometric mean of the text tokens' probabilities (timestamps and other special
        tokens aside; None without text tokens)."""
        pw = self._pw
        params = self._params(ctx_size, prompt, max_tokens)
        with self._lock:
            ctx = self._ctx
            if ctx is None:
                raise RecognizerError("recognizer is closed")
            try:
                rc = pw.whisper_full(ctx, params, samples, samples.size)  # releases the GIL while it runs
                if rc != 0:
                    raise RecognizerError(f"whisper_full failed with code {rc}")
                n_segments = pw.whisper_full_n_segments(ctx)
                raw = b"".join(pw.whisper_full_get_segment_text(ctx, i) for i in range(n_segments))
                n_tokens = sum(pw.whisper_full_n_tokens(ctx, i) for i in range(n_segments))
                eot = pw.whisper_token_eot(ctx)  # the special tokens (timestamps too) come after it
                probabilities = [
                    pw.whisper_full_get_token_p(ctx, i, j)
                    for i in range(n_segments)
                    for j in range(pw.whisper_full_n_tokens(ctx, i))
                    if pw.whisper_full_get_token_id(ctx, i, j) < eot
                ]
            except RecognizerError:
                raise
            except Exception as exc:
                raise RecognizerError(f"whisper.cpp transcription failed: {exc}") from exc
        if n_segments == 0:
            return None, 0, None
        confidence = None
        if probabilities:
            confidence = math.exp(sum(math.log(max(p, 1e-6)) for p in probabilities) / len(probabilities))
        return " ".join(raw.decode("utf-8", errors="replace").split()), n_tokens, confidence

    def close(self) -> None:
        """Free the whisper.cpp context; idempotent. Waits for a transcription in progress to finish."""
        with self._lock:
            ctx, self._ctx = self._ctx, None
        if ctx is not None:
            self._pw.whisper_free(ctx)

    def __enter__(self) -> WhisperCppRecognizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_ctx", None) is not None:
            self.close()


def _discard_log(level: int, text: str) -> None:
    """whisper.cpp's log sink while a model loads."""


def whisper_languages() -> tuple[str, ...]:
    """The language codes whisper.cpp knows (``[asr] language`` takes one of them, or ``auto``)."""
    pw = _binding()
    return tuple(pw.whisper_lang_str(i) for i in range(pw.whisper_lang_max_id() + 1))


def _binding() -> ModuleType:
    """pywhispercpp's native module, imported on first use (importing it loads whisper.cpp and ggml)."""
    try:
        import _pywhispercpp
    except ImportError as exc:
        raise RecognizerError("pywhispercpp is not installed (pip install pywhispercpp==1.5.1)") from exc
    return _pywhispercpp
