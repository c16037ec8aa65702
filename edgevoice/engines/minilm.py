"""Sentence embeddings from all-MiniLM-L6-v2, run in numpy: the one adapter for the embedding model.

The model is a 6-layer BERT encoder (hidden size 384, 12 attention heads, GELU feed-forward of 1536, LayerNorm
eps 1e-12, absolute positions up to 512); a sentence's embedding is the mean of its last hidden states over the
attention mask, L2-normalised (sentence-transformers' ``Transformer`` -> ``Pooling(mean)`` -> ``Normalize``), so
the dot product of two embeddings is their cosine similarity.

Weights are read with ``safetensors.numpy`` and text is tokenized with HuggingFace ``tokenizers`` (WordPiece,
lower-cased, from the model's own ``tokenizer.json``); neither torch nor sentence-transformers is needed. A short
question (15 tokens) costs one forward pass of a few milliseconds on one core. Shapes come from the weights; the
hyper-parameters the weights do not show (heads, eps, activation) from the model's ``config.json`` when given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from edgevoice.errors import ModelFormatError
from edgevoice.models.distributions import sha256_file

__all__ = ["BertShape", "MiniLmEmbedder", "erf"]

Floats = npt.NDArray[np.float32]

MAX_TOKENS = 256
"""sentence-transformers' ``max_seq_length`` for all-MiniLM-L6-v2: longer texts are cut (the model was trained on
up to 128 word pieces)."""


@dataclass(frozen=True)
class BertShape:
    """The encoder's hyper-parameters (all-MiniLM-L6-v2's by default)."""

    heads: int = 12
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"

    @classmethod
    def from_config(cls, path: Path) -> BertShape:
        """From a HuggingFace ``config.json`` of a BERT model."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelFormatError(f"{path}: cannot read the encoder config ({exc})") from exc
        if data.get("model_type") != "bert" or data.get("position_embedding_type", "absolute") != "absolute":
            raise ModelFormatError(f"{path}: not a BERT encoder with absolute positions")
        activation = data.get("hidden_act", "gelu")
        if activation not in ("gelu", "relu"):
            raise ModelFormatError(f"{path}: activation {activation!r} is not supported (gelu, relu)")
        return cls(int(data["num_attention_heads"]), float(data["layer_norm_eps"]), activation)


