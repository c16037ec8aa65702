"""The display as a run starts it: its feed on the loop's bus, its app, served by uvicorn on ``[display] listen``
(off by default), closed together."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence

from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.server import AdminServer
from edgevoice.config import DisplayConfig
from edgevoice.display.app import create_display_app
from edgevoice.display.feed import DisplayFeed
from edgevoice.errors import EdgeVoiceError
from edgevoice.live.activation import Activation
from edgevoice.live.bus import EventBus

log = logging.getLogger(__name__)


@dataclasses.dataclass
class DisplayHandle:
    """The display of a run: its feed and its server."""

    feed: DisplayFeed
    server: AdminServer

    def close(self) -> None:
        self.feed.close()  # every page's stream ends first, so the server stops at once
        self.server.close()


def example_questions(questions: Iterable[str], count: int) -> list[str]:
    """The first ``count`` distinct questions of the knowledge that read as questions (ending with "?")."""
    seen: dict[str, str] = {}
    for question in questions:
        text = " ".join(question.split())
        if text.endswith("?") and text.lower() not in seen and len(seen) < count:
            seen[text.lower()] = text
    return list(seen.values())


def start_display(
    config: DisplayConfig, bus: EventBus, activation: Activation, questions: Callable[[], Sequence[str]]
) -> DisplayHandle | None:
    """The display as ``[display]`` configures it; None when it is off or cannot listen (logged: the kiosk answers
    without its screen). ``questions``: the knowledge's questions now (the examples come from them)."""
    listen = config.listen
    if not listen or listen == "off":
        return None
    feed = DisplayFeed(
        bus,
        mode=activation.mode.value,
        examples=lambda: example_questions(questions(), config.examples),
        clear_after_s=config.clear_after_s,
        max_clients=config.max_clients,
    )
    app = create_display_app(feed, hosts=ServedHosts.for_listen(listen, config.hosts), activation=activation)
    try:
        server = AdminServer(app, listen, token=False, name="display")
    except (OSError, EdgeVoiceError) as exc:
        log.warning("display: cannot listen on %s (%s); it is not served", listen, exc)
        feed.close()
        return None
    return DisplayHandle(feed, server)
