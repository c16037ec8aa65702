"""The quality benchmark's written questions through the model path (``direct_answers = false``) with each reply
check unit (``[kiosk] reply_check``), the language model's replies generated once and replayed to both.

Greedy decoding gives a prompt one reply; replaying it makes the comparison exact: the two units see the same
model output, so every difference in the answers is the check's. Also prints, for the checked replies, how many of
the model's tokens came before the first words were released. Usage:
``python scripts/reply_check_quality.py [--split dev|test|both] [--venue all|sample|DIR]``
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgevoice.bench.cli import venues
from edgevoice.bench.venue_quality import VenueOptions, run_venues
from edgevoice.config import Config
from edgevoice.engines.llamacpp import LlamaCppModel
from edgevoice.events import ChatMessage
from edgevoice.kiosk.grounded_model import GroundedModel
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.models.configured import model_store

UNITS = ("sentence", "clause")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="both", choices=("dev", "test", "both"))
    parser.add_argument("--venue", action="append", default=[])
    parser.add_argument("--threads", type=int, default=Config().llm.threads, help="the language model's threads")
    parser.add_argument("--replies", type=Path, help="keep the generated replies in this file (a rerun reuses them)")
    args = parser.parse_args()

    generate = LlamaCppModel.stream_reply
    replies: dict[Any, list[str]] = {}
    if args.replies is not None and args.replies.is_file():
        replies = {(tuple(map(tuple, k)), n): v for k, n, v in json.loads(args.replies.read_text())}
    given = [0]

    def replayed(self: LlamaCppModel, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        key = (tuple((m.role, m.content) for m in messages), max_tokens)
        if key not in replies:
            replies[key] = list(generate(self, messages, max_tokens=max_tokens))
            if args.replies is not None:
                args.replies.write_text(json.dumps([[k, n, v] for (k, n), v in replies.items()]))
        for piece in replies[key]:
            given[0] += 1
            yield piece

    first_release: dict[str, list[int]] = {unit: [] for unit in UNITS}
    unit_now = [UNITS[0]]
    answer = GroundedModel.stream_reply

    def counted(self: GroundedModel, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        given[0] = 0
        released = False
        for piece in answer(self, messages, max_tokens=max_tokens):
            if piece and not released:
                released = True
                grounding = self.last_grounding
                answered = self.last_verdict not in (Verdict.GATE, Verdict.DIRECT, Verdict.SMALL_TALK)
                if given[0] and grounding is not None and answered:
                    first_release[unit_now[0]].append(given[0])
            yield piece

    LlamaCppModel.stream_reply = replayed  # type: ignore[method-assign]
    GroundedModel.stream_reply = counted  # type: ignore[method-assign]
    base = Config()
    store = model_store(base)
    reports = {}
    for unit in UNITS:
        unit_now[0] = unit
        config = replace(
            base,
            kiosk=replace(base.kiosk, direct_answers=False, reply_check=unit),
            llm=replace(base.llm, threads=args.threads),
        )
        options = VenueOptions(split=args.split, written_only=True)
        reports[unit] = run_venues(config, store, venues(args.venue or ["all"]), options, progress=print)
    print("\nvenue      split  n   right facts (sentence / clause)  don't know  invented")
    for a, b in zip(reports["sentence"]["rows"], reports["clause"]["rows"], strict=True):
        print(
            f"{a['venue']:<10} {a['split']:<5} {a['n']:>3}  "
            f"{a['right_facts_percent']!s:>6} / {b['right_facts_percent']!s:<6}                "
            f"{a['dont_know_percent']!s:>5} / {b['dont_know_percent']!s:<5}"
            f"  {a['invented']} / {b['invented']}"
        )
    changed = [
        (a["venue"], a["id"], a["reply"], b["reply"])
        for a, b in zip(reports["sentence"]["items"], reports["clause"]["items"], strict=True)
        if a["reply"] != b["reply"]
    ]
    print(f"\n{len(changed)} replies differ:")
    for venue, qid, a, b in changed:
        print(f"  {venue}/{qid}:\n    sentence: {a}\n    clause:   {b}")
    for unit, counts in first_release.items():
        if counts:
            print(
                f"{unit}: checked replies {len(counts)}, model tokens before the first release: "
                f"median {statistics.median(counts)}, mean {statistics.mean(counts):.1f}, max {max(counts)}"
            )


if __name__ == "__main__":
    main()
