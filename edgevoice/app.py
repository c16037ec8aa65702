"""The application assembled from the config, its one composition root: the engines (manifest names or one's own
model files, checked before loading), the end-of-turn model, the kiosk, the assistant; for ``edgevoice run``, the live
appliance on them (:mod:`edgevoice.app_live`). Each engine is opened by :mod:`edgevoice.app_engines`, the engines
side by side (:func:`load_engines_with`). The application sits above the stages (engines, kiosk, reply, live,
admin), which never import it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from edgevoice.app_engines import (
    open_llm,
    open_recognizer,
    open_remote_llm,
    open_turn_model,
    open_vad,
    open_voice,
)
from edgevoice.clock import Clock
from edgevoice.config import Config
from edgevoice.errors import ModelMissingError
from edgevoice.interfaces import Engines, Recognizer, Synthesizer, VoiceActivity
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.semantic import Embedder
from edgevoice.kiosk.sounds import Phonemize
from edgevoice.models.configured import embedder_files, model_store, piper_files, voice_id
from edgevoice.models.store import ModelStore
from edgevoice.parallel_load import load_side_by_side
from edgevoice.reply.audio_cache import CachedSynthesizer, ReplyAudioCache

if TYPE_CHECKING:
    from edgevoice.converse import Assistant
    from edgevoice.engines.minilm import MiniLmEmbedder
    from edgevoice.engines.piper_onnx import PiperSynthesizer
    from edgevoice.engines.smart_turn_onnx import SmartTurn
    from edgevoice.interfaces import LanguageModel
    from edgevoice.reply.hedge import HedgedModel

log = logging.getLogger(__name__)


def load_engines(config: Config, store: ModelStore | None = None) -> tuple[Engines, dict[str, float]]:
    """Load every engine; return them with the load time of each (seconds)."""
    engines, _, times = load_engines_with(config, store or model_store(config), {})
    return engines, times


def load_engines_with(
    config: Config, store: ModelStore, also: Mapping[str, Callable[[], object]], *, text_turn: bool = False
) -> tuple[Engines, dict[str, object], dict[str, float]]:
    """Load every engine side by side (:func:`~edgevoice.parallel_load.load_side_by_side`), and ``also``'s loads
    beside them; return the engines, what ``also`` built (by name) and the seconds each load took. With
    ``text_turn`` (the live loop) the language model's end-of-turn judge is made on its thread too (seconds: a
    context of its own and the vocabulary's sentence endings), where the loop finds it made."""
    piper: list[tuple[Path, Path]] = []

    def open_piper() -> PiperSynthesizer:
        piper.append(piper_files(store, config.models.tts))  # checked on its thread, in its turn: vad's error first
        return open_voice(config, store, files=piper[0])

    builders: dict[str, Callable[[], object]] = {
        "vad": lambda: open_vad(config, store),
        "asr": lambda: open_recognizer(config, store),
        "llm": lambda: open_local_llm(config, store, text_turn=text_turn and config.llm.backend != "openai"),
        "tts": open_piper,
        **also,
    }
    built, times = load_side_by_side(builders)
    llm = cast("LanguageModel", built["llm"])
    voice = cast("PiperSynthesizer", built["tts"])
    if config.llm.backend == "openai":
        t = time.perf_counter()
        try:
            llm = hedged_model(config, llm)  # the hedge owns the local model now: closing it closes both
        except BaseException:
            for engine in built.values():
                getattr(engine, "close", lambda: None)()
            raise
        times["llm_remote"] = time.perf_counter() - t
    tts: Synthesizer = voice
    if config.tts.presynthesize:
        tts = cached_voice(voice, config, voice_id(store, piper[0], voice.settings))
    engines = Engines(
        vad=cast("VoiceActivity", built["vad"]), recognizer=cast("Recognizer", built["asr"]), llm=llm, synthesizer=tts
    )
    return engines, {name: built[name] for name in also}, times


def open_local_llm(config: Config, store: ModelStore, *, text_turn: bool) -> LanguageModel:
    """The local language model, its prompt prefix kept between starts; with ``text_turn`` (the live loop), its
    end-of-turn judge made, else (when there is no judge) its weights warmed by one decode: either way the first
    turn does not page the weights in (:func:`load_engines_with`)."""
    llm = open_llm(config, store, keep_prefix=True)
    if text_turn:
        from edgevoice.live.loop import text_end_of_turn

        try:  # kept by the model; a failure is logged, the loop goes without
            if text_end_of_turn(llm, config.endpointing) is None:
                llm.warm()
        except BaseException:
            llm.close()
            raise
    return llm


