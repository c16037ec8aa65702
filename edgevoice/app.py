"""The application assembled from the config, its one composition root: the engines (manifest names or one's own
model files, checked before loading), the end-of-turn model, the kiosk, the assistant and, for ``edgevoice run``, the
live loop with its metrics, presynthesis, model recheck and admin page (:func:`load_models`, :func:`build_appliance`).
Each engine is opened by :mod:`edgevoice.app_engines`; each feature that follows the loop is wired by its module in
:mod:`edgevoice.wiring`. The application sits above the stages (engines, kiosk, reply, live, admin), which never
import it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from edgevoice.app_engines import (
    open_llm,
    open_recognizer,
    open_remote_llm,
    open_turn_model,
    open_vad,
    open_voice,
    open_wake_word,
)
from edgevoice.clock import Clock, MonotonicClock
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
from edgevoice.wiring.actions import subscribe_actions
from edgevoice.wiring.compiling import compile_in_background
from edgevoice.wiring.records import RECORDS_QUEUE, TurnRecords
from edgevoice.wiring.review import subscribe_review

if TYPE_CHECKING:
    from edgevoice.act.service import Notifications
    from edgevoice.admin.appliance import AdminHandle
    from edgevoice.converse import Assistant
    from edgevoice.display.server import DisplayHandle
    from edgevoice.engines.minilm import MiniLmEmbedder
    from edgevoice.engines.piper_onnx import PiperSynthesizer
    from edgevoice.engines.smart_turn_onnx import SmartTurn
    from edgevoice.engines.wake_word import MicroWakeWord
    from edgevoice.interfaces import LanguageModel
    from edgevoice.live.assistant import LiveAssistant
    from edgevoice.live.metrics import MetricsExporter
    from edgevoice.live.recorder import TurnRecorder
    from edgevoice.live.service import ServiceMonitor
    from edgevoice.models.recheck import BackgroundRecheck
    from edgevoice.reply.hedge import HedgedModel
    from edgevoice.reply.presynthesis import Presynthesis
    from edgevoice.review.store import ReviewStore
    from edgevoice.wyoming_server.service import WyomingService

log = logging.getLogger(__name__)


def load_engines(config: Config, store: ModelStore | None = None) -> tuple[Engines, dict[str, float]]:
    """Load every engine; return them with the load time of each (seconds)."""
    engines, _, times = load_engines_with(config, store or model_store(config), {})
    return engines, times


def load_engines_with(
    config: Config, store: ModelStore, also: Mapping[str, Callable[[], object]], *, text_turn: bool = False
) -> tuple[Engines, dict[str, object], dict[str, float]]:
    """Load every engine side by side (:func:`~edgevoice.parallel_load.load_side_by_side`), and ``also``'s loads
    beside them; return the engines, what ``also`` built (by name) and the seconds each load took. The language
    model's weights are warmed by one decode on its thread, so that the first turn does not page them in; with
    ``text_turn`` (the live loop) its end-of-turn judge is made there too (seconds: a context of its own and the
    vocabulary's sentence endings), where the loop finds it made."""
    files = piper_files(store, config.models.tts)
    builders: dict[str, Callable[[], object]] = {
        "vad": lambda: open_vad(config, store),
        "asr": lambda: open_recognizer(config, store),
        "llm": lambda: open_local_llm(config, store, text_turn=text_turn and config.llm.backend != "openai"),
        "tts": lambda: open_voice(config, store, files=files),
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
        tts = cached_voice(voice, config, voice_id(store, files, voice.settings))
    engines = Engines(
        vad=cast("VoiceActivity", built["vad"]), recognizer=cast("Recognizer", built["asr"]), llm=llm, synthesizer=tts
    )
    return engines, {name: built[name] for name in also}, times


def open_local_llm(config: Config, store: ModelStore, *, text_turn: bool) -> LanguageModel:
    """The local language model, its prompt prefix kept between starts, its weights warmed; with ``text_turn``, its
    end-of-turn judge made (:func:`load_engines_with`)."""
    llm = open_llm(config, store, keep_prefix=True, warm=True)
    if text_turn:
        from edgevoice.live.loop import text_end_of_turn

        text_end_of_turn(llm, config.endpointing)  # kept by the model; a failure is logged, the loop goes without
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
) -> Assistant:
    """The :class:`Assistant` on ``engines`` with the kiosk the config describes (:func:`build_kiosk`); ``idle``:
    when a large knowledge may be embedded in the background."""
    from edgevoice.converse import Assistant

    return Assistant(config, engines, kiosk=build_kiosk(config, idle=idle), clock=clock, live=live, idle=idle)


@dataclass
class LoadedModels:
    """What ``edgevoice run`` loads first: the engines, the end-of-turn model and the metrics exporter."""

    store: ModelStore
    loaded: Engines  # as loaded: what :meth:`close` frees
    engines: Engines  # with the test-only faults (edgevoice/live/faults.py); the loaded ones by default
    turn_model: SmartTurn
    exporter: MetricsExporter | None
    load_s: dict[str, float] = field(default_factory=dict)  # each load's seconds (they ran side by side)

    def close(self, *, engines_free: bool) -> None:
        """Free the models and stop the exporter; ``engines_free``: no loop thread is still inside an engine
        (freeing one that is would crash the process: the exit reclaims it then)."""
        if engines_free:
            self.turn_model.close()
            self.loaded.close()
        else:
            log.error("engines left to the process exit: a loop thread did not stop in time")
        if self.exporter is not None:
            self.exporter.close()


def load_models(config: Config, *, release: threading.Event) -> LoadedModels:
    """Load the engines and the end-of-turn model and start the metrics exporter; ``release`` ends any injected
    fault's hold (:func:`edgevoice.live.faults.inject_faults`)."""
    from edgevoice.live.faults import inject_faults

    store = model_store(config)
    loaded, extra, times = load_engines_with(
        config, store, {"turn": lambda: load_turn_model(config, store)}, text_turn=True
    )
    log.info("engines loaded side by side: %s", ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in times.items()))
    engines = inject_faults(loaded, release=release)
    from edgevoice.live.metrics import start_metrics

    return LoadedModels(store, loaded, engines, cast("SmartTurn", extra["turn"]), start_metrics(config), times)


