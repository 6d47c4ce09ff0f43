"""Span-corruption pretraining (notebook 05): learn the languages from unpaired sentences, then translate.

The course's single-span objective, on our subword tokens and in our translation format. From one sentence
(French or English, never a pair), keep a random-length beginning (4 tokens up to 7/8 of the block), cut
one span of random length (a quarter of it on average) and ask the model to write the span back::

    <bos> prefix <mask> suffix <sep> span <eos>

Everything before ``<sep>`` is the visible source, as a French sentence is in translation; the loss is
on ``span <eos>`` only. So pretraining trains exactly the machinery translation uses (read a source
bidirectionally, write a continuation), on text that needs no translator.
``<mask>`` is the tokenizer's ``<unk>`` id: byte fallback spells every unknown character as bytes, so
``<unk>`` never occurs in encoded text and is free to serve as the sentinel.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..run_folder import RunFolder
from ..text.batches import BucketBatcher
from ..text.encoding import Example
from ..text.sources import DataError
from ..text.tokenizer import BOS_ID, EOS_ID, SEP_ID, UNK_ID
from .train import FROM_OUT_DIR, train

MASK_ID = UNK_ID
PRETRAIN_KINDS = ("span",)


def corrupt_span(ids: Sequence[int], rng: random.Random, max_len: int) -> Example | None:
    """One pretraining example from one sentence's token ids, or None if it has fewer than 2 tokens."""
    room = max_len - 4  # <bos>, <mask>, <sep> and <eos> take four positions
    if len(ids) < 2 or room < 2:
        return None
    longest = min(len(ids), max(2, room * 7 // 8))
    n = rng.randint(min(4, longest), longest)  # the kept beginning
    span_len = min(rng.randint(1, max(1, n // 2)), n - 1)  # mean about n / 4; one token always stays visible
    start = rng.randint(0, n - span_len)
    doc = list(ids[:n])
    prefix, span, suffix = doc[:start], doc[start : start + span_len], doc[start + span_len :]
    return Example([BOS_ID, *prefix, MASK_ID, *suffix, SEP_ID, *span, EOS_ID], len(prefix) + len(suffix) + 3)


def monolingual_ids(tokenizer, pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
    """Both sides of the pairs as separate, unpaired sentences (French first, then English), as token ids."""
    sentences = [fr for fr, _ in pairs] + [en for _, en in pairs]
    ids = tokenizer.encode_batch(sentences)
    if any(MASK_ID in s for s in ids):
        raise DataError(
            f"a sentence encodes to the <unk> id {MASK_ID}, which pretraining uses as <mask>: train the tokenizer with "
            "Tokenizer.train (byte fallback on), which never produces <unk>."
        )
    return ids


class SpanCorruptionBatcher(BucketBatcher):
    """A :class:`helpers.text.batches.BucketBatcher` whose examples are corrupted afresh each epoch (seed, epoch).

    ``dropped`` counts the sentences too short to corrupt (under 2 tokens); they are reported, not hidden.
    """

    def __init__(self, sentences: Sequence[Sequence[int]], max_len: int, max_tokens: int, *, seed: int = 0, **kw):
        self.sentences, self.max_len = [list(s) for s in sentences], int(max_len)
        self.dropped = sum(len(s) < 2 for s in self.sentences)
        self._examples_epoch = 0
        super().__init__(self._corrupt(0, seed), max_tokens, seed=seed, **kw)

    def _corrupt(self, epoch: int, seed: int | None = None) -> list[Example]:
        rng = random.Random(f"{self.seed if seed is None else seed}-{epoch}")
        examples = [corrupt_span(s, rng, self.max_len) for s in self.sentences]
        return [e for e in examples if e is not None]

    def _plan(self, epoch: int) -> list[list[int]]:
        if epoch != self.epoch:
            raise ValueError(
                f"a span-corruption batcher plans only its current epoch ({self.epoch}): call set_epoch({epoch}) first."
            )
        if epoch != self._examples_epoch:  # a new epoch: new cuts of the same sentences
            self.examples = self._corrupt(epoch)
            self.lengths = np.array([len(e.input_ids) for e in self.examples])
            self._examples_epoch, self._plan_cache = epoch, None
        return super()._plan(epoch)

    def _fingerprint(self) -> str:  # the sentences, not one epoch's cuts, identify the data
        h = hashlib.sha1(str(self.max_len).encode())
        for s in self.sentences:
            h.update(np.asarray(s, dtype=np.int64).tobytes() + b"|")
        return h.hexdigest()[:16]


def split_budget(cfg, fraction: float | None = None):
    """(pretraining config, fine-tuning config): the run's minutes or steps shared so the total stays the same."""
    fraction = cfg.pretrain_fraction if fraction is None else fraction
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"pretrain_fraction must lie strictly between 0 and 1, got {fraction!r} (0.3 is typical).")

    m1 = m2 = s1 = s2 = None
    if cfg.minutes is not None:
        m1, m2 = cfg.minutes * fraction, cfg.minutes * (1.0 - fraction)
    if cfg.steps is not None:
        if cfg.steps < 2:
            raise ValueError(f"steps={cfg.steps} cannot be shared between pretraining and translation: use at least 2.")
        s1 = min(cfg.steps - 1, max(1, round(cfg.steps * fraction)))
        s2 = cfg.steps - s1  # whole steps: the two phases add up to the budget exactly
    pre, fine = replace(cfg, minutes=m1, steps=None), replace(cfg, minutes=m2, steps=None)
    # set after construction: a phase of one step is fine, while TrainConfig's own check (a run that pretrains
    # needs at least 2 steps, one for each phase) speaks of the whole run, and would refuse it
    pre.steps, fine.steps = s1, s2
    return pre, fine


def pretrain_phase(
    model, prepared, cfg, out_dir, *, resume_from=FROM_OUT_DIR, device=None, progress: bool = True, stderr=None
):
    """Pretrain ``model`` in place for ``cfg.pretrain_fraction`` of the budget, into ``out_dir/pretrain``.

    The sentences are both sides of every training pair, unpaired (``cfg.parallel_pairs`` limits only the
    translation data); validation uses the validation split's sentences, corrupted once. Resumable like any
    run: ``resume_from`` is the pretraining checkpoint to continue (``train`` decides it: a finished phase is loaded,
    not trained again), by default the one ``out_dir/pretrain`` holds.
    """
    err = stderr if stderr is not None else sys.stderr
    pre_cfg, _ = split_budget(cfg)
    tok = prepared.tokenizer
    batcher = SpanCorruptionBatcher(
        monolingual_ids(tok, prepared.splits.train), cfg.max_len, cfg.max_tokens, seed=cfg.seed
    )
    valid_ids = monolingual_ids(tok, prepared.splits.valid[: max(1, cfg.valid_sentences // 2)])
    valid_batches = list(SpanCorruptionBatcher(valid_ids, cfg.max_len, cfg.max_tokens, seed=cfg.seed, shuffle=False))
    if progress:
        budget = f"{pre_cfg.minutes:.1f} min" if pre_cfg.minutes is not None else f"{pre_cfg.steps} steps"
        print(
            f"Pretraining (span corruption) for {budget}: {len(batcher.sentences):,} unpaired sentences "
            f"({batcher.dropped} too short to corrupt, skipped); then translation for the rest of the budget.",
            file=err,
        )
    out = None if out_dir is None else RunFolder(out_dir).pretrain
    return train(
        model,
        batcher,
        valid_batches,
        pre_cfg,
        out,
        device=device,
        extra_config={"phase": "pretrain-span"},
        resume_from=resume_from,
        progress=progress,
    )
