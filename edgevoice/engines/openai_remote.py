"""An OpenAI-compatible chat server (llama.cpp's server, vLLM, Ollama) behind the LanguageModel interface.

The reply streams as server-sent events from ``POST {base_url}/chat/completions`` with ``"stream": true``: each
event's ``choices[0].delta.content`` is a piece of the reply, ``[DONE]`` ends it. Every way the server can fail is a
:class:`~edgevoice.errors.LanguageModelError` with a code of its own (:data:`REMOTE_ERRORS`), so the hedge
(:mod:`edgevoice.reply.hedge`) lets the local model answer and the turn record says why.

Nothing the server sends is trusted to end: each reply is read for at most ``max_tokens`` pieces, as many characters
as they may hold (:func:`~edgevoice.events.reply_chars`) and ``max_reply_s`` seconds, after which the response is
closed and the reply ends there (:attr:`RemoteChatModel.last_cut` says which bound it reached); no line of the stream
is held past :func:`line_bytes` and no reply reads more than :func:`reply_bytes` from the network.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2

from edgevoice.clock import Clock, MonotonicClock
from edgevoice.errors import ConfigError, LanguageModelError
from edgevoice.events import ChatMessage, Cut, reply_chars

REMOTE_ERRORS = {
    "llm_remote_unreachable": "the server refused the connection or could not be reached in time",
    "llm_remote_stalled": "the server sent nothing for longer than llm.remote_stall_s",
    "llm_remote_http": "the server answered with an HTTP error, or an error event in the stream",
    "llm_remote_malformed": "the server's stream was not OpenAI chat chunks",
    "llm_remote_failed": "the connection broke, or the stream ended before the reply did",
    "llm_remote_oversized": "a line of the stream, or the whole stream, was longer than any reply of max_tokens",
}
"""The codes of the remote model's failures, and what each means."""

ERROR_BODY_CHARS = 200
"""How much of an HTTP error's body goes into the error message."""
EVENT_BYTES = 1024
"""The most bytes of the stream read per token of the reply: an OpenAI chat chunk holding one token takes 150 to 400
(its id, model name, fingerprint and usage), and keep-alive comments and empty chunks come between."""


def line_bytes(max_tokens: int) -> int:
    """The longest line of the stream held: one event holding a whole reply of ``max_tokens`` tokens, every character
    escaped in its JSON (``\\uXXXX``), and the chunk's other fields."""
    return 4096 + 6 * reply_chars(max_tokens)


def reply_bytes(max_tokens: int) -> int:
    """The most bytes read from the network for one reply of ``max_tokens`` tokens."""
    return max_tokens * EVENT_BYTES + line_bytes(max_tokens)


def _fail(code: str, message: str) -> LanguageModelError:
    return LanguageModelError(f"remote model: {message}", code=code)


