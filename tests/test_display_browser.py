"""The kiosk screen (edgevoice/display/static/) in a real browser: Debian's chromium, headless, driven over its
DevTools pipe against a stand-in for the display's server (tests/display_stand_in.py) on a loopback port, whose
event stream each test scripts message by message."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.display_stand_in import STATIC, StandIn, hello
from tests.test_admin_browser import DevTools, share_of

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/setup adds it)"),
]

EXAMPLES = ("When do you open?", "Where is the cafe?", "Is there a cloakroom?")
BACKGROUNDS = {"light": (0xF7, 0xF6, 0xF2), "dark": (0x0D, 0x11, 0x17)}
"""The page's background in each colour scheme (display.css)."""
MARKS = {"light": (0xFF, 0xE6, 0x80), "dark": (0xFF, 0xD5, 0x4A)}
"""The current clause's highlight."""
SIZES = ((800, 1280), (1920, 1080), (3840, 2160))


def wait_for(browser: DevTools, condition: str, timeout_s: float = 20.0) -> None:
    """Until the JavaScript ``condition`` holds in the page (checked every 20 ms there), or fail after ``timeout_s``."""
    expression = f"""new Promise((resolve) => {{
      const until = performance.now() + {timeout_s * 1000};
      const check = () => {{
        let ok = false;
        try {{ ok = Boolean({condition}); }} catch (e) {{}}
        if (ok || performance.now() > until) resolve(ok); else setTimeout(check, 20);
      }};
      check();
    }})"""
    result = browser.send(
        "Runtime.evaluate", session=True, expression=expression, awaitPromise=True, returnByValue=True
    )
    assert result["result"].get("value") is True, f"never true in the page: {condition}\n{state_of(browser)}"


def state_of(browser: DevTools) -> object:
    return browser.evaluate(
        "JSON.stringify({state: document.body.dataset.state, view: document.body.dataset.view,"
        " connection: document.body.dataset.connection, debug: window.edgevoiceDisplay,"
        " main: document.querySelector('main').innerText})"
    )


def values(browser: DevTools, expression: str) -> list[Any]:
    """The JavaScript array that ``expression`` gives."""
    result = browser.evaluate(expression)
    assert isinstance(result, list), f"{expression}: {result!r}"
    return result


def text(browser: DevTools, selector: str) -> str:
    return str(browser.evaluate(f"document.querySelector({json.dumps(selector)}).textContent"))


def settled(browser: DevTools) -> None:
    """Until no fade is running (the state dot's pulse, which never ends, aside)."""
    wait_for(
        browser,
        "document.getAnimations()"
        ".every(a => a.playState !== 'running' || a.effect.getTiming().iterations === Infinity)",
    )


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    server = StandIn(hello("always", EXAMPLES))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Browser(DevTools):
    """chromium over DevTools, keeping the events that :meth:`DevTools.wait_event` reads past (a page's errors while it
    loads among them)."""

    def __init__(self, tmp_path: Path) -> None:
        self.passed: list[dict[str, object]] = []
        super().__init__(tmp_path)

    def wait_event(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read())
        self.passed.extend(self.events)
        self.events.clear()

    def faults(self) -> list[object]:
        """The page's uncaught errors and Content-Security-Policy refusals so far."""
        self.send("Runtime.evaluate", session=True, expression="0")  # the events sent until now are read
        return [
            e["params"]
            for e in [*self.passed, *self.events]
            if e.get("method") == "Runtime.exceptionThrown"
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["source"] in ("security", "javascript"))  # type: ignore[index]
        ]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    """chromium; the page's uncaught errors and Content-Security-Policy refusals fail the test."""
    driver = Browser(tmp_path)
    try:
        driver.send("Runtime.enable", session=True)
        driver.send("Log.enable", session=True)
        yield driver
        assert driver.faults() == []
    finally:
        driver.close()


def open_page(browser: DevTools, stand_in: StandIn, connections: int = 1) -> None:
    browser.load("Page.navigate", url=f"{stand_in.url}/")
    stand_in.wait_connections(connections)
    wait_for(browser, "window.edgevoiceDisplay.connected && document.body.dataset.state === 'idle'")


