"""``edgevoice bench --quality --learn``: a venue's first weeks. Day 1 the development half is asked and reviewed by a
scripted operator; day 2 the test half is asked, never reviewed.

Per venue the kiosk is measured in stages (each item's ``stage``):

* ``before``: the knowledge as written; both halves asked (day 1 and day 2).
* ``reviewed``: day 1's misses (a question with facts answered wrongly or refused) attached, each to its right entry
  (:func:`~edgevoice.bench.entry_labels.right_entry`), as the operator would in the review inbox: what the kiosk
  heard, the transcript, becomes another way of asking that entry. Written and spoken are reviewed apart (a spoken
  day 1 is reviewed on every voice's and condition's transcripts together). Day 2 asked again.
* with ``--compiled``: ``compiled`` (the knowledge with its compiled ways of asking; both halves) and
  ``compiled+reviewed`` (the same review, on the compiled kiosk's day 1).

A follow-up ("and on Sundays?") is not attached: out of its conversation it names no entry. A question whose right
entry cannot be told (its facts fit several entries and no ``entry`` label settles it) is counted, not attached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from edgevoice.bench.entry_labels import right_entry
from edgevoice.bench.venue import ANSWERABLE, Venue
from edgevoice.bench.venue_quality import (
    WRITTEN,
    Conversations,
    VenueOptions,
    answer_venue,
    condition_name,
    summarize,
    transcribe_venue,
    venue_config,
)
from edgevoice.config import Config
from edgevoice.errors import ConfigError
from edgevoice.events import Transcript
from edgevoice.kiosk.knowledge import Entry
from edgevoice.models.store import ModelStore

__all__ = [
    "BEFORE",
    "REVIEWED",
    "Compiled",
    "finished_compile",
    "format_learning",
    "review",
    "run_learning",
    "stage_rows",
]

BEFORE, REVIEWED, COMPILED, COMPILED_REVIEWED = "before", "reviewed", "compiled", "compiled+reviewed"
POOLED = "pooled"

Compiled = Callable[[Venue, Config], Mapping[str, Sequence[str]]]
"""A venue's compiled ways of asking its entries, by :attr:`Entry.key <edgevoice.kiosk.knowledge.Entry.key>` (from a
finished compile's cache)."""


@dataclass(frozen=True)
class Review:
    """What a scripted operator attached after day 1: questions by entry key, and the misses left alone."""

    asked: dict[str, tuple[str, ...]]
    attached: int
    follow_ups: int
    """Misses that were follow-ups (not attached)."""
    unlabelled: int
    """Misses whose right entry cannot be told (not attached)."""


def review(venue: Venue, entries: Sequence[Entry], day1: Sequence[dict[str, Any]]) -> Review:
    """Each day-1 miss (a question with facts whose reply lacks them) attached to its right entry, as heard."""
    asked: dict[str, dict[str, None]] = {}
    attached = follow_ups = unlabelled = 0
    for item in day1:
        if item["kind"] not in ANSWERABLE or item["right"] or not item["heard"].strip():
            continue
        question = venue.question(item["id"])
        if question.after:
            follow_ups += 1
            continue
        try:
            index = right_entry(question, entries)
        except ConfigError:
            unlabelled += 1
            continue
        if index is None:
            continue
        key = entries[index].key
        if item["heard"] not in asked.setdefault(key, {}):
            asked[key][item["heard"]] = None
            attached += 1
    return Review({k: tuple(v) for k, v in asked.items()}, attached, follow_ups, unlabelled)


def _joined(*parts: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, dict[str, None]] = {}
    for part in parts:
        for key, questions in part.items():
            out.setdefault(key, {}).update(dict.fromkeys(questions))
    return {k: tuple(v) for k, v in out.items()}


def finished_compile(venue: Venue, config: Config) -> Mapping[str, Sequence[str]]:
    """The compiled ways of asking of ``venue``'s knowledge, from a finished compile's cache (``--compiled``; made by
    ``edgevoice knowledge compile venues/NAME/knowledge.md --persona venues/NAME/persona.txt``)."""
    from edgevoice.app import load_embedder
    from edgevoice.kiosk.embedding_cache import encoder_identity
    from edgevoice.kiosk.grounding import Kiosk
    from edgevoice.knowledge_compile import finished_compile as finished
    from edgevoice.models.configured import model_store

    store = model_store(config)
    entries = Kiosk(venue.persona, venue.knowledge).source_entries
    kept = finished(config, store, entries, encoder_identity(load_embedder(config, store)) or "")
    if kept is None:
        raise ConfigError(
            f"--compiled: venue {venue.name!r} has no finished compile in the cache; make it with: edgevoice "
            "knowledge compile KNOWLEDGE_FILE --persona PERSONA_FILE",
            code="compile_missing",
        )
    return kept


