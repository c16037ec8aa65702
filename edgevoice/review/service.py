"""The review inbox of a run, as ``[review]`` configures it: its store opened (and pruned) at start, or, when the
inbox is off, any inbox a former run left removed (off means nothing is kept)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path

from edgevoice.config.served import ReviewConfig
from edgevoice.errors import EdgeVoiceError
from edgevoice.review.store import FILE_NAME, ReviewStore, default_review_dir

__all__ = ["open_review", "review_dir"]

log = logging.getLogger(__name__)


def review_dir(config: ReviewConfig) -> Path:
    """Where the inbox's file is: ``[review] dir``, else the service's state directory (:func:`default_review_dir`)."""
    return Path(config.dir).expanduser() if config.dir else default_review_dir()


def open_review(config: ReviewConfig) -> ReviewStore | None:
    """The inbox's store with ``[review] enabled``; None when it is off (a file a former run left is removed) or
    cannot be opened (logged: the kiosk answers without it)."""
    directory = review_dir(config)
    if not config.enabled:
        leftover = directory / FILE_NAME
        if leftover.is_file():
            with contextlib.suppress(OSError):
                leftover.unlink()
                log.info("review inbox off ([review] enabled = false): the inbox a former run kept was removed")
        return None
    try:
        store = ReviewStore(directory, keep_days=config.keep_days, max_items=config.max_items)
    except (OSError, sqlite3.Error, EdgeVoiceError) as exc:
        log.warning("review inbox: cannot open it in %s (%s); nothing is kept this run", directory, exc)
        return None
    log.info("review inbox: %d items kept in %s", len(store), store.path)
    return store