def test_an_exchange_shows_the_words_then_the_reply_clause_by_clause(stand_in: StandIn, browser: DevTools) -> None:
    open_page(browser, stand_in)
    assert browser.evaluate("[...document.querySelectorAll('#examples li')].map(e => e.textContent)") == list(EXAMPLES)
    assert browser.evaluate("document.body.dataset.view") == "idle"
    assert browser.evaluate("document.getElementById('talk').getClientRects().length") == 0  # always: no button

    stand_in.send({"v": 1, "type": "state", "state": "listening"})
    wait_for(browser, "document.body.dataset.state === 'listening'")
    assert text(browser, "#state-label") == "Listening…"
    stand_in.send({"v": 1, "type": "state", "state": "hearing"})
    stand_in.send({"v": 1, "type": "partial", "turn": 3, "text": "where is"})
    wait_for(browser, "document.getElementById('partial').textContent === 'where is'")
    assert browser.evaluate("document.body.dataset.state") == "hearing"
    assert browser.evaluate("document.body.dataset.view") == "exchange"
    stand_in.send("not json {")  # a broken message and a newer server's type are passed over
    stand_in.send({"v": 1, "type": "a_type_from_the_future", "turn": 3, "text": "ignore me"})
    stand_in.send({"v": 1, "type": "state", "state": "constructor"})  # not a state, though every object has one
    stand_in.send({"v": 1, "type": "partial", "turn": 3, "text": "where is the cafe"})
    stand_in.send({"v": 1, "type": "transcript", "turn": 3, "text": "Where is the cafe?"})
    wait_for(browser, "document.getElementById('transcript').textContent === 'Where is the cafe?'")
    assert text(browser, "#partial") == ""  # the final words replace the partial ones
    assert "ignore me" not in str(browser.evaluate("document.body.innerText"))
    assert (
        browser.evaluate("document.body.dataset.state") == "hearing" and text(browser, "#state-label") == "Hearing you…"
    )

    stand_in.send({"v": 1, "type": "state", "state": "thinking"})
    stand_in.send({"v": 1, "type": "state", "state": "speaking"})
    clauses = ["The cafe is upstairs,", "next to the shop.", "It opens at nine."]
    current = "[...document.querySelectorAll('#reply .clause')].map(c => c.classList.contains('current'))"
    for index, clause in enumerate(clauses):
        stand_in.send({"v": 1, "type": "clause", "turn": 3, "index": index, "text": clause})
        wait_for(browser, f"document.querySelectorAll('#reply .clause').length === {index + 1}")
        assert browser.evaluate(current) == [i == index for i in range(index + 1)]  # only this one marked
        assert browser.evaluate("document.querySelector('#reply [aria-current=true]').textContent") == clause + " "
    assert browser.evaluate("document.body.dataset.state") == "speaking"
    assert text(browser, "#reply") == " ".join(clauses) + " "
    captions = browser.evaluate("window.edgevoiceDisplay.captions")
    assert isinstance(captions, list)
    assert [(c["turn"], c["index"], c["text"]) for c in captions] == [(3, i, c) for i, c in enumerate(clauses)]
    times = [c["at"] for c in captions]
    assert times == sorted(times)
    assert browser.evaluate("document.getElementById('captions').getAttribute('aria-live')") == "polite"

    stand_in.send({"v": 1, "type": "end", "turn": 3})
    wait_for(browser, "document.querySelectorAll('#reply .current').length === 0")
    stand_in.send({"v": 1, "type": "state", "state": "idle"})
    stand_in.send({"v": 1, "type": "clear"})
    wait_for(browser, "document.body.dataset.view === 'idle' && document.getElementById('reply').children.length === 0")
    settled(browser)
    # what was said is gone from the page, not only hidden: the screen is public
    body = str(browser.evaluate("document.body.textContent"))
    assert "cafe is upstairs" not in body and "Where is the cafe?" in body  # (that one is an example)
    assert browser.evaluate("document.getElementById('idle').checkVisibility()") is True
    assert browser.evaluate("document.getElementById('exchange').checkVisibility({visibilityProperty: true})") is False
    types = [m["type"] for m in values(browser, "window.edgevoiceDisplay.messages")]
    assert types[0] == "hello" and types[-2:] == ["state", "clear"] and "a_type_from_the_future" in types


