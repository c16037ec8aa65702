"""Each engine adapter opened from the config, the one place that maps ``[llm]``, ``[asr]``, ``[vad]``, ``[tts]``,
``[activation]`` and ``[models]`` onto the adapters' constructors: the application (:mod:`edgevoice.app`), the
self-test and the benchmarks all open their engines here. A keyword left out (None) takes the config's value; the
benchmarks name what they vary or hold fixed. The adapters' modules are imported only when an engine is opened, so
that the CLI starts without them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from edgevoice.config import Config
from edgevoice.errors import ModelError
from edgevoice.models.configured import manifest_model, moonshine_files, piper_files, resolve
from edgevoice.models.store import ModelStore
from edgevoice.paths import default_cache_dir

if TYPE_CHECKING:
    from edgevoice.engines.llamacpp import LlamaCppModel
    from edgevoice.engines.moonshine_onnx import MoonshineOnnxRecognizer
    from edgevoice.engines.openai_remote import RemoteChatModel
    from edgevoice.engines.piper_onnx import PiperSynthesizer
    from edgevoice.engines.silero_onnx import SileroVad
    from edgevoice.engines.smart_turn_onnx import SmartTurn
    from edgevoice.engines.wake_word import MicroWakeWord
    from edgevoice.engines.whispercpp import WhisperCppRecognizer
    from edgevoice.kiosk.compiler import LanguageModelGenerator

__all__ = [
    "open_compiler",
    "open_llm",
    "open_plain_voice",
    "open_recognizer",
    "open_remote_llm",
    "open_turn_model",
    "open_vad",
    "open_voice",
    "open_wake_word",
]

T = TypeVar("T")


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def open_llm(
    config: Config,
    store: ModelStore,
    *,
    name: str | None = None,
    threads: int | None = None,
    n_batch: int | None = None,
    n_gpu_layers: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    repeat_penalty: float | None = None,
    keep_prefix: bool = False,
) -> LlamaCppModel:
    """The local language model ``[models] llm`` (or ``name``) with ``[llm]``'s context, threads, batch, offload,
    seed and sampling. ``keep_prefix``: its prompt prefix, once evaluated, is kept on disk for the next start
    (``prompts/`` in the cache directory, :mod:`edgevoice.engines.llamacpp_state`)."""
    from edgevoice.engines.llamacpp import PREFILL_CHUNK, LlamaCppModel
    from edgevoice.engines.llamacpp_state import PrefixStateFiles

    c = config.llm
    path = resolve(store, "llm", _or(name, config.models.llm))
    settings = (c.n_ctx, _or(threads, c.threads), _or(n_batch, c.n_batch), _or(n_gpu_layers, c.n_gpu_layers))
    states = None
    if keep_prefix:
        checked = store.handed_out.get(path)  # a manifest model: its checksum names it; one's own file: its stat
        st = path.stat()
        model = checked[1].sha256 if checked is not None else f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
        identity = f"{model}|n_ctx,threads,n_batch,gpu {settings}|chunk {PREFILL_CHUNK}"
        states = PrefixStateFiles(default_cache_dir() / "prompts", identity)
    return LlamaCppModel(
        path,
        n_ctx=settings[0],
        threads=settings[1],
        n_batch=settings[2],
        n_gpu_layers=settings[3],
        prefix_states=states,
        seed=c.seed,
        temperature=_or(temperature, c.temperature),
        top_p=_or(top_p, c.top_p),
        repeat_penalty=_or(repeat_penalty, c.repeat_penalty),
    )


def open_compiler(
    config: Config, store: ModelStore, *, busy: Callable[[], bool] | None = None
) -> LanguageModelGenerator | None:
    """The strongest model the box has, greedy, to compile the knowledge (:mod:`edgevoice.kiosk.compiler`): the
    manifest's compile model (``edgevoice/data/kiosk/compile.toml``) when installed, else the LAN model of ``[llm]
    backend = "openai"``; None when neither is there. ``busy()``: a turn began, the model stops at its next token."""
    from edgevoice.kiosk.compiler import COMPILE_MODEL, LanguageModelGenerator

    try:
        path = store.path(COMPILE_MODEL)
    except ModelError:  # not installed, or not the file it should be: the next in line compiles
        path = None
    if path is not None:
        llm = open_llm(config, store, name=COMPILE_MODEL, temperature=0.0)
        checked = store.handed_out.get(path)
        checksum = checked[1].sha256 if checked is not None else ""
        return LanguageModelGenerator(llm, f"{COMPILE_MODEL}\0{checksum}", busy=busy)
    c = config.llm
    if c.backend != "openai":
        return None
    remote = open_remote_llm(config, temperature=0.0)
    return LanguageModelGenerator(remote, f"{c.model or 'LAN model'} at {c.base_url}\0", busy=busy)


def open_remote_llm(config: Config, *, temperature: float | None = None) -> RemoteChatModel:
    """The ``[llm] backend = "openai"`` server at ``base_url`` with ``[llm]``'s model, key, stall limit and sampling."""
    from edgevoice.engines.openai_remote import RemoteChatModel, read_api_key

    c = config.llm
    return RemoteChatModel(
        c.base_url,
        model=c.model,
        api_key=read_api_key(key_file=c.api_key_file, key_env=c.api_key_env),
        stall_s=c.remote_stall_s,
        temperature=_or(temperature, c.temperature),
        top_p=c.top_p,
        seed=c.seed,
        max_reply_s=config.kiosk.max_reply_s,
    )