def run_learning(
    config: Config,
    store: ModelStore,
    venues: Sequence[Venue],
    options: VenueOptions,
    *,
    compiled: Compiled | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Every venue's first weeks (see the module's doc), written and (unless written only) spoken; the report as plain
    data, JSON-ready: the items (each with its ``stage``), rows per venue, stage and input, and the venues pooled."""
    started = time.perf_counter()
    report: dict[str, Any] = {
        "learn": True,
        "compiled": compiled is not None,
        "voices": [] if options.written_only else list(options.voices),
        "conditions": [] if options.written_only else [condition_name(c) for c in options.conditions],
        "models": {"asr": config.models.asr, "llm": config.models.llm},
        "reviews": [],
        "items": [],
    }
    for venue in venues:
        items, reviews = learn_venue(config, store, venue, options, compiled, progress)
        report["items"] += items
        report["reviews"] += reviews
    report["rows"] = stage_rows(report["items"])
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def learn_venue(
    config: Config,
    store: ModelStore,
    venue: Venue,
    options: VenueOptions,
    compiled: Compiled | None,
    progress: Callable[[str], None],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One venue's scored items in every stage, and what each review attached."""
    from edgevoice.app import build_kiosk
    from edgevoice.app_engines import open_llm
    from edgevoice.kiosk.grounding import Kiosk

    config = venue_config(config, venue)
    day1, day2 = venue.in_split("dev", options.per_kind), venue.in_split("test", options.per_kind)
    plain = build_kiosk(config, store=store)
    heard: dict[tuple[str, str], dict[str, Transcript]] = {
        (WRITTEN, ""): {q.id: Transcript(q.text) for q in venue.questions}
    }
    if not options.written_only:
        heard |= transcribe_venue(config, store, plain, venue, (*day1, *day2), options, progress)

    def kiosk(asked: Mapping[str, Sequence[str]]) -> Kiosk:
        return Kiosk.from_config(config, embedder=plain.embedder, phonemize=plain.phonemize, asked=asked)

    llm = open_llm(config, store, n_gpu_layers=0)  # the quality benchmark answers on the CPU
    items: list[dict[str, Any]] = []
    reviews: list[dict[str, Any]] = []

    def ask(stage: str, at: Kiosk, questions: Sequence[Any], only: set[str] | None = None) -> list[dict[str, Any]]:
        grounded = at.grounded(llm)
        llm.prefill(at.prefix)
        conversations = Conversations(config, at, grounded)
        out: list[dict[str, Any]] = []
        for (voice, condition), texts in heard.items():
            if only is not None and voice not in only:
                continue
            progress(f"{venue.name} {stage}: answering {len(questions)} questions ({voice} {condition})".rstrip())
            found = answer_venue(venue, questions, voice, condition, texts, conversations.ask, conversations.read_outs)
            out += [{**i, "stage": stage} for i in found]
        return out

    def reviewed(stage: str, base: Mapping[str, Sequence[str]], first: Sequence[dict[str, Any]]) -> None:
        for inputs in ({WRITTEN}, {v for v, _ in heard} - {WRITTEN}):
            if not inputs:
                continue
            done = review(venue, plain.entries, [i for i in first if i["voice"] in inputs])
            reviews.append({"venue": venue.name, "stage": stage, "inputs": sorted(inputs), "attached": done.attached,
                            "follow_ups": done.follow_ups, "unlabelled": done.unlabelled})  # fmt: skip
            items.extend(ask(stage, kiosk(_joined(base, done.asked)), day2, inputs))

    try:
        first = ask(BEFORE, plain, (*day1, *day2))
        items += first
        reviewed(REVIEWED, {}, [i for i in first if i["split"] == "dev"])
        if compiled is not None:
            ways = compiled(venue, config)
            first = ask(COMPILED, kiosk(ways), (*day1, *day2))
            items += first
            reviewed(COMPILED_REVIEWED, ways, [i for i in first if i["split"] == "dev"])
    finally:
        llm.close()
    return items, reviews


def stage_rows(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows per venue (then the venues pooled), stage, split and input (spoken: all voices together)."""
    rows: list[dict[str, Any]] = []
    venues = list(dict.fromkeys(i["venue"] for i in items))
    for venue in [*venues, POOLED] if len(venues) > 1 else venues:
        for stage in dict.fromkeys(i["stage"] for i in items):
            for split in ("dev", "test"):
                for input_name in dict.fromkeys(i["input"] for i in items):
                    group = [
                        i
                        for i in items
                        if venue in (POOLED, i["venue"])
                        and (i["stage"], i["split"], i["input"]) == (stage, split, input_name)
                    ]
                    if group:
                        rows.append({"venue": venue, "stage": stage, "split": split, "input": input_name,
                                     **summarize(group)})  # fmt: skip
    return rows


def format_learning(report: dict[str, Any]) -> str:
    """The table of ``--learn``: one row per venue (and pooled), stage, split and input."""
    from edgevoice.bench.quality_report import _f

    lines = [
        f"A venue's first weeks (models {report['models']['asr']}, {report['models']['llm']}): day 1 = dev (reviewed"
        " by a scripted operator), day 2 = test (never reviewed).",
        f"  {'venue':<10} {'stage':<18} {'split':<5} {'input':<15} {'right facts':>11} {'dont know':>10}"
        f" {'small talk':>10} {'invented':>8} {'wrong entry':>11} {'wrong subject':>13} {'n':>5}",
    ]
    for row in report["rows"]:
        lines.append(
            f"  {row['venue']:<10} {row['stage']:<18} {row['split']:<5} {row['input']:<15}"
            f" {_f(row['right_facts_percent']):>11} {_f(row['dont_know_percent']):>10}"
            f" {_f(row['small_talk_percent']):>10} {row['invented']:>8} {row.get('wrong_entry', 0):>11}"
            f" {row.get('wrong_subject', 0):>13} {row['n']:>5}"
        )
    attached = sum(r["attached"] for r in report["reviews"])
    skipped = sum(r["unlabelled"] for r in report["reviews"])
    follow = sum(r["follow_ups"] for r in report["reviews"])
    lines.append(
        f"reviews: {attached} questions attached; {follow} follow-ups and {skipped} without a single right entry left"
        f" ({report['seconds']:.0f} s)"
    )
    return "\n".join(lines)
