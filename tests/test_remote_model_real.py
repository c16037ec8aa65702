"""The remote language model against a real OpenAI-compatible server: llama-cpp-python's, started on loopback with
the default model: a streamed reply; a request it refuses with an HTTP error, which the real local model answers; a
reply hedged with the local model, which the server answers; then the server is stopped and the local model
answers."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import httpx2
import pytest

from edgevoice.config import Config
from edgevoice.engines.openai_remote import RemoteChatModel
from edgevoice.errors import LanguageModelError
from edgevoice.events import Answered, ChatMessage
from edgevoice.interfaces import Engines
from edgevoice.models.configured import resolve
from edgevoice.models.store import ModelStore
from edgevoice.reply.hedge import HedgedModel
from tests.test_remote_model import free_port
from tests.waiting import poll

pytestmark = [pytest.mark.models, pytest.mark.slow]

START_S = 120.0
"""The longest the server may take to load the model and answer /v1/models on a loaded two-core machine."""
QUESTION = [
    ChatMessage("system", "You are a museum kiosk. Answer in one short sentence."),
    ChatMessage("user", "Is the museum open on Sundays?"),
]


@pytest.fixture(scope="module")
def llama_server(
    store: ModelStore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    model = resolve(store, "llm", Config().models.llm)
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024", "--n_threads", "1"]
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    base_url = f"http://127.0.0.1:{port}/v1"
    with log_path.open("wb") as log:  # a file, not a pipe: the model's loading talk would fill a pipe and block it
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def ready() -> bool:
        if server.poll() is not None:
            return True
        try:
            return httpx2.get(f"{base_url}/models", timeout=1.0).status_code == 200
        except httpx2.HTTPError:
            return False

    try:
        started = poll(ready, START_S, interval=0.25)
        if not started or server.poll() is not None:
            pytest.fail(f"llama-cpp-python's server did not start: {log_path.read_text(errors='replace')[-2000:]}")
        yield base_url, server
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


def test_a_real_server_answers_and_the_local_model_takes_over_when_it_is_gone(
    llama_server: tuple[str, subprocess.Popen[bytes]], engines: Engines
) -> None:
    base_url, server = llama_server
    remote = RemoteChatModel(base_url, model="default", stall_s=60.0)
    pieces = list(remote.stream_reply(QUESTION, max_tokens=16))
    assert len(pieces) > 1 and "".join(pieces).strip()  # streamed, piece by piece

    # A request the server refuses (top_p above 1; llama-cpp-python 0.3.36 answers HTTP 500): the local model answers.
    refusing = RemoteChatModel(base_url, top_p=1.5, stall_s=60.0)
    with pytest.raises(LanguageModelError) as refused:
        list(refusing.stream_reply(QUESTION, max_tokens=16))
    assert refused.value.code == "llm_remote_http" and re.search(r"HTTP [45]\d\d", refused.value.message)
    hedged = HedgedModel(refusing, engines.llm, hedge_s=120.0)
    text = "".join(hedged.stream_reply(QUESTION, max_tokens=16))
    print(f"local, the server refusing: {text!r}")
    assert text.strip() and hedged.answered_by == Answered("local", "llm_remote_http")
    refusing.close()

    # A budget no loopback reply misses: the remote answers and the local model is never asked.
    hedged = HedgedModel(remote, engines.llm, hedge_s=120.0)
    text = "".join(hedged.stream_reply(QUESTION, max_tokens=16))
    print(f"remote: {text!r}")
    assert text.strip() and hedged.answered_by == Answered("remote")

    server.terminate()
    server.wait(10)
    text = "".join(hedged.stream_reply(QUESTION, max_tokens=16))
    print(f"local, the server gone: {text!r}")
    assert text.strip() and hedged.answered_by == Answered("local", "llm_remote_unreachable")
    remote.close()  # the local model belongs to the session's engines: not closed here
