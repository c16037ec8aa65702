"""The read-out decision: whether the entry ranked first answers a question that the gate let through and no rule
read out, so that its answer is spoken as the operator wrote it instead of going to the language model.

A logistic regression over six features of the ranking (:data:`FEATURES`), fitted by ``scripts/fit_read_out.py`` on
the development halves of the benchmark venues (never their test halves) and kept in ``data/en/read_out.toml``
with the identity of the sentence encoder it was fitted for: another encoder's similarities mean something else, so
the decision is off with it. How it was measured: ``docs/decisions/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from edgevoice import data

__all__ = ["FEATURES", "ReadOut", "fit", "ranking_features"]

FEATURES = ("similarity", "similarity_margin", "relevance", "coverage", "coverage_margin", "lacks_asked")
"""The best entry's cosine with the question; that less the runner-up's; how much closer the question is to the
entry's answer than to its own question; the share of the question's words it holds; that less the runner-up's;
whether the question asks a kind of value (a price, a time...) its answer does not give."""

Floats = npt.NDArray[np.float64]


def ranking_features(
    order: Sequence[int], similarity: npt.ArrayLike, relevance: npt.ArrayLike, covered: npt.ArrayLike, lacks: bool
) -> Floats:
    """:data:`FEATURES` of a question whose entries are ranked ``order`` (best first), from the per-entry cosines,
    relevances and word coverages."""
    sim, rel, cov = (np.asarray(a, dtype=np.float64) for a in (similarity, relevance, covered))
    best = order[0]
    runner_sim = sim[order[1]] if len(order) > 1 else -1.0
    runner_cov = cov[order[1]] if len(order) > 1 else 0.0
    return np.array([sim[best], sim[best] - runner_sim, rel[best], cov[best], cov[best] - runner_cov, float(lacks)])


@dataclass(frozen=True)
class ReadOut:
    """A fitted decision: read out when :meth:`probability` reaches :attr:`threshold`."""

    encoder: str
    """The identity of the encoder the features were measured with (``Embedder.identity``)."""
    mean: Floats
    scale: Floats
    weights: Floats
    bias: float
    threshold: float

    @classmethod
    def packaged(cls) -> ReadOut:
        """The decision shipped in ``data/en/read_out.toml``."""
        return cls.from_table(data.table("en/read_out.toml"))

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> ReadOut:
        features = {f["name"]: f for f in table["feature"]}
        if tuple(features) != FEATURES:
            raise ValueError(f"read-out table: features {tuple(features)}, expected {FEATURES}")
        column = [[float(features[n][key]) for n in FEATURES] for key in ("mean", "scale", "weight")]
        mean, scale, weights = (np.array(c) for c in column)
        return cls(str(table["encoder"]), mean, scale, weights, float(table["bias"]), float(table["threshold"]))

    def as_table(self) -> dict[str, Any]:
        """The TOML tables :meth:`from_table` reads."""
        return {
            "encoder": self.encoder,
            "threshold": self.threshold,
            "bias": round(self.bias, 6),
            "feature": [
                {"name": n, "mean": round(float(m), 6), "scale": round(float(s), 6), "weight": round(float(w), 6)}
                for n, m, s, w in zip(FEATURES, self.mean, self.scale, self.weights, strict=True)
            ],
        }

    def probability(self, features: npt.ArrayLike) -> float:
        """The fitted probability that the best entry is the one whose facts answer the question."""
        z = float(np.dot((np.asarray(features, dtype=np.float64) - self.mean) / self.scale, self.weights)) + self.bias
        return float(1.0 / (1.0 + np.exp(-z)))

    def reads_out(self, features: npt.ArrayLike) -> bool:
        return self.probability(features) >= self.threshold


def fit(features: npt.ArrayLike, right: npt.ArrayLike, *, encoder: str, threshold: float, l2: float = 0.01) -> ReadOut:
    """A logistic regression of ``right`` (1: the best entry answers the question) on ``features`` (one row of
    :data:`FEATURES` a question), by gradient descent on standardized features with a small L2 penalty."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(right, dtype=np.float64)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    z = (x - mean) / scale
    weights, bias = np.zeros(x.shape[1]), 0.0
    for _ in range(5000):
        p = 1.0 / (1.0 + np.exp(-(z @ weights + bias)))
        weights -= 0.5 * (z.T @ (p - y) / len(y) + l2 * weights)
        bias -= 0.5 * float(np.mean(p - y))
    return ReadOut(encoder, mean, scale, weights, bias, threshold)
