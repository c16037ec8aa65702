"""The end of a turn in the visitor's words: the chat model's probability that what was said so far is a finished
sentence, read off one forward pass over the transcript (the idea behind LiveKit's turn detector).

Smart Turn judges the sound of a pause, and a voice that hesitates with a falling tone ("Where can I find ... the
nearest exit?") sounds finished to it. The words say otherwise: after "where can i find" a finished sentence
is unlikely. The transcript goes in as the user's message of the model's own chat template, lower case and without
punctuation (the recognizer puts a question mark after half a question too), and the probability is that of the
next token ending the sentence: the end of the message or a full stop, question or exclamation mark.

It runs in a llama.cpp context of its own on the already loaded model (the weights are shared, its cache holds 128
tokens), so it neither waits for nor disturbs the reply's context. The cache keeps the last transcript judged, and a
new one is decoded from the first token where the two differ: judged on each partial transcript while the visitor
speaks, the words are mostly in the cache at the pause, and the verdict there costs the last few tokens.
``scripts/text_turn_eval.py`` measures it on the benchmark venues' questions, whole and cut at a random word;
``docs/decisions/`` has the figures.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from edgevoice.errors import TurnError
from edgevoice.words import words

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["MEASURED_THRESHOLD", "TextEndOfTurn"]

MEASURED_THRESHOLD = 0.005
"""``endpointing.text_incomplete_below`` chosen for the default model on the development halves
(``scripts/text_turn_eval.py``)."""
N_CTX = 128
SENTINEL = "\u2063TEXT\u2063"
ENDINGS = frozenset({"?", ".", "!", "?!", "!?", "...", "\u2026", '?"', '."', '!"', "?)", ".)"})
"""Tokens (stripped of white space) that end a sentence."""


def shared_prefix(cached: Iterable[int], tokens: Iterable[int]) -> int:
    """How many tokens ``cached`` (what a llama.cpp context holds) and ``tokens`` share from their start: those need
    no evaluation again."""
    n = 0
    for a, b in zip(cached, tokens, strict=False):
        if a != b:
            break
        n += 1
    return n


class TextEndOfTurn:
    """``probability_complete(text)``: how likely the chat model finds that ``text`` ends the visitor's sentence."""

    def __init__(self, llm: Llama, template: str, *, threads: int = 2) -> None:
        import llama_cpp
        from llama_cpp._internals import LlamaBatch, LlamaContext
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._llm = llm
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = N_CTX
        params.n_threads = params.n_threads_batch = threads
        self._ctx = LlamaContext(model=llm._model, params=params, verbose=False)
        self._batch = LlamaBatch(n_tokens=N_CTX, embd=0, n_seq_max=1, verbose=False)
        self._lock = threading.Lock()
        rendered = Jinja2ChatFormatter(template=template, eos_token="", bos_token="")(
            messages=[{"role": "user", "content": SENTINEL}]
        ).prompt
        head, _, tail = rendered.partition(SENTINEL)
        self._prefix = llm.tokenize(head.encode(), add_bos=True, special=True)
        end_of_message = llm.tokenize(tail.encode(), add_bos=False, special=True)[:1]
        self._endings = np.array(sorted({*end_of_message, llm.token_eos(), *self._ending_tokens()}), dtype=np.int64)
        self._decode(self._prefix, 0)
        self._judged: list[int] = []
        """The transcript's tokens in the cache after the prefix (the last text judged)."""
        self.tokens_decoded = 0
        self.tokens_reused = 0
        """Tokens of judged transcripts decoded, and found in the cache already (for the turn records and tests)."""

    def _ending_tokens(self) -> set[int]:
        model = self._llm._model
        pieces = (model.token_to_piece(i).rstrip(b"\0").decode("utf-8", "ignore") for i in range(self._llm.n_vocab()))
        return {i for i, piece in enumerate(pieces) if piece.strip() in ENDINGS}

    def _decode(self, tokens: list[int], n_past: int) -> None:
        self._batch.set_batch(tokens, n_past=n_past, logits_all=False)
        self._ctx.decode(self._batch)

    def probability_complete(self, text: str) -> float:
        """The probability that the next token after ``text`` ends the sentence; 1.0 for no words (nothing to
        judge: the sound decides)."""
        said = " ".join(words(text))  # lower case, no punctuation
        if not said:
            return 1.0
        tokens = self._llm.tokenize(said.encode(), add_bos=False, special=False)[: N_CTX - len(self._prefix) - 1]
        with self._lock:
            # the cached tokens the two texts share (the last one is decoded again when nothing differs: its logits
            # are the verdict)
            keep = min(shared_prefix(self._judged, tokens), len(tokens) - 1)
            start = len(self._prefix) + keep
            try:
                self._judged = []  # until the decode is done, the cache holds nothing certain past the prefix
                self._ctx.kv_cache_seq_rm(-1, start, -1)
                self._decode(tokens[keep:], start)
                logits = np.ctypeslib.as_array(self._ctx.get_logits(), shape=(self._llm.n_vocab(),))
            except Exception as exc:  # llama.cpp reports a failed decode as a plain exception
                raise TurnError(f"text end-of-turn: {exc}") from exc
            self._judged = tokens
            self.tokens_reused += keep
            self.tokens_decoded += len(tokens) - keep
            logits = logits.astype(np.float64)
        log_total = np.logaddexp.reduce(logits)
        return float(np.exp(np.logaddexp.reduce(logits[self._endings]) - log_total))

    def close(self) -> None:
        self._ctx.close()
