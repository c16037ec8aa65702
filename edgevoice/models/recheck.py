"""Hashing the models again after start-up: a file changed after it was verified at load (while the service runs)
is already open and stamped; only its content tells."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable

from edgevoice.errors import ModelChecksumError, ModelError
from edgevoice.models.store import ModelStore
from edgevoice.priority import lower_this_thread, wait_idle

__all__ = ["BackgroundRecheck", "recheck"]

log = logging.getLogger(__name__)


def recheck(store: ModelStore, stop: threading.Event | None = None, *, idle: Callable[[], bool] | None = None) -> bool:
    """Hash every file handed out by :meth:`ModelStore.path` again, stamps or not: a file changed since it was
    handed out is already loaded, so only its content tells. Raises :class:`ModelChecksumError` naming the file and
    the expected checksum on a mismatch (and drops its stamp); False when ``stop`` was set before the end. ``idle``:
    hash only while it says so (the appliance has no turn in progress), so the work never competes with a visitor's
    turn."""
    stop = stop or threading.Event()
    for target, (name, out) in list(store.handed_out.items()):
        digest = hashlib.sha256()
        try:
            with target.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    if not wait_idle(idle, stop):
                        return False
                    digest.update(chunk)
        except OSError as exc:
            raise ModelError(f"cannot read model file {target} ({name}) again: {exc}") from exc
        if digest.hexdigest() != out.sha256:
            store.drop_stamp(out.file)
            raise ModelChecksumError(
                f"model file {target} ({name}) changed on disk after it was verified: expected sha256 "
                f"{out.sha256}, actual sha256 {digest.hexdigest()}; reinstall it with: "
                f"{store.install_command(name, force=True)}"
            )
    return True


class BackgroundRecheck:
    """Runs :func:`recheck` once in a thread of its own (started by :meth:`start`, after start-up, so
    the first visitor never waits for it) and calls ``on_error`` with the error on a mismatch. :meth:`close` stops
    it between two blocks and joins it."""

    def __init__(
        self,
        store: ModelStore,
        on_error: Callable[[ModelError], None],
        *,
        nice: int = 0,
        idle: Callable[[], bool] | None = None,
    ) -> None:
        """``idle``: hash only while it is true (see :func:`recheck`). ``nice``: 0 by default, as the
        compute threads (:mod:`edgevoice.priority`): a lowered thread that holds the GIL when the kernel preempts it
        holds up every other thread, the audio callbacks too."""
        self.store = store
        self.idle = idle
        self.on_error = on_error
        self.nice = nice
        self.error: ModelError | None = None
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="edgevoice-model-recheck", daemon=True)

    def start(self) -> BackgroundRecheck:
        self._thread.start()
        return self

    def _run(self) -> None:
        lower_this_thread(self.nice)
        try:
            recheck(self.store, self._stop, idle=self.idle)
        except ModelError as exc:
            self.error = exc
            log.error("%s", exc)
            self.on_error(exc)
        finally:
            self.finished.set()

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
