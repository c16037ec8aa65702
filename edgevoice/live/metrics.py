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

import logging
import socket
import socketserver
import threading
from pathlib import Path
from typing import Any

from edgevoice.admin.hosts import ServedHosts
from edgevoice.atomic_write import atomic_write
from edgevoice.config import Config
from edgevoice.config.listen_address import effective_listen, parse_listen
from edgevoice.errors import ConfigError
from edgevoice.events import Answered
from edgevoice.ownership import BoundSocket, FileKind, check_file, check_socket, claim_socket
from edgevoice.trace import STAGE_NAMES, TurnTimeline

log = logging.getLogger(__name__)

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


SOCKET_KEY = "metrics.listen"
TEXTFILE_KEY = "metrics.textfile"
TEXTFILE = FileKind("a file of edgevoice's metrics", lambda head: head.startswith(b"# HELP edgevoice_"))
"""What ``[metrics] textfile`` holds once written: the exposition of :class:`Metrics`."""


def check_metrics_files(listen: str, textfile: str, warnings: list[str] | None = None) -> None:
    """Refuse, without touching them, a Unix socket path held by anything but a stale socket and a textfile that is
    not ours: the exporter replaces both (:mod:`edgevoice.ownership`)."""
    if listen.startswith("unix:"):
        check_socket(SOCKET_KEY, listen[5:], [] if warnings is None else warnings)
    if textfile:
        check_file(TEXTFILE_KEY, textfile, TEXTFILE)


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
        self._unix: BoundSocket | None = None
        if listen:
            self._serve(*parse_listen(listen))

    def _serve(self, host: str, port: str | int) -> None:
        from prometheus_client.exposition import MetricsHandler

        handler: Any = MetricsHandler.factory(self.metrics.registry)
        if host != "unix":  # a browser reaches TCP only; a socket's clients are the file system's
            handler = _host_checked(handler, ServedHosts.for_listen(f"{host}:{port}"))
        try:
            if host == "unix":
                path = str(port)
                try:
                    claim_socket(SOCKET_KEY, path)
                except ConfigError as exc:  # served by another process (a file there was refused at start)
                    log.warning("metrics: %s; metrics are not served", exc.message)
                    return
                server: socketserver.BaseServer = _UnixHTTPServer(path, handler)
                self._unix = BoundSocket(path)
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
        try:
            check_file(TEXTFILE_KEY, self.textfile, TEXTFILE)
        except ConfigError as exc:
            log.warning("metrics: %s; it is left alone", exc.message)
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
        if self._unix is not None:
            self._unix.remove()


def _host_checked(handler: Any, served: ServedHosts) -> Any:
    """``handler`` answering only requests whose one ``Host`` names this endpoint (:class:`ServedHosts`, as the admin
    page): a web page whose name was rebound to 127.0.0.1 (DNS rebinding) reads no metrics."""

    class HostChecked(handler):
        def do_GET(self) -> None:
            names = self.headers.get_all("Host") or []
            if len(names) != 1 or not served.allows(names[0]):
                self.send_error(421, "Misdirected Request", f"this endpoint serves {served.describe()} only")
                return
            super().do_GET()

    return HostChecked


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


def start_metrics(config: Config) -> MetricsExporter | None:
    """The configured metrics exporter (``[metrics]``, the service's socket by default), or None when metrics are
    off."""
    m = config.metrics
    listen = effective_listen(m.listen)
    if not listen and not m.textfile:
        return None
    return MetricsExporter(Metrics(), listen=listen, textfile=m.textfile)
