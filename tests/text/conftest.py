"""The small tokenizer the tokenizer, example and batch tests share (trained once per session, about a second)."""

from __future__ import annotations

import pytest

from helpers.text import corpus
from helpers.text.tokenizer import Tokenizer
from tests.text.test_sources import FR_EN


@pytest.fixture(scope="session")
def tok(tmp_path_factory) -> Tokenizer:
    pairs = corpus.builtin_corpus(n=3000, seed=0, difficulty=1) + FR_EN * 3
    return Tokenizer.train(pairs, vocab_size=500, out_dir=tmp_path_factory.mktemp("tok"))
