"""Measure the words' end-of-turn verdict (:mod:`edgevoice.engines.text_turn`) on the benchmark venues' questions:
each whole question (a finished sentence) and the same question cut after a random word (half a sentence, as heard
at a pause in mid-sentence). The threshold is chosen on the development halves, as the highest of
:data:`THRESHOLDS` that holds up at most 2.5 % of the whole questions, and reported on the test halves.
Usage, from the checkout's root: ``PYTHONPATH=. python scripts/text_turn_eval.py``
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from edgevoice.app import load_engines
from edgevoice.bench.cli import venues
from edgevoice.config import Config

THRESHOLDS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.1)
HELD_UP = 0.025


def main() -> None:
    show = "--show" in sys.argv  # the whole questions it would hold up at 0.02
    engines, _ = load_engines(Config())
    judge = engines.llm.end_of_turn_model()  # type: ignore[attr-defined]
    rng = random.Random(1)
    scores: dict[str, list[tuple[bool, float]]] = {"dev": [], "test": []}
    took = []
    for venue in venues(["all"]):
        for q in venue.questions:
            said = q.text.split()
            cases = [(q.text, True)]
            if len(said) >= 3:  # cut after two words or more, before the last
                cases.append((" ".join(said[: rng.randint(2, len(said) - 1)]), False))
            for text, whole in cases:
                t = time.perf_counter()
                scores[q.split].append((whole, judge.probability_complete(text)))
                if show and whole and scores[q.split][-1][1] < 0.02:
                    print(f"  {q.split} whole, {scores[q.split][-1][1]:.4f}: {text}")
                took.append(time.perf_counter() - t)
    print(f"{len(took)} verdicts, median {statistics.median(took) * 1000:.0f} ms each")
    for split, rows in scores.items():
        whole = [p for w, p in rows if w]
        cut = [p for w, p in rows if not w]
        print(f"{split}: {len(whole)} whole questions, {len(cut)} cut")
        for t in THRESHOLDS:
            held = sum(p < t for p in whole)
            caught = sum(p < t for p in cut)
            print(f"  below {t}: whole held up {held} ({100 * held / len(whole):.1f} %), "
                  f"cut caught {caught} ({100 * caught / len(cut):.1f} %)")  # fmt: skip
    dev_whole = [p for w, p in scores["dev"] if w]
    chosen = max(t for t in THRESHOLDS if sum(p < t for p in dev_whole) <= HELD_UP * len(dev_whole))
    print(f"chosen on the development halves: {chosen}")


if __name__ == "__main__":
    main()
