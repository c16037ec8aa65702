"""The prompt prefix's KV cache kept on disk, so that a restart does not evaluate the prefix again.

The prefix (persona, rules, venue knowledge) is the same at every start until the knowledge, the model or the
settings change; evaluating it is the longest part of start-up on two cores. After it is evaluated once, llama.cpp's
state of that sequence is written to a file named for everything it depends on (the model's identity, the prefix's
tokens, the context's settings and the llama.cpp build); the next start reads it back in milliseconds. A file that
does not read back, or reads back other tokens, is removed and the prefix evaluated as before: the cache can make a
start faster, never a reply different (the state read back is the one the same model evaluated from the same
tokens)."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

__all__ = ["PrefixStateFiles"]

KEEP_FILES = 4
"""Prefix states kept in the directory (the newest): a knowledge edited back and forth finds its state still there."""
SUFFIX = ".kvstate"


class PrefixStateFiles:
    """Prefix states of one model in ``directory``; ``identity``: what names that model and its context (its sha256
    or file identity, ``n_ctx``, threads, batch), so that no other model or setting reads a state back."""

    def __init__(self, directory: Path, identity: str) -> None:
        self.directory = directory
        self.identity = identity

    def path(self, tokens: Sequence[int]) -> Path:
        import llama_cpp

        digest = hashlib.sha256(f"{self.identity}|llama_cpp {llama_cpp.__version__}|".encode())
        digest.update(",".join(map(str, tokens)).encode())
        return self.directory / f"{digest.hexdigest()[:32]}{SUFFIX}"

    def restore(self, llm: Llama, tokens: Sequence[int]) -> bool:
        """Read the state of ``tokens`` into ``llm``'s sequence 0 (its cache emptied first); False, with the cache
        left empty, when there is none or it does not read back as those tokens (a bad file is removed)."""
        import llama_cpp

        path = self.path(tokens)
        if not path.is_file():
            return False
        llm.reset()
        llm._ctx.kv_cache_clear()
        out = (llama_cpp.llama_token * len(tokens))()
        count = ctypes.c_size_t(0)
        read = llama_cpp.llama_state_seq_load_file(
            llm._ctx.ctx, os.fsencode(path), 0, out, len(tokens), ctypes.byref(count)
        )
        if read == 0 or count.value != len(tokens) or list(out[: count.value]) != list(tokens):
            llm._ctx.kv_cache_clear()
            log.warning("prompt prefix state %s does not read back: removed, the prefix is evaluated", path)
            with contextlib.suppress(OSError):
                path.unlink()
            return False
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        llm._requires_eval = True  # no logits were read back: the next prompt's last token is decoded again
        with contextlib.suppress(OSError):
            os.utime(path)  # the newest are kept
        return True

    def save(self, llm: Llama, tokens: Sequence[int]) -> Path | None:
        """Write the state of ``tokens`` (the first ``len(tokens)`` of ``llm``'s cache) to its file, atomically, and
        keep the newest :data:`KEEP_FILES`; None when it cannot be written (a warning: the next start evaluates)."""
        import llama_cpp

        path = self.path(tokens)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        array = (llama_cpp.llama_token * len(tokens))(*tokens)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            written = llama_cpp.llama_state_seq_save_file(llm._ctx.ctx, os.fsencode(tmp), 0, array, len(tokens))
            if written == 0:
                raise OSError("llama.cpp wrote nothing")
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("prompt prefix state not kept in %s: %s", self.directory, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return None
        self._prune()
        return path

    def _prune(self) -> None:
        try:
            states = sorted(self.directory.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return
        for old in states[KEEP_FILES:]:
            with contextlib.suppress(OSError):
                old.unlink()
