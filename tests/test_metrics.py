"""Prometheus metrics: histograms per stage and for voice-to-voice; loopback or Unix socket only; textfile."""

from __future__ import annotations

import http.client
import os
import socket
import stat
from pathlib import Path

import pytest

from edgevoice.config.listen_address import effective_listen, parse_listen
from edgevoice.config.load import config_from_dict
from edgevoice.errors import ConfigError
from edgevoice.live.metrics import Metrics, MetricsExporter, start_metrics
from edgevoice.trace import TurnTimeline


def turn(v2v: float, *, played: bool = True) -> TurnTimeline:
    return TurnTimeline(
        1,
        speech_end=10.0,
        endpoint_audio=10.2,
        endpoint=10.23,
        transcript=10.25,
        first_token=10.3,
        first_clause=10.4,
        first_audio=10.45,
        first_handed=10.47,
        first_played=10.0 + v2v if played else None,
    )


def sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the exposition")


def scrape(path: Path) -> bytes:
    """The whole HTTP answer of the exporter listening on the Unix socket ``path`` to ``GET /metrics``."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(path))
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def test_each_turn_feeds_the_stage_and_voice_to_voice_histograms() -> None:
    metrics = Metrics()
    metrics.observe(turn(0.5))
    metrics.observe(turn(1.2), underruns=2)
    metrics.observe(turn(0.0, played=False), cancelled=True)
    text = metrics.exposition().decode()
    assert sample(text, "edgevoice_voice_to_voice_seconds_count") == 2
    assert sample(text, "edgevoice_voice_to_voice_seconds_sum") == pytest.approx(1.7)
    assert sample(text, 'edgevoice_voice_to_voice_seconds_bucket{le="0.75"}') == 1
    assert sample(text, 'edgevoice_stage_seconds_count{stage="endpointing"}') == 3
    assert sample(text, 'edgevoice_stage_seconds_sum{stage="endpointing"}') == pytest.approx(0.6)
    assert sample(text, 'edgevoice_stage_seconds_count{stage="output"}') == 2
    assert sample(text, 'edgevoice_turns_total{outcome="answered"}') == 2
    assert sample(text, 'edgevoice_turns_total{outcome="cancelled"}') == 1
    assert sample(text, "edgevoice_output_underruns_total") == 2


@pytest.mark.parametrize("listen", ["0.0.0.0:9464", "[::]:9464", "192.168.1.5:9464", ":9464", "9464", "unix:rel"])
def test_metrics_are_never_served_on_a_public_interface(listen: str) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.listen"):
        config_from_dict({"metrics": {"listen": listen}})


def test_loopback_and_unix_sockets_are_accepted() -> None:
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    assert parse_listen("unix:/run/edgevoice/metrics.sock") == ("unix", "/run/edgevoice/metrics.sock")
    assert config_from_dict({"metrics": {"listen": "localhost:9000"}}).metrics.listen == "localhost:9000"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_served_over_http_on_loopback() -> None:
    metrics = Metrics()
    metrics.observe(turn(0.4))
    port = free_port()
    exporter = MetricsExporter(metrics, listen=f"127.0.0.1:{port}")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode()
        conn.close()
    finally:
        exporter.close()
    assert sample(body, "edgevoice_voice_to_voice_seconds_count") == 1


def test_a_rebound_host_name_reads_no_metrics() -> None:
    """DNS rebinding: a page on attacker.example whose name now resolves to 127.0.0.1 asks with its own Host."""
    metrics = Metrics()
    metrics.observe(turn(0.4))
    port = free_port()
    exporter = MetricsExporter(metrics, listen=f"127.0.0.1:{port}")
    try:
        answers = {}
        for host in (f"attacker.example:{port}", "attacker.example", f"localhost:{port}", f"127.0.0.1:{port}"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/metrics", headers={"Host": host})
            response = conn.getresponse()
            answers[host] = (response.status, response.read().decode(errors="replace"))
            conn.close()
    finally:
        exporter.close()
    for host in (f"attacker.example:{port}", "attacker.example"):
        status, body = answers[host]
        assert status == 421 and "edgevoice_" not in body
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        status, body = answers[host]
        assert status == 200 and sample(body, "edgevoice_voice_to_voice_seconds_count") == 1


def test_served_on_a_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "metrics.sock"
    metrics = Metrics()
    metrics.observe(turn(0.4))
    exporter = MetricsExporter(metrics, listen=f"unix:{path}")
    try:
        assert stat.S_ISSOCK(path.stat().st_mode)
        data = scrape(path)
    finally:
        exporter.close()
    assert data.startswith(b"HTTP/1.0 200")
    assert sample(data.decode().split("\r\n\r\n", 1)[1], "edgevoice_voice_to_voice_seconds_count") == 1
    assert not path.exists()  # removed on close


def test_textfile_is_rewritten_and_a_failure_to_write_is_survived(tmp_path: Path) -> None:
    target = tmp_path / "edgevoice.prom"
    metrics = Metrics()
    exporter = MetricsExporter(metrics, textfile=str(target))
    metrics.observe(turn(0.4))
    exporter.update()
    assert sample(target.read_text(), "edgevoice_voice_to_voice_seconds_count") == 1
    metrics.observe(turn(0.6))
    exporter.update()
    assert sample(target.read_text(), "edgevoice_voice_to_voice_seconds_count") == 2
    assert [p.name for p in tmp_path.iterdir()] == ["edgevoice.prom"]  # no temporary file left
    gone = MetricsExporter(metrics, textfile=str(tmp_path / "missing-dir" / "x.prom"))
    gone.update()  # logged, not raised
    if os.geteuid() != 0:  # root ignores permissions; the missing directory above covers the failure path
        tmp_path.chmod(0o500)
        try:
            exporter.update()
        finally:
            tmp_path.chmod(0o700)


@pytest.mark.parametrize(
    ("listen", "environ", "expected"),
    [
        ("", {"RUNTIME_DIRECTORY": "/run/edgevoice"}, "unix:/run/edgevoice/metrics.sock"),
        ("", {"RUNTIME_DIRECTORY": "/run/edgevoice/:/run/other"}, "unix:/run/edgevoice/metrics.sock"),
        ("", {}, ""),  # not under the service: off
        ("", {"RUNTIME_DIRECTORY": "relative"}, ""),
        ("off", {"RUNTIME_DIRECTORY": "/run/edgevoice"}, ""),
        ("127.0.0.1:9464", {"RUNTIME_DIRECTORY": "/run/edgevoice"}, "127.0.0.1:9464"),
    ],
)
def test_the_default_endpoint_is_the_runtime_socket(listen: str, environ: dict[str, str], expected: str) -> None:
    assert effective_listen(listen, environ) == expected


def test_off_is_a_valid_listen_value() -> None:
    assert config_from_dict({"metrics": {"listen": "off"}}).metrics.listen == "off"


def test_the_live_assistant_serves_on_the_runtime_directory_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(tmp_path))
    exporter = start_metrics(config_from_dict({}))
    assert exporter is not None
    try:
        data = scrape(tmp_path / "metrics.sock")
    finally:
        exporter.close()
    assert data.startswith(b"HTTP/1.0 200") and b'edgevoice_turns_total{outcome="answered"} 0.0' in data
    monkeypatch.delenv("RUNTIME_DIRECTORY")
    assert start_metrics(config_from_dict({})) is None  # outside the service: off by default