def test_a_barge_in_stops_marking_and_a_new_turn_replaces_the_exchange(stand_in: StandIn, browser: DevTools) -> None:
    open_page(browser, stand_in)
    stand_in.send({"v": 1, "type": "transcript", "turn": 1, "text": "Tell me everything"})
    stand_in.send({"v": 1, "type": "clause", "turn": 1, "index": 0, "text": "We have a cafe,"})
    wait_for(browser, "document.querySelectorAll('#reply .current').length === 1")
    stand_in.send({"v": 1, "type": "barge_in", "turn": 1})
    wait_for(browser, "document.getElementById('reply').classList.contains('cut')")
    assert browser.evaluate("document.querySelectorAll('#reply .current').length") == 0
    stand_in.send({"v": 1, "type": "partial", "turn": 2, "text": "when do"})
    wait_for(browser, "document.getElementById('partial').textContent === 'when do'")
    assert text(browser, "#transcript") == "" and text(browser, "#reply") == ""
    assert browser.evaluate("document.getElementById('reply').classList.contains('cut')") is False


def test_hello_with_an_exchange_shows_it_with_its_current_clause(stand_in: StandIn, browser: DevTools) -> None:
    stand_in.hello = hello(
        "always",
        EXAMPLES,
        state="speaking",
        exchange={"turn": 5, "transcript": "Is it open?", "clauses": ["Yes,", "until six."], "current": 1},
    )
    browser.load("Page.navigate", url=f"{stand_in.url}/")
    wait_for(browser, "document.body.dataset.state === 'speaking'")
    assert browser.evaluate("document.body.dataset.view") == "exchange"
    assert text(browser, "#transcript") == "Is it open?"
    assert text(browser, "#reply .current") == "until six. "


@pytest.mark.parametrize("pointer", ["mouse", "touch"])
def test_push_to_talk_posts_press_then_release(stand_in: StandIn, browser: DevTools, pointer: str) -> None:
    stand_in.hello = hello("push_to_talk", EXAMPLES)
    open_page(browser, stand_in)
    assert text(browser, "#talk") == "Hold to talk"
    x, y = centre(browser, "#talk")
    if pointer == "mouse":
        browser.send(
            "Input.dispatchMouseEvent", session=True, type="mousePressed", x=x, y=y, button="left", clickCount=1
        )
        wait_for(browser, "document.getElementById('talk').getAttribute('aria-pressed') === 'true'")
        assert stand_in.wait_posts(1) == [{"action": "press"}]
        browser.send(
            "Input.dispatchMouseEvent", session=True, type="mouseReleased", x=x, y=y, button="left", clickCount=1
        )
    else:
        browser.send("Emulation.setTouchEmulationEnabled", session=True, enabled=True, maxTouchPoints=1)
        browser.send("Input.dispatchTouchEvent", session=True, type="touchStart", touchPoints=[{"x": x, "y": y}])
        assert stand_in.wait_posts(1) == [{"action": "press"}]
        browser.send("Input.dispatchTouchEvent", session=True, type="touchEnd", touchPoints=[])
    assert stand_in.wait_posts(2) == [{"action": "press"}, {"action": "release"}]
    assert {origin for _, origin in stand_in.posts} == {stand_in.url}  # the real server checks the Origin
    assert browser.evaluate("document.getElementById('talk').getAttribute('aria-pressed')") == "false"


def test_the_keyboard_holds_the_push_to_talk_button_too(stand_in: StandIn, browser: DevTools) -> None:
    stand_in.hello = hello("push_to_talk", EXAMPLES)
    open_page(browser, stand_in)
    browser.evaluate("document.getElementById('talk').focus()")
    for kind in ("keyDown", "keyDown", "keyUp"):  # the second keyDown is the key's auto-repeat
        browser.send(
            "Input.dispatchKeyEvent",
            session=True,
            type=kind,
            key=" ",
            code="Space",
            windowsVirtualKeyCode=32,
            autoRepeat=kind == "keyDown" and bool(stand_in.posts),
        )
        if kind == "keyDown":
            stand_in.wait_posts(1)
    assert stand_in.wait_posts(2) == [{"action": "press"}, {"action": "release"}]


@pytest.mark.parametrize("mode", ["trigger", "wake_word"])
def test_a_click_triggers_a_turn(stand_in: StandIn, browser: DevTools, mode: str) -> None:
    stand_in.hello = hello(mode, EXAMPLES)
    open_page(browser, stand_in)
    assert text(browser, "#talk") == "Tap to talk"
    x, y = centre(browser, "#talk")
    for kind in ("mousePressed", "mouseReleased"):
        browser.send("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1)
    assert stand_in.wait_posts(1) == [{"action": "trigger"}]


def centre(browser: DevTools, selector: str) -> tuple[float, float]:
    box = browser.evaluate(
        f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2, r.width, r.height]; })()"
    )
    assert isinstance(box, list) and box[2] > 100 and box[3] > 40, f"no large button: {box}"
    return float(box[0]), float(box[1])


