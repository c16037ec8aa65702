"""16 kHz, the rate every model stage takes, is defined once (:data:`edgevoice.audio.SAMPLE_RATE`) and imported
everywhere else: no other module of the package names a constant of its own for it."""

from __future__ import annotations

import ast
from pathlib import Path

from edgevoice.audio import SAMPLE_RATE

ROOT = Path(__file__).resolve().parent.parent
DEFINED_IN = ROOT / "edgevoice" / "audio" / "__init__.py"


def constants_of(tree: ast.Module, value: int) -> list[tuple[int, str]]:
    """(line, name) of each module-level or class-level assignment of ``value`` to a name (a dataclass field's
    annotated default, such as a device's rate, is not a constant)."""
    found: list[tuple[int, str]] = []
    bodies = [tree.body, *(node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef))]
    for body in bodies:
        for node in body:
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign) and body is tree.body:
                targets = [node.target]
            else:
                continue
            if isinstance(node.value, ast.Constant) and node.value.value == value:
                found += [(node.lineno, ast.unparse(t)) for t in targets]
    return found


def test_the_model_rate_is_16_khz() -> None:
    assert SAMPLE_RATE == 16000


def test_no_other_module_defines_the_model_rate() -> None:
    elsewhere = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in sorted((ROOT / "edgevoice").rglob("*.py"))
        if path != DEFINED_IN
        for line, name in constants_of(ast.parse(path.read_text()), SAMPLE_RATE)
    ]
    assert elsewhere == []


def test_a_constant_of_its_own_is_found() -> None:
    tree = ast.parse("RATE = 16000\nclass Fake:\n    sample_rate = 16000\n    rate: int = 16000\nx: int = 16_000\n")
    assert constants_of(tree, 16000) == [(1, "RATE"), (5, "x"), (3, "sample_rate")]
