#!/usr/bin/env python3
"""Replay the written replies of earlier `edgevoice bench --quality --venue ... --json` reports through this checkout's
kiosk, and print right facts, honest don't-know and invented values before and after, per venue and split.

    .venv/bin/python scripts/replay_checks.py hotel.json library.json

Each item's spoken reply is handed to the kiosk as the language model's reply, so the gate, the direct answers and
the reply check decide again without running the model: a quick measure of a change to the checks on real model
replies (not of a change to the prompt, which would change the replies themselves). Follow-ups are asked alone.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

from edgevoice.app import build_kiosk
from edgevoice.bench.cli import venues
from edgevoice.bench.scoring import is_dont_know
from edgevoice.bench.venue import ANSWERABLE, DONT_KNOW
from edgevoice.bench.venue_quality import score_reply, venue_config
from edgevoice.config import Config
from edgevoice.events import ChatMessage
from edgevoice.kiosk.prompt import conversation
from edgevoice.models.store import ModelStore


class Scripted:
    """Says ``reply`` word by word, as a model streams."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        for i, word in enumerate(self.reply.split(" ")):
            yield word if i == 0 else " " + word


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", type=Path, nargs="+")
    args = parser.parse_args()
    by_name = {v.name: v for v in venues(["all"])}
    store, embedder = ModelStore(), None
    counts: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    changed = []
    for path in args.reports:
        items = [i for i in json.loads(path.read_text())["items"] if i["input"] == "written"]
        for name in dict.fromkeys(i["venue"] for i in items):
            venue = by_name[name]
            kiosk = build_kiosk(venue_config(Config(), venue), store=store, embedder=embedder)
            embedder = kiosk.semantic.embedder if kiosk.semantic is not None else embedder
            for item in (i for i in items if i["venue"] == name):
                question = venue.question(item["id"])
                grounded = kiosk.grounded(Scripted(item["reply"]))  # type: ignore[arg-type]
                turn = conversation(kiosk.prefix, [], item["heard"])
                new = "".join(grounded.stream_reply(turn, max_tokens=60))
                for when, reply in (("before", item["reply"]), ("after", new)):
                    score = score_reply(question, reply, venue.knowledge)
                    c = counts[(name, item["split"], when)]
                    c["answerable"] += question.kind in ANSWERABLE
                    c["right"] += question.kind in ANSWERABLE and bool(score["right"])
                    c["out"] += question.kind in DONT_KNOW
                    c["dont_know"] += question.kind in DONT_KNOW and is_dont_know(reply)
                    c["invented"] += bool(score["invented"])
                if new != item["reply"] and item["by"] != "direct":
                    changed.append(f"{name}/{item['split']}/{item['id']}: {item['reply']!r} -> {new!r}")
    print(f"{'venue':10} {'split':5} {'':6} {'right':>7} {'dont-know':>9} {'invented':>8}")
    for (name, split, when), c in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] == "after")):
        right, dont_know = f"{c['right']}/{c['answerable']}", f"{c['dont_know']}/{c['out']}"
        print(f"{name:10} {split:5} {when:6} {right:>7} {dont_know:>9} {c['invented']:>8}")
    print("\nReplies that changed (direct answers aside):", *changed, sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
