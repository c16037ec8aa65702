"""The Wyoming server's listening socket and event loop, on a thread of its own (:class:`WyomingServer`): at most
``max_clients`` connections at once, one more told ``busy`` and closed; started and closed by the service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from urllib.parse import urlparse

from wyoming.event import async_write_event

from edgevoice.errors import ConfigError
from edgevoice.thread_names import name_this_thread
from edgevoice.wyoming_server.handler import ClientHandler, Served
from edgevoice.wyoming_server.protocol import Refused, close_lingering, refusal

__all__ = ["WyomingServer"]

log = logging.getLogger(__name__)

START_TIMEOUT_S = 10.0


class WyomingServer:
    """Serves :class:`ClientHandler`\\ s on ``served.config.listen`` (``tcp://host:port`` or ``unix:///path``) from
    :meth:`start` until :meth:`close`."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.address: tuple[str, int] | str | None = None
        """Where it listens once started: (host, port), the port chosen when 0 was asked; a socket's path."""
        self.clients = 0
        self.refused = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> WyomingServer:
        """Listen (raises ``ConfigError`` when the address cannot be bound) and serve on the server's thread."""
        self._thread = threading.Thread(target=self._run, name="edgevoice-wyoming-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise ConfigError(f"wyoming.listen = {self.served.config.listen!r}: the server did not start")
        if self._failure is not None:
            raise ConfigError(f"wyoming.listen = {self.served.config.listen!r}: {self._failure}") from self._failure
        log.info(
            "wyoming: serving on %s (at most %d clients)", self.served.config.listen, self.served.config.max_clients
        )
        return self

    def _run(self) -> None:
        name_this_thread("ev-wyoming-srv")
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported by start(), which waits for it
            self._failure = exc
        finally:
            self._ready.set()
            loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if len(tasks) >= self.served.config.max_clients:
                self.refused += 1
                busy = Refused(
                    code="wyoming_busy",
                    message=f"{self.served.config.max_clients} clients are served already (wyoming.max_clients)",
                )
                with contextlib.suppress(ConnectionError):
                    await async_write_event(refusal(busy), writer)
                await close_lingering(reader, writer)
                return
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            self.clients += 1
            try:
                await ClientHandler(self.served, reader, writer).run()
            finally:
                tasks.discard(task)

        url = urlparse(self.served.config.listen)
        line = self.served.limits.line
        if url.scheme == "unix":
            server = await asyncio.start_unix_server(connected, path=url.path, limit=line)
            self.address = url.path
        else:
            server = await asyncio.start_server(connected, host=url.hostname, port=url.port, limit=line)
            host, port = server.sockets[0].getsockname()[:2]
            self.address = (host, port)
        self._ready.set()
        async with server:
            await self._stopped.wait()
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def close(self, timeout: float = 2.0) -> None:
        """Stop listening and drop every connection (a model call in progress ends first), within ``timeout``."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("wyoming: the server's thread did not stop within %.1f s", timeout)
        self.served.desk.close()
        if isinstance(self.address, str):
            with contextlib.suppress(OSError):
                os.unlink(self.address)
