// The kiosk screen's script: follows the appliance's event stream (/events, schema in docs/display.md) and draws
// what the kiosk is doing, the visitor's words and the reply clause by clause; in push-to-talk, trigger and wake-word
// modes it offers a talk button that posts to /talk. Plain script, no build step, nothing from the network.
"use strict";

(function () {
  const STATES = {
    idle: "Ready",
    listening: "Listening…",
    hearing: "Hearing you…",
    thinking: "Thinking…",
    speaking: "Speaking",
    asked_again: "Please say that again",
    error: "Sorry, something went wrong",
  };
  const IDLE_TITLES = {
    always: "Ask me a question",
    push_to_talk: "Hold the button and ask a question",
    trigger: "Press the button and ask a question",
    wake_word: "Say the wake word, or press the button",
  };
  const BUTTON_LABELS = { push_to_talk: "Hold to talk", trigger: "Tap to talk", wake_word: "Tap to talk" };
  const KEPT = 200; // messages and captions kept for tests and measurements: a page left open for days stays small
  const RETRY_MS = [1000, 2000, 5000, 10000, 30000]; // when the browser gives up (an HTTP error such as 503)
  const FADE_MS = 600; // the exchange's text is removed once it has faded out (display.css --fade, and a margin)

  const $ = (id) => document.getElementById(id);
  const body = document.body;
  const debug = { messages: [], captions: [], connected: false };
  window.edgevoiceDisplay = debug;

  let mode = "always";
  let turn = null; // the exchange on screen
  let source = null;
  let failures = 0;
  let retryTimer = null;
  let emptyTimer = null;
  let talkQueue = Promise.resolve(); // posts to /talk go one after another: a release never overtakes its press
  let held = false;

  function keep(list, item) {
    list.push(item);
    if (list.length > KEPT) list.splice(0, list.length - KEPT);
  }

  function setState(state) {
    if (!Object.hasOwn(STATES, state)) return;
    body.dataset.state = state;
    $("state-label").textContent = STATES[state];
  }

  function showIdle(examples) {
    if (Array.isArray(examples)) {
      const list = $("examples");
      list.replaceChildren(...examples.filter((e) => typeof e === "string").map((text) => {
        const item = document.createElement("li");
        item.textContent = text;
        return item;
      }));
      $("examples-intro").hidden = list.children.length === 0;
    }
    body.dataset.view = "idle";
    turn = null;
    clearTimeout(emptyTimer);
    emptyTimer = setTimeout(emptyExchange, FADE_MS); // what was said stays on screen for this exchange only
  }

  function emptyExchange() {
    $("partial").textContent = "";
    $("transcript").textContent = "";
    $("reply").replaceChildren();
    $("reply").classList.remove("cut");
    $("heard-title").hidden = true;
    $("reply-title").hidden = true;
  }

  function exchangeFor(n) {
    // A message of another turn than the one on screen starts a new exchange.
    if (turn !== n || body.dataset.view !== "exchange") {
      clearTimeout(emptyTimer);
      if (turn !== n) emptyExchange();
      turn = n;
      body.dataset.view = "exchange";
    }
  }

  function heard(text, final) {
    $("heard-title").hidden = false;
    if (final) {
      $("partial").textContent = "";
      $("transcript").textContent = text;
    } else if (!$("transcript").textContent) {
      $("partial").textContent = text;
    }
  }

  function markCurrent(index) {
    const reply = $("reply");
    for (const clause of reply.children) {
      const current = Number(clause.dataset.index) === index;
      clause.classList.toggle("current", current);
      if (current) clause.setAttribute("aria-current", "true");
      else clause.removeAttribute("aria-current");
    }
    const clause = reply.querySelector(".current");
    if (clause) {
      // keep the clause being spoken in sight: a long reply scrolls up inside its box, never the page
      const bottom = clause.offsetTop - reply.offsetTop + clause.offsetHeight;
      if (bottom > reply.scrollTop + reply.clientHeight) reply.scrollTop = bottom - reply.clientHeight;
    }
  }

  function addClause(index, text, current) {
    const reply = $("reply");
    $("reply-title").hidden = false;
    let span = reply.querySelector(`[data-index="${index}"]`);
    if (!span) {
      span = document.createElement("span");
      span.className = "clause";
      span.dataset.index = String(index);
      const after = [...reply.children].find((c) => Number(c.dataset.index) > index);
      reply.insertBefore(span, after || null);
    }
    span.textContent = text + " ";
    if (current) markCurrent(index);
  }

  function hello(m) {
    release(); // a button held across a restart: the new service never saw its press, and a release does no harm
    mode = Object.hasOwn(IDLE_TITLES, m.mode) ? m.mode : "always";
    $("idle-title").textContent = IDLE_TITLES[mode];
    setupButton();
    emptyExchange();
    showIdle(m.examples || []);
    const ex = m.exchange;
    if (ex && typeof ex === "object") {
      clearTimeout(emptyTimer);
      exchangeFor(ex.turn);
      if (typeof ex.transcript === "string" && ex.transcript) heard(ex.transcript, true);
      (Array.isArray(ex.clauses) ? ex.clauses : []).forEach((text, i) => addClause(i, String(text), false));
      if (Number.isInteger(ex.current)) markCurrent(ex.current);
    }
    setState(m.state);
  }

  function handle(m) {
    switch (m.type) {
      case "hello": hello(m); break;
      case "state": setState(m.state); break;
      case "partial": exchangeFor(m.turn); heard(String(m.text), false); break;
      case "transcript": exchangeFor(m.turn); heard(String(m.text), true); break;
      case "clause":
        if (!Number.isInteger(m.index) || m.index < 0) break;
        exchangeFor(m.turn);
        addClause(Number(m.index), String(m.text), true);
        keep(debug.captions, { turn: m.turn, index: m.index, text: m.text, at: performance.now() });
        break;
      case "barge_in": if (m.turn === turn) { markCurrent(-1); $("reply").classList.add("cut"); } break;
      case "end": if (m.turn === turn) markCurrent(-1); break;
      case "clear": showIdle(null); break;
      default: break; // a newer server's type: ignored (the schema's promise)
    }
  }

  function onMessage(event) {
    let m;
    try {
      m = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    if (!m || typeof m !== "object" || typeof m.type !== "string") return;
    keep(debug.messages, m);
    handle(m);
  }

  function connecting(state) {
    body.dataset.connection = state;
    debug.connected = state === "open";
  }

  function connect() {
    retryTimer = null;
    source = new EventSource("/events");
    source.onopen = () => { failures = 0; connecting("open"); };
    source.onmessage = onMessage;
    source.onerror = () => {
      connecting(body.dataset.connection === "connecting" ? "connecting" : "reconnecting");
      if (source.readyState === EventSource.CLOSED && retryTimer === null) {
        // the browser retries a dropped stream itself, but not one refused (e.g. 503 display_full): retry later
        source = null;
        retryTimer = setTimeout(connect, RETRY_MS[Math.min(failures, RETRY_MS.length - 1)]);
        failures += 1;
      }
    };
  }

  function talk(action) {
    talkQueue = talkQueue.then(() => fetch("/talk", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ action }),
    })).catch(() => undefined); // the state shown says whether the kiosk listens; a failed post changes nothing
  }

  function press() {
    if (held) return;
    held = true;
    $("talk").setAttribute("aria-pressed", "true");
    talk("press");
  }

  function release() {
    if (!held) return;
    held = false;
    $("talk").setAttribute("aria-pressed", "false");
    talk("release");
  }

  function setupButton() {
    const button = $("talk");
    button.hidden = mode === "always";
    button.textContent = BUTTON_LABELS[mode] || "";
    if (mode === "push_to_talk") button.setAttribute("aria-pressed", held ? "true" : "false");
    else button.removeAttribute("aria-pressed");
  }

  function wireButton() {
    const button = $("talk");
    button.addEventListener("pointerdown", (e) => {
      if (mode !== "push_to_talk" || e.button !== 0) return;
      e.preventDefault();
      press();
    });
    for (const name of ["pointerup", "pointercancel", "pointerleave"]) {
      button.addEventListener(name, () => { if (mode === "push_to_talk") release(); });
    }
    button.addEventListener("keydown", (e) => {
      if (mode !== "push_to_talk" || (e.key !== " " && e.key !== "Enter")) return;
      e.preventDefault();
      if (!e.repeat) press();
    });
    button.addEventListener("keyup", (e) => {
      if (mode === "push_to_talk" && (e.key === " " || e.key === "Enter")) release();
    });
    button.addEventListener("blur", () => { if (mode === "push_to_talk") release(); });
    button.addEventListener("click", () => { if (mode === "trigger" || mode === "wake_word") talk("trigger"); });
    button.addEventListener("contextmenu", (e) => e.preventDefault()); // a long touch is a held button, not a menu
  }

  wireButton();
  emptyExchange();
  connect();
})();
