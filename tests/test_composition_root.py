"""Engine adapters are opened only by the composition root (:mod:`edgevoice.app`, :mod:`edgevoice.app_engines`) and by
the adapters' own modules (``edgevoice/engines/``): everything else (the benchmarks, the self-test, the CLI, the live
loop, the scripts) asks the root, so that the config's mapping onto each adapter's constructor exists once.

An adapter is a class defined in ``edgevoice/engines/`` with a ``close`` method (it holds a model or a native handle).
The source is read with :mod:`ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edgevoice"
ROOT_MODULES = ("app.py", "app_engines.py")
"""The composition root, relative to the package: the only modules outside engines/ that open an adapter."""


def adapter_classes(engines_dir: Path) -> set[str]:
    """The classes defined at the top of ``engines_dir``'s modules that have a ``close`` method."""
    names = set()
    for path in sorted(engines_dir.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(item, ast.FunctionDef) and item.name == "close" for item in node.body
            ):
                names.add(node.name)
    return names


def constructions(path: Path, adapters: set[str]) -> list[str]:
    """``line name`` for each call of an adapter class in ``path`` (by its name or as ``module.Name``), and each
    import of one under another name (which a call by the new name would hide)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in adapters:
                found.append(f"{node.lineno} {name}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found += [
                f"{node.lineno} {alias.name} as {alias.asname}"
                for alias in node.names
                if alias.name.rpartition(".")[2] in adapters and alias.asname not in (None, alias.name)
            ]
    return found


def constructed_outside_root(package_dir: Path, scripts: list[Path]) -> list[str]:
    """``file:line name`` for each adapter opened outside the root and engines/, in the package and ``scripts``."""
    adapters = adapter_classes(package_dir / "engines")
    allowed = {package_dir / name for name in ROOT_MODULES}
    files = [
        p
        for p in sorted(package_dir.rglob("*.py"))
        if p not in allowed and not p.is_relative_to(package_dir / "engines")
    ]
    out = []
    for path in [*files, *scripts]:
        shown = path.relative_to(package_dir.parent)
        out += [f"{shown}:{found}" for found in constructions(path, adapters)]
    return out


def test_the_adapters_are_found() -> None:
    """The scan knows every engine adapter (a rename or a lost ``close`` would blind it)."""
    expected = {"LlamaCppModel", "WhisperCppRecognizer", "SileroVad", "SmartTurn", "PiperSynthesizer", "MicroWakeWord"}
    assert expected <= adapter_classes(PACKAGE / "engines")


def test_only_the_composition_root_opens_an_engine() -> None:
    found = constructed_outside_root(PACKAGE, sorted((ROOT / "scripts").glob("*.py")))
    assert found == [], "open these through edgevoice.app_engines: " + "; ".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from pkg.engines.vad import Vad\nv = Vad('m.onnx', threads=2)\n", ["2 Vad"]),
        ("from pkg.engines import vad\nv = vad.Vad('m.onnx')\n", ["2 Vad"]),
        ("def f():\n    from pkg.engines.vad import Vad as V\n    return V('m.onnx')\n", ["2 Vad as V"]),
        ("from pkg.engines.vad import Vad, speech\nx: Vad | None = None\nspeech([])\n", []),
    ],
)
def test_a_construction_outside_the_root_is_found(tmp_path: Path, source: str, expected: list[str]) -> None:
    package_dir = tmp_path / "pkg"
    (package_dir / "engines").mkdir(parents=True)
    (package_dir / "engines" / "vad.py").write_text(
        "class Vad:\n    def close(self):\n        pass\n\n\nclass Shape:\n    pass\n\n\ndef speech(audio):\n"
        "    return Vad('m.onnx')\n"
    )
    (package_dir / "app.py").write_text("from pkg.engines.vad import Vad\nvad = Vad('m.onnx')\n")
    (package_dir / "bench.py").write_text(source)
    assert adapter_classes(package_dir / "engines") == {"Vad"}
    found = constructed_outside_root(package_dir, [])
    assert [line.split(":", 1)[1] for line in found] == expected
    assert all(line.startswith("pkg/bench.py:") for line in found)