def open_recognizer(
    config: Config,
    store: ModelStore,
    *,
    name: str | None = None,
    threads: int | None = None,
    audio_ctx: int | None = None,
    initial_prompt: str | None = None,
    phantom_filters: bool = True,
) -> WhisperCppRecognizer | MoonshineOnnxRecognizer:
    """The recognizer ``[models] asr`` (or ``name``) with ``[asr]``'s threads, audio context, language and prompt;
    ``phantom_filters=False`` turns off what drops text heard in no speech (the no-speech threshold, the noise test
    and the phantom phrases), to measure what they catch. The engine follows the manifest entry's main file: an
    ``ort`` model is Moonshine (which takes no audio context, language or prompt), anything else whisper.cpp."""
    from edgevoice.engines.whispercpp import WhisperCppRecognizer

    a = config.asr
    value = _or(name, config.models.asr)
    spec = manifest_model(store, "asr", value)
    if spec is not None and spec.output().format == "ort":
        from edgevoice.engines.moonshine_onnx import MoonshineOnnxRecognizer

        files = moonshine_files(store, spec.name)
        if phantom_filters:
            return MoonshineOnnxRecognizer(*files, threads=_or(threads, a.threads))
        return MoonshineOnnxRecognizer(
            *files, threads=_or(threads, a.threads), noise_flatness=None, phantom_phrases=frozenset()
        )
    path = resolve(store, "asr", value)
    threads, audio_ctx = _or(threads, a.threads), _or(audio_ctx, a.audio_ctx)
    prompt = _or(initial_prompt, a.initial_prompt)
    if phantom_filters:
        return WhisperCppRecognizer(
            path, threads=threads, audio_ctx=audio_ctx, language=a.language, initial_prompt=prompt
        )
    return WhisperCppRecognizer(
        path,
        threads=threads,
        audio_ctx=audio_ctx,
        language=a.language,
        initial_prompt=prompt,
        no_speech_threshold=1.0,
        noise_flatness=None,
        phantom_phrases=(),
    )


def open_vad(config: Config, store: ModelStore, *, threads: int | None = None) -> SileroVad:
    """The voice activity detector ``[models] vad`` with ``[vad] threads``."""
    from edgevoice.engines.silero_onnx import SileroVad

    return SileroVad(resolve(store, "vad", config.models.vad), threads=_or(threads, config.vad.threads))


def open_turn_model(config: Config, store: ModelStore, *, threads: int = 1) -> SmartTurn:
    """The end-of-turn model ``[models] turn`` (Smart Turn v3.x ONNX); one thread unless told (it has no config)."""
    from edgevoice.engines.smart_turn_onnx import SmartTurn

    return SmartTurn(resolve(store, "turn", config.models.turn), threads=threads)


def open_voice(
    config: Config,
    store: ModelStore,
    *,
    files: tuple[Path, Path] | None = None,
    threads: int | None = None,
    length_scale: float | None = None,
    sentence_silence_ms: int | None = None,
    provider: str | None = None,
) -> PiperSynthesizer:
    """The kiosk's voice: ``[models] tts`` (or its ``files``, already found) with ``[tts]``'s threads, speed, pause
    between sentences and provider; the voice's own sampling noise."""
    from edgevoice.engines.piper_onnx import PiperSynthesizer

    t = config.tts
    return PiperSynthesizer(
        *(files or piper_files(store, config.models.tts)),
        threads=_or(threads, t.threads),
        length_scale=_or(length_scale, t.length_scale),
        sentence_silence_ms=_or(sentence_silence_ms, t.sentence_silence_ms),
        provider=_or(provider, t.provider),
    )


def open_plain_voice(
    config: Config,
    store: ModelStore,
    *,
    threads: int = 1,
    length_scale: float | None = None,
    noise_scale: float | None = None,
    noise_w: float | None = None,
    provider: str = "cpu",
) -> PiperSynthesizer:
    """The voice ``[models] tts`` without ``[tts]``'s settings: the voice's own speed and noise unless given, no pause
    between sentences (the benchmarks speak their questions with it, with the noise at 0 to make them repeatable)."""
    from edgevoice.engines.piper_onnx import PiperSynthesizer

    return PiperSynthesizer(
        *piper_files(store, config.models.tts),
        threads=threads,
        length_scale=length_scale,
        noise_scale=noise_scale,
        noise_w=noise_w,
        provider=provider,
    )


def open_wake_word(config: Config) -> MicroWakeWord | None:
    """The wake-word detector ``[activation] wake_word`` in ``wake_word`` mode; None in the other modes."""
    if config.activation.mode != "wake_word":
        return None
    from edgevoice.engines.wake_word import MicroWakeWord

    return MicroWakeWord(config.activation.wake_word)
