"""Token embeddings for our model from a pretrained model's (``train --init-embeddings``, notebooks 05 and 06).

:func:`transfer_embeddings` gives each of our sentencepiece pieces the mean vector of the pieces a pretrained
model's tokenizer cuts it into, reduced to our width by PCA; :func:`init_embeddings` loads the model
(:func:`helpers.hf.loading.load_pretrained`) and writes those rows into our model's embedding table, as
:func:`helpers.pipeline.start_model` does for ``cfg.init_embeddings``. :class:`EmbeddingTransfer` says what was
copied and what kept its random start (notebook 06 compares these starts, :mod:`helpers.embeddings`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .loading import load_pretrained


@dataclass
class EmbeddingTransfer:
    ids: torch.Tensor  # (n,) our token ids that received a vector
    vectors: torch.Tensor  # (n, d_model)
    source: str
    skipped: dict  # why the other ids kept their random start: {"special": k, "byte": k, "no pieces": k}
    explained: float  # share of the variance of the pretrained vectors kept by the projection to d_model

    def describe(self) -> str:
        return (
            f"{len(self.ids):,} token embeddings from {self.source} (PCA to {self.vectors.shape[1]} dimensions keeps "
            f"{self.explained:.0%} of their variance); kept random: "
            + ", ".join(f"{v:,} {k}" for k, v in self.skipped.items())
        )


def transfer_embeddings(tokenizer, hf_model, hf_tokenizer, d_model: int, *, std: float = 0.02, source: str = "?"):
    """Vectors for our pieces from a pretrained model's input embeddings.

    Each of our pieces is written as text (sentencepiece's "▁" is a leading space), cut by the other model's
    tokenizer, and given the mean of those pieces' pretrained vectors. The vectors (width D) are centred and
    projected on their first ``d_model`` principal directions (PCA keeps as much of their geometry as a linear
    map to d_model can), then scaled to our initialisation's ``std``. Special and byte pieces keep their random
    start: they have no text of their own.
    """
    table = hf_model.get_input_embeddings().weight.detach().float().cpu()  # (V', D)
    ids, rows = [], []
    skipped = {"special": 0, "byte": 0, "no pieces": 0}
    for i in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(i)
        if i <= tokenizer.unk_id:
            skipped["special"] += 1
            continue
        if piece.startswith("<0x") and piece.endswith(">"):
            skipped["byte"] += 1
            continue
        other = hf_tokenizer(piece.replace("\u2581", " "), add_special_tokens=False)["input_ids"]
        if not other:
            skipped["no pieces"] += 1
            continue
        ids.append(i)
        rows.append(table[other].mean(0))
    if not rows:
        raise ValueError(f"no piece of our tokenizer could be written with {source}'s tokenizer: nothing to transfer.")
    X = torch.stack(rows)  # (n, D)
    X = X - X.mean(0)
    k = min(d_model, X.shape[0], X.shape[1])
    _, S, V = torch.linalg.svd(X, full_matrices=False)  # principal directions: rows of V
    Y = X @ V[:k].T  # (n, k)
    if k < d_model:  # fewer directions than our width: the rest start at zero
        Y = torch.cat([Y, Y.new_zeros(len(Y), d_model - k)], dim=1)
    Y = Y * (std / Y.std())
    explained = float((S[:k] ** 2).sum() / (S**2).sum())
    return EmbeddingTransfer(torch.tensor(ids), Y, source, skipped, explained)


def init_embeddings(model, tokenizer, source: str, *, device=None) -> EmbeddingTransfer:
    """Overwrite ``model.tok_emb`` rows with :func:`transfer_embeddings` from ``source`` (a hub name, a folder or a
    .gguf file, as :func:`load_pretrained` takes). With tied weights the LM head starts from them too."""
    pretrained = load_pretrained(source)
    transfer = transfer_embeddings(
        tokenizer, pretrained.model, pretrained.tokenizer, model.config.d_model, source=str(source)
    )
    with torch.no_grad():
        weight = model.tok_emb.weight
        weight[transfer.ids.to(weight.device)] = transfer.vectors.to(weight.device, weight.dtype)
    del pretrained
    return transfer
