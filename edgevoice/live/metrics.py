"""Prometheus metrics: a histogram per latency stage and for voice-to-voice, and turn counters.

``[metrics] listen`` serves them over HTTP on a loopback address (``127.0.0.1:9464``) or on a Unix socket
(``unix:/run/edgevoice/metrics.sock``), never on a public interface (the config refuses ``0.0.0.0``). Left empty, it
is the service's socket under systemd (:func:`edgevoice.config.listen_address.effective_listen`: the unit's sandbox
allows Unix sockets only) and off elsewhere; ``"off"`` turns it off everywhere.
``[metrics] textfile`` rewrites a file for node_exporter's textfile collector after every turn instead (atomically:
written beside it, then renamed). Neither replaces what is not its own: a file at the socket's path, a textfile that
holds something else. A metrics failure (socket taken, disk full, read-only file system) is logged and
costs nothing else. Uses ``prometheus_client``, imported only when metrics are on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import socketserver
import stat
import threading
from pathlib import Path
from typing import Any

from edgevoice.atomic_write import atomic_write
from edgevoice.config.listen_address import parse_listen
from edgevoice.errors import ConfigError
from edgevoice.events import Answered
from edgevoice.trace import STAGE_NAMES, TurnTimeline

log = logging.getLogger(__name__)

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


def check_metrics_files(listen: str, textfile: str) -> None:
    """Refuse, without touching them, a Unix socket path held by something that is not a socket and a textfile that
    is not ours: the exporter replaces both."""
    if listen.startswith("unix:"):
        path = listen[5:]
        with contextlib.suppress(OSError):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise ConfigError(f"metrics.listen = {listen!r}: {path} exists and is not a socket; it is not removed")
    if textfile and not _ours(Path(textfile)):
        raise ConfigError(
            f"metrics.textfile = {textfile!r}: that file exists and does not hold edgevoice's metrics; "
            "it is not replaced (name a new file, or remove it)"
        )


def _ours(path: Path) -> bool:
    """A textfile this exporter may replace: none yet, an empty file, or one that holds edgevoice's metrics."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return not head or head.startswith(b"# HELP edgevoice_")


class Metrics:
    """The appliance's metrics in their own registry (nothing global)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self.stage_seconds = Histogram(
            "edgevoice_stage_seconds",
            "Time spent in each latency stage of a turn (see edgevoice.trace).",
            ["stage"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.voice_to_voice_seconds = Histogram(
            "edgevoice_voice_to_voice_seconds",
            "End of the visitor's speech to the first reply sample played.",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.turns = Counter("edgevoice_turns", "Turns answered.", ["outcome"], registry=self.registry)
        self.underruns = Counter(
            "edgevoice_output_underruns", "Times the speaker ran dry during a reply.", registry=self.registry
        )
        self.llm_replies = Counter(
            "edgevoice_llm_replies",
            'Replies by the model that answered ("remote" or "local") and what kept the remote from answering.',
            ["source", "remote_error"],
            registry=self.registry,
        )
        for stage in STAGE_NAMES:  # every series exists from the start, at zero
            self.stage_seconds.labels(stage=stage)
        for outcome in ("answered", "cancelled", "empty"):
            self.turns.labels(outcome=outcome)

    def observe(
        self,
        timeline: TurnTimeline,
        *,
        cancelled: bool = False,
        underruns: int = 0,
        answered_by: Answered | None = None,
    ) -> None:
        """Count one turn; ``answered_by``: which language model answered it (None: none was asked)."""
        for stage, seconds in timeline.stages().items():
            self.stage_seconds.labels(stage=stage).observe(max(0.0, seconds))
        total = timeline.voice_to_voice()
        if total is not None:
            self.voice_to_voice_seconds.observe(max(0.0, total))
        outcome = "cancelled" if cancelled else "answered" if timeline.first_played is not None else "empty"
        self.turns.labels(outcome=outcome).inc()
        self.underruns.inc(underruns)
        if answered_by is not None:
            self.llm_replies.labels(source=answered_by.source, remote_error=answered_by.remote_error or "").inc()

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))


class MetricsExporter:
    """Publishes :class:`Metrics` as configured; :meth:`close` stops the server. Never raises after start-up."""

    def __init__(self, metrics: Metrics, *, listen: str = "", textfile: str = "") -> None:
        self.metrics = metrics
        check_metrics_files(listen, textfile)
        self.textfile = Path(textfile) if textfile else None
        self._server: socketserver.BaseServer | None = None
        self._thread: threading.Thread | None = None
        self._unix_path: str | None = None
        if listen:
            self._serve(*parse_listen(listen))

    def _serve(self, host: str, port: str | int) -> None:
        from prometheus_client.exposition import MetricsHandler

        handler: Any = MetricsHandler.factory(self.metrics.registry)
        try:
            if host == "unix":
                path = str(port)
                _remove_stale_socket(path)
                server: socketserver.BaseServer = _UnixHTTPServer(path, handler)
                self._unix_path = path
            else:
                server = _TCPHTTPServer((host, int(port)), handler)
        except OSError as exc:
            log.warning("metrics: cannot listen on %s:%s (%s); metrics are not served", host, port, exc)
            return
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="edgevoice-metrics", daemon=True)
        self._thread.start()
        log.info("metrics served on %s", f"unix:{port}" if host == "unix" else f"{host}:{port}")

    def update(self) -> None:
        """After a turn: rewrite the textfile (if configured)."""
        if self.textfile is None:
            return
        if not _ours(self.textfile):
            log.warning("metrics: %s no longer holds edgevoice's metrics; it is left alone", self.textfile)
            return
        try:  # readable by node_exporter, which may run as another user
            atomic_write(self.textfile, self.metrics.exposition(), mode=0o644)
        except OSError as exc:  # disk full, read-only: the kiosk goes on answering
            log.warning("metrics: cannot write %s: %s", self.textfile, exc)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(2.0)
        if self._unix_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._unix_path)


def _remove_stale_socket(path: str) -> None:
    """Remove a socket left by a previous run; anything else at ``path`` is refused, never deleted."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"metrics.listen = 'unix:{path}': {path} exists and is not a socket; it is not removed")
    os.unlink(path)


class _TCPHTTPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self) -> tuple[Any, Any]:
        request, _ = super().get_request()
        return request, ("unix", 0)  # http.server expects a (host, port) client address