def erf(x: Floats) -> Floats:
    """The error function, elementwise (Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7, under float32's
    resolution near 1). numpy has none, and BERT's GELU is the exact ``x/2 (1 + erf(x/sqrt 2))``."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * np.exp(-a * a)
    return np.copysign(y, x).astype(np.float32, copy=False)


def _layer_norm(x: Floats, weight: Floats, bias: Floats, eps: float) -> Floats:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    out: Floats = centred / np.sqrt(var + eps) * weight + bias
    return out


@dataclass(frozen=True)
class _Layer:
    qkv: Floats  # (hidden, 3 * hidden): query, key and value projections side by side, transposed for x @ w
    qkv_bias: Floats
    out: Floats
    out_bias: Floats
    ln1: tuple[Floats, Floats]
    up: Floats
    up_bias: Floats
    down: Floats
    down_bias: Floats
    ln2: tuple[Floats, Floats]


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 (or another BERT sentence encoder with mean pooling) in numpy.

    ``weights``: ``model.safetensors``; ``tokenizer``: its ``tokenizer.json``; ``pooling``: sentence-transformers'
    ``1_Pooling/config.json`` (checked to say mean pooling); ``config``: the model's ``config.json``."""

    def __init__(
        self,
        weights: Path,
        tokenizer: Path,
        *,
        pooling: Path | None = None,
        config: Path | None = None,
        max_tokens: int = MAX_TOKENS,
        weights_sha256: str | None = None,
    ) -> None:
        """``weights_sha256``: the weights' checksum when already known (a model of the store, checked against its
        manifest); else the file is hashed here (about 0.2 s)."""
        from safetensors.numpy import load_file  # lazy: only a kiosk with semantic matching pays for the import
        from tokenizers import Tokenizer

        self.shape = BertShape.from_config(config) if config is not None else BertShape()
        if pooling is not None:
            _check_pooling(pooling)
        try:
            tensors = load_file(str(weights))
        except Exception as exc:  # safetensors raises its own SafetensorError on a bad file
            raise ModelFormatError(f"{weights}: not a readable safetensors file ({exc})") from exc
        try:
            self._load(tensors)
        except KeyError as exc:
            raise ModelFormatError(f"{weights}: not a BERT encoder (no tensor {exc.args[0]!r})") from None
        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer))
        except Exception as exc:  # tokenizers raises a plain Exception on a bad file
            raise ModelFormatError(f"{tokenizer}: not a tokenizers JSON file ({exc})") from exc
        self.max_tokens = min(max_tokens, self.positions.shape[0])
        self.tokenizer.no_padding()  # the file pads to 128: batches are padded here, to their longest text
        self.tokenizer.enable_truncation(self.max_tokens)
        checksum = weights_sha256 or sha256_file(Path(weights))
        self.identity = f"{type(self).__name__} {Path(weights).name} sha256:{checksum} max_tokens:{self.max_tokens}"
        """What names this encoder's output: embeddings cached under it are reused
        (:mod:`edgevoice.kiosk.embedding_cache`)."""

    def _load(self, t: dict[str, Any]) -> None:
        def f(name: str) -> Floats:
            return np.ascontiguousarray(t[name], dtype=np.float32)

        def prefixed(name: str) -> str:
            return name if name in t else f"bert.{name}"  # a BertModel saved inside another model

        def g(name: str) -> Floats:
            return f(prefixed(name))

        self.words = g("embeddings.word_embeddings.weight")
        self.positions = g("embeddings.position_embeddings.weight")
        self.token_type = g("embeddings.token_type_embeddings.weight")[0]
        self.ln_embed = (g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"))
        self.dim = int(self.words.shape[1])
        if self.dim % self.shape.heads:
            raise ModelFormatError(f"hidden size {self.dim} is not divisible by {self.shape.heads} heads")
        layers = []
        i = 0
        while prefixed(f"encoder.layer.{i}.attention.self.query.weight") in t:
            p = f"encoder.layer.{i}."
            qkv = [g(f"{p}attention.self.{n}.weight").T for n in ("query", "key", "value")]
            layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(np.concatenate(qkv, axis=1)),
                    qkv_bias=np.concatenate([g(f"{p}attention.self.{n}.bias") for n in ("query", "key", "value")]),
                    out=np.ascontiguousarray(g(f"{p}attention.output.dense.weight").T),
                    out_bias=g(f"{p}attention.output.dense.bias"),
                    ln1=(g(f"{p}attention.output.LayerNorm.weight"), g(f"{p}attention.output.LayerNorm.bias")),
                    up=np.ascontiguousarray(g(f"{p}intermediate.dense.weight").T),
                    up_bias=g(f"{p}intermediate.dense.bias"),
                    down=np.ascontiguousarray(g(f"{p}output.dense.weight").T),
                    down_bias=g(f"{p}output.dense.bias"),
                    ln2=(g(f"{p}output.LayerNorm.weight"), g(f"{p}output.LayerNorm.bias")),
                )
            )
            i += 1
        if not layers:
            raise KeyError("encoder.layer.0.attention.self.query.weight")
        self.layers = tuple(layers)

    def token_ids(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.int64], Floats]:
        """Token ids padded to the longest text (``[CLS] ... [SEP]``), and the attention mask (1.0: a real token)."""
        encodings = self.tokenizer.encode_batch(list(texts))
        longest = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), longest), dtype=np.int64)
        mask = np.zeros((len(texts), longest), dtype=np.float32)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1.0
        return ids, mask

    def embed(self, texts: Sequence[str], *, batch: int = 8) -> Floats:
        """One L2-normalised embedding per text, shape ``(len(texts), dim)``: the dot product of two is their
        cosine similarity. Texts are batched by length, so short ones are not padded to a long one; small batches
        are faster than one text at a time and than large padded batches."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch):
            rows = order[start : start + batch]
            ids, mask = self.token_ids([texts[i] for i in rows])
            out[rows] = self._forward(ids, mask)
        return out

    def _forward(self, ids: npt.NDArray[np.int64], mask: Floats) -> Floats:
        n, length = ids.shape
        heads, eps = self.shape.heads, self.shape.layer_norm_eps
        size = self.dim // heads
        x = self.words[ids] + self.positions[:length] + self.token_type
        x = _layer_norm(x, *self.ln_embed, eps)
        # masked keys get a large negative score, as in BERT's extended attention mask
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self.layers:
            qkv = x @ layer.qkv + layer.qkv_bias  # (n, L, 3H)
            qkv = qkv.reshape(n, length, 3, heads, size).transpose(2, 0, 3, 1, 4)  # (3, n, heads, L, size)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            weights = np.exp(scores)
            weights /= weights.sum(axis=-1, keepdims=True)
            context = (weights @ v).transpose(0, 2, 1, 3).reshape(n, length, self.dim)
            x = _layer_norm(context @ layer.out + layer.out_bias + x, *layer.ln1, eps)
            h = self._activation(x @ layer.up + layer.up_bias)
            x = _layer_norm(h @ layer.down + layer.down_bias + x, *layer.ln2, eps)
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: Floats = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out

    def _activation(self, h: Floats) -> Floats:
        if self.shape.activation == "relu":
            return np.maximum(h, np.float32(0.0))
        out: Floats = np.float32(0.5) * h * (np.float32(1.0) + erf(h * np.float32(1.0 / np.sqrt(2.0))))
        return out

    def close(self) -> None:
        """Drop the weights (about 90 MB); the embedder is unusable afterwards."""
        self.layers = ()
        self.words = np.zeros((0, self.dim), dtype=np.float32)


def _check_pooling(path: Path) -> None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"{path}: cannot read the pooling config ({exc})") from exc
    modes = {k for k, v in data.items() if k.startswith("pooling_mode_") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        raise ModelFormatError(f"{path}: only mean pooling is supported, the config asks for {sorted(modes)}")