def test_the_page_reconnects_after_the_server_restarts(stand_in: StandIn, browser: DevTools) -> None:
    open_page(browser, stand_in)
    stand_in.send({"v": 1, "type": "state", "state": "speaking"})
    stand_in.send({"v": 1, "type": "transcript", "turn": 1, "text": "Where is the lift?"})
    stand_in.send({"v": 1, "type": "clause", "turn": 1, "index": 0, "text": "Behind you."})
    wait_for(browser, "document.querySelectorAll('#reply .clause').length === 1")
    assert (
        browser.evaluate("document.getElementById('connection').checkVisibility({visibilityProperty: true})") is False
    )

    stand_in.stop()
    wait_for(browser, "document.body.dataset.connection === 'reconnecting' && !window.edgevoiceDisplay.connected")
    assert browser.evaluate("document.getElementById('connection').checkVisibility({visibilityProperty: true})") is True
    assert text(browser, "#connection") == "Reconnecting…"

    stand_in.hello = hello("trigger", ("Where can I park?",))  # the service came back with another configuration
    stand_in.start()
    stand_in.wait_connections(2)
    wait_for(browser, "window.edgevoiceDisplay.connected && document.body.dataset.connection === 'open'")
    wait_for(browser, "document.body.dataset.view === 'idle' && document.body.dataset.state === 'idle'")
    assert browser.evaluate("[...document.querySelectorAll('#examples li')].map(e => e.textContent)") == [
        "Where can I park?"
    ]
    settled(browser)
    assert "Behind you" not in str(browser.evaluate("document.body.textContent"))  # the hello reset the screen
    assert browser.evaluate("document.getElementById('talk').checkVisibility()") is True
    assert (
        browser.evaluate("document.getElementById('connection').checkVisibility({visibilityProperty: true})") is False
    )


def test_a_refused_stream_is_tried_again(stand_in: StandIn, browser: Browser) -> None:
    """A browser gives up on an event stream answered with an HTTP error (here 503 display_full, a display followed
    by too many pages); the page asks again by itself, later."""
    stand_in.refuse = 2
    browser.load("Page.navigate", url=f"{stand_in.url}/")
    stand_in.wait_connections(1)
    wait_for(browser, "window.edgevoiceDisplay.connected && document.body.dataset.state === 'idle'")
    assert stand_in.refused == 2
    assert browser.evaluate("[...document.querySelectorAll('#examples li')].map(e => e.textContent)") == list(EXAMPLES)


def test_a_page_left_open_keeps_the_same_size(stand_in: StandIn, browser: Browser) -> None:
    """Exchange after exchange: what the page keeps for tests is bounded, and each exchange replaces the last."""
    open_page(browser, stand_in)
    size = "[window.edgevoiceDisplay.messages.length, window.edgevoiceDisplay.captions.length,"
    size += " document.getElementsByTagName('*').length]"
    nodes = values(browser, size)[2]
    for turn in range(1, 61):
        stand_in.send({"v": 1, "type": "transcript", "turn": turn, "text": f"Question {turn}?"})
        for index in range(4):
            stand_in.send({"v": 1, "type": "clause", "turn": turn, "index": index, "text": f"Part {index}."})
        stand_in.send({"v": 1, "type": "end", "turn": turn})
    stand_in.send({"v": 1, "type": "clear"})
    wait_for(browser, "window.edgevoiceDisplay.messages.at(-1).type === 'clear'")
    wait_for(browser, "document.body.dataset.view === 'idle' && !document.getElementById('reply').firstChild")
    assert values(browser, size) == [200, 200, nodes]  # 361 messages and 240 captions were received
    last = values(browser, "window.edgevoiceDisplay.captions.slice(-1).map(c => [c.turn, c.index])")
    assert last == [[60, 3]]


VISIBLE_TEXT = """(() => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    const own = [...el.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!own || !el.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
    const r = el.getBoundingClientRect();
    if (r.width < 2 || r.height < 2) continue;  // visually hidden (headings for screen readers)
    const style = getComputedStyle(el);
    let bg = null;
    for (let a = el; a; a = a.parentElement) {
      const c = rgb(getComputedStyle(a).backgroundColor);
      if (c.length === 3 || c[3] > 0) { bg = c; break; }
    }
    out.push({text: el.textContent.trim().slice(0, 40), color: rgb(style.color), background: bg,
              size: parseFloat(style.fontSize), wide: el.scrollWidth, box: el.clientWidth,
              display: style.display});
  }
  return out;
})()"""


