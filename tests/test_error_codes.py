"""Every error code the package raises is in ``ERROR_CODES`` (edgevoice/errors.py) and in docs/cli.md's table, with
the same exit status and meaning; every code listed there is raised somewhere. Each failure names the code, where it
is raised and the exact line to add or change."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from edgevoice import errors
from edgevoice.errors import ERROR_CODES, ErrorCode

ROOT = Path(__file__).resolve().parent.parent
CLI_DOC = ROOT / "docs" / "cli.md"
ROW = re.compile(r"^\| `([a-z0-9_]+)` \| (\d+) \| (.*) \|$")
STATUS_ROW = re.compile(r"^\| (\d+) \| ")
CODE = re.compile(r"[a-z][a-z0-9_]*")


def raised_codes(root: Path = ROOT / "edgevoice") -> dict[str, list[str]]:
    """Each code written in the package, with where (``path:line``): a ``code="..."`` argument, a class's
    ``code = "..."``, a ``{"code": "..."}`` (an error as JSON), the first argument of a function whose first
    parameter is ``code`` (``_fail(code, ...)``, ``error_response(code, ...)``, wherever it is called from), each
    of these also as a module's constant (``CODE = "..."`` then ``code=CODE``), and the
    snake_case keys of a module's table of codes (a dict named ``*_CODES`` or ``*_ERRORS``, ``ERROR_CODES`` itself
    aside)."""
    trees = {
        str(path.relative_to(root.parent)): ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for path in sorted(root.rglob("*.py"))
    }
    takes_code = {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.args.args and node.args.args[0].arg == "code"
    }
    found: dict[str, list[str]] = defaultdict(list)
    for where, tree in trees.items():
        constants = {
            target.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name)
        }

        def add(value: ast.expr | None, line: int) -> None:
            if isinstance(value, ast.Name):
                value = constants.get(value.id)  # noqa: B023 (used at once, in this iteration)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found[value.value].append(f"{where}:{line}")  # noqa: B023 (used at once, in this iteration)

        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "code":
                        add(keyword.value, node.lineno)
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name in takes_code and node.args:
                    add(node.args[0], node.lineno)
            elif isinstance(node, ast.Dict):  # an error as JSON: {"code": "...", ...}
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code":
                        add(value, node.lineno)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if any(n.endswith(("_CODES", "_ERRORS")) and n != "ERROR_CODES" for n in names):
                    for key in node.value.keys:  # snake_case, as codes are (not a table of KEY_SPACE and the like)
                        if isinstance(key, ast.Constant) and CODE.fullmatch(str(key.value)):
                            add(key, node.lineno)
            elif isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, ast.Assign):
                        targets = statement.targets
                    elif isinstance(statement, ast.AnnAssign):
                        targets = [statement.target]
                    else:
                        continue
                    if any(isinstance(t, ast.Name) and t.id == "code" for t in targets):
                        add(statement.value, statement.lineno)
    return dict(found)


def documented_codes(text: str) -> dict[str, tuple[int, str]]:
    return {m[1]: (int(m[2]), m[3]) for line in text.splitlines() if (m := ROW.match(line))}


def row(code: str, entry: ErrorCode) -> str:
    return f"| `{code}` | {entry.status} | {entry.meaning} |"


def test_the_scan_finds_codes_however_they_are_written(tmp_path: Path) -> None:
    package = tmp_path / "edgevoice"
    package.mkdir()
    (package / "m.py").write_text(
        "class AError(Exception):\n    code = 'by_class'\n"
        "class BError(Exception):\n    code: str = 'by_annotated_class'\n"
        "def _fail(code, message):\n    return AError(message)\n"
        "x = AError('m', code='by_keyword')\ny = _fail('by_helper', 'm')\nz = obj._fail('by_method', 'm')\n"
        "body = {'error': {'code': 'by_json', 'message': 'm'}}\n"
        "HTTP_CODES = {'by_table': 409}\nERROR_CODES = {'not_by_the_registry': 1}\nKEY_CODES = {'KEY_SPACE': 57}\n"
    )
    (package / "other.py").write_text("from m import _fail\nerror = _fail('by_helper_elsewhere', 'm')\n")
    found = raised_codes(package)
    assert set(found) == {
        "by_class",
        "by_annotated_class",
        "by_keyword",
        "by_helper",
        "by_method",
        "by_json",
        "by_table",
        "by_helper_elsewhere",
    }
    assert found["by_keyword"] == ["edgevoice/m.py:7"]


def test_every_code_raised_is_registered() -> None:
    missing = [
        f"code {code!r} is raised at {', '.join(places)} but is not in ERROR_CODES (edgevoice/errors.py); add\n"
        f'    "{code}": ErrorCode(EXIT_ERROR, "what it means"),\n'
        f"and its row to docs/cli.md's table of error codes"
        for code, places in sorted(raised_codes().items())
        if code not in ERROR_CODES
    ]
    assert not missing, "\n".join(missing)


def test_every_registered_code_is_raised() -> None:
    raised = raised_codes()
    unused = [
        f"ERROR_CODES has {code!r}, which nothing in edgevoice/ raises: remove its line from edgevoice/errors.py and "
        "its row from docs/cli.md (or raise it)"
        for code in ERROR_CODES
        if code not in raised
    ]
    assert not unused, "\n".join(unused)


def test_docs_table_matches_the_registry() -> None:
    documented = documented_codes(CLI_DOC.read_text(encoding="utf-8"))
    problems = [
        f"docs/cli.md's table of error codes has no row for {code!r}; add\n{row(code, entry)}"
        for code, entry in ERROR_CODES.items()
        if code not in documented
    ]
    problems += [
        f"docs/cli.md's table names {code!r}, which ERROR_CODES (edgevoice/errors.py) does not define; remove the row "
        f"or add its line there"
        for code in documented
        if code not in ERROR_CODES
    ]
    problems += [
        f"docs/cli.md's row for {code!r} differs from ERROR_CODES; make it\n{row(code, ERROR_CODES[code])}"
        for code, (status, meaning) in documented.items()
        if code in ERROR_CODES and (status, meaning) != tuple(ERROR_CODES[code])
    ]
    assert not problems, "\n".join(problems)


def test_every_exit_status_is_documented() -> None:
    statuses = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert {e.status for e in ERROR_CODES.values()} <= statuses
    text = CLI_DOC.read_text(encoding="utf-8")
    table = {int(m[1]) for line in text.splitlines() if (m := STATUS_ROW.match(line))}
    assert statuses <= table, f"exit statuses missing from docs/cli.md's table: {sorted(statuses - table)}"
