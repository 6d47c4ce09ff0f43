"""helpers.embeddings: the four starts of the token embeddings (learned, random frozen, word2vec, a pretrained
LM's), word2vec's vectors, a frozen table staying put, the rows notebook 05 would train, and their comparison."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from helpers import embeddings
from helpers.nn import build_model
from helpers.text.tokenizer import Tokenizer
from helpers.training import config as C


def _toy_tokenizer():
    pairs = [(f"le chat {i} dort", f"the cat {i} sleeps") for i in range(40)] + [("un chien", "a dog")] * 10
    return Tokenizer.train(pairs, vocab_size=300, num_threads=1), [s for p in pairs for s in p]


def test_word2vec_vectors_are_seeded_scaled_and_skip_special_and_byte_pieces():
    tok, sentences = _toy_tokenizer()
    transfer = embeddings.word2vec_embeddings(tok, sentences, 16, seed=0)
    assert transfer.vectors.shape == (len(transfer.ids), 16)
    assert transfer.vectors.std().item() == pytest.approx(0.02, rel=1e-3)
    assert transfer.vectors.mean(0).abs().max().item() < 1e-6, "centred, as transfer_embeddings centres"
    assert int(transfer.ids.min()) > tok.unk_id and transfer.skipped["byte"] == 256
    assert not any(tok.id_to_piece(int(i)).startswith("<0x") for i in transfer.ids)
    assert torch.equal(embeddings.word2vec_embeddings(tok, sentences, 16, seed=0).vectors, transfer.vectors)
    assert not torch.allclose(embeddings.word2vec_embeddings(tok, sentences, 16, seed=1).vectors, transfer.vectors)


def test_start_embeddings_freezes_only_the_random_frozen_start():
    tok, sentences = _toy_tokenizer()
    cfg = C.preset_config("tiny", d_model=16, n_head=2)
    models = {}
    for kind in embeddings.EMBEDDING_KINDS[:3]:
        torch.manual_seed(0)
        models[kind] = build_model(cfg.model_config(tok.vocab_size))
        embeddings.start_embeddings(models[kind], tok, kind, sentences=sentences)
    assert models["learned"].tok_emb.weight.requires_grad and models["word2vec"].tok_emb.weight.requires_grad
    assert not models["random frozen"].tok_emb.weight.requires_grad
    assert torch.equal(models["learned"].tok_emb.weight, models["random frozen"].tok_emb.weight)
    changed = (models["word2vec"].tok_emb.weight != models["learned"].tok_emb.weight).any(1)
    assert changed[tok.unk_id + 1 + 256 :].any() and not changed[: tok.unk_id + 1 + 256].any()
    with pytest.raises(ValueError, match="lm="):
        embeddings.start_embeddings(models["learned"], tok, "pretrained LM")
    with pytest.raises(ValueError, match="known"):
        embeddings.start_embeddings(models["learned"], tok, "glove")


def test_a_frozen_embedding_stays_put_while_the_rest_trains():
    from helpers.text import data as D

    cfg = C.preset_config("tiny", seed=0, steps=3, warmup_steps=1)
    prepared = D.prepare_data("builtin", cfg, None, seed=0, limit=300, progress=False)
    row = embeddings.embedding_row(prepared, cfg, "random frozen", eval_sentences=5)
    learned = embeddings.embedding_row(prepared, cfg, "learned", eval_sentences=5)
    emb = cfg.model_config(prepared.tokenizer.vocab_size)
    assert learned["trainable"] - row["trainable"] == emb.vocab_size * emb.d_model
    assert row["steps"] == learned["steps"] == 3 and len(row["hypotheses_new"]) == 5


def test_the_learned_and_pretrained_lm_rows_are_the_rows_notebook_05_would_train(tmp_path):
    """embedding_row repeats experiments.run_variant's steps: same BLEU for the learned start and for a tiny LM's."""
    from helpers import experiments as X
    from helpers.hf import tiny
    from helpers.text import data as D

    torch.set_num_threads(1)
    cfg = C.preset_config("tiny", seed=0, steps=8, warmup_steps=2)
    prepared = D.prepare_data("builtin", cfg, None, seed=0, limit=400, progress=False)
    lm = str(tiny.tiny_causal_lm(prepared.splits.train[:100], tmp_path / "lm", seed=0))
    for kind, changes in (("learned", {}), ("pretrained LM", {"init_embeddings": lm})):
        mine = embeddings.embedding_row(prepared, cfg, kind, lm=lm, eval_sentences=20)
        theirs = X.run_variant(prepared, replace(cfg, **changes), label=kind, eval_sentences=20)
        assert (mine["bleu_new"], mine["bleu_valid"], mine["val_loss"]) == (
            theirs["bleu_new"],
            theirs["bleu_valid"],
            theirs["val_loss"],
        ), kind


def test_compare_embeddings_pairs_each_row_with_the_reference():
    refs = ["the cat sleeps on the mat"] * 10
    rows = [
        {"label": "learned", "bleu_new": 1.0, "hypotheses_new": ["a dog"] * 10, "references_new": refs},
        {"label": "word2vec", "bleu_new": 100.0, "hypotheses_new": refs, "references_new": refs},
    ]
    (c,) = embeddings.compare_embeddings(rows, resamples=50)
    assert c["label"] == "word2vec" and c["reference"] == 1.0 and c["delta"] > 0


def test_put_word_vectors_writes_the_scaled_vectors_in_place_and_keeps_the_tie():
    tok, sentences = _toy_tokenizer()
    cfg = C.preset_config("tiny", d_model=16, n_head=2)
    torch.manual_seed(0)
    model = build_model(cfg.model_config(tok.vocab_size))
    table = model.tok_emb.weight
    n = embeddings.put_word_vectors(model, tok, embeddings.train_word2vec(tok, sentences, 16, seed=0))
    transfer = embeddings.word2vec_embeddings(tok, sentences, 16, seed=0)
    assert n == len(transfer.ids) and model.tok_emb.weight is table and model.lm_head.weight is table
    assert torch.equal(table[transfer.ids].detach(), transfer.vectors)
    torch.manual_seed(0)
    other = build_model(cfg.model_config(tok.vocab_size))
    how = embeddings.start_embeddings(
        other, tok, "word2vec", sentences=sentences, put_word2vec=embeddings.put_word_vectors
    )
    assert torch.equal(other.tok_emb.weight, table) and how.startswith(f"{n:,} token embeddings from word2vec")


@pytest.mark.parametrize(
    "low, high, word", [(0.5, 2.0, "better"), (-2.0, -0.1, "worse"), (-1.0, 1.5, "not distinguishable")]
)
def test_the_bootstrap_sentence_flips_with_the_interval(low, high, word):
    c = {"label": "word2vec", "bleu_new": 20.0, "reference": 19.0, "delta": (low + high) / 2, "low": low, "high": high, "p": 0.01}  # fmt: skip
    sentence = embeddings.bootstrap_sentence(c)
    assert f": {word} " in sentence, sentence
