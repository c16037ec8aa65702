"""llama.cpp (llama-cpp-python) behind the LanguageModel interface, with the prompt prefix kept in the KV cache.

The chat template comes from the GGUF file. Every turn's prompt starts with the same system prompt (persona, rules,
venue knowledge), so llama.cpp's KV cache keeps it between turns: only the new tokens are evaluated. ``prefill`` lets
the pipeline evaluate a prompt prefix ahead of time (at start-up, or while the visitor is still speaking).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgevoice.engines.llamacpp_state import PrefixStateFiles
from edgevoice.engines.text_turn import TextEndOfTurn, shared_prefix
from edgevoice.errors import LanguageModelError, ModelFormatError, ModelMissingError
from edgevoice.events import ChatMessage, Cut
from edgevoice.models.formats import check_gguf
from edgevoice.native_output import quiet_stderr
from edgevoice.priority import in_background, should_yield

if TYPE_CHECKING:
    from llama_cpp import Llama


PREFILL_CHUNK = 64
"""Prompt tokens evaluated per llama_decode call in :meth:`LlamaCppModel.prefill`: between two chunks a prefill can
be interrupted (shutdown), so no prefill holds the model for long; smaller chunks cost prefill speed."""
BACKGROUND_PREFILL_CHUNK = 16
"""The same, for a prefill done ahead of time (:func:`edgevoice.priority.background`): it stops between two chunks
once the critical path needs the cores, so a chunk is what it can hold them up."""


class LlamaCppModel:
    """A GGUF chat model. Not thread-safe: one reply at a time (except :meth:`interrupt`, from any thread)."""

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 2048,
        threads: int = 2,
        n_batch: int = 256,
        n_gpu_layers: int = 0,
        seed: int = 1234,
        temperature: float = 0.0,
        top_p: float = 0.9,
        repeat_penalty: float = 1.1,
        prefix_states: PrefixStateFiles | None = None,
    ) -> None:
        """``prefix_states``: where :meth:`warm_prefix` keeps the evaluated prompt prefix between starts (None: it is
        evaluated at every start)."""
        if not model_path.is_file():
            raise ModelMissingError(f"language model {model_path} does not exist")
        info = check_gguf(model_path)
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        try:
            with quiet_stderr():
                self._llm: Llama = Llama(
                    model_path=str(model_path),
                    n_ctx=n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    n_batch=n_batch,
                    n_gpu_layers=n_gpu_layers,
                    seed=seed,
                    verbose=False,
                )
        except (ValueError, RuntimeError) as exc:
            raise ModelFormatError(f"llama.cpp could not load {model_path}: {exc}") from exc
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelFormatError(f"{model_path} has no chat template (tokenizer.chat_template): not a chat model")
        eos = self._llm.token_eos()
        bos = self._llm.token_bos()
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=self._llm._model.token_get_text(eos) if eos != -1 else "",
            bos_token=self._llm._model.token_get_text(bos) if bos != -1 else "",
        )
        self.info = info
        self.n_ctx = n_ctx
        self._threads = threads
        self._template = template
        self._text_turn: TextEndOfTurn | None = None
        self._temperature, self._top_p, self._repeat_penalty = temperature, top_p, repeat_penalty
        self._interrupted = threading.Event()
        self.prefix_states = prefix_states
        self.last_cut: Cut | None = None
        """:attr:`~edgevoice.events.Cut.TOKENS` when the last reply stopped at its ``max_tokens``, else None."""

    def end_of_turn_model(self) -> TextEndOfTurn:
        """The model's judge of whether a transcript ends a sentence (:mod:`edgevoice.engines.text_turn`), in a
        context of its own on these weights; made once."""
        if self._text_turn is None:
            with quiet_stderr():
                self._text_turn = TextEndOfTurn(self._llm, self._template, threads=self._threads)
        return self._text_turn

    # -- prompt handling ---------------------------------------------------------------------------------------
    def tokens(self, messages: Sequence[ChatMessage], *, generation_prompt: bool = True) -> list[int]:
        """The prompt tokens for ``messages`` in the model's own chat format."""
        self._formatter.add_generation_prompt = generation_prompt
        chat: list[Any] = [{"role": m.role, "content": m.content} for m in messages]
        rendered = self._formatter(messages=chat)
        return self._llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=True, special=True)

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return len(self.tokens(messages))

    @property
    def cached_tokens(self) -> int:
        return int(self._llm.n_tokens)

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        """Evaluate the prompt for ``messages`` (no generation prompt) into the KV cache; return new tokens evaluated.

        Tokens already in the cache (the longest common prefix with the last prompt) are not evaluated again.
        """
        tokens = self.tokens(messages, generation_prompt=False)
        keep = shared_prefix(self._llm.input_ids[: self._llm.n_tokens], tokens)
        if keep == len(tokens):
            return 0
        self._llm.n_tokens = keep
        chunk = BACKGROUND_PREFILL_CHUNK if in_background() else PREFILL_CHUNK
        try:
            for start in range(keep, len(tokens), chunk):
                if self._interrupted.is_set():
                    raise LanguageModelError("prefill interrupted: the model is shutting down", code="llm_interrupted")
                if should_yield():  # ahead-of-time work, and the critical path needs the cores: what is done stays
                    return start - keep
                self._llm.eval(tokens[start : start + chunk])  # n_tokens grows with each chunk evaluated
        except LanguageModelError:
            raise
        except Exception as exc:
            raise LanguageModelError(f"prefill failed: {exc}") from exc
        return len(tokens) - keep

    def warm(self) -> None:
        """One decode, then an empty cache: the weights are paged in and the compute buffers made now (at load,
        beside the other engines' loads), not in the first prefill or turn."""
        bos = self._llm.token_bos()
        self._llm.eval([bos if bos != -1 else 0])
        self._llm.reset()
        self._llm._ctx.kv_cache_clear()

    def warm_prefix(self, messages: Sequence[ChatMessage]) -> str:
        """Have the prompt prefix ``messages`` in the KV cache before the first turn: read back from
        :attr:`prefix_states` when an earlier start kept it, else evaluated (:meth:`prefill`) and kept there. Returns
        how: ``"restored"``, ``"evaluated"`` or ``"cached"`` (in the cache already)."""
        tokens = self.tokens(messages, generation_prompt=False)
        if shared_prefix(self._llm.input_ids[: self._llm.n_tokens], tokens) == len(tokens):
            return "cached"
        states = self.prefix_states
        if states is not None and states.restore(self._llm, tokens):
            return "restored"
        self.prefill(messages)
        done = shared_prefix(self._llm.input_ids[: self._llm.n_tokens], tokens) == len(tokens)
        if states is not None and done:
            states.save(self._llm, tokens)
        return "evaluated"

    def forget_messages(self, before: Sequence[ChatMessage], dropped: Sequence[ChatMessage]) -> int:
        """Cut ``dropped`` (the oldest history, just after ``before``) out of the KV cache and shift what follows
        back (llama.cpp's context shift), so trimming the history does not re-evaluate the rest of it.

        Returns the number of tokens removed; 0 when the cache does not hold those messages as a contiguous span
        (then the next prompt simply re-evaluates from the first difference)."""
        head = self.tokens(before, generation_prompt=False)
        span = self.tokens([*before, *dropped], generation_prompt=False)
        n = int(self._llm.n_tokens)
        cached = self._llm.input_ids[:n]
        if span[: len(head)] != head or n < len(span) or list(cached[: len(span)]) != span:
            return 0
        start, end = len(head), len(span)
        ctx = self._llm._ctx
        if not ctx.kv_cache_seq_rm(0, start, end):
            return 0
        ctx.kv_cache_seq_shift(0, end, n, start - end)
        self._llm.input_ids[start : n - (end - start)] = cached[end:n].copy()
        self._llm.n_tokens = n - (end - start)
        return end - start

    # -- generation --------------------------------------------------------------------------------------------
    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        prompt = self.tokens(messages)
        if len(prompt) + max_tokens > self.n_ctx:
            raise LanguageModelError(
                f"prompt of {len(prompt)} tokens plus {max_tokens} reply tokens exceeds n_ctx={self.n_ctx}",
                code="llm_context_full",
            )
        self.last_cut = None
        stream: Any = None
        try:
            stream = self._llm.create_completion(
                prompt=prompt,
                max_tokens=max_tokens,
                stream=True,
                temperature=self._temperature,
                top_p=self._top_p,
                repeat_penalty=self._repeat_penalty,
            )
            for chunk in stream:
                if self._interrupted.is_set():
                    raise LanguageModelError(
                        "generation interrupted: the model is shutting down", code="llm_interrupted"
                    )
                choice = chunk["choices"][0]
                if choice.get("finish_reason") == "length":
                    self.last_cut = Cut.TOKENS
                if choice["text"]:
                    yield choice["text"]
        except (GeneratorExit, LanguageModelError):
            raise
        except Exception as exc:
            raise LanguageModelError(f"generation failed: {exc}") from exc
        finally:
            # Closed here, in this thread, while the model is alive: an exception kept for later (the loop keeps a
            # turn's error) would otherwise keep llama-cpp-python's generator, and its sampler, alive in its
            # traceback until the interpreter's exit, long after the model was freed.
            if stream is not None:
                stream.close()

    def interrupt(self) -> None:
        """Make a prefill or generation in progress on another thread stop at its next chunk or token (raising
        ``llm_interrupted``), and every later one at once until :meth:`resume`: the first step of shutting down."""
        self._interrupted.set()

    def resume(self) -> None:
        """Accept work again after :meth:`interrupt` (a new loop on the same model)."""
        self._interrupted.clear()

    def close(self) -> None:
        """Free the model. Only once no thread uses it any more (:meth:`interrupt`, then join the users)."""
        llm = getattr(self, "_llm", None)
        if llm is not None:
            llm.close()
            self._llm = None  # type: ignore[assignment]
