"""The tests of helpers.hf share one set of tiny random stand-ins (helpers.hf.tiny), built once per session."""

from __future__ import annotations

import pytest

from helpers.hf import tiny
from helpers.text.sources import load_path


@pytest.fixture(scope="session")
def pairs():
    pairs, _ = load_path("builtin", None, limit=1500, seed=0)
    return pairs


@pytest.fixture(scope="session")
def folders(pairs, tmp_path_factory):
    """A tiny MarianMT and a tiny Llama saved as downloaded models are, trained on nothing: random weights."""
    root = tmp_path_factory.mktemp("tiny_models")
    return {
        "seq2seq": tiny.tiny_marian(pairs, root / "marian"),
        "causal": tiny.tiny_causal_lm(pairs, root / "llama"),
    }