class LoopIdle:
    """Whether the live loop is between turns: false until :meth:`follow` names the loop's test (start-up is never
    idle). Background work (embedding, presynthesis, the model recheck) runs only while it is true."""

    def __init__(self) -> None:
        self._idle: Callable[[], bool] | None = None

    def follow(self, idle: Callable[[], bool]) -> None:
        self._idle = idle

    def __call__(self) -> bool:
        return self._idle is not None and self._idle()


@dataclass
class Appliance:
    """The running appliance's parts built on the loaded models: the assistant, the live loop, the presynthesis,
    the model recheck, the review inbox (with ``[review] enabled``) and (once started) the admin page, each closed by
    :meth:`close`."""

    config: Config
    models: LoadedModels
    recheck: BackgroundRecheck
    assistant: Assistant
    presynthesis: Presynthesis | None
    live: LiveAssistant
    turns: TurnRecords
    admin: AdminHandle | None = None
    display: DisplayHandle | None = None
    review: ReviewStore | None = None
    notifications: Notifications | None = None
    wyoming: WyomingService | None = None
    startup_s: dict[str, float] = field(default_factory=dict)
    """Seconds of each start-up step after the models' loads: the kiosk, the warm-up's prefix, asr and tts."""

    def start_services(self, monitor: ServiceMonitor) -> None:
        """Once the loop is ready: the model recheck, the admin page, the display, the presynthesis, in that order."""
        from edgevoice.admin.appliance import LiveAppliance, start_admin
        from edgevoice.display.server import start_display

        self.recheck.start()
        live = self.live
        appliance = LiveAppliance(self.config, self.assistant, monitor, lambda: live)
        outbox = self.notifications.outbox.summary if self.notifications is not None else None
        self.admin = start_admin(self.config, appliance, review=self.review, outbox=outbox)
        self.turns.admin = self.admin
        assistant = self.assistant
        self.display = start_display(
            self.config.display,
            live.loop.bus,
            live.activation,
            lambda: [entry.question for entry in assistant.kiosk.entries],  # the knowledge as reloaded
        )
        if self.presynthesis is not None:
            self.presynthesis.start()
        if self.config.wyoming.listen:  # Home Assistant's way in (docs/wyoming.md)
            from edgevoice.wyoming_server.service import serve_the_loop

            self.wyoming = serve_the_loop(self.config, self.models.store, self.models.engines, live.loop)

    def close(self) -> None:
        """Stop the recheck, the admin page, the assistant's background work and the presynthesis (the models are
        :meth:`LoadedModels.close`'s)."""
        self.recheck.close()
        if self.wyoming is not None:
            self.wyoming.close()
        if self.display is not None:
            self.display.close()
        if self.admin is not None:
            self.admin.close()
        if self.review is not None:
            self.review.close()
        if self.notifications is not None:
            self.notifications.close()  # what waits stays in the outbox for the next run
        self.assistant.close()
        if self.presynthesis is not None:
            self.presynthesis.close()


