"""A stand-in for ``edgevoice.kiosk.knowledge_edit`` and ``save_and_reload(expected_sha256=...)`` (slice edit's, not
merged yet), for TOML ``[[qa]]`` knowledge only, as the contract states them. Installed by :func:`install`."""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from edgevoice.admin import knowledge_file
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge import entry_key


def _toml(tables: list[dict[str, object]]) -> str:
    out = []
    for table in tables:
        out.append("[[qa]]")
        for name, value in table.items():
            out.append(f"{name} = {json.dumps(value)}")
        out.append("")
    return "\n".join(out)


def attach_question(text: str, key: str, question: str, *, source: str = "knowledge") -> str:
    tables = tomllib.loads(text)["qa"]
    for table in tables:
        if entry_key(table.get("question", ""), table["answer"]) == key:
            asked = list(table.get("asked", []))
            if question in asked:
                return text
            table["asked"] = [*asked, question]
            return _toml(tables)
    raise ConfigError(
        f"{source}: no entry has the key {key} (edited or deleted meanwhile)", code="knowledge_entry_changed"
    )


def add_entry(text: str, question: str, answer: str, *, source: str = "knowledge") -> str:
    return text.rstrip("\n") + "\n\n" + _toml([{"question": question, "answer": answer}])


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real module and argument when slice edit's branch is merged; these stand-ins until then."""
    try:
        import edgevoice.kiosk.knowledge_edit  # noqa: F401
    except ImportError:
        module = types.ModuleType("edgevoice.kiosk.knowledge_edit")
        module.attach_question = attach_question  # type: ignore[attr-defined]
        module.add_entry = add_entry  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "edgevoice.kiosk.knowledge_edit", module)
    import inspect

    if "expected_sha256" not in inspect.signature(knowledge_file.save_and_reload).parameters:
        real = knowledge_file.save_and_reload

        def checked(
            path: Path, text: str, reload: Callable[[], object], clock: Callable[[], float], *, expected_sha256: str
        ) -> knowledge_file.Saved:
            with knowledge_file.SAVING:
                if hashlib.sha256(path.read_bytes()).hexdigest() != expected_sha256:
                    raise ConfigError(f"{path}: saved meanwhile", code="knowledge_changed_meanwhile")
            return real(path, text, reload, clock)

        monkeypatch.setattr("edgevoice.admin.inbox.save_and_reload", checked)
