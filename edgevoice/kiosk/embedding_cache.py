"""The knowledge's embeddings kept on disk, keyed by content: a kiosk restarted on the same knowledge embeds nothing.

Embedding an entry costs a forward pass of the sentence encoder (a few milliseconds each, three texts per entry): a
5,000-entry knowledge file took about 107 s before the first answer. :class:`EmbeddingCache` keeps one file per
encoder (``<dir>/<encoder hash>.npz``: the texts' keys and their vectors); a text's key is the SHA-256 of the
encoder's identity (its name and the checksum of its weights) and the text as embedded, so an edited entry, or the
same entry under another encoder, is embedded again and an unchanged one never is.

A first start on a large file embeds for minutes (in the background: :mod:`edgevoice.kiosk.background_embedding`):
what is embedded is written every :data:`CHECKPOINT_SECONDS` and when the embedding is stopped, so a start cut short
(a restart, systemd's stop, a power cut) resumes where it stopped instead of starting again.

The file is written whole to a temporary file beside it and renamed over it: a reader sees the old file or the new
one, never a part, and two kiosks writing at once leave one complete file (the last). A file that cannot be read (cut
short, not an archive, the wrong shapes) is a warning, not an error: its vectors are embedded again and it is
replaced. A directory that cannot be written is a warning too: the kiosk runs, embedding at every start.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgevoice.atomic_write import replacing

__all__ = ["MAX_ROWS", "EmbeddingCache", "EmbeddingStopped", "encoder_identity", "stored_embed"]

log = logging.getLogger(__name__)

Floats = npt.NDArray[np.float32]

MAX_ROWS = 40_000
"""At most this many vectors are kept in one file (about 60 MB at 384 dimensions): the current knowledge's first,
then those of earlier versions (a kiosk switched back to yesterday's file embeds nothing either)."""

CHUNK = 256
"""Texts embedded between two looks at the clock."""
CHECKPOINT_SECONDS = 20.0
"""While embedding, what is done is written at least this often."""

KEY_BYTES = 32
"""A key is a SHA-256 digest, stored as a row of bytes (numpy's ``S`` strings would drop its trailing zero bytes)."""


class EmbeddingStopped(Exception):
    """The embedding was asked to stop (its ``go_on`` said so) before every text was embedded; what was embedded is
    kept in the cache."""


class _Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> Floats: ...


def encoder_identity(embedder: object) -> str | None:
    """What names an encoder's output for the cache (its ``identity`` attribute: name and weights checksum); None:
    the encoder has none, and its embeddings are not cached."""
    identity = getattr(embedder, "identity", None)
    return identity if isinstance(identity, str) and identity else None


class EmbeddingCache:
    """Vectors of texts under one encoder, kept in ``directory``."""

    def __init__(self, directory: Path, encoder: str) -> None:
        self.directory = Path(directory)
        self.encoder = encoder
        self.path = self.directory / f"{hashlib.sha256(encoder.encode()).hexdigest()[:24]}.npz"
        self._lock = threading.Lock()
        self.hits = 0
        """Texts found in the cache by :meth:`embed` (for the log and the tests)."""
        self.misses = 0
        """Texts :meth:`embed` had to embed."""

    def key(self, text: str) -> bytes:
        return hashlib.sha256(f"{self.encoder}\0{text}".encode()).digest()

    def missing(self, texts: Sequence[str]) -> int:
        """How many distinct ``texts`` the cache does not hold yet: what :meth:`embed` would embed."""
        with self._lock:
            stored_keys, _ = self._read()
        return len({self.key(t) for t in texts} - set(stored_keys))

    def embed(
        self,
        embedder: _Embedder,
        texts: Sequence[str],
        *,
        go_on: Callable[[], bool] | None = None,
        chunk: int | None = None,
    ) -> Floats:
        """The embeddings of ``texts`` (one row each), from the cache where it has them, else from ``embedder`` (each
        distinct text once, ``chunk`` to a call, :data:`CHUNK` by default); the file is rewritten when anything new
        was embedded, and every :data:`CHECKPOINT_SECONDS` while embedding. ``go_on`` is asked before each chunk:
        False writes what is embedded and raises :class:`EmbeddingStopped` (it may also wait, for the appliance to
        be idle, say)."""
        chunk = chunk or CHUNK
        with self._lock:
            keys = [self.key(t) for t in texts]
            stored_keys, stored = self._read()
            row_of = {k: i for i, k in enumerate(stored_keys)}
            missing = list(dict.fromkeys(k for k in keys if k not in row_of))
            self.misses, self.hits = len(missing), len(set(keys)) - len(missing)
            text_of = dict(zip(keys, texts, strict=True))
            if missing:
                log.info("embedding %d knowledge texts (kept in %s for the next start)", len(missing), self.path)
            parts: list[Floats] = []
            last_write = time.monotonic()
            for start in range(0, len(missing), chunk):
                if go_on is not None and not go_on():
                    if parts:
                        self._write(missing[:start], np.concatenate(parts))
                    raise EmbeddingStopped(f"stopped after {start} of {len(missing)} texts")
                part = missing[start : start + chunk]
                parts.append(np.asarray(embedder.embed([text_of[k] for k in part]), dtype=np.float32))
                if start + chunk < len(missing) and time.monotonic() - last_write >= CHECKPOINT_SECONDS:
                    self._write(missing[: start + len(part)], np.concatenate(parts))
                    last_write = time.monotonic()
            fresh = np.concatenate(parts) if parts else stored
            fresh_row = {k: i for i, k in enumerate(missing)}
            out = np.zeros((len(texts), fresh.shape[1] if len(fresh) else 1), dtype=np.float32)
            for row, k in enumerate(keys):
                out[row] = fresh[fresh_row[k]] if k in fresh_row else stored[row_of[k]]
            if missing:
                self._write(keys, out)
            return out

    def _read(self) -> tuple[list[bytes], Floats]:
        empty: tuple[list[bytes], Floats] = ([], np.zeros((0, 1), dtype=np.float32))
        try:
            with self.path.open("rb") as f:
                archive = np.load(f, allow_pickle=False)
                if not isinstance(archive, np.lib.npyio.NpzFile):
                    raise ValueError("not an .npz archive")
                with archive:
                    encoder = str(archive["encoder"])
                    keys = archive["keys"]
                    vectors = archive["vectors"]
        except FileNotFoundError:
            return empty
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            log.warning("embedding cache %s cannot be read (%s): the knowledge is embedded again", self.path, exc)
            return empty
        if (
            encoder != self.encoder
            or keys.dtype != np.uint8
            or keys.ndim != 2
            or keys.shape[1] != KEY_BYTES
            or vectors.dtype != np.float32
            or vectors.ndim != 2
            or len(keys) != len(vectors)
        ):
            log.warning(
                "embedding cache %s does not hold this encoder's vectors: the knowledge is embedded again", self.path
            )
            return empty
        raw = keys.tobytes()
        return [raw[i : i + KEY_BYTES] for i in range(0, len(raw), KEY_BYTES)], vectors

    def _write(self, keys: list[bytes], vectors: Floats) -> None:
        """The current texts' vectors, then as many others as :data:`MAX_ROWS` allows, written atomically. The others
        are the file's as it is now, not as it was when the embedding began: what another writer added meanwhile
        (the small-talk examples, while the knowledge is embedded in the background) is kept."""
        old_keys, old = self._read()
        first: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        rows = list(first.values())
        kept_keys = list(first)
        seen = set(first)
        earlier = [i for i, k in enumerate(old_keys) if k not in seen][: max(0, MAX_ROWS - len(rows))]
        if old.shape[1:] != vectors.shape[1:]:
            earlier = []
        joined = b"".join(kept_keys + [old_keys[i] for i in earlier])
        all_keys = np.frombuffer(joined, dtype=np.uint8).reshape(-1, KEY_BYTES)
        all_vectors = np.concatenate([vectors[rows], old[earlier]]) if earlier else vectors[rows]
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning(
                "embedding cache %s cannot be written (%s): the knowledge is embedded at every start",
                self.directory,
                exc.strerror or exc,
            )
            return
        try:
            with replacing(self.path, fsync=True, prefix=".embeddings-", suffix=".tmp") as temp, temp.open("wb") as f:
                np.savez(f, encoder=np.array(self.encoder), keys=all_keys, vectors=all_vectors)
        except OSError as exc:
            log.warning(
                "embedding cache %s cannot be written (%s): the knowledge is embedded at every start",
                self.path,
                exc.strerror or exc,
            )


def stored_embed(embedder: _Embedder | None, directory: Path | None) -> Callable[[Sequence[str]], Floats] | None:
    """``embedder``'s texts to vectors, through the on-disk cache in ``directory`` when there is one."""
    if embedder is None:
        return None
    identity = encoder_identity(embedder)
    if directory is None or identity is None:
        return embedder.embed
    stored = EmbeddingCache(directory, identity)
    return lambda texts: stored.embed(embedder, texts)
