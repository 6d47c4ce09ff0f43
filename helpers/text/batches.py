"""Batches of similar lengths under a token budget (notebook 03, "Batches of similar lengths").

    for batch in BucketBatcher(examples, max_tokens=4096, seed=0): ...   # a (B, T) Batch, B * T <= 4096
    StaticBucketBatcher(examples, 4096, step=16, max_len=64)              # a fixed set of shapes: a compiled step

:func:`collate` pads :class:`helpers.text.encoding.Example` rows on the right and builds the labels: the next
token where it is English or ``<eos>``, :data:`IGNORE_INDEX` elsewhere, so the loss is the mean over target tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .encoding import Example
from .sources import DataError
from .tokenizer import PAD_ID

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T) long, right-padded with pad_id
    labels: torch.Tensor  # (B, T) long: the next token where it is English or <eos>, else -100
    prefix_len: torch.Tensor  # (B,) long
    n_target_tokens: int  # labels != -100: what the loss averages over

    def to(self, device, non_blocking: bool = False) -> Batch:
        return Batch(
            self.input_ids.to(device, non_blocking=non_blocking),
            self.labels.to(device, non_blocking=non_blocking),
            self.prefix_len.to(device, non_blocking=non_blocking),
            self.n_target_tokens,
        )

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)


def collate(examples: Sequence[Example], pad_id: int = PAD_ID) -> Batch:
    """Pad on the right and build the labels: position t predicts token t+1, scored only on the target."""
    B, T = len(examples), max(len(e.input_ids) for e in examples)
    input_ids = torch.full((B, T), pad_id, dtype=torch.long)
    labels = torch.full((B, T), IGNORE_INDEX, dtype=torch.long)
    for b, e in enumerate(examples):
        L = len(e.input_ids)
        input_ids[b, :L] = torch.tensor(e.input_ids, dtype=torch.long)
        # predicting from position prefix_len-1 (the <sep>) onwards yields English tokens, then <eos>
        labels[b, e.prefix_len - 1 : L - 1] = input_ids[b, e.prefix_len : L]
    prefix_len = torch.tensor([e.prefix_len for e in examples], dtype=torch.long)
    return Batch(input_ids, labels, prefix_len, int((labels != IGNORE_INDEX).sum()))


class BucketBatcher:
    """Batches of similar-length examples under a token budget: B * T_max <= max_tokens.

    Each epoch: shuffle (seed, epoch), sort by length (ties stay shuffled), cut greedily into batches
    under the budget, shuffle the batch order. Little padding, different batches every epoch, and
    exactly the same ones for the same seed and epoch. It is a cursor: ``state_dict()`` records the
    epoch and how many batches were handed out, so a resumed run continues with the very next batch.
    Iterating to the end of an epoch moves to the next one; ``bucket=False`` batches in random order
    (the baseline that bucketing beats).
    """

    def __init__(
        self,
        examples: Sequence[Example],
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        bucket: bool = True,
        max_batch_size: int | None = None,
        pad_id: int = PAD_ID,
    ):
        self.examples = list(examples)
        if not self.examples:
            raise DataError("BucketBatcher got no examples: check encode_pairs' report (all dropped as too long?).")
        self.lengths = np.array([len(e.input_ids) for e in self.examples])
        if self.lengths.max() > max_tokens:
            raise DataError(
                f"max_tokens={max_tokens} is smaller than the longest example ({self.lengths.max()} tokens): "
                f"raise max_tokens or lower max_len in encode_pairs."
            )
        self.max_tokens, self.shuffle, self.seed, self.bucket = int(max_tokens), shuffle, int(seed), bucket
        self.max_batch_size, self.pad_id = max_batch_size, pad_id
        self.epoch, self.position = 0, 0
        self._plan_cache: tuple[int, list[list[int]]] | None = None

    # -- the plan of one epoch
    def _plan(self, epoch: int) -> list[list[int]]:
        if self._plan_cache and self._plan_cache[0] == epoch:
            return self._plan_cache[1]
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.examples)) if self.shuffle else np.arange(len(self.examples))
        if self.bucket:
            order = order[np.argsort(self.lengths[order], kind="stable")]
        batches, current, longest = [], [], 0
        for i in order.tolist():
            L = int(self.lengths[i])
            full = self.max_batch_size is not None and len(current) >= self.max_batch_size
            if current and (full or (len(current) + 1) * max(longest, L) > self.max_tokens):
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, L)
        if current:
            batches.append(current)
        if self.shuffle:
            batches = [batches[j] for j in rng.permutation(len(batches))]
        self._plan_cache = (epoch, batches)
        return batches

    def __len__(self) -> int:
        return len(self._plan(self.epoch))

    def __iter__(self) -> Iterator[Batch]:
        plan = self._plan(self.epoch)
        while self.position < len(plan):
            idx = plan[self.position]
            self.position += 1  # counted before yielding: a checkpoint taken now resumes after this batch
            yield self._collate(idx)
        self.epoch, self.position = self.epoch + 1, 0

    def _collate(self, idx: list[int]) -> Batch:
        return collate([self.examples[i] for i in idx], self.pad_id)

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = int(epoch), 0

    # -- resuming
    def _fingerprint(self) -> str:
        return hashlib.sha1(self.lengths.astype(np.int64).tobytes()).hexdigest()[:16]

    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "shuffle": self.shuffle,
            "bucket": self.bucket,
            "max_batch_size": self.max_batch_size,
            "n_examples": len(self.examples),
            "fingerprint": self._fingerprint(),
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("seed", "max_tokens", "shuffle", "bucket", "max_batch_size", "n_examples", "fingerprint"):
            mine = (
                len(self.examples)
                if key == "n_examples"
                else (self._fingerprint() if key == "fingerprint" else getattr(self, key))
            )
            if state.get(key) != mine:
                raise DataError(
                    f"This batcher cannot resume that state: {key} was {state.get(key)!r} when it was saved and is "
                    f"{mine!r} now. Rebuild the batcher from the same examples, seed and max_tokens to resume exactly."
                )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])

    # -- how well it packs
    def stats(self, epoch: int | None = None) -> dict:
        plan = self._plan(self.epoch if epoch is None else epoch)
        real = sum(int(self.lengths[idx].sum()) for idx in plan)
        padded = sum(len(idx) * int(self.lengths[idx].max()) for idx in plan)
        sizes = [len(idx) for idx in plan]
        return {
            "batches": len(plan),
            "examples": len(self.examples),
            "mean_batch_size": float(np.mean(sizes)),
            "max_batch_size": max(sizes),
            "tokens": real,
            "padded_tokens": padded,
            "padding_fraction": 1 - real / padded,
            "budget_used": padded / (len(plan) * self.max_tokens),
        }

    @property
    def padding_fraction(self) -> float:
        return self.stats()["padding_fraction"]


class StaticBucketBatcher(BucketBatcher):
    """A :class:`BucketBatcher` with a fixed set of batch shapes, for a compiled training step (``train --compile``).

    Every example is padded up to a multiple of ``step`` tokens (at most ``max_len``), and every batch of length T
    holds exactly ``max_tokens // T`` rows: the last batch of each length is filled up with empty rows, which carry
    no target tokens. A compiled model then meets one shape per length (:meth:`shapes`: 6 for the cpu preset), each
    compiled once, where today's batches bring a new shape, and a new compilation, with almost every batch. The
    price is padding: tokens computed that teach nothing (``stats()["padding_fraction"]``).
    """

    def __init__(self, examples, max_tokens: int, *, step: int = 16, max_len: int | None = None, **kw):
        super().__init__(examples, max_tokens, **kw)
        if step < 1:
            raise DataError(f"step must be a positive number of tokens, got {step!r} (16 is typical).")
        top = max_len if max_len is not None else int(self.lengths.max())
        self.step = int(step)
        self.padded = np.minimum(np.maximum(self.step, -(-self.lengths // self.step) * self.step), max(top, 1))
        self.padded = np.maximum(self.padded, self.lengths)

    def rows(self, length: int) -> int:
        return max(1, self.max_tokens // int(length))

    def shapes(self) -> list[tuple[int, int]]:
        """Every (rows, length) a batch can have: what a compiled step compiles for."""
        return [(self.rows(T), int(T)) for T in np.unique(self.padded)]

    def _plan(self, epoch: int) -> list[list[int]]:
        if self._plan_cache and self._plan_cache[0] == epoch:
            return self._plan_cache[1]
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.examples)) if self.shuffle else np.arange(len(self.examples))
        batches = []
        for T in np.unique(self.padded):
            same = order[self.padded[order] == T].tolist()
            n = self.rows(T)
            batches += [same[i : i + n] for i in range(0, len(same), n)]
        if self.shuffle:
            batches = [batches[j] for j in rng.permutation(len(batches))]
        self._plan_cache = (epoch, batches)
        return batches

    def _collate(self, idx: list[int]) -> Batch:
        T = int(self.padded[idx[0]])
        b = collate([self.examples[i] for i in idx], self.pad_id)
        ids = torch.full((self.rows(T), T), self.pad_id, dtype=torch.long)
        labels = torch.full((self.rows(T), T), IGNORE_INDEX, dtype=torch.long)
        plen = torch.ones(self.rows(T), dtype=torch.long)  # an empty row: one position of "source", nothing to learn
        B, L = b.input_ids.shape
        ids[:B, :L], labels[:B, :L], plen[:B] = b.input_ids, b.labels, b.prefix_len
        return Batch(ids, labels, plen, b.n_target_tokens)

    def stats(self, epoch: int | None = None) -> dict:
        plan = self._plan(self.epoch if epoch is None else epoch)
        out = super().stats(epoch)
        padded = sum(self.rows(self.padded[idx[0]]) * int(self.padded[idx[0]]) for idx in plan)
        return {**out, "padded_tokens": padded, "padding_fraction": 1 - out["tokens"] / padded, "shapes": self.shapes()}
