"""An OpenAI-compatible chat server (llama.cpp's server, vLLM, Ollama) behind the LanguageModel interface.

The reply streams as server-sent events from ``POST {base_url}/chat/completions`` with ``"stream": true``: each
event's ``choices[0].delta.content`` is a piece of the reply, ``[DONE]`` ends it. Every way the server can fail is a
:class:`~edgevoice.errors.LanguageModelError` with a code of its own (:data:`REMOTE_ERRORS`), so the hedge
(:mod:`edgevoice.reply.hedge`) lets the local model answer and the turn record says why.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2

from edgevoice.errors import ConfigError, LanguageModelError
from edgevoice.events import ChatMessage

REMOTE_ERRORS = {
    "llm_remote_unreachable": "the server refused the connection or could not be reached in time",
    "llm_remote_stalled": "the server sent nothing for longer than llm.remote_stall_s",
    "llm_remote_http": "the server answered with an HTTP error, or an error event in the stream",
    "llm_remote_malformed": "the server's stream was not OpenAI chat chunks",
    "llm_remote_failed": "the connection broke, or the stream ended before the reply did",
}
"""The codes of the remote model's failures, and what each means."""

ERROR_BODY_CHARS = 200
"""How much of an HTTP error's body goes into the error message."""


def _fail(code: str, message: str) -> LanguageModelError:
    return LanguageModelError(f"remote model: {message}", code=code)


def _piece(data: str) -> tuple[str, bool]:
    """The reply text in one event's data, and whether the event says the reply is finished."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise _fail("llm_remote_malformed", f"an event is not JSON: {data[:80]!r}") from None
    if not isinstance(chunk, Mapping):
        raise _fail("llm_remote_malformed", f"an event is not a JSON object: {data[:80]!r}")
    if "error" in chunk:
        raise _fail("llm_remote_http", f"the server sent an error: {str(chunk['error'])[:ERROR_BODY_CHARS]}")
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        raise _fail("llm_remote_malformed", f"an event has no choices: {data[:80]!r}")
    if not choices:
        return "", False  # a usage-only chunk
    choice = choices[0]
    delta = choice.get("delta") if isinstance(choice, Mapping) else None
    if not isinstance(delta, Mapping):
        raise _fail("llm_remote_malformed", f"an event's choice has no delta: {data[:80]!r}")
    content = delta.get("content")
    if content is not None and not isinstance(content, str):
        raise _fail("llm_remote_malformed", f"an event's content is not text: {data[:80]!r}")
    return content or "", choice.get("finish_reason") is not None


class RemoteChatModel:
    """A chat model on an OpenAI-compatible server. One connection pool; replies may stream from several threads
    (the hedge reads each on its own), :meth:`interrupt` from any thread."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        api_key: str | None = None,
        stall_s: float = 2.0,
        temperature: float = 0.0,
        top_p: float = 0.9,
        seed: int | None = None,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        """``stall_s``: the longest wait for the connection and for each piece of the stream. The environment's
        proxy settings are not used: the server is on the kiosks' own network, and the key goes to it alone."""
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._options: dict[str, Any] = {"temperature": temperature, "top_p": top_p}
        if seed is not None:
            self._options["seed"] = seed
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx2.Client(
            headers=headers, timeout=httpx2.Timeout(stall_s), trust_env=False, transport=transport
        )
        self._interrupted = threading.Event()

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        body: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": max_tokens,
            "stream": True,
            **self._options,
        }
        if self.model:
            body["model"] = self.model
        finished = False
        try:
            with self._client.sse(self.url, method="POST", json=body) as source:
                response = source.response
                if response.status_code != 200:
                    text = response.read().decode("utf-8", "replace")[:ERROR_BODY_CHARS]
                    raise _fail("llm_remote_http", f"HTTP {response.status_code} from {self.url}: {text}")
                for event in source:
                    if self._interrupted.is_set():
                        raise LanguageModelError("generation interrupted: shutting down", code="llm_interrupted")
                    if event.data.strip() == "[DONE]":
                        return
                    text, done = _piece(event.data)
                    finished = finished or done
                    if text:
                        yield text
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
            raise _fail("llm_remote_unreachable", f"{self.url}: {exc}") from exc
        except httpx2.TimeoutException as exc:
            raise _fail("llm_remote_stalled", f"{self.url} sent nothing for too long") from exc
        except httpx2.SSEError as exc:
            raise _fail("llm_remote_malformed", f"{self.url}: {exc}") from exc
        except httpx2.HTTPError as exc:
            raise _fail("llm_remote_failed", f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if not finished:
            raise _fail("llm_remote_failed", f"{self.url}: the stream ended before the reply did")

    def interrupt(self) -> None:
        """Make a reply in progress stop at its next piece, and every later one at once until :meth:`resume`."""
        self._interrupted.set()

    def resume(self) -> None:
        self._interrupted.clear()

    def close(self) -> None:
        self._client.close()


def read_api_key(*, key_file: str, key_env: str) -> str | None:
    """The API key from ``llm.api_key_file`` or the variable ``llm.api_key_env`` names; None when neither is set.

    The file's path may name variables: ``${CREDENTIALS_DIRECTORY}/llm-key`` is the key systemd's ``LoadCredential=``
    hands the service."""
    if key_file:
        path = Path(os.path.expandvars(key_file)).expanduser()
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"llm.api_key_file = {str(path)!r}: cannot read it ({exc})") from None
        if not key:
            raise ConfigError(f"llm.api_key_file = {str(path)!r}: the file is empty")
        return key
    if key_env:
        key = os.environ.get(key_env, "").strip()
        if not key:
            raise ConfigError(f"llm.api_key_env = {key_env!r}: that environment variable is not set")
        return key
    return None
