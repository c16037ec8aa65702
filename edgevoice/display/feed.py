"""What the kiosk's screen shows, kept from the loop's events: the state, the current exchange, and the messages
(schema version 1, docs/display.md) fanned out to each page that follows the stream.

:class:`DisplayFeed` is one subscriber of the loop's :class:`~edgevoice.live.bus.EventBus`, read by a thread of its
own, so the loop never waits for it. It keeps only the current exchange (for a page that connects in the middle of
one: its ``hello``) and forgets its words ``clear_after_s`` after it ended. Each page gets the messages through its
own bounded queue (:class:`~edgevoice.display.clients.Client`); a page that falls behind is disconnected (its browser
reconnects and starts again from a fresh ``hello``), never waited for.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from edgevoice.clock import Clock, MonotonicClock
from edgevoice.errors import EdgeVoiceError
from edgevoice.live.events import (
    AskedAgain,
    BargeIn,
    ClauseStarted,
    Fallback,
    FallbackReason,
    Listening,
    LoopEvent,
    Partial,
    ReplyFinished,
    ReplyStarted,
    SpeechStarted,
    Transcribed,
    TurnCommitted,
)
from edgevoice.thread_names import name_this_thread

if TYPE_CHECKING:
    from edgevoice.display.clients import Client, Waker
    from edgevoice.live.bus import EventBus, Subscription

log = logging.getLogger(__name__)

SCHEMA = 1
"""The version of the messages (``"v"``): a change that an old page would misread gets a new one."""
FEED_QUEUE = 1024
"""Loop events the feed may fall behind by (its subscription's bound)."""
CLIENT_QUEUE = 256
"""Messages a page may fall behind by before it is disconnected (a minute of a busy conversation)."""
MAX_CLAUSES = 64
"""Clauses of one exchange kept for a page that connects mid-reply (a reply has far fewer)."""
MAX_TEXT = 2000
"""Characters of one transcript or clause sent (a recognizer's runaway transcript is cut)."""
IN_PROGRESS = ("thinking", "speaking")
"""States in which the reply owes the exchange its end: its words are not cleared meanwhile."""

Message = dict[str, object]


class DisplayFull(EdgeVoiceError):
    """As many pages follow the stream as ``[display] max_clients`` allows."""

    code = "display_full"


@dataclass
class Exchange:
    """The exchange on screen: the visitor's words and the reply's clauses heard so far."""

    turn: int
    transcript: str = ""
    clauses: list[str] = field(default_factory=list)
    current: int = -1
    """The clause being played (-1: none yet)."""

    def as_message(self) -> Message:
        return {
            "turn": self.turn,
            "transcript": self.transcript,
            "clauses": list(self.clauses),
            "current": self.current,
        }


class DisplayFeed:
    """Turns the loop's events into the screen's messages and hands them to every page following the stream.

    ``mode``: the activation mode (the page offers a button in any but ``always``); ``examples``: the example
    questions for the idle screen, asked for each new page; ``clock``: when to forget an exchange (a test's
    :class:`~edgevoice.clock.ManualClock`)."""

    def __init__(
        self,
        bus: EventBus | None,
        *,
        mode: str = "always",
        examples: Callable[[], Sequence[str]] = lambda: (),
        clear_after_s: float = 20.0,
        max_clients: int = 16,
        client_queue: int = CLIENT_QUEUE,
        clock: Clock | None = None,
        poll_s: float = 0.5,
    ) -> None:
        self.mode, self.examples, self.clear_after_s = mode, examples, clear_after_s
        self.max_clients, self.client_queue = max_clients, client_queue
        self.clock = clock or MonotonicClock()
        self.poll_s = poll_s
        """How often the feed's thread looks whether an exchange is due to be cleared, with no event coming."""
        self._lock = threading.Lock()
        self._seq = 0
        self._gate_open = False
        self._state = self._resting()
        self._exchange: Exchange | None = None
        self._clear_at: float | None = None
        self._clients: set[Client] = set()
        self.refused = 0
        """Pages refused because ``max_clients`` followed already."""
        self.disconnected = 0
        """Pages disconnected because they fell ``client_queue`` messages behind."""
        self._stop = threading.Event()
        self._subscription: Subscription | None = None
        self._thread: threading.Thread | None = None
        if bus is not None:
            self._subscription = bus.subscribe(name="display", maxsize=FEED_QUEUE)
            self._thread = threading.Thread(target=self._run, name="edgevoice-display", daemon=True)
            self._thread.start()

    # -- the feed's thread -------------------------------------------------------------------------------------------
    def _run(self) -> None:
        name_this_thread("ev-display")
        assert self._subscription is not None
        while not self._stop.is_set():
            event = self._subscription.get(timeout=self.poll_s)
            if event is not None:
                self.handle(event)
            self.tick()

    def close(self, timeout: float = 2.0) -> None:
        """Unsubscribe, end the thread, disconnect every page."""
        self._stop.set()
        if self._subscription is not None:
            self._subscription.close(0.0)
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            clients, self._clients = list(self._clients), set()
        for client in clients:
            client.close()

    # -- events in, messages out -------------------------------------------------------------------------------------
    def handle(self, event: LoopEvent) -> None:
        """One loop event: the state and the exchange follow it, and its messages go to every page."""
        with self._lock:
            for message in self._apply(event):
                self._broadcast(message)

    def tick(self) -> None:
        """Forget the exchange once ``clear_after_s`` passed since it ended (or last changed, a reply aside)."""
        with self._lock:
            if self._clear_at is None or self.clock.now() < self._clear_at:
                return
            self._exchange, self._clear_at = None, None
            self._broadcast({"type": "clear"})
            self._set_state(self._resting())

    def _resting(self) -> str:
        return "listening" if self.mode == "always" or self._gate_open else "idle"

    def _apply(self, event: LoopEvent) -> list[Message]:
        out: list[Message] = []
        match event:
            case Listening(listening):
                self._gate_open = listening
                if listening and self._state in ("idle", "asked_again"):
                    self._set_state("listening", out)
                elif not listening and self._state in ("listening", "hearing"):
                    self._set_state("idle", out)  # a push-to-talk release without speech, a trigger's timeout
                return out
            case SpeechStarted(turn_id, _t):
                self._exchange = Exchange(turn_id)
                self._set_state("hearing", out)
            case Partial(turn_id, text):
                if not text:
                    return out
                exchange = self._exchange_for(turn_id)
                exchange.transcript = text[:MAX_TEXT]
                out.append({"type": "partial", "turn": turn_id, "text": exchange.transcript})
            case TurnCommitted():
                self._exchange_for(event.turn_id)
                self._set_state("thinking", out)
            case Transcribed(turn_id, text):
                exchange = self._exchange_for(turn_id)
                exchange.transcript = text[:MAX_TEXT]
                out.append({"type": "transcript", "turn": turn_id, "text": exchange.transcript})
            case ReplyStarted(turn_id):
                self._exchange_for(turn_id)
                self._set_state("speaking", out)
            case ClauseStarted(turn_id, index, text):
                exchange = self._exchange_for(turn_id)
                if index == len(exchange.clauses) and index < MAX_CLAUSES:
                    exchange.clauses.append(text[:MAX_TEXT])
                exchange.current = index
                out.append({"type": "clause", "turn": turn_id, "index": index, "text": text[:MAX_TEXT]})
            case BargeIn(turn_id):
                out.append({"type": "barge_in", "turn": turn_id})
                self._set_state("hearing", out)
            case Fallback(turn_id, reason) if reason is FallbackReason.ERROR:
                self._exchange_for(turn_id)
                self._set_state("error", out)
            case AskedAgain(turn_id):
                self._exchange_for(turn_id)
                self._set_state("asked_again", out)
            case ReplyFinished():
                if self._exchange is None or self._exchange.turn != event.turn_id:
                    return out  # a reply cut by the visitor's next turn: that one is on screen
                out.append({"type": "end", "turn": event.turn_id})
                if self._state != "asked_again":
                    self._set_state(self._resting(), out)
                self._clear_at = self.clock.now() + self.clear_after_s
                return out
            case _:
                return out
        in_progress = self._state in IN_PROGRESS
        self._clear_at = None if in_progress else self.clock.now() + self.clear_after_s
        return out

    def _exchange_for(self, turn_id: int) -> Exchange:
        if self._exchange is None or self._exchange.turn != turn_id:
            self._exchange = Exchange(turn_id)
        return self._exchange

    def _set_state(self, state: str, out: list[Message] | None = None) -> None:
        if state == self._state:
            return
        self._state = state
        message: Message = {"type": "state", "state": state}
        if out is None:
            self._broadcast(message)
        else:
            out.append(message)

    def _broadcast(self, message: Message) -> None:
        """(Holding the lock.) Number the message and queue it for every page; a page too far behind is dropped."""
        self._seq += 1
        frame = sse_frame(self._seq, {"v": SCHEMA} | message)
        for client in list(self._clients):
            if not client.put(frame):
                self._clients.discard(client)
                self.disconnected += 1
                log.info("display: a page fell %d messages behind and was disconnected", self.client_queue)

    # -- pages -------------------------------------------------------------------------------------------------------
    def attach(self, waker: Waker) -> tuple[Client, str]:
        """A new page: its queue and its first frame (``hello``: the state and the exchange now); raises
        :class:`DisplayFull` past ``max_clients``. ``waker`` wakes the page's task (on its event loop)."""
        from edgevoice.display.clients import Client

        examples = [str(e) for e in self.examples()]
        with self._lock:
            if len(self._clients) >= self.max_clients:
                self.refused += 1
                raise DisplayFull(f"{self.max_clients} pages follow the display already ([display] max_clients)")
            client = Client(self.client_queue, waker)
            self._clients.add(client)
            hello = {
                "v": SCHEMA,
                "type": "hello",
                "mode": self.mode,
                "examples": examples,
                "clear_after_s": self.clear_after_s,
                "state": self._state,
                "exchange": None if self._exchange is None else self._exchange.as_message(),
            }
            return client, sse_frame(self._seq, hello)

    def detach(self, client: Client) -> None:
        with self._lock:
            self._clients.discard(client)
        client.close()

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._clients)

    @property
    def state(self) -> str:
        return self._state

    @property
    def exchange(self) -> Message | None:
        """The exchange kept now (None once cleared)."""
        with self._lock:
            return None if self._exchange is None else self._exchange.as_message()


def sse_frame(seq: int, message: Message) -> str:
    """One Server-Sent Event: its id and one JSON object (no ``event:`` field: every message is a ``message``)."""
    return f"id: {seq}\ndata: {json.dumps(message, ensure_ascii=False, separators=(',', ':'))}\n\n"
