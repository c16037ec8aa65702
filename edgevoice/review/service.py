"""The review inbox of a run, as ``[review]`` configures it: its store opened (and pruned) at start, or, when the
inbox is off, any inbox a former run left removed (off means nothing is kept)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path

from edgevoice.config import Config
from edgevoice.config.served import ReviewConfig
from edgevoice.errors import ConfigError, EdgeVoiceError
from edgevoice.review.store import FILE_NAME, ReviewStore, default_review_dir

__all__ = ["check_review", "open_review", "review_dir"]

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


def check_review(config: Config, warnings: list[str]) -> None:
    """What ``edgevoice config --check`` says of ``[review]``: its file's place holds no directory or other thing
    (a ConfigError); a warning when the inbox would keep questions nobody can review (the admin page off) or act on
    (the knowledge inline, not in a file)."""
    if not config.review.enabled:
        return
    path = review_dir(config.review) / FILE_NAME
    if path.exists() and not path.is_file():
        raise ConfigError(f"review.dir: {str(path)!r} is not a file: set [review] dir to a directory of its own")
    if config.admin.listen == "off":
        warnings.append(
            'review.enabled = true with admin.listen = "off": questions are kept that no page shows; turn one off'
        )
    if not config.kiosk.knowledge_file:
        warnings.append(
            "review.enabled = true with the knowledge inline ([kiosk] knowledge): the inbox cannot attach a question "
            "or add an entry; set [kiosk] knowledge_file"
        )
