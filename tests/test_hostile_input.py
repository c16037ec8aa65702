"""Hostile and careless input that needs no model: sizes, paths, files, errors and logs (issue 19).

Case → behaviour (docs/bad-input.md lists them with these test names):
- a WAV whose header says 1 Hz → refused before decoding, the limit named;
- a file far longer than a question → only its first ``max_seconds`` decoded, in blocks, with a warning;
- a 1 MB knowledge line, and lines built to make regexes backtrack → refused at once / parsed in linear time;
- a Markdown table in the knowledge → one fact per row; a row without its header → refused;
- a system file (``/etc/passwd``), a copy of one, one giant entry, binary bytes, a directory or a FIFO as the
  knowledge → refused by ``config``, ``run``, ``converse`` and the admin page, a code naming what is wrong; facts
  without a single question or topic → a warning (issue 31);
- a question answered twice, differently → a warning (logged, and printed by ``edgevoice config``);
- ``[metrics] listen = "unix:<a file>"`` → refused, the file kept; ``textfile`` naming a file not ours → refused;
- a host name that only begins like ``localhost`` → refused (names must resolve to loopback addresses only);
- ``[debug] record_dir`` holding other files (``/etc``) → refused;
- ``converse --out`` / ``say --out`` to a missing folder or a directory → exit 2 before any work;
- a non-UTF-8, missing or broken knowledge file → a config error naming the file (and line): exit 2, and
  ``edgevoice config`` reports it instead of "config OK";
- the error code of a bad listen address → printed once;
- a non-model file given as a model → an error that does not quote its bytes;
- a mended question → the visitor's words logged only with ``log_transcripts``;
- ONNX Runtime telemetry → turned off before every session.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import tempfile
import threading
import time
import tracemalloc
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile
import soxr
from starlette.testclient import TestClient

from edgevoice import cli
from edgevoice.admin.app import create_app
from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.knowledge_file import save_and_reload
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.audio.files import check_output_path, read_audio
from edgevoice.config import Config
from edgevoice.config.knowledge_path import check_knowledge_path, open_knowledge_file
from edgevoice.config.listen_address import parse_listen
from edgevoice.config.load import config_from_dict, load_config
from edgevoice.errors import AudioInputError, ConfigError, EdgeVoiceError, ModelFormatError
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.knowledge import MAX_LINE_CHARS, parse_knowledge
from edgevoice.kiosk.knowledge_guard import MAX_ENTRY_CHARS
from edgevoice.live import metrics as metrics_module
from edgevoice.live.metrics import Metrics, MetricsExporter
from edgevoice.live.recorder import TurnRecorder, check_record_dir
from edgevoice.models.formats import check_gguf, check_onnx, check_safetensors
from tests.admin_fakes import NEW_FACTS, OLD_FACTS, FakeAppliance
from tests.conftest import config_with_knowledge

ROOT = Path(__file__).resolve().parents[1]
SECRET = b"root:hunter2-SECRET-PASSWORD\n"

# --- sizes ---------------------------------------------------------------------------------------------------------


def test_wav_header_at_1_hz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "one-hertz.wav"
    soundfile.write(path, np.zeros(68_000, np.int16), 1, subtype="PCM_16")  # 137 KB said to last 19 hours
    assert 130_000 < path.stat().st_size < 140_000
    with pytest.raises(AudioInputError) as err:
        read_audio(path, rate=16000)
    assert err.value.code == "audio_rate" and "1 Hz" in err.value.message and "1000-384000 Hz" in err.value.message


def test_long_file_is_decoded_up_to_max_seconds_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "ten-minutes.wav"
    soundfile.write(path, np.full(8000 * 600, 1000, np.int16), 8000, subtype="PCM_16")
    tracemalloc.start()
    try:
        with caplog.at_level(logging.WARNING, logger="edgevoice.audio.files"):
            audio = read_audio(path, rate=16000, max_seconds=30.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(audio) == 30 * 16000
    assert peak < 20_000_000  # the whole file at 16 kHz would be 38 MB; decoding it at once, more
    assert "only its first 30 s are used" in caplog.text
    assert len(read_audio(path, rate=16000)) == 300 * 16000  # the default bound: five minutes


def test_ordinary_file_reads_as_before(tmp_path: Path) -> None:
    t = np.arange(44100 * 2) / 44100
    stereo = np.stack([0.5 * np.sin(2 * np.pi * 440 * t), 0.25 * np.sin(2 * np.pi * 220 * t)], axis=1)
    stereo[1000, 0] = np.nan
    path = tmp_path / "stereo.wav"
    soundfile.write(path, stereo.astype(np.float32), 44100, subtype="FLOAT")
    audio = read_audio(path, rate=16000)
    mono = np.nan_to_num(stereo.mean(axis=1)).astype(np.float32)
    whole = soxr.resample(mono, 44100, 16000, quality="HQ")
    assert audio.dtype == np.float32 and len(audio) == len(whole) == 32000
    assert np.all(np.isfinite(audio)) and np.max(np.abs(audio - whole)) < 1e-3


# --- knowledge parsing ---------------------------------------------------------------------------------------------


def test_megabyte_knowledge_line_is_refused_at_once() -> None:
    started = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        parse_knowledge("Where are the toilets? Next to the lifts.\n" + "*a " * 350_000, source="venue.md")
    assert time.perf_counter() - started < 1.0
    assert f"at most {MAX_LINE_CHARS}" in err.value.message and "line 2" in err.value.message
    assert err.value.message.startswith("venue.md:")
    with pytest.raises(ConfigError, match=r"venue.toml: \[\[qa\]\] number 2 has 3000 characters; at most 2000"):
        parse_knowledge(
            f'[[qa]]\nquestion = "Open?"\nanswer = "Yes."\n[[qa]]\nquestion = "Q?"\nanswer = "{"a" * 3000}"\n',
            source="venue.toml",
        )


def parse_seconds(text: str) -> float:
    """The best of three parses of ``text`` (the least disturbed by the machine's other work); a text refused once
    parsed (one giant entry, not written for people) is timed all the same."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        with contextlib.suppress(ConfigError):
            parse_knowledge(text)
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.parametrize(
    ("head", "unit", "tail", "repeats"),
    [
        ("", "*a ", "", 660),  # emphasis opened and never closed
        ("", "_a ", "", 660),
        ("", "`a ", "", 660),
        ("", "[", "", 1990),  # a link that never closes
        ("", "[a](", "", 490),
        ("# a", " ", "x", 1990),  # a heading's closing marks
        ("# ", "#", "x", 1990),
        ("Q: ", "**a ", "", 490),
    ],
)
def test_knowledge_parsing_is_linear(head: str, unit: str, tail: str, repeats: int) -> None:
    """Lines eight times as long take about eight times as long, not sixty-four (the patterns used to take seconds
    (emphasis) to minutes (headings) per line): a ratio within one run, not a wall-clock bound. Four times as long
    gave 9 against a bound of 8 on a loaded machine; eight keeps linear and quadratic far apart."""
    short, long = ("\n".join([head + unit * (n // 8 * k) + tail] * 100) for n, k in ((repeats, 1), (repeats, 8)))
    ratio = parse_seconds(long) / parse_seconds(short)
    assert ratio < 24, ratio


def test_blank_lines_do_not_slow_the_format_check() -> None:
    one = "Where is the cafe? On the roof."
    ratio = parse_seconds("\n" * 200_000 + one) / parse_seconds("\n" * 50_000 + one)
    assert parse_knowledge("\n" * 200_000 + one) != []
    assert ratio < 8, ratio


def test_emphasis_and_links_still_stripped() -> None:
    [entry] = parse_knowledge("**Opening hours**: *Tuesday to Sunday*, **10 *to* 18**, see [our site](http://x.org).")
    assert entry.question == "Opening hours" and entry.answer == "Tuesday to Sunday, 10 to 18, see our site."


def test_markdown_table_rows_become_facts() -> None:
    entries = parse_knowledge(
        "## Tickets\n\n| Visitor | Price | Note |\n|:---|---:|---|\n| Adults | 14 euros | |\n"
        "| **Children** | 7 euros | under 12 |\n\nWhere is the cafe? On the roof.\n"
    )
    assert [(e.question, e.answer) for e in entries] == [
        ("Tickets, Adults", "Price: 14 euros"),
        ("Tickets, Children", "Price: 7 euros; Note: under 12"),
        ("Where is the cafe?", "On the roof."),
    ]
    assert not any("---" in e.line() or "|" in e.line() for e in entries)


def test_table_row_without_header_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"line 2 looks like a table row.*\|---\|"):
        parse_knowledge("Prices:\n| Adults | 14 euros |\n")
    with pytest.raises(ConfigError, match="line 4: a table row with 3 cells under a header of 2"):
        parse_knowledge("| Visitor | Price |\n|---|---|\n| Adults | 14 |\n| Children | 7 | free |\n")


def test_conflicting_duplicate_questions_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    text = "Is the museum open on Monday? Yes.\nIs the museum open on monday? No, closed on Mondays.\n"
    warnings: list[str] = []
    assert len(parse_knowledge(text, source="venue.md", warnings=warnings)) == 2
    assert warnings == [
        "venue.md: 'Is the museum open on Monday?' is answered 2 ways: 'Yes.' / 'No, closed on Mondays.'"
    ]
    with caplog.at_level(logging.WARNING, logger="edgevoice.kiosk.knowledge"):
        parse_knowledge(text)
    assert "answered 2 ways" in caplog.text
    assert parse_knowledge("Is it open? Yes.\nIs it open? Yes.\n", warnings=(same := [])) and same == []


# --- knowledge that is no knowledge (issue 31) ---------------------------------------------------------------------

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\nbin:x:2:2:bin:/bin:"
    "/usr/sbin/nologin\nsys:x:3:3:sys:/dev:/usr/sbin/nologin\nsync:x:4:65534:sync:/bin:/bin/sync\n"
    "www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)


def config_check_json(config_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """``edgevoice config --check --json`` on ``config_path``: its exit status must be 2, its one JSON object."""
    assert cli.main(["config", "--check", "--json", "--no-devices", "--config", str(config_path)]) == 2
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    return report


def knowledge_errors(report: dict[str, object]) -> list[dict[str, str]]:
    return [e for e in report["errors"] if "knowledge" in e["message"]]  # type: ignore[attr-defined]


@pytest.mark.parametrize("system_file", ["/etc/passwd", "/etc/shadow", "/proc/self/environ", "/dev/zero"])
def test_a_system_file_is_refused_as_knowledge(
    system_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = config_with_knowledge(tmp_path, None)
    config_path.write_text(config_path.read_text().replace(str(tmp_path / "venue.md"), system_file))
    [error] = knowledge_errors(config_check_json(config_path, capsys))
    assert error["code"] == "knowledge_system_file"
    assert f"kiosk.knowledge_file = '{system_file}'" in error["message"] and "a system directory" in error["message"]
    config = load_config(config_path)
    with pytest.raises(ConfigError, match="a system directory") as raised:  # what `run` and `converse` build
        Kiosk.from_config(config)
    assert raised.value.code == "knowledge_system_file"


def test_a_link_to_a_system_file_is_refused_but_the_service_directory_is_allowed(tmp_path: Path) -> None:
    link = tmp_path / "venue.md"
    link.symlink_to("/etc/passwd")
    with pytest.raises(ConfigError, match=r"it leads to /etc/passwd, under /etc, a system directory"):
        check_knowledge_path(link)
    check_knowledge_path(Path("/etc/edgevoice/venue.md"))  # the service's own configuration directory
    check_knowledge_path(Path("/etc/edgevoice/venues/museum.md"))
    with pytest.raises(ConfigError, match="under /etc, a system directory"):
        check_knowledge_path(Path("/etc/edgevoice-not/venue.md"))


def test_a_copy_of_passwd_is_refused_as_not_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [error] = knowledge_errors(config_check_json(config_with_knowledge(tmp_path, PASSWD.encode()), capsys))
    assert error["code"] == "knowledge_not_text"
    assert f"kiosk.knowledge_file = '{tmp_path / 'venue.md'}'" in error["message"]
    assert "is it the right file?" in error["message"]
    real = Path("/etc/passwd").read_text()  # this machine's, copied where no path rule applies
    with pytest.raises(ConfigError, match="pieces are words or numbers") as raised:
        parse_knowledge(real, source="copy of /etc/passwd")
    assert raised.value.code == "knowledge_not_text"


def test_facts_in_any_script_and_full_of_values_are_text() -> None:
    text = (
        "洗手间在哪里？每层楼都有，在电梯旁边。\nशौचालय कहाँ है? हर मंज़िल पर, लिफ़्ट के पास।\n"
        "Где туалет? На каждом этаже, у лифтов.\n## Opening hours\n- Monday: 10:00-18:00\n- Tue-Sun: 10am-6pm, €14\n"
    )
    assert len(parse_knowledge(text, warnings=(warnings := []))) == 5 and warnings == []


def test_one_giant_entry_is_refused_naming_its_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prose = "The museum holds paintings, drawings and prints from five centuries of the city's history.\n"
    text = "Where is the cafe? On the roof.\n\n" + prose * 40  # lines 3-42: no blank line, one paragraph
    [error] = knowledge_errors(config_check_json(config_with_knowledge(tmp_path, text.encode()), capsys))
    assert error["code"] == "knowledge_entry_too_long"
    assert "lines 3-42 are one paragraph" in error["message"] and f"at most {MAX_ENTRY_CHARS:,}" in error["message"]
    with pytest.raises(ConfigError, match=r"entry 1 .* characters; at most") as raised:  # a TOML answer and question
        parse_knowledge(f'[[qa]]\nquestion = "{prose.strip() * 12}"\nanswer = "{prose.strip() * 12}"\n')
    assert raised.value.code == "knowledge_entry_too_long"


@pytest.mark.parametrize(
    "content",
    [
        b"Where is the cafe? On the roof.\n\x7fELF\x02\x01\x01\x00\x00\x00\n",
        b"Is it open? Yes.\n" + bytes(range(1, 9)) * 8,
    ],
    ids=["nul-bytes", "control-bytes"],
)
def test_binary_content_is_refused(content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [error] = knowledge_errors(config_check_json(config_with_knowledge(tmp_path, content), capsys))
    assert error["code"] == "knowledge_binary"
    assert f"kiosk.knowledge_file = '{tmp_path / 'venue.md'}': line 2 holds the control character" in error["message"]
    assert "binary content" in error["message"]


def test_a_directory_or_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a regular file") as raised:
        open_knowledge_file(tmp_path)
    assert raised.value.code == "knowledge_not_a_file"
    fifo = tmp_path / "venue.md"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            open_knowledge_file(fifo).close()
        except ConfigError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # blocked in open() waiting for a writer: let it go, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
        pytest.fail("opening a FIFO as the knowledge waited for a writer")
    assert "is a FIFO" in str(outcome[0])


def test_plain_text_without_a_question_or_topic_is_warned_about(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    text = b"The museum opens at ten.\n\nTickets cost fourteen euros.\n\nThe cafe is on the roof.\n"
    assert cli.main(["config", "--no-devices", "--config", str(config_with_knowledge(tmp_path, text))]) == 0
    err = capsys.readouterr().err
    assert "none of its 3 entries has a question or a topic" in err and "venue.md" in err


def test_the_admin_save_refuses_what_is_no_knowledge(tmp_path: Path) -> None:
    venue = tmp_path / "venue.md"
    venue.write_text(OLD_FACTS)
    appliance = FakeAppliance(venue)
    app = create_app(appliance, SelftestRunner(lambda folder: ["true"]), hosts=ServedHosts.for_listen("127.0.0.1:8080"))
    web = TestClient(app, base_url="http://127.0.0.1")
    for body, expected in [(PASSWD, "pieces are words or numbers"), ("Open? Yes.\n\x00\x00\n", "binary content")]:
        result = web.put("/api/knowledge", content=body.encode())
        error = result.json()["error"]
        assert result.status_code == 422 and expected in error["message"] and str(venue) in error["message"]
    assert venue.read_text() == OLD_FACTS and appliance.reloads == 0
    with pytest.raises(ConfigError, match="a system directory"):  # whatever the config names, never written over
        save_and_reload(Path("/etc/passwd"), NEW_FACTS, lambda: None, time.perf_counter)


# --- paths and files -----------------------------------------------------------------------------------------------


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose paths fit a Unix socket address (108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="ev-") as name:
        yield Path(name)


def test_unix_listen_never_removes_a_file_that_is_not_a_socket(short_dir: Path) -> None:
    victim = short_dir / "important.db"
    victim.write_bytes(b"keep me")
    with pytest.raises(ConfigError, match="not a socket; it is not replaced"):
        MetricsExporter(Metrics(), listen=f"unix:{victim}")
    assert victim.read_bytes() == b"keep me"
    (short_dir / "dir").mkdir()
    with pytest.raises(ConfigError, match="is a directory, not a socket"):
        MetricsExporter(Metrics(), listen=f"unix:{short_dir / 'dir'}")
    assert (short_dir / "dir").is_dir()


def test_unix_listen_replaces_a_stale_socket(short_dir: Path) -> None:
    path = short_dir / "metrics.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()
    exporter = MetricsExporter(Metrics(), listen=f"unix:{path}")
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(5)
            client.connect(str(path))
            client.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert b"edgevoice_turns" in b"".join(iter(lambda: client.recv(65536), b""))
    finally:
        exporter.close()


def test_textfile_refuses_to_replace_a_file_that_is_not_ours(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    foreign = tmp_path / "passwd"
    foreign.write_text("root:x:0:0\n")
    with pytest.raises(ConfigError, match="is not a file of edgevoice's metrics; it is not replaced"):
        MetricsExporter(Metrics(), textfile=str(foreign))
    assert foreign.read_text() == "root:x:0:0\n"

    ours = tmp_path / "edgevoice.prom"
    exporter = MetricsExporter(Metrics(), textfile=str(ours))  # a new file
    exporter.update()
    assert ours.read_bytes().startswith(b"# HELP edgevoice_")
    MetricsExporter(Metrics(), textfile=str(ours)).update()  # ours from a previous run: replaced
    (tmp_path / "empty.prom").touch()
    MetricsExporter(Metrics(), textfile=str(tmp_path / "empty.prom")).update()
    assert (tmp_path / "empty.prom").read_bytes().startswith(b"# HELP edgevoice_")

    ours.write_text("something else now\n")  # replaced behind our back: left alone, with a warning
    with caplog.at_level(logging.WARNING, logger="edgevoice.live.metrics"):
        exporter.update()
    assert ours.read_text() == "something else now\n" and "left alone" in caplog.text


def test_listen_host_must_resolve_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {
        "localhost": ["127.0.0.1", "::1"],
        "localhost.attacker.example": ["203.0.113.7"],
        "mixed": ["127.0.0.1", "10.0.0.1"],
    }

    def getaddrinfo(host: str, *_: object, **__: object) -> list[tuple[object, ...]]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "unknown")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0)) for address in table[host]]

    monkeypatch.setattr(metrics_module.socket, "getaddrinfo", getaddrinfo)
    assert parse_listen("localhost:9464") == ("localhost", 9464)
    assert parse_listen("127.0.0.2:9464") == ("127.0.0.2", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    for value in ("localhost.attacker.example:9464", "127.evil.example:9464", "mixed:9464", "0.0.0.0:9464", ":9464"):
        with pytest.raises(ConfigError, match="loopback only"):
            parse_listen(value)


def test_record_dir_holding_other_files_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"debug.record_dir = '/etc': holds files that are not the debug recorder's"):
        TurnRecorder.from_config(3, "/etc")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "000001-turn1.wav").touch()
    (mixed / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"\(notes.txt\)"):
        check_record_dir(mixed)
    assert (mixed / "notes.txt").read_text() == "mine"
    (mixed / "notes.txt").unlink()
    (mixed / ".000002-turn2.json.abc123").touch()  # a temporary file a crash left behind
    recorder = TurnRecorder.from_config(3, str(mixed))
    assert recorder is not None and recorder.turns() == ["000001-turn1"]
    assert TurnRecorder.from_config(3, str(tmp_path / "new")) is not None


@pytest.mark.parametrize("command", ["converse", "say"])
def test_output_path_checked_before_any_work(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("edgevoice.app.load_engines", _no_models)
    monkeypatch.setattr("edgevoice.app.load_engines_with", _no_models)
    monkeypatch.setattr("edgevoice.models.configured.piper_files", _no_models)
    first = [str(tmp_path / "no-such-input.wav")] if command == "converse" else ["Hello."]
    for out, problem in [(tmp_path / "missing" / "reply.wav", "does not exist"), (tmp_path, "is a directory")]:
        assert cli.main([command, *first, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"[output_path] cannot write {out}: " in err and problem in err, err
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o500)
    if not os.access(read_only, os.W_OK):  # root writes anywhere
        with pytest.raises(EdgeVoiceError, match="is not writable"):
            check_output_path(read_only / "reply.wav")
    check_output_path(tmp_path / "reply.wav")


def _no_models(*_: object, **__: object) -> None:
    raise AssertionError("models loaded before the output path was checked")


# --- errors, exit codes and logs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knowledge", "message"),
    [
        (b"Where is the cafe? On the roof.\nOpen \xe0 10 h.\n", "line 2 is not UTF-8 text"),
        (None, "cannot read it (No such file or directory)"),
        (b'[[qa]]\nquestion = "Open?"\nanswer = \n', "not valid TOML"),
        (b"Prices\n| Adults | 14 |\n", "looks like a table row"),
    ],
)
def test_broken_knowledge_file_is_a_config_error(
    knowledge: bytes | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = config_with_knowledge(tmp_path, knowledge)
    assert cli.main(["config", "--config", str(config_path)]) == 2  # the unit does not restart on 2
    captured = capsys.readouterr()
    assert "config OK" not in captured.out
    assert f"kiosk.knowledge_file = '{tmp_path / 'venue.md'}'" in captured.err and message in captured.err
    config = load_config(config_path)
    with pytest.raises(ConfigError):
        parse_knowledge(config.knowledge_text(), source=config.knowledge_source())


def test_config_command_reports_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_path = config_with_knowledge(tmp_path, b"Is it open? Yes.\nIs it open? No.\n")
    assert cli.main(["config", "--no-devices", "--config", str(config_path)]) == 0
    captured = capsys.readouterr()
    assert "config OK" in captured.out and "1 warning" in captured.out and "answered 2 ways" in captured.err

    (tmp_path / "metrics.prom").write_text("not ours\n")
    with config_path.open("a") as fh:
        fh.write(
            f'[debug]\nrecord_turns = 2\nrecord_dir = "/etc"\n[metrics]\ntextfile = "{tmp_path / "metrics.prom"}"\n'
        )
    assert cli.main(["config", "--no-devices", "--config", str(config_path)]) == 2
    err = capsys.readouterr().err
    assert "debug.record_dir = '/etc'" in err and "metrics.textfile" in err and "answered 2 ways" in err


def test_unit_does_not_restart_on_config_errors() -> None:
    unit = (ROOT / "packaging" / "edgevoice.service").read_text()
    statuses = [
        line.split("=", 1)[1].split() for line in unit.splitlines() if line.startswith("RestartPreventExitStatus=")
    ]
    assert statuses and "2" in statuses[0]


def test_error_code_is_printed_once() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"metrics": {"listen": "0.0.0.0:9464"}})
    assert str(err.value).count("[config_invalid]") == 1 and str(err.value).startswith(
        "[config_invalid] metrics.listen"
    )


@pytest.mark.parametrize("check", [check_gguf, check_onnx, check_safetensors])
def test_non_model_file_is_not_quoted(check: object, tmp_path: Path) -> None:
    path = tmp_path / "shadow"
    path.write_bytes(SECRET * 4)
    with pytest.raises(ModelFormatError) as err:
        check(path)  # type: ignore[operator]
    assert str(path) in err.value.message
    for piece in (b"root", b"hunt", b"SECRET", b"PASS"):
        assert piece.decode() not in err.value.message.replace(str(path), "")
    assert "0x72" not in err.value.message and "'r'" not in err.value.message  # nor a byte's value


@pytest.mark.parametrize("log_transcripts", [False, True])
def test_mended_question_logged_only_with_log_transcripts(
    log_transcripts: bool, caplog: pytest.LogCaptureFixture
) -> None:
    kiosk = Kiosk(
        "You are the guide of a gallery.",
        "Where are the toilets? On every floor, next to the lifts.\nHow much is a ticket? Adults 14 euros.",
        log_transcripts=log_transcripts,
    )
    mend = types.SimpleNamespace(first_mend=lambda question, holds: "where are the toilets on this floor")
    kiosk.matcher.sounds = mend  # type: ignore[assignment]
    with caplog.at_level(logging.DEBUG):
        assert kiosk.ground("where are the twilights on this floor").question == "where are the toilets on this floor"
    assert caplog.records and ("twilights" in caplog.text) is log_transcripts


def test_config_turns_log_transcripts_through(monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_from_dict({"kiosk": {"semantic": False}, "debug": {"log_transcripts": True}})
    assert Kiosk.from_config(config).log_transcripts is True
    assert Kiosk.from_config(config_from_dict({"kiosk": {"semantic": False}})).log_transcripts is False
    assert Config().debug.log_transcripts is False


def test_onnx_telemetry_is_turned_off_before_a_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgevoice.engines import onnx_session

    calls: list[str] = []
    monkeypatch.setattr(onnx_session.ort, "disable_telemetry_events", lambda: calls.append("off"))
    real = onnx_session.ort.InferenceSession

    def session(*args: object, **kwargs: object) -> object:
        assert calls == ["off"], "a session was created with telemetry on"
        return real(*args, **kwargs)

    monkeypatch.setattr(onnx_session.ort, "InferenceSession", session)
    path = tmp_path / "not-a-model.onnx"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelFormatError):
        onnx_session.open_session(path)
    assert calls == ["off"]


def test_onnx_sessions_thread_pools_sleep_between_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spinning, a two-thread VAD took 78 % of a core at the listener's pace, 4 % without (scripts/ort_spinning.py)."""
    from edgevoice.engines import onnx_session

    seen: list[dict[str, str]] = []

    def session(path: str, sess_options: onnx_session.ort.SessionOptions, **kwargs: object) -> object:
        keys = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")
        seen.append({key: sess_options.get_session_config_entry(key) for key in keys})
        return object()

    monkeypatch.setattr(onnx_session.ort, "InferenceSession", session)
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x00" * 64)
    onnx_session.open_session(path, threads=2)
    assert seen == [{"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}]
