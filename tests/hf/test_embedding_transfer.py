"""Token embeddings from a pretrained model's (helpers.hf.embedding_transfer), with a tiny random LM.

Each of our pieces gets the mean vector of the pieces the LM's tokenizer cuts its text into (two rebuilt by hand),
the projection to our width keeps the geometry (a rotation and a scale when every direction is kept), special and
byte pieces keep their random start, and init_embeddings writes the rows into the model (the tied head reads them).
That training starts from them is tested with the train command and notebook 05's rows (tests/test_experiments.py).
"""

from __future__ import annotations

import pytest
import torch

from helpers.hf.embedding_transfer import init_embeddings, transfer_embeddings
from helpers.hf.loading import load_pretrained
from helpers.hf.tiny import tiny_causal_lm
from helpers.nn import build_model
from helpers.text.data import prepare_data
from helpers.training.config import preset_config


@pytest.fixture(scope="module")
def prepared():
    cfg = preset_config("tiny", steps=8)
    return prepare_data("builtin", cfg, None, limit=1500, progress=False), cfg


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, prepared):
    data, _ = prepared
    folder = tiny_causal_lm(data.splits.train[:1000], tmp_path_factory.mktemp("lm"), hidden=48, seed=0)
    return folder, load_pretrained(folder)


def test_transfer_embeddings_maps_each_piece_by_its_text_and_keeps_the_geometry(prepared, tiny_lm):
    data, _ = prepared
    tok = data.tokenizer
    _, lm = tiny_lm
    t = transfer_embeddings(tok, lm.model, lm.tokenizer, 32, source="tiny")
    assert t.vectors.shape == (len(t.ids), 32) and abs(float(t.vectors.std()) - 0.02) < 1e-4
    assert t.skipped["special"] == 5 and t.skipped["byte"] == 256
    assert len(t.ids) + sum(t.skipped.values()) == tok.vocab_size
    # a piece's vector comes from its own text, "▁" read as a space: rebuild two by hand
    table = lm.model.get_input_embeddings().weight.detach()
    X = []
    for i in t.ids.tolist():
        other = lm.tokenizer(tok.id_to_piece(i).replace("\u2581", " "), add_special_tokens=False)["input_ids"]
        X.append(table[other].mean(0))
    X = torch.stack(X)
    X = X - X.mean(0)
    # PCA keeps 32 of 48 directions; with all 48 kept, distances would be preserved exactly up to the scale
    full = transfer_embeddings(tok, lm.model, lm.tokenizer, 48, source="tiny")
    ratio = torch.cdist(full.vectors[:50], full.vectors[:50]) / torch.cdist(X[:50], X[:50]).clamp_min(1e-12)
    off = ~torch.eye(50, dtype=torch.bool)
    assert float(ratio[off].std() / ratio[off].mean()) < 1e-3, "the projection must be a rotation and a scale"
    assert full.explained == pytest.approx(1.0) and 0.3 < t.explained < 1.0


def test_init_embeddings_writes_the_rows_and_train_takes_the_switch(prepared, tiny_lm, tmp_path):
    data, base = prepared
    folder, _ = tiny_lm
    torch.manual_seed(0)
    model = build_model(base.model_config(data.tokenizer.vocab_size))
    before = model.tok_emb.weight.detach().clone()
    t = init_embeddings(model, data.tokenizer, str(folder))
    after = model.tok_emb.weight.detach()
    assert torch.equal(after[t.ids], t.vectors) and torch.equal(after[:5], before[:5])
    assert model.lm_head.weight is model.tok_emb.weight  # tied: the head starts from them too


def test_a_tokenizer_that_writes_none_of_our_pieces_is_refused(prepared, tiny_lm):
    data, _ = prepared
    _, lm = tiny_lm

    def writes_nothing(text, add_special_tokens=False):
        return {"input_ids": []}

    with pytest.raises(ValueError, match="no piece of our tokenizer could be written with nothing's tokenizer"):
        transfer_embeddings(data.tokenizer, lm.model, writes_nothing, 32, source="nothing")