WIDER_THAN_THEIR_BOX = """[...document.querySelectorAll('body *')]
  .filter(e => e.checkVisibility() && e.clientWidth > 2 && e.scrollWidth > e.clientWidth)  // 1 px: visually hidden
  .map(e => `${e.id || e.tagName}: ${e.scrollWidth} px in ${e.clientWidth}`)"""
REPLY_HTML = "document.getElementById('reply').innerHTML"


def luminance(colour: list[float]) -> float:
    channels = [c / 255 for c in colour[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(foreground: list[float], background: list[float]) -> float:
    """WCAG 2.1's contrast ratio; a translucent foreground is first laid over its background."""
    alpha = foreground[3] if len(foreground) == 4 else 1.0
    mixed = [alpha * f + (1 - alpha) * b for f, b in zip(foreground[:3], background[:3], strict=True)]
    high, low = sorted((luminance(mixed), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_is_computed_as_wcag_defines_it() -> None:
    assert contrast([0, 0, 0], [255, 255, 255]) == pytest.approx(21.0)
    assert contrast([0x77, 0x77, 0x77], [255, 255, 255]) == pytest.approx(4.48, abs=0.01)  # the classic near-miss
    assert contrast([0, 0, 0, 0.5], [255, 255, 255]) < 4.5


def check_text(browser: DevTools, where: str) -> int:
    texts = browser.evaluate(VISIBLE_TEXT)
    assert isinstance(texts, list) and texts, where
    for t in texts:
        assert t["background"] is not None and len(t["background"]) == 3, f"{where}: {t}"  # an opaque background
        ratio = contrast(t["color"], t["background"])
        assert ratio >= 4.5, f"{where}: {t['text']!r} has a contrast of {ratio:.2f}: {t}"
        if t["display"] != "inline":
            assert t["wide"] <= t["box"], f"{where}: {t['text']!r} overflows its box: {t}"
    return len(texts)


def check_overflow(browser: DevTools, where: str) -> None:
    for element in ("document.documentElement", "document.body"):
        wide, box = values(browser, f"[{element}.scrollWidth, {element}.clientWidth]")
        assert wide <= box, f"{where}: {element} is {wide} px wide in {box} px"
    high, box = values(browser, "[document.documentElement.scrollHeight, document.documentElement.clientHeight]")
    assert high <= box, f"{where}: the page is {high} px high in {box} px"
    # nor inside a box that hides its overflow (the reply's does, to scroll the current clause into sight)
    assert values(browser, WIDER_THAN_THEIR_BOX) == [], where


@pytest.mark.slow
def test_three_sizes_in_light_and_dark_fit_the_screen_with_aa_contrast(
    stand_in: StandIn, browser: DevTools, tmp_path: Path
) -> None:
    from PIL import Image

    stand_in.hello = hello("push_to_talk", (*EXAMPLES, "Can I bring my dog inside the building with me?"))
    open_page(browser, stand_in)
    for width, height in SIZES:
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        for scheme in ("light", "dark"):
            where = f"{width}x{height} {scheme}"
            browser.send(
                "Emulation.setEmulatedMedia", session=True, features=[{"name": "prefers-color-scheme", "value": scheme}]
            )
            wait_for(browser, f"matchMedia('(prefers-color-scheme: {scheme})').matches && innerWidth === {width}")
            settled(browser)
            check_overflow(browser, f"{where} idle")
            assert check_text(browser, f"{where} idle") >= 6  # the state, the title, the examples, the button
            pixels = browser.screenshot()
            Image.fromarray(pixels.astype(np.uint8)).save(tmp_path / f"idle-{width}x{height}-{scheme}.png")
            assert share_of(pixels, BACKGROUNDS[scheme], 2) > 0.5, f"{where}: not the {scheme} background"

            turn = width + (scheme == "dark")
            stand_in.send({"v": 1, "type": "state", "state": "speaking"})
            stand_in.send({"v": 1, "type": "transcript", "turn": turn, "text": "Tell me about the venue " * 6})
            stand_in.send(
                {"v": 1, "type": "clause", "turn": turn, "index": 0, "text": "https://example.invalid/" + "x" * 120}
            )
            for i in range(1, 15):
                clause = f"Clause {i} of turn {turn}, a long reply that goes on and on about the venue,"
                stand_in.send({"v": 1, "type": "clause", "turn": turn, "index": i, "text": clause})
            wait_for(browser, f"document.querySelector('#reply .current')?.textContent === {json.dumps(clause + ' ')}")
            settled(browser)
            check_overflow(browser, f"{where} exchange")
            check_text(browser, f"{where} exchange")
            # the clause being spoken is on screen even when the reply is longer than its box
            inside = browser.evaluate(
                "(() => { const c = document.querySelector('#reply .current').getBoundingClientRect();"
                " const r = document.getElementById('reply').getBoundingClientRect();"
                " return c.top >= r.top - 1 && c.bottom <= r.bottom + 1 && c.bottom <= innerHeight; })()"
            )
            assert inside is True, f"{where}: {state_of(browser)} {browser.evaluate(REPLY_HTML)}"
            size = browser.evaluate("parseFloat(getComputedStyle(document.getElementById('reply')).fontSize)")
            assert isinstance(size, float | int) and size >= 0.04 * min(width, height), f"{where}: {size} px type"

            pixels = browser.screenshot()
            Image.fromarray(pixels.astype(np.uint8)).save(tmp_path / f"display-{width}x{height}-{scheme}.png")
            assert pixels.shape[:2] == (height, width)
            assert share_of(pixels, BACKGROUNDS[scheme], 2) > 0.4, f"{where}: not the {scheme} background"
            assert share_of(pixels, MARKS[scheme], 2) > 0.001, f"{where}: the current clause is not marked"
            stand_in.send({"v": 1, "type": "end", "turn": turn})
            stand_in.send({"v": 1, "type": "state", "state": "idle"})
            stand_in.send({"v": 1, "type": "clear"})
            wait_for(browser, "document.body.dataset.view === 'idle' && !document.getElementById('reply').firstChild")


def test_reduced_motion_stops_the_fades_and_the_pulse(stand_in: StandIn, browser: DevTools) -> None:
    open_page(browser, stand_in)
    stand_in.send({"v": 1, "type": "state", "state": "listening"})
    wait_for(browser, "document.body.dataset.state === 'listening'")
    motion = (
        "[getComputedStyle(document.getElementById('exchange')).transitionDuration,"
        " getComputedStyle(document.getElementById('state-dot')).animationName]"
    )
    fade, pulse = values(browser, motion)
    assert fade != "0s" and pulse == "pulse"  # so that the check below can fail
    browser.send(
        "Emulation.setEmulatedMedia", session=True, features=[{"name": "prefers-reduced-motion", "value": "reduce"}]
    )
    wait_for(browser, "matchMedia('(prefers-reduced-motion: reduce)').matches")
    assert browser.evaluate(motion) == ["0s", "none"]


def test_the_page_loads_nothing_from_elsewhere(stand_in: StandIn, browser: DevTools) -> None:
    for path in STATIC.iterdir():
        source = path.read_text()
        assert not re.search(r"https?:|//[a-z0-9]|@import|url\(", source, re.I), f"{path.name} names a resource"
    open_page(browser, stand_in)
    loaded = browser.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert isinstance(loaded, list) and loaded
    assert all(name.startswith(stand_in.url + "/") for name in loaded), loaded
    assert browser.evaluate("document.documentElement.lang") == "en"
    assert browser.evaluate("[...document.querySelectorAll('h1')].length") == 1


def test_chromium_with_the_kiosk_units_flags_opens_the_page(stand_in: StandIn, tmp_path: Path) -> None:
    """The flags of packaging/edgevoice-display.service, headless, on the stand-in's address instead of 8470 (its URL
    given plainly: headless chromium opens no ``--app`` window to dump)."""
    from tests.test_display_packaging import PAGE, UNIT, unit_settings

    program, *flags = shlex.split(unit_settings(UNIT)["ExecStart"][0])
    assert f"--app={PAGE}" in flags
    flags.remove(f"--app={PAGE}")
    dom = subprocess.run(
        [
            program,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            *flags,
            f"{stand_in.url}/",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    ).stdout
    # dumped when the page has loaded, before its stream's first message perhaps (the other tests follow that)
    assert '<html lang="en">' in dom and 'id="captions" aria-live="polite"' in dom and 'id="talk"' in dom
