"""The knowledge's embeddings kept on disk (edgevoice/kiosk/embedding_cache.py): reused for unchanged text, embedded
again for changed text or another encoder, rebuilt from a broken file, written whole by concurrent writers, kept as
a background embedding goes and resumed after it was stopped."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from edgevoice.bench.knowledge_size import synthetic_knowledge
from edgevoice.data import sample_persona
from edgevoice.kiosk import background_embedding, embedding_cache
from edgevoice.kiosk.embedding_cache import EmbeddingCache
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.knowledge import parse_knowledge
from edgevoice.kiosk.semantic import SemanticIndex


class HashEmbedder:
    """Text -> a unit vector drawn from its hash (and the encoder's name): the same text, the same vector."""

    def __init__(self, identity: str = "hash-encoder v1") -> None:
        self.identity = identity
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        out = np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, 8), np.float32)
        return out.astype(np.float32)

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(f"{self.identity}|{text}".encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
        return v / np.linalg.norm(v)


TEXTS = ["Where is the cafe?", "Can I take photos?", "Where is the cafe?", "When do you open?"]


def test_a_second_start_embeds_nothing_and_gives_the_same_vectors(tmp_path: Path) -> None:
    first, second = HashEmbedder(), HashEmbedder()
    cold = EmbeddingCache(tmp_path, first.identity).embed(first, TEXTS)
    assert first.embedded == ["Where is the cafe?", "Can I take photos?", "When do you open?"]  # each text once
    cache = EmbeddingCache(tmp_path, second.identity)
    warm = cache.embed(second, TEXTS)
    assert second.embedded == []
    assert (cache.hits, cache.misses) == (3, 0)
    np.testing.assert_array_equal(cold, warm)
    np.testing.assert_array_equal(warm[1], second.vector("Can I take photos?"))


def test_only_changed_text_is_embedded_again(tmp_path: Path) -> None:
    EmbeddingCache(tmp_path, "hash-encoder v1").embed(HashEmbedder(), TEXTS)
    embedder = HashEmbedder()
    changed = [*TEXTS[:3], "When do you close?"]
    vectors = EmbeddingCache(tmp_path, embedder.identity).embed(embedder, changed)
    assert embedder.embedded == ["When do you close?"]
    np.testing.assert_array_equal(vectors[3], embedder.vector("When do you close?"))
    # the earlier version's vectors are still kept: switching back embeds nothing
    back = HashEmbedder()
    EmbeddingCache(tmp_path, back.identity).embed(back, TEXTS)
    assert back.embedded == []


def test_another_encoder_embeds_everything_again(tmp_path: Path) -> None:
    EmbeddingCache(tmp_path, "hash-encoder v1").embed(HashEmbedder(), TEXTS)
    other = HashEmbedder("hash-encoder v2")
    vectors = EmbeddingCache(tmp_path, other.identity).embed(other, TEXTS)
    assert len(other.embedded) == 3
    np.testing.assert_array_equal(vectors[0], other.vector(TEXTS[0]))


def _save(path: Path, **arrays: np.ndarray) -> None:
    with path.open("wb") as f:
        np.savez(f, encoder=np.array("hash-encoder v1"), **arrays)


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),  # cut short
        lambda p: p.write_bytes(b"not an archive at all"),
        lambda p: _save(p, keys=np.zeros((2, 32), np.uint8), vectors=np.zeros((3, 8), np.float32)),
    ],
    ids=["truncated", "garbage", "mismatched-shapes"],
)
def test_a_broken_cache_file_is_a_warning_and_is_rebuilt(tmp_path: Path, damage, caplog) -> None:  # type: ignore[no-untyped-def]
    cache = EmbeddingCache(tmp_path, "hash-encoder v1")
    cache.embed(HashEmbedder(), TEXTS)
    damage(cache.path)
    embedder = HashEmbedder()
    with caplog.at_level(logging.WARNING, logger="edgevoice.kiosk.embedding_cache"):
        vectors = EmbeddingCache(tmp_path, embedder.identity).embed(embedder, TEXTS)
    assert "embedded again" in caplog.text and str(cache.path) in caplog.text
    assert len(embedder.embedded) == 3
    np.testing.assert_array_equal(vectors[2], embedder.vector(TEXTS[2]))
    again = HashEmbedder()
    EmbeddingCache(tmp_path, again.identity).embed(again, TEXTS)
    assert again.embedded == []  # rebuilt


