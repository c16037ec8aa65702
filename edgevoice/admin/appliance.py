"""The running `edgevoice run` as the admin page sees it (:class:`~edgevoice.admin.app.Appliance`), and the
admin page started with it (:func:`start_admin`)."""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from edgevoice.config import Config
from edgevoice.config.admin_listen import effective_admin_listen, read_token
from edgevoice.errors import EdgeVoiceError

if TYPE_CHECKING:
    from edgevoice.admin.selftest_runner import SelftestRunner
    from edgevoice.admin.server import AdminServer
    from edgevoice.converse import Assistant
    from edgevoice.review.store import ReviewStore

log = logging.getLogger(__name__)

TURNS_KEPT = 20


class ServiceState(Protocol):
    """What the page shows of the service (``edgevoice.live.service.ServiceMonitor``, which sits above this page)."""

    @property
    def state(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def turns(self) -> int: ...


class _Output(Protocol):
    @property
    def fallbacks(self) -> int: ...


class _Loop(Protocol):
    @property
    def errors(self) -> Sequence[object]: ...
    @property
    def barge_ins(self) -> int: ...
    @property
    def output(self) -> _Output: ...


class _Xruns(Protocol):
    def as_dict(self) -> dict[str, object]: ...


class RunningLoop(Protocol):
    """What the page shows of the running loop (``edgevoice.live.assistant.LiveAssistant``, which starts this page
    and so is passed in, not imported)."""

    @property
    def loop(self) -> _Loop: ...
    def xruns(self) -> _Xruns: ...


def model_checksums(config: Config) -> dict[str, dict[str, str]]:
    """Each configured model (role → name) with the first 12 hex digits of its pinned sha256 ("own file": a path
    that is not in the manifest)."""
    from edgevoice.models.manifest import load_manifest

    manifest = load_manifest()
    out: dict[str, dict[str, str]] = {}
    for f in dataclasses.fields(config.models):
        if f.name == "dir":
            continue
        name = getattr(config.models, f.name)
        spec = manifest.find(name)  # a former name shows the same model's checksum
        sha = spec.output().sha256[:12] if spec is not None else "own file"
        out[f.name] = {"name": name, "sha256": sha}
    return out


class LiveAppliance:
    """The admin page's view of `edgevoice run`: status from the service monitor and the loop, the last turns'
    records (:meth:`add_turn` from the run's ``on_trace``), the knowledge reload and the trigger."""

    def __init__(
        self,
        config: Config,
        assistant: Assistant,
        monitor: ServiceState,
        live: Callable[[], RunningLoop | None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.assistant = assistant
        self.monitor = monitor
        self._live = live
        self._clock = clock
        self._started = clock()
        self._turns: collections.deque[Mapping[str, object]] = collections.deque(maxlen=TURNS_KEPT)
        self._lock = threading.Lock()
        self._models = model_checksums(config)

    @property
    def log_transcripts(self) -> bool:
        return self.config.debug.log_transcripts

    @property
    def knowledge_path(self) -> Path | None:
        file = self.config.kiosk.knowledge_file
        return Path(file).expanduser() if file else None

    def add_turn(self, record: Mapping[str, object]) -> None:
        with self._lock:
            self._turns.append(dict(record))

    def turns(self) -> Sequence[Mapping[str, object]]:
        with self._lock:
            return list(self._turns)

    def status(self) -> Mapping[str, object]:
        live = self._live()
        kiosk = self.assistant.kiosk
        status: dict[str, object] = {
            "state": self.monitor.state,
            "ready": self.monitor.state not in ("loading", "stopping"),
            "status": self.monitor.status,
            "uptime_s": round(self._clock() - self._started),
            "turns": self.monitor.turns,
            "knowledge": f"{len(kiosk.entries)} entries ({self.config.knowledge_source()})",
            "llm": self.config.llm.backend,
        }
        compiler = self.assistant.compiler
        if compiler is not None:
            status["compile"] = compiler.progress.line()
            status["compile_progress"] = compiler.progress.as_dict()
        xruns: dict[str, object] = {}
        if live is not None:
            status["errors"] = len(live.loop.errors)
            status["barge_ins"] = live.loop.barge_ins
            status["fallbacks"] = live.loop.output.fallbacks
            xruns = live.xruns().as_dict()
            status["activation"] = str(getattr(getattr(live, "activation", None), "mode", "always"))
        return status | {"models": self._models, "xruns": xruns}

    def knowledge_text(self) -> str:
        return self.config.knowledge_text()

    def reload_knowledge(self) -> object:
        return self.assistant.reload_knowledge()

    def trigger(self) -> bool:
        live = self._live()
        trigger = getattr(getattr(live, "activation", None), "trigger", None)
        return trigger is not None and bool(trigger())  # False: the mode takes no trigger


@dataclasses.dataclass
class AdminHandle:
    """The admin page of a run: its server and self-test runner, closed together."""

    appliance: LiveAppliance
    server: AdminServer
    selftest: SelftestRunner

    def close(self) -> None:
        self.selftest.close()
        self.server.close()


def start_admin(
    config: Config,
    appliance: LiveAppliance,
    *,
    review: ReviewStore | None = None,
    outbox: Callable[[], Mapping[str, object]] | None = None,
) -> AdminHandle | None:
    """The admin page as ``[admin]`` configures it (the service's socket by default), with the review inbox of
    ``review`` (None: ``[review]`` is off); None when it is off or cannot listen (logged: the kiosk answers without
    it)."""
    from edgevoice.admin.app import create_app
    from edgevoice.admin.hosts import ServedHosts
    from edgevoice.admin.selftest_runner import SelftestRunner, selftest_command
    from edgevoice.admin.server import AdminServer

    listen = effective_admin_listen(config.admin.listen)
    if not listen:
        return None
    token = read_token(config.admin.token_file) if config.admin.token_file else None
    hosts = ServedHosts.for_listen(listen, config.admin.hosts)
    if listen.rpartition(":")[0] in ("0.0.0.0", "[::]") and not config.admin.hosts:
        log.warning("admin page: on %s it answers to loopback names only until [admin] hosts names others", listen)
    selftest = SelftestRunner(selftest_command(config.source))
    app = create_app(appliance, selftest, hosts=hosts, token=token, review=review, outbox=outbox)
    try:
        server = AdminServer(app, listen, token=token is not None)
    except (OSError, EdgeVoiceError) as exc:
        log.warning("admin page: cannot listen on %s (%s); it is not served", listen, exc)
        selftest.close()
        return None
    return AdminHandle(appliance, server, selftest)