def build_appliance(
    config: Config,
    models: LoadedModels,
    *,
    stop: threading.Event,
    emit: Callable[[dict[str, object]], None],
    recorder: TurnRecorder | None,
) -> Appliance:
    """The appliance on ``models``: the assistant (its prompt prefix warmed up), the presynthesis of the known
    replies (with ``[tts] presynthesize``) and the live loop, whose turns and events go to ``emit``. A model file
    that changes after it was verified sets ``stop``. What was built is closed if a later part fails."""
    from edgevoice.live.assistant import LiveAssistant
    from edgevoice.models.recheck import BackgroundRecheck
    from edgevoice.reply.presynthesis import Presynthesis, disk_audio, known_replies
    from edgevoice.review.service import open_review

    idle = LoopIdle()  # a large knowledge is embedded, replies presynthesized, models hashed only between turns
    # A model file changed after it was verified at load: hash every file again once ready (seconds of work, too
    # long to keep the first visitor waiting) and stop on a mismatch; only while no turn is in progress.
    recheck = BackgroundRecheck(models.store, on_error=lambda exc: stop.set(), idle=idle)
    turns = TurnRecords(emit, recorder, models.exporter, models.engines.synthesizer.sample_rate)
    assistant: Assistant | None = None
    presynthesis: Presynthesis | None = None
    wake_word: MicroWakeWord | None = None
    live: LiveAssistant | None = None
    review = open_review(config.review)  # pruned now; None when off: nothing of a visitor's words is kept
    notifications: Notifications | None = None
    try:
        t = time.perf_counter()
        assistant = build_assistant(config, models.engines, clock=MonotonicClock(), live=True, idle=idle)
        startup_s = {"kiosk": time.perf_counter() - t}
        startup_s |= {f"warm_{step}": s for step, s in assistant.warm_up().items()}
        if isinstance(voice := models.loaded.synthesizer, CachedSynthesizer):
            # the known replies' audio, made while nobody speaks, so that they play the moment a turn is committed
            presynthesis = Presynthesis(
                voice,
                known_replies(assistant.kiosk),
                max_sentences=config.kiosk.max_sentences,
                bounds=assistant.responder.bounds,
                disk=disk_audio(config.tts.presynthesized_dir, voice.voice_id),
                idle=idle,
            )
        wake_word = open_wake_word(config)
        live = LiveAssistant(config, models.engines, models.turn_model, assistant.responder, wake_word=wake_word)
        turns.timeline, turns.echo = live.timeline, live.reply_echo
        live.loop.bus.subscribe(turns, name="records", maxsize=RECORDS_QUEUE)
        if review is not None:
            subscribe_review(config, review, assistant, live)
        notifications = subscribe_actions(config, assistant, live)
    except BaseException:
        if notifications is not None:
            notifications.close()
        recheck.close()
        if review is not None:
            review.close()
        if assistant is not None:
            assistant.close()
        if presynthesis is not None:
            presynthesis.close()
        if wake_word is not None and live is None:
            wake_word.close()
        raise
    idle.follow(live.loop.idle)
    compile_in_background(config, models.store, assistant, idle)
    return Appliance(
        config,
        models,
        recheck,
        assistant,
        presynthesis,
        live,
        turns,
        review=review,
        notifications=notifications,
        startup_s=startup_s,
    )
