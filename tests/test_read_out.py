"""The learned read-out (edgevoice/kiosk/read_out.py): the fitted decision, its data file, and its place in the gate
(on a fake encoder; the real encoder's decisions are in tests/test_semantic.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from edgevoice.data import sample_persona
from edgevoice.kiosk import direct_answers
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.matching import Matcher
from edgevoice.kiosk.read_out import FEATURES, ReadOut, fit, ranking_features
from tests.test_semantic import FAKE_KNOWLEDGE, ConceptEmbedder


class NamedConceptEmbedder(ConceptEmbedder):
    identity = "concept-encoder v1"


def always(encoder: str, *, threshold: float = 0.5) -> ReadOut:
    """A decision that reads out whatever the features (a large bias, no weights)."""
    n = len(FEATURES)
    return ReadOut(encoder, np.zeros(n), np.ones(n), np.zeros(n), 20.0, threshold)


def test_the_packaged_decision_loads_names_its_encoder_and_round_trips() -> None:
    packaged = ReadOut.packaged()
    assert "all-MiniLM-L6-v2" in packaged.encoder and 0.5 <= packaged.threshold < 1.0
    again = ReadOut.from_table(packaged.as_table())
    features = np.array([0.6, 0.2, 0.0, 0.5, 0.3, 0.0])
    assert again.probability(features) == pytest.approx(packaged.probability(features), abs=1e-5)
    # closer in meaning, further ahead of the runner-up, and its answer fits better: more likely right
    better = features + np.array([0.2, 0.2, 0.2, 0.0, 0.0, 0.0])
    assert packaged.probability(better) > packaged.probability(features)
    # asking a kind of value the answer does not give: less likely
    assert packaged.probability(features + np.eye(6)[5]) < packaged.probability(features)


def test_a_table_with_other_features_is_refused() -> None:
    table = ReadOut.packaged().as_table()
    table["feature"] = table["feature"][:-1]
    with pytest.raises(ValueError, match="features"):
        ReadOut.from_table(table)


def test_fit_separates_rows_the_features_separate() -> None:
    rng = np.random.default_rng(7)
    right = rng.random(200) < 0.5
    x = rng.normal(size=(200, len(FEATURES))) * 0.1
    x[:, 0] += np.where(right, 0.8, 0.3)  # only the similarity tells them apart
    model = fit(x, right, encoder="e", threshold=0.9)
    p = np.array([model.probability(row) for row in x])
    assert p[right].min() > 0.5 > p[~right].max()
    assert model.weights[0] == max(model.weights, key=abs)


def test_ranking_features_of_one_entry_and_of_a_ranking() -> None:
    f = ranking_features([1, 0], [0.2, 0.7], [0.0, -0.1], [0.5, 1.0], True)
    assert f == pytest.approx([0.7, 0.5, -0.1, 1.0, 0.5, 1.0])
    only = ranking_features([0], [0.4], [0.1], [0.0], False)
    assert only == pytest.approx([0.4, 1.4, 0.1, 0.0, 0.0, 0.0])


def test_the_gate_reads_out_what_the_rules_left_to_the_model_only_for_its_own_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the rules' own read-out by meaning off: on the fake encoder every match is exact, and the question is then
    # the model's (passed by the gate, read out by no rule)
    monkeypatch.setattr(direct_answers, "SEMANTIC_DIRECT", 2.0)
    monkeypatch.setattr(direct_answers, "SEMANTIC_SAME", 2.0)  # and its read-out of a question said again
    question = "Is photography with a camera allowed?"
    rules = Kiosk(sample_persona(), FAKE_KNOWLEDGE, embedder=NamedConceptEmbedder(), learned_read_out=False)
    assert rules.ground(question).known and rules.ground(question).direct is None

    kiosk = Kiosk(sample_persona(), FAKE_KNOWLEDGE, embedder=NamedConceptEmbedder(), learned_read_out=False)
    kiosk.matcher.read_out = always(NamedConceptEmbedder.identity)
    assert kiosk.ground(question).direct == "Yes, without flash."
    # a question the gate stops stays stopped, whatever the decision says
    assert not kiosk.ground("Will it rain tomorrow?").known
    # never applied to an encoder it was not fitted for, nor with direct answers off
    other = Matcher(kiosk.entries, frozenset(), embedder=NamedConceptEmbedder(), read_out=always("another encoder"))
    assert other.read_out is None and other.ground(question).direct is None
    same = Matcher(kiosk.entries, frozenset(), embedder=NamedConceptEmbedder(), read_out=always("concept-encoder v1"))
    assert same.read_out is not None and same.ground(question).direct == "Yes, without flash."
    off = Matcher(
        kiosk.entries, frozenset(), embedder=NamedConceptEmbedder(), read_out=always("concept-encoder v1"),
        direct_answers=False,
    )  # fmt: skip
    assert off.ground(question).direct is None
    # a threshold the probability does not reach leaves it to the model
    kiosk.matcher.read_out = replace(always(NamedConceptEmbedder.identity), bias=-20.0)
    kiosk._grounded.clear()
    assert kiosk.ground(question).direct is None
