"""helpers.text.encoding: one training sequence per pair, ``<bos> French <sep> English <eos>``, what encoding drops
and cuts (and counts), and the inference prompt and source budget. The tokenizer is conftest's ``tok``."""

from __future__ import annotations

import pytest

from helpers.text.encoding import encode_pairs, make_example, max_source_tokens, pair_lengths, prompt_ids
from helpers.text.sources import DataError
from tests.text.test_sources import FR_EN


def test_example_layout_is_bos_french_sep_english_eos(tok):
    ex = make_example(tok, "J'ai froid.", "I'm cold.", max_len=64)
    fr, en = tok.encode("J'ai froid."), tok.encode("I'm cold.")
    assert ex.input_ids == [1, *fr, 2, *en, 3]
    assert ex.prefix_len == len(fr) + 2
    assert prompt_ids(tok, "J'ai froid.") == ex.input_ids[: ex.prefix_len]
    assert make_example(tok, "J'ai froid.", "I'm cold.", max_len=len(ex.input_ids) - 1) is None


def test_encode_pairs_counts_dropped_and_truncated_pairs(tok):
    M = max(len(make_example(tok, fr, en, 10_000).input_ids) for fr, en in FR_EN)  # all of FR_EN fits in M
    long = ("Une très longue phrase.", "A very long sentence " * 20)
    pairs = FR_EN + [long]
    ex, report = encode_pairs(tok, pairs, max_len=M)
    assert len(ex) == len(FR_EN) and report.kept == len(FR_EN)
    assert (report.n_pairs, report.dropped_too_long, report.dropped_empty, report.truncated) == (len(pairs), 1, 0, 0)
    assert report.longest > M
    ex_t, rep_t = encode_pairs(tok, FR_EN + [long], max_len=M + 60, truncate=True)
    assert rep_t.truncated == 1 and rep_t.dropped_too_long == 0 and len(ex_t) == len(FR_EN) + 1
    assert len(ex_t[-1].input_ids) == M + 60 and rep_t.tokens_lost == rep_t.longest - (M + 60)
    assert ex_t[-1].input_ids[-1] != tok.eos_id  # the cut English has no end: the model is not taught to stop there
    assert "truncated 1" in rep_t.pretty()
    # a source that alone fills max_len leaves nothing to learn: dropped even with truncate
    _, rep_src = encode_pairs(tok, [(long[1], "Yes.")], max_len=20, truncate=True)
    assert rep_src.dropped_too_long == 1
    with pytest.raises(DataError, match="at least 4"):
        encode_pairs(tok, FR_EN, max_len=3)


def test_a_side_with_no_tokens_is_dropped_and_counted(tok):
    ex, report = encode_pairs(tok, [("", "Nothing."), ("Oui.", "Yes.")], max_len=32)
    assert len(ex) == 1 and report.dropped_empty == 1


def test_pair_lengths_in_words_and_tokens(tok):
    words = pair_lengths(FR_EN)
    assert words["fr"].tolist()[0] == 2 and words["en"].tolist()[0] == 2
    toks = pair_lengths(FR_EN, tok)
    assert (toks["fr"] >= words["fr"]).all()


def test_the_source_budget_leaves_half_the_positions_to_the_english(tok):
    assert [max_source_tokens(n) for n in (64, 48, 7, 4)] == [30, 22, 1, 1]  # never below one token
    for max_len in (16, 48, 64):
        # a source at the budget, with <bos> and <sep>, fills half of max_len at most: the English keeps the rest
        assert max_source_tokens(max_len) + 2 <= max_len // 2
    prompt = prompt_ids(tok, "Où est la gare ?")
    assert prompt[0] == tok.bos_id and prompt[-1] == tok.sep_id and prompt[1:-1] == tok.encode("Où est la gare ?")