def test_an_unwritable_directory_is_a_warning_not_a_failure(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    blocked = tmp_path / "file"
    blocked.write_text("a file where the directory should be")
    embedder = HashEmbedder()
    with caplog.at_level(logging.WARNING, logger="edgevoice.kiosk.embedding_cache"):
        vectors = EmbeddingCache(blocked / "embeddings", embedder.identity).embed(embedder, TEXTS)
    assert "cannot be written" in caplog.text
    np.testing.assert_array_equal(vectors[0], embedder.vector(TEXTS[0]))


def _write_many(directory: str, worker: int, rounds: int) -> None:
    embedder = HashEmbedder()
    for r in range(rounds):
        texts = [f"worker {worker} round {r} text {i}" for i in range(50)] + TEXTS
        EmbeddingCache(Path(directory), embedder.identity).embed(embedder, texts)


def test_concurrent_writers_leave_a_whole_file(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(str(tmp_path), w, 8)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left behind
    embedder = HashEmbedder()
    cache = EmbeddingCache(tmp_path, embedder.identity)
    vectors = cache.embed(embedder, TEXTS)
    assert embedder.embedded == []  # the file is whole and holds the texts every writer wrote
    np.testing.assert_array_equal(vectors[1], embedder.vector(TEXTS[1]))


class FailingEmbedder(HashEmbedder):
    """Fails on its third call: a start cut short."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(self.embedded) >= 4:
            raise KeyboardInterrupt
        return super().embed(texts)


def test_a_start_cut_short_keeps_what_it_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_cache, "CHUNK", 2)
    monkeypatch.setattr(embedding_cache, "CHECKPOINT_SECONDS", 0.0)
    texts = [f"text {i}" for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        EmbeddingCache(tmp_path, "hash-encoder v1").embed(FailingEmbedder(), texts)
    resumed = HashEmbedder()
    vectors = EmbeddingCache(tmp_path, resumed.identity).embed(resumed, texts)
    assert resumed.embedded == ["text 4", "text 5"]  # the first two calls' four texts were kept
    np.testing.assert_array_equal(vectors[0], resumed.vector("text 0"))


def test_the_file_keeps_at_most_max_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_cache, "MAX_ROWS", 5)
    embedder = HashEmbedder()
    EmbeddingCache(tmp_path, embedder.identity).embed(embedder, [f"old {i}" for i in range(4)])
    cache = EmbeddingCache(tmp_path, embedder.identity)
    cache.embed(embedder, [f"new {i}" for i in range(3)])
    with np.load(cache.path) as archive:
        assert len(archive["keys"]) == 5  # the three current texts first, then two of the earlier ones
        assert {row.tobytes() for row in archive["keys"][:3]} == {cache.key(f"new {i}") for i in range(3)}


def test_keys_ending_in_zero_bytes_are_found_again(tmp_path: Path) -> None:
    texts = [f"text {i}" for i in range(1500)]
    cache = EmbeddingCache(tmp_path, "hash-encoder v1")
    assert sum(cache.key(t).endswith(b"\0") for t in texts) > 1  # 1 in 256 digests
    cache.embed(HashEmbedder(), texts)
    again = EmbeddingCache(tmp_path, "hash-encoder v1")
    again.embed(HashEmbedder(), texts)
    assert (again.hits, again.misses) == (1500, 0)


def test_the_kiosk_reuses_its_entries_embeddings(tmp_path: Path) -> None:
    knowledge = "Can I take photos? Yes, without flash.\nWhere are the toilets? On every floor.\n"
    first = HashEmbedder()
    Kiosk(sample_persona(), knowledge, embedder=first, embedding_cache=tmp_path)
    assert first.embedded
    second = HashEmbedder()
    kiosk = Kiosk(sample_persona(), knowledge + "Is there a cafe? Yes, on the ground floor.\n", embedder=second,
                  embedding_cache=tmp_path)  # fmt: skip
    assert second.embedded and all("cafe" in t.lower() or "ground floor" in t for t in second.embedded)
    assert kiosk.semantic is not None and kiosk.semantic.questions.shape == (3, 8)
    np.testing.assert_array_equal(kiosk.semantic.questions[0], second.vector("Can I take photos?"))


class GatedEmbedder(HashEmbedder):
    """Says the appliance is busy (:attr:`idle` cleared) once the background embedding has made ``chunks`` calls."""

    def __init__(self, chunks: int) -> None:
        super().__init__()
        self.chunks = chunks
        self.background: list[str] = []
        self.idle = threading.Event()
        self.idle.set()
        self.busy = threading.Event()
        """Set with the call that made the appliance busy."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if threading.current_thread().name == "knowledge-embedding":
            self.background.extend(texts)
            if len(self.background) >= self.chunks * background_embedding.CHUNK:
                self.idle.clear()
                self.busy.set()
        return super().embed(texts)


def test_a_background_embedding_waits_for_idle_stops_on_close_and_a_restart_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text, _ = synthetic_knowledge(200)
    texts = set(SemanticIndex.texts(parse_knowledge(text)))
    first = GatedEmbedder(chunks=2)
    with caplog.at_level(logging.INFO, logger="edgevoice.kiosk.background_embedding"):
        kiosk = Kiosk(
            sample_persona(),
            text,
            embedder=first,
            embedding_cache=tmp_path,
            embed_now_texts=100,
            idle=first.idle.is_set,
        )
        assert first.busy.wait(10)  # two chunks embedded, then a turn began: it waits, and is closed while waiting
        assert kiosk.close(10) and kiosk.semantic is None
    assert len(first.background) == 2 * background_embedding.CHUNK  # nothing embedded while busy
    assert "it resumes from the embedding cache at the next start" in caplog.text
    second = HashEmbedder()
    restarted = Kiosk(sample_persona(), text, embedder=second, embedding_cache=tmp_path, embed_now_texts=len(texts))
    assert restarted.semantic is not None  # embedded before ready: within the limit given
    assert set(second.embedded) == texts - set(first.background)  # what the first start embedded was kept
    np.testing.assert_array_equal(
        restarted.semantic.questions[0], second.vector(SemanticIndex.texts(restarted.entries)[0])
    )
