"""The live appliance that ``edgevoice run`` drives, composed from :mod:`edgevoice.app`'s parts: the models loaded
side by side (:func:`load_models`) and the running appliance on them (:func:`build_appliance`): the assistant, the
live loop with its metrics, presynthesis, model recheck and admin page. Each feature that follows the loop is wired
by its module in :mod:`edgevoice.wiring`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from edgevoice.app import build_assistant, build_kiosk, load_engines_with, load_turn_model
from edgevoice.app_engines import open_wake_word
from edgevoice.clock import MonotonicClock
from edgevoice.config import Config
from edgevoice.interfaces import Engines
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.models.configured import model_store
from edgevoice.models.store import ModelStore
from edgevoice.reply.audio_cache import CachedSynthesizer
from edgevoice.wiring.actions import subscribe_actions
from edgevoice.wiring.compiling import compile_in_background
from edgevoice.wiring.records import RECORDS_QUEUE, TurnRecords
from edgevoice.wiring.review import subscribe_review

if TYPE_CHECKING:
    from edgevoice.act.service import Notifications
    from edgevoice.admin.appliance import AdminHandle
    from edgevoice.converse import Assistant
    from edgevoice.display.server import DisplayHandle
    from edgevoice.engines.smart_turn_onnx import SmartTurn
    from edgevoice.engines.wake_word import MicroWakeWord
    from edgevoice.live.assistant import LiveAssistant
    from edgevoice.live.metrics import MetricsExporter
    from edgevoice.live.recorder import TurnRecorder
    from edgevoice.live.service import ServiceMonitor
    from edgevoice.models.recheck import BackgroundRecheck
    from edgevoice.reply.presynthesis import Presynthesis
    from edgevoice.review.store import ReviewStore
    from edgevoice.wyoming_server.service import WyomingService

log = logging.getLogger(__name__)


@dataclass
class LoadedModels:
    """What ``edgevoice run`` loads first: the engines and the end-of-turn model side by side, then the kiosk (its
    sentence encoder and embeddings), and the metrics exporter."""

    store: ModelStore
    loaded: Engines  # as loaded: what :meth:`close` frees
    engines: Engines  # with the test-only faults (edgevoice/live/faults.py); the loaded ones by default
    turn_model: SmartTurn
    exporter: MetricsExporter | None
    load_s: dict[str, float] = field(default_factory=dict)  # each load's seconds (they ran side by side)
    kiosk: Kiosk | None = None  # handed to the assistant (:func:`build_appliance`), which closes it
    idle: LoopIdle = field(default_factory=lambda: LoopIdle())  # the kiosk's test of when to embed in the background

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
        if self.kiosk is not None:  # never handed to an assistant
            self.kiosk.close()


def load_models(config: Config, *, release: threading.Event) -> LoadedModels:
    """Load the engines and the end-of-turn model (side by side), then the kiosk, and start the metrics exporter;
    ``release`` ends any injected fault's hold (:func:`edgevoice.live.faults.inject_faults`)."""
    from edgevoice.live.faults import inject_faults

    store = model_store(config)
    idle = LoopIdle()
    turn = {"turn": lambda: load_turn_model(config, store)}
    loaded, extra, times = load_engines_with(config, store, turn, text_turn=True)
    turn_model = cast("SmartTurn", extra["turn"])
    log.info("engines loaded side by side: %s", ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in times.items()))
    # the kiosk after the engines, not beside them: an open question about slow first decodes (decisions, 2026-12-07)
    t = time.perf_counter()
    try:
        kiosk = build_kiosk(config, store=store, idle=idle)
    except BaseException:
        loaded.close()
        turn_model.close()
        raise
    times["kiosk"] = time.perf_counter() - t
    engines = inject_faults(loaded, release=release)
    from edgevoice.live.metrics import start_metrics

    return LoadedModels(store, loaded, engines, turn_model, start_metrics(config), times, kiosk, idle)


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

    idle = models.idle  # a large knowledge is embedded, replies presynthesized, models hashed only between turns
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
        kiosk, models.kiosk = models.kiosk, None  # the assistant's now
        assistant = build_assistant(config, models.engines, clock=MonotonicClock(), live=True, idle=idle, kiosk=kiosk)
        startup_s = {"assistant": time.perf_counter() - t}
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
