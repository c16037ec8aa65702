"""Fit the learned read-out (:mod:`edgevoice.kiosk.read_out`) on the development halves of the benchmark venues and
write ``edgevoice/data/en/read_out.toml``.

Every question of the development halves (answerable or not; small talk and follow-ups left out) gives one row: the
ranking's features, and whether the entry ranked first holds every fact its answer needs. The threshold is chosen
by leaving one venue out: fitted on the other venues' development halves, the lowest threshold at which the held-out
venues' development halves get no more out-of-knowledge questions read out than the rules alone read out. The test
halves are then reported the same way (each venue by a fit on the others) and never used to choose anything.
Usage, from the checkout's root: ``OMP_NUM_THREADS=1 PYTHONPATH=. python scripts/fit_read_out.py [--write]``
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import tomli_w

from edgevoice.app import load_embedder
from edgevoice.bench.cli import venues
from edgevoice.bench.scoring import has_fact
from edgevoice.bench.venue_quality import venue_config
from edgevoice.config import Config
from edgevoice.kiosk.embedding_cache import encoder_identity
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.read_out import fit
from edgevoice.kiosk.semantic import Embedder

ANSWERABLE = ("fact", "paraphrase", "neighbour", "number")
UNANSWERABLE = ("out", "near_miss")
THRESHOLDS = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98)
OUT = Path(__file__).resolve().parent.parent / "edgevoice" / "data" / "en" / "read_out.toml"


@dataclass(frozen=True)
class Row:
    venue: str
    split: str
    answerable: bool
    features: np.ndarray
    right: bool
    """The entry ranked first holds every fact group of the question's answer."""
    left_to_model: bool
    """The rules pass the question and read nothing out: only then does the read-out decide."""
    rules_read_out: bool


def rules_only(config: Config, embedder: Embedder) -> Kiosk:
    """The kiosk ``config`` describes, its gate without the learned read-out."""
    k = config.kiosk
    return Kiosk(
        k.persona, config.knowledge_text(), grounding_threshold=k.grounding_threshold,
        retrieve_entries=k.retrieve_entries, direct_answers=k.direct_answers, embedder=embedder,
        learned_read_out=False,
    )  # fmt: skip


def rows(config: Config) -> list[Row]:
    embedder = load_embedder(config)
    out = []
    for venue in venues(["all"]):
        kiosk = rules_only(venue_config(config, venue), embedder)
        matcher = kiosk.matcher
        for q in venue.questions:
            if q.kind not in ANSWERABLE + UNANSWERABLE:
                continue
            features = matcher.read_out_features(q.text)
            assert features is not None
            grounding = kiosk.ground(q.text)
            top = grounding.entries[0] if grounding.entries else None
            right = top is not None and q.kind in ANSWERABLE and has_fact(f"{top.question} {top.answer}", q.facts)
            out.append(
                Row(venue.name, q.split, q.kind in ANSWERABLE, features, right,
                    grounding.known and grounding.direct is None, grounding.direct is not None)
            )  # fmt: skip
    return out


def held_out(data: list[Row], split: str, encoder: str) -> dict[float, tuple[int, int]]:
    """For each threshold: (answers read out right, out-of-knowledge questions read out) added to the rules' on the
    ``split`` halves, each venue decided by a fit on the other venues' development halves."""
    added = dict.fromkeys(THRESHOLDS, (0, 0))
    for venue in sorted({r.venue for r in data}):
        train = [r for r in data if r.venue != venue and r.split == "dev"]
        model = fit([r.features for r in train], [r.right for r in train], encoder=encoder, threshold=0.5)
        for r in data:
            if r.venue != venue or r.split != split or not r.left_to_model:
                continue
            p = model.probability(r.features)
            for t in THRESHOLDS:
                if p >= t:
                    ok, wrong = added[t]
                    added[t] = (ok + (r.answerable and r.right), wrong + (not r.answerable))
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    args = parser.parse_args()
    config = Config()
    config = replace(config, kiosk=replace(config.kiosk, mend_misheard=False))
    encoder = encoder_identity(load_embedder(config))
    assert encoder is not None
    data = rows(config)
    for split in ("dev", "test"):
        part = [r for r in data if r.split == split]
        facts = sum(r.answerable for r in part)
        rules = sum(r.rules_read_out and r.answerable and r.right for r in part)
        wrong = sum(r.rules_read_out and not r.answerable for r in part)
        print(f"{split}: {facts} questions with facts; the rules read out {rules} right, {wrong} unknowns")
        for t, (ok, bad) in held_out(data, split, encoder).items():
            print(f"  threshold {t}: + {ok} right, + {bad} unknowns read out (each venue fitted on the others)")
    added = held_out(data, "dev", encoder)
    threshold = min(t for t in THRESHOLDS if added[t][1] == 0)
    dev = [r for r in data if r.split == "dev"]
    model = fit([r.features for r in dev], [r.right for r in dev], encoder=encoder, threshold=threshold)
    print(f"chosen on the development halves: threshold {threshold}")
    if args.write:
        header = (
            "# The learned read-out (edgevoice/kiosk/read_out.py), written by scripts/fit_read_out.py from the\n"
            "# development halves of the benchmark venues: do not edit by hand, run the script again.\n\n"
        )
        OUT.write_text(header + tomli_w.dumps(model.as_table()), encoding="utf-8")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
