"""The small-talk detector alone over every question of the benchmark venues: per venue and split, how many small-talk
questions are taken for small talk, and how many other questions are (false positives).

Each venue becomes a kiosk (its knowledge and persona, the configured sentence encoder, loaded once); a question is
taken for small talk when :meth:`~edgevoice.kiosk.grounding.Kiosk.ground` gives it a small-talk reply, as the reply
path does. Seconds rather than the quality benchmark's minutes: no language model, no voices. ``--show`` lists the
development half's misses and false positives (the test half is only counted: it is never read while tuning).
Usage, from the checkout's root (``PYTHONPATH=.`` so that this checkout's package runs; ``OMP_NUM_THREADS=1`` on a
busy machine): ``PYTHONPATH=. python scripts/small_talk_detect.py [--venue all|sample|DIR]... [--words-only] [--show]``
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from edgevoice.app import build_kiosk, load_embedder
from edgevoice.bench.cli import venues
from edgevoice.bench.venue import SPLITS
from edgevoice.bench.venue_quality import venue_config
from edgevoice.config import Config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venue", action="append", default=[])
    parser.add_argument("--words-only", action="store_true", help="no sentence encoder: the patterns alone")
    parser.add_argument("--show", action="store_true", help="list the development half's misses and false positives")
    args = parser.parse_args()

    config = Config()
    config = replace(config, kiosk=replace(config.kiosk, mend_misheard=False, semantic=not args.words_only))
    embedder = None if args.words_only else load_embedder(config)
    totals = {s: [0, 0, 0, 0] for s in SPLITS}  # found, small talk, false positives, other questions
    print(f"{'venue':<10} {'split':<5} {'small talk':>10} {'false pos.':>12}")
    for venue in venues(args.venue or ["all"]):
        kiosk = build_kiosk(venue_config(config, venue), embedder=embedder)
        for split in SPLITS:
            asked = [q for q in venue.questions if q.split == split]
            taken = {q.id: kiosk.ground(q.text).small_talk is not None for q in asked}
            chat = [q for q in asked if q.kind == "small_talk"]
            other = [q for q in asked if q.kind != "small_talk"]
            found = sum(taken[q.id] for q in chat)
            false = [q for q in other if taken[q.id]]
            counts = (found, len(chat), len(false), len(other))
            totals[split] = [a + b for a, b in zip(totals[split], counts, strict=True)]
            print(f"{venue.name:<10} {split:<5} {found:>5}/{len(chat):<4} {len(false):>5}/{len(other):<6}")
            if args.show and split == "dev":
                for q in chat:
                    if not taken[q.id]:
                        print(f"    missed: {q.text!r} ({q.small_talk})")
                for q in false:
                    print(f"    false positive: {q.text!r} ({q.kind})")
    for split, (found, n, false, other) in totals.items():
        print(f"{'all':<10} {split:<5} {found:>5}/{n:<4} {false:>5}/{other:<6}")


if __name__ == "__main__":
    main()