def _piece(data: str) -> tuple[str, str | None]:
    """The reply text in one event's data, and why the reply finished if the event says it did (``"stop"``,
    ``"length"``: the server stopped at ``max_tokens``...)."""
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
        return "", None  # a usage-only chunk
    choice = choices[0]
    delta = choice.get("delta") if isinstance(choice, Mapping) else None
    if not isinstance(delta, Mapping):
        raise _fail("llm_remote_malformed", f"an event's choice has no delta: {data[:80]!r}")
    content = delta.get("content")
    if content is not None and not isinstance(content, str):
        raise _fail("llm_remote_malformed", f"an event's content is not text: {data[:80]!r}")
    reason = choice.get("finish_reason")
    return content or "", None if reason is None else str(reason)


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
        max_reply_s: float = 20.0,
        clock: Clock | None = None,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        """``stall_s``: the longest wait for the connection and for each piece of the stream. ``max_reply_s``: the
        longest a reply is read (``[kiosk] max_reply_s``), on ``clock``. The environment's proxy settings are not
        used: the server is on the kiosks' own network, and the key goes to it alone."""
        self.max_reply_s = max_reply_s
        self.clock = clock or MonotonicClock()
        self._cuts = threading.local()
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

    @property
    def last_cut(self) -> Cut | None:
        """The bound at which the last reply read on this thread was cut (None: the server ended it, or it failed).
        Per thread: the hedge reads each reply on a thread of its own."""
        cut = getattr(self._cuts, "cut", None)
        return cut if isinstance(cut, Cut) else None

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self._cuts.cut = None
        body: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": max_tokens,
            "stream": True,
            **self._options,
        }
        if self.model:
            body["model"] = self.model
        started = self.clock.now()
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        finished = False
        pieces, room = 0, reply_chars(max_tokens)
        received, events = 0, _EventLines(line_bytes(max_tokens))
        try:
            with self._client.stream("POST", self.url, json=body, headers=headers) as response:
                self._check_response(response)
                for chunk in response.iter_bytes():
                    if self._interrupted.is_set():
                        raise LanguageModelError("generation interrupted: shutting down", code="llm_interrupted")
                    for data in events.feed(chunk):
                        if data.strip() == "[DONE]":
                            return
                        text, reason = _piece(data)
                        finished = finished or reason is not None
                        if reason == "length":  # the server stopped at max_tokens: the reply was cut, as by us
                            self._cuts.cut = Cut.TOKENS
                        if not text:
                            continue
                        pieces += 1
                        if pieces > max_tokens:
                            self._cuts.cut = Cut.TOKENS
                            return  # leaving closes the response: nothing more is read
                        if len(text) > room:
                            self._cuts.cut = Cut.CHARS
                            if room:
                                yield text[:room]
                            return
                        room -= len(text)
                        yield text
                    if self.clock.now() - started > self.max_reply_s:
                        self._cuts.cut = Cut.SECONDS
                        return
                    received += len(chunk)  # each chunk is one read from the connection: at most tens of kB
                    if received > reply_bytes(max_tokens):
                        raise _fail("llm_remote_oversized", f"{self.url} sent over {received} bytes for one reply")
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
            raise _fail("llm_remote_unreachable", f"{self.url}: {exc}") from exc
        except httpx2.TimeoutException as exc:
            raise _fail("llm_remote_stalled", f"{self.url} sent nothing for too long") from exc
        except httpx2.HTTPError as exc:
            raise _fail("llm_remote_failed", f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if not finished:
            raise _fail("llm_remote_failed", f"{self.url}: the stream ended before the reply did")

    def _check_response(self, response: httpx2.Response) -> None:
        """Raise unless ``response`` is an event stream (an HTTP error, with the start of its body, or another body)."""
        if response.status_code != 200:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= 4 * ERROR_BODY_CHARS:
                    break
            text = body.decode("utf-8", "replace")[:ERROR_BODY_CHARS]
            raise _fail("llm_remote_http", f"HTTP {response.status_code} from {self.url}: {text}")
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "text/event-stream":
            raise _fail("llm_remote_malformed", f"{self.url}: a {kind or 'untyped'} body, not an event stream")

    def interrupt(self) -> None:
        """Make a reply in progress stop at its next piece, and every later one at once until :meth:`resume`."""
        self._interrupted.set()

    def resume(self) -> None:
        self._interrupted.clear()

    def close(self) -> None:
        self._client.close()


class _EventLines:
    """The data of each server-sent event, cut from the stream's bytes as they come; comments and other fields are
    skipped. A line longer than ``max_line`` bytes is never held: it ends the reply (``llm_remote_oversized``)."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._rest = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        if len(self._rest) > self.max_line:
            raise _fail("llm_remote_oversized", f"a line of the stream is longer than {self.max_line} bytes")
        out: list[str] = []
        for raw in lines:
            if len(raw) > self.max_line:
                raise _fail("llm_remote_oversized", f"a line of the stream is longer than {self.max_line} bytes")
            try:
                line = raw.rstrip(b"\r").decode("utf-8")
            except UnicodeDecodeError:
                raise _fail("llm_remote_malformed", f"a line is not UTF-8: {raw[:80]!r}") from None
            if not line:
                if self._data:
                    out.append("\n".join(self._data))
                    self._data = []
                continue
            name, _, value = line.partition(":")
            if name == "data":
                self._data.append(value[1:] if value.startswith(" ") else value)
        return out


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
