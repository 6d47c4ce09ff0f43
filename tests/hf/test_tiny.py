"""The tiny random stand-ins (helpers.hf.tiny): offline, random, and saying so.

Both are saved as a downloaded model is and read back by helpers.hf.loading.load_pretrained; their tokenizers are
trained on the pairs given; the Llama's has no pad token, as many real LMs' have none. The check that a stand-in
says it is not pretrained is shown to fail on a model without the mark.
"""

from __future__ import annotations

import torch

from helpers.hf import loading
from helpers.hf.translator import NOT_PRETRAINED


def load(folders, kind):
    """The stand-in of ``kind`` ("seq2seq" or "causal") as a translator."""
    return loading.load_pretrained(folders[kind])


def not_pretrained_problems(tr) -> list[str]:
    """What a stand-in must say of itself: [] when it reads as random weights everywhere it is shown."""
    problems = []
    if tr.pretrained:
        problems.append("it reads as pretrained")
    if "NOT pretrained" not in tr.describe():
        problems.append(f"its description hides it: {tr.describe()!r}")
    return problems


def test_stand_ins_load_offline_as_their_family_and_say_they_are_not_pretrained(folders):
    for kind in ("seq2seq", "causal"):
        tr = load(folders, kind)
        assert tr.kind == kind and not_pretrained_problems(tr) == [], kind
        assert 1_000 < tr.parameters() < 1_000_000, "tiny: seconds to build and to run"
    # the control: the same model without the mark reads as pretrained, and the check says so
    tr = load(folders, "causal")
    delattr(tr.model.config, NOT_PRETRAINED)
    assert not_pretrained_problems(tr) == [
        "it reads as pretrained",
        f"its description hides it: {tr.describe()!r}",
    ]


def test_tokenizers_are_trained_on_the_pairs_and_the_lm_has_no_pad_token(folders, pairs):
    marian, lm = load(folders, "seq2seq"), load(folders, "causal")
    fr, en = pairs[0]
    for tr in (marian, lm):  # a word of the pairs is a few pieces, never unknown
        ids = tr.tokenizer(fr, add_special_tokens=False)["input_ids"]
        assert 0 < len(ids) <= len(fr) // 2 and tr.tokenizer.unk_token_id not in ids
        assert tr.tokenizer.decode(ids, skip_special_tokens=True).strip() == fr
    # many real LMs have no pad token: the translator pads with <eos> and says so
    assert lm.tokenizer.pad_token == lm.tokenizer.eos_token == "<|endoftext|>"
    assert any("no pad token" in note for note in lm.notes) and not marian.notes


def test_the_same_seed_builds_the_same_weights(pairs, tmp_path):
    from helpers.hf.tiny import tiny_causal_lm

    a = loading.load_pretrained(tiny_causal_lm(pairs[:200], tmp_path / "a", seed=3)).model.state_dict()
    b = loading.load_pretrained(tiny_causal_lm(pairs[:200], tmp_path / "b", seed=3)).model.state_dict()
    c = loading.load_pretrained(tiny_causal_lm(pairs[:200], tmp_path / "c", seed=4)).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a), "another seed must give other weights"
