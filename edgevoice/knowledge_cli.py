"""``edgevoice knowledge compile FILE``: the knowledge's other ways of asking written and checked ahead of time (the
bench's ``--compiled`` and a box being prepared use it), kept in the compile cache that ``edgevoice run`` then loads
(:mod:`edgevoice.knowledge_compile`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgevoice.config import Config
from edgevoice.kiosk.background_compile import MAX_ENTRIES
from edgevoice.kiosk.knowledge import Entry
from edgevoice.knowledge_compile import compile_file

__all__ = ["add_knowledge_parser"]


def add_knowledge_parser(commands: Any) -> None:
    """``edgevoice knowledge compile FILE``."""
    knowledge = commands.add_parser("knowledge", help="the venue's knowledge: compile it ahead of time")
    sub = knowledge.add_subparsers(dest="knowledge_command", required=True)
    p = sub.add_parser("compile", help="write out and check other ways of asking each entry (kept in the cache)")
    p.add_argument("file", type=Path, help="the knowledge file (any format the kiosk reads)")
    p.add_argument("--persona", type=Path, help="the persona file (default: the config's [kiosk] persona)")
    p.add_argument("--max-entries", type=int, default=MAX_ENTRIES, help="compile at most this many entries")
    p.add_argument("--fresh", action="store_true", help="check the written questions again")
    p.add_argument("--show", action="store_true", help="print the questions kept, per entry")
    p.add_argument("--config", help="edgevoice.toml to use")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(handler=cmd_knowledge_compile)


def cmd_knowledge_compile(args: argparse.Namespace) -> int:
    """Compile ``args.file`` with the config's models; print the progress and (``--show``) the questions kept."""
    from edgevoice.cli_json import emit
    from edgevoice.config.load import find_config

    out = compile_command(args, find_config(args.config))
    if args.json:
        emit(out)
        return 0
    for question, asked in out.get("kept", {}).items():  # type: ignore[attr-defined]
        print(question)
        for q in asked:
            print(f"    {q}")
    print(out["summary"])
    return 0


def compile_command(args: argparse.Namespace, config: Config) -> dict[str, object]:
    """What ``edgevoice knowledge compile`` prints, as a JSON object."""
    from edgevoice.app import build_kiosk
    from edgevoice.models.configured import model_store

    kiosk_config = replace(config.kiosk, knowledge_file=str(args.file), knowledge="")
    if args.persona is not None:
        kiosk_config = replace(kiosk_config, persona=args.persona.read_text(encoding="utf-8").strip())
    config = replace(config, kiosk=kiosk_config)
    store = model_store(config)
    kiosk = build_kiosk(config, store=store)
    try:
        kept, progress = compile_file(config, store, kiosk, max_entries=args.max_entries, fresh=args.fresh)
    finally:
        kiosk.close()
    out: dict[str, object] = {"compile": progress.as_dict(), "summary": progress.line()}
    if args.show:
        out["kept"] = _by_question(kiosk.source_entries, kept)
    return out


def _by_question(entries: Sequence[Entry], kept: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    return {e.question or e.answer[:60]: list(kept[e.key]) for e in entries if e.key in kept}
