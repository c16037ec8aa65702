"""Wrong-entry read-outs at the grounding stage, without any language model: per venue and split, which entry the
kiosk would read out for each question, against the question's right entry (``entry_labels.right_entry``).

Each venue becomes a kiosk (its knowledge and persona, the configured sentence encoder loaded once) and each question
is grounded as the reply path grounds it: a follow-up with the question asked before it
(:meth:`~edgevoice.kiosk.grounding.Kiosk.ground_follow_up`). Counted:

* **questions with facts**: ``read ok`` (the right entry read out), ``read wrong`` (another entry read out: a
  wrong-entry read-out), ``model top1`` / ``model other`` (left to the model with the right entry ranked first, or
  another: an echo would read that one out), ``stopped`` ("I don't know" at the gate);
* **questions without** (out, near_miss, small_talk): ``read`` (an entry read out: always a wrong-entry read-out),
  ``told`` (the near-miss form: the refusal, then what the nearest entry says), ``model``, ``refused`` (the plain
  refusal), ``chat`` (a small-talk reply).

Echoes and the model's numbers need the model: ``edgevoice bench --quality --venue ... --written-only`` counts those.
``--show`` lists the development half's wrong read-outs and model-other questions (the test half is only counted: it
is never read while tuning). Usage, from the checkout's root: ``PYTHONPATH=. python scripts/read_out_eval.py
[--venue all|sample|DIR]... [--show] [--mend]``
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import replace

from edgevoice.app import build_kiosk, load_embedder
from edgevoice.bench.cli import venues
from edgevoice.bench.subjects import Subjects, told_near_miss
from edgevoice.bench.venue import SPLITS
from edgevoice.bench.venue_quality import venue_config
from edgevoice.config import Config
from edgevoice.kiosk.knowledge import parse_knowledge

FACT_COLUMNS = ("read ok", "read wrong", "model top1", "model other", "stopped")
NONE_COLUMNS = ("read", "told", "model", "refused", "chat")


def outcome(kiosk, subjects, venue, question) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """What the grounding does with one question, and the entry it would read out (see the module's doc)."""
    previous = venue.question(question.after).text if question.after else None
    grounding = kiosk.ground_follow_up(question.text, previous)
    right = subjects.right(question)
    top = grounding.entries[0] if grounding.entries else None
    read = grounding.direct_entry
    said = read.question if read is not None else (top.question if top is not None else "")
    if grounding.small_talk is not None:
        return "chat", ""
    if not grounding.known:
        if right is not None:
            return "stopped", said
        return ("told" if told_near_miss(kiosk.refusal(grounding)) else "refused"), said
    if right is None:
        return ("read" if grounding.direct is not None else "model"), said
    if grounding.direct is not None:
        return ("read ok" if read is not None and read.key == right.key else "read wrong"), said
    return ("model top1" if top is not None and top.key == right.key else "model other"), said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venue", action="append", default=[])
    parser.add_argument("--show", action="store_true", help="list the development half's wrong read-outs")
    parser.add_argument("--mend", action="store_true", help="mend misheard venue words (espeak-ng), as the kiosk")
    args = parser.parse_args()

    config = Config()
    config = replace(config, kiosk=replace(config.kiosk, mend_misheard=args.mend))
    embedder = load_embedder(config)
    totals: dict[str, Counter[str]] = {s: Counter() for s in SPLITS}
    facts_head = "".join(f"{c:>12}" for c in FACT_COLUMNS)
    none_head = "".join(f"{c:>8}" for c in NONE_COLUMNS)
    print(f"{'venue':<9} {'split':<5} {'facts':>5}{facts_head} | {'none':>4}{none_head} | wrong reads")
    for venue in venues(args.venue or ["all"]):
        kiosk = build_kiosk(venue_config(config, venue), embedder=embedder)
        subjects = Subjects.of(parse_knowledge(venue.knowledge))
        for split in SPLITS:
            asked = [q for q in venue.questions if q.split == split]
            decided = {q.id: outcome(kiosk, subjects, venue, q) for q in asked}
            counts = Counter(decided[q.id][0] for q in asked)
            totals[split] += counts
            print(line(venue.name, split, counts))
            if args.show and split == "dev":
                for q in asked:
                    what, said = decided[q.id]
                    if what in ("read wrong", "read", "model other"):
                        right = subjects.right(q)
                        named = right.question if right else "-"
                        print(f"    {what}: {q.text!r} ({q.kind}) -> {said!r}, right: {named!r}")
    for split in SPLITS:
        print(line("all", split, totals[split]))


def line(venue: str, split: str, counts: Counter[str]) -> str:
    facts = "".join(f"{counts[c]:>12}" for c in FACT_COLUMNS)
    none = "".join(f"{counts[c]:>8}" for c in NONE_COLUMNS)
    n_facts, n_none = sum(counts[c] for c in FACT_COLUMNS), sum(counts[c] for c in NONE_COLUMNS)
    return f"{venue:<9} {split:<5} {n_facts:>5}{facts} | {n_none:>4}{none} | {counts['read wrong'] + counts['read']}"


if __name__ == "__main__":
    main()
