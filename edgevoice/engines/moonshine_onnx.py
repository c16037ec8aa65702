"""Speech recognition with Moonshine tiny-en in the project's ONNX Runtime: the one adapter for Moonshine.

The model is an encoder (raw 16 kHz samples in, about 41 hidden frames a second out: its cost follows the audio's
length, with no fixed window) and a merged decoder whose ``use_cache_branch`` input chooses between the first step
(computing the cross-attention keys and values from the encoder's output) and the later ones (reusing them and the
self-attention cache). Decoding is greedy. The tokenizer is ``tokenizer.bin``: one length-prefixed byte string per
token id, SentencePiece style (``▁`` for a space, ids 3-258 single bytes).

The decoder's ``encoder_attention_mask`` has one entry per *sample*, like the encoder's: the graph takes every
384th entry (the encoder's total stride) and keeps as many as there are encoder frames. A mask with one entry per
frame works by broadcasting while it has fewer than 385 entries and fails from about 9.3 s of audio on (the shape
error first seen on a 10 s clip). Audio longer than ``PIECE_SECONDS`` is cut
into pieces at the quietest 100 ms near each piece's end and the pieces' texts are joined: nothing is dropped.
The silence, noise and phantom defences are whisper's (:mod:`edgevoice.engines.whispercpp`).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

from edgevoice.audio import SAMPLE_RATE
from edgevoice.engines.audio_screen import NOISE_FLATNESS, screen_audio
from edgevoice.engines.onnx_session import open_session
from edgevoice.engines.speech_evidence import speech_evidence
from edgevoice.engines.whispercpp import (
    DEFAULT_PHANTOM_PHRASES,
    SAID_PHANTOM_PHRASES,
    collapse_repeated_sentences,
    phantom_reason,
)
from edgevoice.errors import ConfigError, ModelFormatError, RecognizerError
from edgevoice.events import Transcript
from edgevoice.models.ort_files import parse_token_list

__all__ = ["MoonshineOnnxRecognizer", "quietest_cut", "read_tokenizer", "split_pieces"]

BOS, EOS = 1, 2
BYTE_TOKENS = range(3, 259)
PIECE_SECONDS = 16.0  # longest stretch decoded at once; longer audio is cut at its quietest point
CUT_SEARCH_SECONDS = 6.0  # where to look for that point: the last seconds of a full piece
CUT_FRAME = 1600  # 100 ms
TOKENS_PER_SECOND = 8  # decode budget; speech needs about 4, a loop more
PAD_SECONDS = 0.1  # silence added on both sides of each piece
_SPACE = "\u2581"


def read_tokenizer(path: Path, vocab_size: int) -> list[bytes]:
    """The token byte strings of ``tokenizer.bin`` (:func:`~edgevoice.models.ort_files.parse_token_list`), checked
    to hold exactly the decoder's ``vocab_size`` tokens."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot read the Moonshine tokenizer ({exc})") from exc
    tokens = parse_token_list(raw, path)
    if len(tokens) != vocab_size:
        raise ModelFormatError(f"{path}: Moonshine tokenizer holds {len(tokens)} tokens, the decoder {vocab_size}")
    return tokens


def quietest_cut(audio: npt.NDArray[np.float32], start: int, end: int) -> int:
    """The sample index between ``start`` and ``end`` at the middle of the quietest 100 ms frame."""
    span = audio[start:end]
    n = span.size // CUT_FRAME
    if n < 1:
        return end
    energy = np.square(span[: n * CUT_FRAME].astype(np.float64)).reshape(n, CUT_FRAME).mean(axis=1)
    return start + int(np.argmin(energy)) * CUT_FRAME + CUT_FRAME // 2


def split_pieces(audio: npt.NDArray[np.float32], piece: int, search: int) -> list[npt.NDArray[np.float32]]:
    """``audio`` cut into pieces of at most ``piece`` samples, each cut at the quietest point of the last
    ``search`` samples before the limit; together they hold every sample."""
    pieces = []
    start = 0
    while audio.size - start > piece:
        cut = quietest_cut(audio, start + piece - search, start + piece)
        pieces.append(audio[start:cut])
        start = cut
    pieces.append(audio[start:])
    return pieces


