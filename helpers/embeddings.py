"""Token embeddings at equal budget (notebook 06, section 4): four starts for the embedding table of the same
translation model (learned, random frozen, word2vec on our own text, a pretrained LM's), and their comparison."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .evaluation.evaluate import bootstrap_bleu_difference
from .experiments import run_variant
from .hf.embedding_transfer import EmbeddingTransfer, init_embeddings
from .text.tokenizer import Tokenizer
from .training.config import TrainConfig

# ---------------------------------------------------------------------------------------------------------------
# embeddings at equal budget: four starts for the token embeddings of the same translation model

EMBEDDING_KINDS = ("learned", "random frozen", "word2vec", "pretrained LM")


def train_word2vec(tok: Tokenizer, sentences: Sequence[str], d_model: int, *, seed: int = 0, epochs: int = 5,
                   window: int = 5):  # fmt: skip
    """gensim's word2vec (skip-gram) trained on ``sentences`` cut into our pieces: its ``KeyedVectors``, whose keys
    are piece ids written as text (``wv["17"]`` is piece 17's vector). Deterministic for a seed: one worker thread.

    Training on the piece-tokenized text gives every piece that occurs a vector directly (no mapping from words
    to pieces to invent)."""
    from gensim.models import Word2Vec  # slow start-up (0.7 s)

    corpus = [[str(i) for i in ids] for ids in tok.encode_batch(list(sentences))]
    w2v = Word2Vec(
        corpus, vector_size=d_model, window=window, min_count=1, sg=1, workers=1, seed=seed, epochs=epochs,
    )  # fmt: skip
    return w2v.wv


def _word2vec_rows(tok: Tokenizer, wv, std: float):
    ids, rows, skipped = [], [], {"special": 0, "byte": 0, "no pieces": 0}
    for i in range(tok.vocab_size):
        piece = tok.id_to_piece(i)
        if i <= tok.unk_id:
            skipped["special"] += 1
        elif piece.startswith("<0x") and piece.endswith(">"):
            skipped["byte"] += 1
        elif str(i) not in wv:
            skipped["no pieces"] += 1
        else:
            ids.append(i)
            rows.append(torch.from_numpy(wv[str(i)].copy()))
    X = torch.stack(rows)
    X = X - X.mean(0)
    X = X * (std / X.std())
    return torch.tensor(ids), X, skipped


def put_word_vectors(model, tok: Tokenizer, wv, std: float = 0.02) -> int:
    """Write word2vec's vectors into ``model``'s token-embedding table, in place (Exercise 6.7's reference).

    Every piece with a vector gets a row, except the special pieces (ids up to ``tok.unk_id``) and the byte pieces
    (``<0x..>``), which keep their random start, as :func:`helpers.hf.embedding_transfer.transfer_embeddings` leaves them.
    The vectors are centred (their mean vector subtracted) and scaled together so their entries have the
    standard deviation ``std`` of the model's initialisation; the table stays the same parameter (the tied output
    layer reads it too). Returns how many rows were written."""
    ids, X, _ = _word2vec_rows(tok, wv, std)
    with torch.no_grad():
        model.tok_emb.weight[ids] = X.to(model.tok_emb.weight.dtype)
    return len(ids)


def word2vec_embeddings(tok: Tokenizer, sentences: Sequence[str], d_model: int, *, seed: int = 0, epochs: int = 5,
                        window: int = 5, std: float = 0.02):  # fmt: skip
    """Word vectors for our pieces (:func:`train_word2vec`), centred and scaled to the model's initial ``std``, as
    :func:`helpers.hf.embedding_transfer.transfer_embeddings` does; special and byte pieces (and pieces that never occur)
    keep their random start."""
    wv = train_word2vec(tok, sentences, d_model, seed=seed, epochs=epochs, window=window)
    ids, X, skipped = _word2vec_rows(tok, wv, std)
    source = (
        f"word2vec (gensim skip-gram, {epochs} passes over {len(sentences):,} training sentences cut into our pieces)"
    )
    return EmbeddingTransfer(ids, X, source, skipped, 1.0)  # trained at our width: no projection


def start_embeddings(model, tok: Tokenizer, kind: str, *, sentences: Sequence[str] = (), lm: str | None = None,
                     seed: int = 0, put_word2vec=None) -> str:  # fmt: skip
    """Give ``model`` the token embeddings of ``kind`` (one of :data:`EMBEDDING_KINDS`); returns what was done.

    ``learned``: the model's own random start, trained (the default). ``random frozen``: the same random
    start, never trained (with tied weights the output layer stays frozen too). ``word2vec``: vectors trained
    on ``sentences`` (:func:`word2vec_embeddings`), then trained further; ``put_word2vec(model, tok, wv)`` (the
    notebook's Exercise 6.7), when given, writes the vectors :func:`train_word2vec` made in place of the package. ``pretrained LM``: the vectors of the
    causal LM ``lm`` (:func:`helpers.hf.embedding_transfer.init_embeddings`), then trained further.
    """
    if kind == "learned":
        return "random start, trained"
    if kind == "random frozen":
        model.tok_emb.weight.requires_grad_(False)
        return "random start, frozen" + (" (the tied output layer too)" if model.config.tie_weights else "")
    if kind == "word2vec" and put_word2vec is not None:
        n = put_word2vec(model, tok, train_word2vec(tok, sentences, model.config.d_model, seed=seed))
        return f"{n:,} token embeddings from word2vec (gensim skip-gram on the training text cut into our pieces)"
    if kind == "word2vec":
        transfer = word2vec_embeddings(tok, sentences, model.config.d_model, seed=seed)
        with torch.no_grad():
            model.tok_emb.weight[transfer.ids] = transfer.vectors.to(model.tok_emb.weight.dtype)
        return f"{len(transfer.ids):,} token embeddings from {transfer.source}; kept random: " + ", ".join(
            f"{v:,} {k}" for k, v in transfer.skipped.items()
        )
    if kind == "pretrained LM":
        if lm is None:
            raise ValueError("kind='pretrained LM' needs lm=: a hub name, a folder or a .gguf file.")
        return init_embeddings(model, tok, lm).describe()
    raise ValueError(f"kind={kind!r} is not known: choose one of {EMBEDDING_KINDS}.")


def embedding_row(prepared, cfg: TrainConfig, kind: str, *, lm: str | None = None, device=None,
                  eval_sentences: int = 300, progress: bool = False, put_word2vec=None) -> dict:  # fmt: skip
    """Train the translation model of ``cfg`` with the embeddings of ``kind`` and score it; one table row.

    :func:`helpers.experiments.run_variant` with the embeddings started by :func:`start_embeddings` (same pairs,
    batches, seed, initial weights and budget; greedy BLEU on the first ``eval_sentences`` pairs of the
    validation split and of the new-sentence set), with the new-sentence hypotheses kept for the paired bootstrap.
    ``put_word2vec``: see :func:`start_embeddings`.
    """
    sentences = [s for pair in prepared.splits.train for s in pair]  # the training text only, both languages
    trainable = {}

    def start(model, tok):
        how = start_embeddings(model, tok, kind, sentences=sentences, lm=lm, seed=cfg.seed, put_word2vec=put_word2vec)
        trainable["n"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return how

    row = run_variant(
        prepared, cfg, label=kind, device=device, eval_sentences=eval_sentences, progress=progress, start=start,
        keep_new=True,
    )  # fmt: skip
    keys = ("label", "embeddings", "parameters", "steps", "val_loss", "bleu_valid", "bleu_new", "chrf_new")
    return {k: row[k] for k in keys} | {
        "trainable": trainable["n"],
        "eval_sentences": row["eval_sentences"],
        "hypotheses_new": row["hypotheses_new"],
        "references_new": row["references_new"],
    }


def compare_embeddings(
    rows: Sequence[dict], reference: str = "learned", resamples: int = 1000, seed: int = 0
) -> list[dict]:
    """Each row's new-sentence BLEU against the ``reference`` row's, with :func:`bootstrap_bleu_difference`."""
    ref = next(r for r in rows if r["label"] == reference)
    out = []
    for r in rows:
        if r["label"] == reference:
            continue
        test = bootstrap_bleu_difference(
            ref["hypotheses_new"], r["hypotheses_new"], ref["references_new"], resamples=resamples, seed=seed
        )
        out.append({"label": r["label"], "bleu_new": r["bleu_new"], "reference": ref["bleu_new"], **test})
    return out


def bootstrap_sentence(comparison: dict, reference: str = "learned from scratch") -> str:
    """One sentence per comparison, from its numbers: better, worse, or not distinguishable at 95 %."""
    c = comparison
    what = f"{c['label']} embeddings: BLEU {c['bleu_new']:.1f} against {c['reference']:.1f} for {reference}"
    interval = f"difference {c['delta']:+.1f}, 95 % interval [{c['low']:+.1f}, {c['high']:+.1f}]"
    if c["low"] > 0:
        return f"{what}: better ({interval}; the gain holds in {1 - c['p']:.0%} of the resamples)."
    if c["high"] < 0:
        return f"{what}: worse ({interval})."
    return f"{what}: not distinguishable on these sentences ({interval} includes 0)."
