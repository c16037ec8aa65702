"""The answer gate alone over the benchmark venues' questions: per venue and split, what the grounding stage decides
before any language model runs.

Each venue becomes a kiosk (its knowledge and persona, the configured sentence encoder, loaded once), and each
question is grounded as the reply path grounds it (:meth:`~edgevoice.kiosk.grounding.Kiosk.ground`). An entry is
*right* for a question when its own text holds every fact group the question's answer needs (the benchmark's
``has_fact``). Counted, for the questions with facts (fact, paraphrase, neighbour, number; follow-ups need the
conversation and are left out):

* **direct ok / direct wrong**: an entry's answer read out, from a right entry or from another one (a wrong
  neighbour read out: always a lost fact);
* **model top1**: passed to the model with a right entry ranked first (the hint the model sees);
* **model**: passed to the model with no right entry first (the knowledge is in its prompt all the same);
* **stopped**: "I don't know" at the gate: always a lost fact.

and for the questions the knowledge does not answer (out, near_miss): **stopped** (right), **direct** (an entry read
out: always wrong), **model** (left to the model to decline). Seconds a venue, not the quality benchmark's hour: no
language model, no voices. ``--show`` lists the development half's losses (the test half is only counted: it is never
read while tuning). Usage, from the checkout's root: ``PYTHONPATH=. python scripts/gate_eval.py [--venue
all|sample|DIR]... [--show]``
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import replace

from edgevoice.app import build_kiosk, load_embedder
from edgevoice.bench.cli import venues
from edgevoice.bench.scoring import has_fact
from edgevoice.bench.venue import SPLITS
from edgevoice.bench.venue_quality import venue_config
from edgevoice.config import Config

ANSWERABLE = ("fact", "paraphrase", "neighbour", "number")
UNANSWERABLE = ("out", "near_miss")


def outcome(kiosk, question) -> str:  # type: ignore[no-untyped-def]
    """What the gate does with one question (see the module's doc)."""
    grounding = kiosk.ground(question.text)
    if question.kind in UNANSWERABLE:
        if not grounding.known:
            return "stopped"
        return "direct" if grounding.direct is not None else "model"
    if not grounding.known:
        return "stopped"
    right = [e for e in kiosk.entries if has_fact(f"{e.question} {e.answer}", question.facts)]
    if grounding.direct is not None:
        return "direct ok" if any(grounding.direct == e.answer for e in right) else "direct wrong"
    return "model top1" if grounding.entries and grounding.entries[0] in right else "model"


COLUMNS = ("direct ok", "model top1", "model", "direct wrong", "stopped")


def row(venue: str, split: str, facts: Counter[str], unknown: Counter[str]) -> str:
    counts = "".join(f"{facts[c]:>13}" for c in COLUMNS)
    n, m = sum(facts.values()), sum(unknown.values())
    return f"{venue:<9} {split:<5} {n:<7}{counts}   {m}: {unknown['stopped']}/{unknown['model']}/{unknown['direct']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venue", action="append", default=[])
    parser.add_argument("--show", action="store_true", help="list the development half's losses")
    args = parser.parse_args()

    config = Config()
    config = replace(config, kiosk=replace(config.kiosk, mend_misheard=False))
    embedder = load_embedder(config)
    totals: dict[str, Counter[str]] = {f"{s} {k}": Counter() for s in SPLITS for k in ("facts", "unknown")}
    header = "".join(f"{c:>13}" for c in COLUMNS)
    print(f"{'venue':<9} {'split':<5} {'facts:':<7}{header}   unknown: stopped/model/direct")
    for venue in venues(args.venue or ["all"]):
        kiosk = build_kiosk(venue_config(config, venue), embedder=embedder)
        for split in SPLITS:
            asked = [q for q in venue.questions if q.split == split and q.kind in ANSWERABLE + UNANSWERABLE]
            decided = {q.id: outcome(kiosk, q) for q in asked}
            facts = Counter(decided[q.id] for q in asked if q.kind in ANSWERABLE)
            unknown = Counter(decided[q.id] for q in asked if q.kind in UNANSWERABLE)
            totals[f"{split} facts"] += facts
            totals[f"{split} unknown"] += unknown
            print(row(venue.name, split, facts, unknown))
            if args.show and split == "dev":
                for q in asked:
                    lost = decided[q.id] in ("direct wrong", "stopped", "model") if q.kind in ANSWERABLE else None
                    if lost or (decided[q.id] == "direct" and q.kind in UNANSWERABLE):
                        print(f"    {decided[q.id]}: {q.text!r} ({q.kind})")
    for split in SPLITS:
        print(row("all", split, totals[f"{split} facts"], totals[f"{split} unknown"]))


if __name__ == "__main__":
    main()