class MoonshineOnnxRecognizer:
    """Moonshine speech-to-text from its encoder, merged decoder and tokenizer files (a
    :class:`~edgevoice.interfaces.Recognizer`). Greedy, deterministic, no prompt (Moonshine takes none)."""

    sample_rate: int = SAMPLE_RATE

    def __init__(
        self,
        encoder: Path,
        decoder: Path,
        tokenizer: Path,
        *,
        threads: int = 2,
        noise_flatness: float | None = NOISE_FLATNESS,
        phantom_phrases: frozenset[str] = DEFAULT_PHANTOM_PHRASES,
    ) -> None:
        if threads < 1:
            raise ConfigError(f"asr threads must be >= 1, got {threads}")
        self.threads = threads
        self.audio_ctx = 0  # whisper's knob, kept so a benchmark can set it on either engine; unused here
        self.noise_flatness = noise_flatness
        self.phantom_phrases = phantom_phrases
        self._encoder = open_session(Path(encoder), threads=threads, varying_shapes=True)
        self._decoder = open_session(Path(decoder), threads=threads, varying_shapes=True)
        self._check_shapes(Path(encoder), Path(decoder))
        vocab = self._decoder.get_outputs()[0].shape[-1]
        self._tokens = read_tokenizer(Path(tokenizer), int(vocab))
        self._special = {
            i for i, t in enumerate(self._tokens) if t.startswith(b"<") and t.endswith(b">") and len(t) > 2
        }
        self._lock = threading.Lock()
        self._closed = False

    def _check_shapes(self, encoder: Path, decoder: Path) -> None:
        enc_in = {i.name for i in self._encoder.get_inputs()}
        if not {"input_values", "attention_mask"} <= enc_in:
            raise ModelFormatError(f"{encoder}: not a Moonshine encoder (inputs {sorted(enc_in)})")
        dec_in = {i.name: i.shape for i in self._decoder.get_inputs()}
        self._layers = sorted({int(n.split(".")[1]) for n in dec_in if n.startswith("past_key_values.")})
        need = {"input_ids", "encoder_hidden_states", "encoder_attention_mask", "use_cache_branch"}
        if not need <= set(dec_in) or not self._layers:
            raise ModelFormatError(f"{decoder}: not a Moonshine merged decoder (inputs {sorted(dec_in)})")
        shape = dec_in[f"past_key_values.{self._layers[0]}.decoder.key"]
        self._heads, self._head_dim = int(shape[1]), int(shape[3])
        hidden = self._encoder.get_outputs()[0].shape[-1]
        if dec_in["encoder_hidden_states"][-1] != hidden:
            raise ModelFormatError(f"{decoder}: its hidden size does not match the encoder {encoder}")

    def transcribe_partial(self, audio: npt.NDArray[np.float32], *, prompt: str = "") -> Transcript:
        """A quick look at speech still in progress: the same decode (Moonshine has no slower retry)."""
        return self.transcribe(audio, prompt=prompt)

    def transcribe(self, audio: npt.NDArray[np.float32], *, prompt: str = "") -> Transcript:
        """Transcribe mono float32 audio at 16 kHz, any length; ``prompt`` is ignored (Moonshine takes none)."""
        samples, screened = screen_audio(audio, self.noise_flatness)
        if screened is not None:
            return screened
        pieces = split_pieces(samples, int(PIECE_SECONDS * SAMPLE_RATE), int(CUT_SEARCH_SECONDS * SAMPLE_RATE))
        texts, logps = [], []
        for piece in pieces:
            text, piece_logps = self._decode(piece)
            if text:
                texts.append(text)
            logps.extend(piece_logps)
        text = " ".join(texts)
        if not text:
            return Transcript(text="", filtered="no_speech")
        reason = phantom_reason(text, self.phantom_phrases)
        if (
            reason is not None
            and reason.removeprefix("phrase:") in SAID_PHANTOM_PHRASES
            and speech_evidence(samples).spoken
        ):
            reason = None  # "Thank you." that was said, not made up
        if reason is not None:
            return Transcript(text="", filtered=reason)
        confidence = math.exp(sum(logps) / len(logps)) if logps else None
        return Transcript(text=text, confidence=confidence)

    def _decode(self, piece: npt.NDArray[np.float32]) -> tuple[str, list[float]]:
        """(text, log-probabilities of its text tokens) of one greedy decode of ``piece``."""
        pad = np.zeros(int(PAD_SECONDS * SAMPLE_RATE), dtype=np.float32)
        x = np.concatenate([pad, piece, pad])[None, :]
        max_tokens = math.ceil(x.shape[1] / SAMPLE_RATE * TOKENS_PER_SECOND) + 4
        with self._lock:
            if self._closed:
                raise RecognizerError("recognizer is closed")
            try:
                ids, logps = self._greedy(x, max_tokens)
            except RecognizerError:
                raise
            except Exception as exc:  # onnxruntime raises its own types
                raise RecognizerError(f"Moonshine transcription failed: {exc}") from exc
        raw = b"".join(self._tokens[i] for i in ids if i not in self._special)
        text = " ".join(raw.decode("utf-8", errors="replace").replace(_SPACE, " ").split())
        if len(ids) >= max_tokens:
            text = collapse_repeated_sentences(text)
        return text, logps

    def _greedy(self, x: npt.NDArray[np.float32], max_tokens: int) -> tuple[list[int], list[float]]:
        mask = np.ones(x.shape, dtype=np.int64)  # one per sample, for the decoder too (see the module's doc)
        hidden = self._encoder.run(None, {"input_values": x, "attention_mask": mask})[0]
        empty = np.zeros((1, self._heads, 0, self._head_dim), dtype=np.float32)
        past: dict[str, npt.NDArray[np.float32]] = {}
        for layer in self._layers:
            for part in ("decoder", "encoder"):
                for kind in ("key", "value"):
                    past[f"past_key_values.{layer}.{part}.{kind}"] = empty
        token, ids, logps = BOS, [], []
        output_names = [o.name for o in self._decoder.get_outputs()]
        for step in range(max_tokens):
            feeds = {
                "input_ids": np.array([[token]], dtype=np.int64),
                "encoder_hidden_states": hidden,
                "encoder_attention_mask": mask,
                "use_cache_branch": np.array([step > 0]),
                **past,
            }
            outputs = dict(zip(output_names, self._decoder.run(None, feeds), strict=True))
            logits = outputs["logits"][0, -1].astype(np.float64)
            token = int(np.argmax(logits))
            if token == EOS:
                break
            ids.append(token)
            if token not in self._special:
                logps.append(float(logits[token] - logits.max() - np.log(np.exp(logits - logits.max()).sum())))
            for name, value in outputs.items():
                if name.startswith("present.") and (step == 0 or ".decoder." in name):
                    past["past_key_values." + name.removeprefix("present.")] = value
        return ids, logps

    def close(self) -> None:
        """Refuse further transcriptions; the sessions are freed with the object. Idempotent."""
        with self._lock:
            self._closed = True

    def __enter__(self) -> MoonshineOnnxRecognizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