def hedged_model(config: Config, local: LanguageModel) -> HedgedModel:
    """The ``[llm] backend = "openai"`` model: the server at ``base_url``, hedged with ``local``."""
    from edgevoice.reply.hedge import HedgedModel
    from edgevoice.reply.responder import FIRST_CLAUSE_WORDS

    c = config.llm
    remote = open_remote_llm(config)
    log.info("language model: %s, hedged with the local model after %d ms", c.base_url, c.hedge_ms)
    return HedgedModel(remote, local, hedge_s=c.hedge_ms / 1000, first_clause_words=FIRST_CLAUSE_WORDS)


def cached_voice(voice: Synthesizer, config: Config, voice_id: str) -> CachedSynthesizer:
    """``voice`` in front of a cache of audio made ahead of time (``[tts] presynthesize``), bounded by
    ``[tts] presynthesized_max_s``."""
    cache = ReplyAudioCache(config.tts.presynthesized_max_s, voice.sample_rate)
    return CachedSynthesizer(voice, cache, voice_id)


def load_turn_model(config: Config, store: ModelStore | None = None) -> SmartTurn:
    """The end-of-turn model (Smart Turn v3.x ONNX)."""
    return open_turn_model(config, store or model_store(config))


def load_embedder(config: Config, store: ModelStore | None = None) -> MiniLmEmbedder:
    """The sentence encoder for the kiosk's semantic matching (``[models] embed``), run in numpy."""
    from edgevoice.engines.minilm import MiniLmEmbedder

    store = store or model_store(config)
    files = embedder_files(store, config.models.embed)
    checked = store.handed_out.get(files["weights"])  # a manifest model: its checksum was checked on the way
    t = time.perf_counter()
    embedder = MiniLmEmbedder(
        files["weights"],
        files["tokenizer"],
        config=files.get("config"),
        pooling=files.get("pooling"),
        weights_sha256=checked[1].sha256 if checked is not None else None,
    )
    log.info("embedding model %s loaded in %.0f ms", files["weights"].name, 1000 * (time.perf_counter() - t))
    return embedder


def build_kiosk(
    config: Config,
    *,
    embedder: Embedder | None = None,
    store: ModelStore | None = None,
    idle: Callable[[], bool] | None = None,
) -> Kiosk:
    """The kiosk the config describes, with its models. With ``[kiosk] semantic`` (the default) the embedding model
    (``[models] embed``) is loaded unless ``embedder`` is given; a model that is not installed leaves the words alone
    to decide, with a warning. With ``[kiosk] mend_misheard`` as well, espeak-ng's phonemes mend misheard venue
    words. ``idle``: when a large knowledge may be embedded in the background (:class:`Kiosk`)."""
    k = config.kiosk
    if not k.semantic:
        embedder = None
        log.info("semantic matching off ([kiosk] semantic = false): questions are matched by their words")
    elif embedder is None:
        try:
            embedder = load_embedder(config, store)
        except (ModelMissingError, ImportError) as exc:
            log.warning("semantic matching off (%s): questions are matched by their words only", exc)
    phonemize = load_phonemizer() if k.mend_misheard and embedder is not None else None
    return Kiosk.from_config(config, embedder=embedder, phonemize=phonemize, idle=idle)


def load_phonemizer() -> Phonemize | None:
    """espeak-ng's text-to-phonemes (the copy bundled with the voice), to mend misheard venue words; None, with a
    warning, when it cannot be loaded."""
    try:
        from edgevoice.engines.piper_onnx import espeak_phonemes

        return espeak_phonemes()
    except (ImportError, OSError, RuntimeError) as exc:
        log.warning("misheard venue words are not mended (no phonemizer: %s)", exc)
        return None


def build_assistant(
    config: Config,
    engines: Engines,
    *,
    clock: Clock | None = None,
    live: bool = False,
    idle: Callable[[], bool] | None = None,
    kiosk: Kiosk | None = None,
) -> Assistant:
    """The :class:`Assistant` on ``engines`` with ``kiosk``, by default the kiosk the config describes
    (:func:`build_kiosk`); ``idle``: when a large knowledge may be embedded in the background."""
    from edgevoice.converse import Assistant

    kiosk = kiosk if kiosk is not None else build_kiosk(config, idle=idle)
    return Assistant(config, engines, kiosk=kiosk, clock=clock, live=live, idle=idle)
