"""The knowledge compile's checks measured on the benchmark venues' development halves: how many written questions
each check keeps, and what the kept ones change at the answer gate (no language model runs here: the questions come
from the compile cache, written earlier by ``edgevoice knowledge compile venues/NAME/knowledge.md --persona
venues/NAME/persona.txt``).

Per venue, for the entries the cache has records for: the questions written, and those kept by each check alone
(judged, near miss, ranked) and by all three. Then the development half's questions with facts and without (out,
near_miss) are grounded as ``scripts/gate_eval.py`` grounds them, by a kiosk on the knowledge as written and by one
with each check set's kept questions in its entries' ``asked``: the outcome columns are gate_eval's (direct ok, model
top1, model, direct wrong, stopped; unknowns stopped/model/direct). The test halves are never read. ``--show`` lists
examples of kept and rejected questions. Usage, from the checkout's root, with the cache the compile wrote
(``EDGEVOICE_CACHE_DIR``): ``PYTHONPATH=. python scripts/compile_eval.py [--venue NAME]... [--show]``
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import replace

from gate_eval import ANSWERABLE, COLUMNS, UNANSWERABLE, outcome

from edgevoice.app import build_kiosk, load_embedder
from edgevoice.bench.cli import venues
from edgevoice.bench.venue_quality import venue_config
from edgevoice.config import Config
from edgevoice.kiosk.compiled import CompileCache
from edgevoice.kiosk.compiler import PROMPT_VERSION, Generated, check_questions, new_words
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.knowledge_compile import compile_cache_dir, generator_identity
from edgevoice.models.configured import model_store

CHECK_SETS: dict[str, tuple[str, ...]] = {
    "none": (),
    "judged": ("judged",),
    "near miss": ("near miss",),
    "ranked": ("ranked",),
    "all": ("judged", "near miss", "ranked"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venue", action="append", default=[])
    parser.add_argument("--show", action="store_true", help="examples of kept and rejected questions")
    args = parser.parse_args()
    config = Config()
    config = replace(config, kiosk=replace(config.kiosk, mend_misheard=False))
    store = model_store(config)
    identity = generator_identity(config, store)
    assert identity is not None, "no compile model installed"
    cache = CompileCache(compile_cache_dir(), identity, PROMPT_VERSION)
    embedder = load_embedder(config, store)
    header = "".join(f"{c:>13}" for c in COLUMNS)
    for venue in venues(args.venue or ["all"]):
        vconfig = venue_config(config, venue)
        plain = build_kiosk(vconfig, embedder=embedder)
        records = {e.key: cache.record(e.key) for e in plain.source_entries}
        done = {k: r for k, r in records.items() if r is not None}
        print(f"\n{venue.name}: {len(done)} of {len(records)} entries compiled")
        if not done:
            continue
        kept_by: dict[str, dict[str, list[str]]] = {}
        rejected: Counter[str] = Counter()
        examples: dict[str, list[str]] = {"kept": [], "judged": [], "near miss": [], "ranked": []}
        for name, checks in CHECK_SETS.items():
            kept_by[name] = {}
            for i, entry in enumerate(plain.source_entries):
                record = done.get(entry.key)
                if record is None:
                    continue
                checked = check_questions(plain.matcher, i, Generated(*record), checks=checks)
                kept_by[name][entry.key] = checked.kept
                if name == "all":
                    rejected.update(why for _, why in checked.rejected)
                    examples["kept"] += [f"{q}  <- {entry.question or entry.answer[:40]}" for q in checked.kept]
                    for q, why in checked.rejected:
                        examples[why].append(f"{q}  <- {entry.question or entry.answer[:40]}")
        written = sum(len(r[0]) for r in done.values())
        fresh = sum(
            new_words(q, e) for e in plain.source_entries for q in kept_by["all"].get(e.key, []) if e.key in done
        )
        print(
            f"written {written}; kept by " + ", ".join(f"{n} {sum(map(len, k.values()))}" for n, k in kept_by.items())
        )
        print(f"all checks: rejected first by {dict(rejected)}; kept with a word the entry lacks: {fresh}")
        asked = [q for q in venue.questions if q.split == "dev" and q.kind in ANSWERABLE + UNANSWERABLE]
        print(f"  dev: {'with':<10}{header}   unknown: stopped/model/direct")
        for name, kept in [("written", {})] + [(n, kept_by[n]) for n in ("none", "near miss", "ranked", "all")]:
            kiosk = Kiosk.from_config(vconfig, embedder=embedder, asked=kept) if kept else plain
            decided = {q.id: outcome(kiosk, q) for q in asked}
            facts = Counter(decided[q.id] for q in asked if q.kind in ANSWERABLE)
            unknown = Counter(decided[q.id] for q in asked if q.kind in UNANSWERABLE)
            counts = "".join(f"{facts[c]:>13}" for c in COLUMNS)
            print(
                f"  {sum(facts.values()):>3}  {name:<10}{counts}   {sum(unknown.values())}: "
                f"{unknown['stopped']}/{unknown['model']}/{unknown['direct']}"
            )
        if args.show:
            for what, lines in examples.items():
                print(f"  {what} ({len(lines)}):")
                for line in lines[:8]:
                    print(f"    {line}")


if __name__ == "__main__":
    main()
