"""The admin page served by uvicorn on its own thread, on a socket bound here (a Unix socket is made 0600 and only
a stale socket is ever replaced); :meth:`AdminServer.close` stops it within a couple of seconds."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from typing import Any

from edgevoice.config.admin_listen import parse_admin_listen
from edgevoice.ownership import BoundSocket, check_socket, claim_socket

log = logging.getLogger(__name__)

SOCKET_KEY = "admin.listen"
WORKER_THREADS = 4
"""Threads the admin page may run blocking work on at once (status, a reload); more requests wait their turn."""


def bind(listen: str, *, token: bool, key: str = SOCKET_KEY) -> socket.socket:
    """A listening socket for ``listen`` ("unix:/path" or "host:port"; ``key``: the setting, for its errors)."""
    host, port = parse_admin_listen(listen, token=token)
    if host == "unix":
        path = str(port)
        claim_socket(key, path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            os.chmod(path, 0o600)  # the service's user (and root) only
        except OSError:
            sock.close()
            raise
    else:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, int(port)))
        except OSError:
            sock.close()
            raise
    sock.listen(64)
    sock.setblocking(False)
    return sock


def check_socket_path(path: str, warnings: list[str] | None = None) -> None:
    """What :func:`bind` would refuse at a Unix socket's ``path``, untouched (:mod:`edgevoice.ownership`)."""
    check_socket(SOCKET_KEY, path, [] if warnings is None else warnings)


class AdminServer:
    """uvicorn serving ``app`` on ``listen`` from a thread of its own (the admin page's, or another ``name``'s: the
    display's)."""

    def __init__(self, app: Any, listen: str, *, token: bool, name: str = "admin") -> None:
        import uvicorn

        self.listen, self.name = listen, name
        self._socket = bind(listen, token=token, key=f"{name}.listen")
        self._unix = BoundSocket(listen[5:]) if listen.startswith("unix:") else None
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=1
        )  # log_config=None: uvicorn leaves logging as the run set it up (the journal under systemd)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name=f"edgevoice-{name}", daemon=True)
        self._thread.start()
        log.info("%s page served on %s", name, listen)

    def _serve(self) -> None:
        try:
            asyncio.run(self._serve_limited())
        except Exception:  # the kiosk goes on answering without its admin page
            log.exception("the %s page stopped", self.name)

    async def _serve_limited(self) -> None:
        """Serve, with at most :data:`WORKER_THREADS` threads for the page's blocking work (the unit's
        ``TasksMax=`` counts them with the appliance's own)."""
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
        await self._server.serve(sockets=[self._socket])

    @property
    def address(self) -> tuple[str, int] | str:
        """Where it listens (a TCP port of 0 becomes the one chosen)."""
        name = self._socket.getsockname()
        return str(name) if isinstance(name, str) else (str(name[0]), int(name[1]))

    def close(self, timeout: float = 3.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        self._socket.close()
        if self._unix is not None:
            self._unix.remove()
