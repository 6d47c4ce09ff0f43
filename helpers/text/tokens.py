"""From text to token ids: the tokenizer, the example format, batches.

Everything that touches token ids lives here, so that training, ``translate``, ``evaluate`` and the
later notebooks take the same road from text to ids::

    tok = Tokenizer.train(train_pairs, vocab_size=4000)   # sentencepiece, on the TRAIN split only
    tok.encode("Où es-tu\u202f?")                         # normalise_text, then sentencepiece
    examples, report = encode_pairs(tok, pairs, max_len=64)
    for batch in BucketBatcher(examples, max_tokens=4096): ...

One training sequence is ``<bos> French <sep> English <eos>``; the loss is taken on the English tokens
and ``<eos>`` only (``Batch.labels``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

PAD, BOS, SEP, EOS, UNK = "<pad>", "<bos>", "<sep>", "<eos>", "<unk>"
PAD_ID, BOS_ID, SEP_ID, EOS_ID, UNK_ID = 0, 1, 2, 3, 4
IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index


class DataError(ValueError):
    """Input we cannot use; the message says what was wrong and what to do."""


@dataclass
class TruncationReport:
    n_pairs: int = 0
    kept: int = 0
    truncated: int = 0  # kept, but cut at max_len (the end of the English and its <eos> are lost)
    dropped_too_long: int = 0
    dropped_empty: int = 0  # a side encoded to no token at all
    max_len: int = 0
    longest: int = 0  # longest sequence before truncation, in tokens
    tokens_lost: int = 0

    def pretty(self) -> str:
        return "\n".join(
            [
                f"Encoding to <bos> French <sep> English <eos>, max_len={self.max_len}",
                f"  pairs in {self.n_pairs:,}; kept {self.kept:,} (of which truncated {self.truncated:,}, "
                f"{self.tokens_lost:,} tokens lost)",
                f"  dropped: too long {self.dropped_too_long:,}, empty side {self.dropped_empty:,}; "
                f"longest sequence {self.longest} tokens",
            ]
        )

    __str__ = pretty


# ============================================================================ normalising
# Tatoeba's French uses narrow and ordinary no-break spaces before ? ! : ; (over 10,000 of them):
# they would otherwise become separate, rare tokens. Zero-width and soft-hyphen characters are invisible.
_INVISIBLE = {0x200B, 0x200C, 0x200E, 0x200F, 0x2060, 0xFEFF, 0x00AD}
# Phones and word processors type curly quotes; Tatoeba writes 140,151 straight apostrophes and 897 curly
# ones. One form each, so "l’homme" and "l'homme" are the same pieces. Guillemets « » are kept: they are
# French quotation marks, not a typing accident.
_QUOTES = {0x2019: "'", 0x2018: "'", 0x02BC: "'", 0x201C: '"', 0x201D: '"', 0x201E: '"'}


def _build_table() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    for cp in range(0x3000 + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat == "Zs" or ch in "\t\n\r\x0b\x0c\x85\u2028\u2029":
            table[cp] = " "
        elif cat == "Cc" or cp in _INVISIBLE:
            table[cp] = None
    table[0xFEFF] = None
    table.update(_QUOTES)
    return table


_TABLE = _build_table()


def normalise_text(text: str) -> str:
    """NFC, every kind of space to " ", curly apostrophes and quotes straight, control and invisible
    characters dropped, spaces collapsed. Idempotent: normalising twice changes nothing."""
    return " ".join(unicodedata.normalize("NFC", text).translate(_TABLE).split())


# ============================================================================ tokenizer


class Tokenizer:
    """A joint French+English sentencepiece model (unigram or BPE) with our four special tokens.

    ids: <pad>=0, <bos>=1, <sep>=2, <eos>=3, <unk>=4, then 256 byte pieces (byte fallback: any character
    the model never saw is spelt as UTF-8 bytes, so it round-trips instead of becoming <unk>), then pieces.
    Train it on the training split only: pieces learnt from test sentences would leak them.
    """

    pad_id, bos_id, sep_id, eos_id, unk_id = PAD_ID, BOS_ID, SEP_ID, EOS_ID, UNK_ID

    def __init__(self, model_proto: bytes, meta: dict | None = None):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self.sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self.meta = dict(meta or {})
        for name, want in (
            ("<pad>", PAD_ID),
            ("<bos>", BOS_ID),
            ("<sep>", SEP_ID),
            ("<eos>", EOS_ID),
            ("<unk>", UNK_ID),
        ):
            if self.sp.piece_to_id(name) != want:
                raise DataError(
                    f"This sentencepiece model puts {name} at id {self.sp.piece_to_id(name)}, not {want}: "
                    f"train it with Tokenizer.train so the special ids match."
                )

    @classmethod
    def train(
        cls,
        texts: Iterable[str] | Iterable[tuple[str, str]],
        vocab_size: int = 8000,
        model_type: str = "unigram",
        out_dir: str | os.PathLike | None = None,
        *,
        character_coverage: float = 0.9995,
        input_sentence_size: int = 400_000,
        num_threads: int | None = None,
        seed: int = 0,
    ) -> Tokenizer:
        """Train on ``texts`` (strings, or (fr, en) pairs: both sides are used). Saved to ``out_dir`` if given."""
        import sentencepiece as spm

        if model_type not in ("unigram", "bpe"):
            raise DataError(f"model_type={model_type!r}: use 'unigram' or 'bpe'.")
        lines = []
        for t in texts:
            lines.extend(t if isinstance(t, tuple) else (t,))
        lines = [s for s in (str(x).strip() for x in lines) if s]
        if not lines:
            raise DataError("No text to train the tokenizer on: pass the training pairs (or their sentences).")
        if vocab_size < 300:
            raise DataError(
                f"vocab_size={vocab_size} is too small: 261 ids are taken by special and byte pieces; "
                f"use at least 300 (8000 for Tatoeba)."
            )
        spm.set_random_generator_seed(seed)
        proto = io.BytesIO()
        try:
            cls._train_spm(
                spm, lines, proto, vocab_size, model_type, character_coverage, input_sentence_size, num_threads
            )
        except RuntimeError as err:
            needed = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(err))
            if not needed:
                raise
            raise DataError(
                f"vocab_size={vocab_size} is smaller than the {needed.group(2)} characters and special pieces this text "
                f"needs: use vocab_size of at least {int(needed.group(2)) + 50} (4000-8000 for Tatoeba)."
            ) from err
        tok = cls(
            proto.getvalue(),
            {"model_type": model_type, "requested_vocab_size": vocab_size, "trained_on_sentences": len(lines)},
        )
        if out_dir is not None:
            tok.save(out_dir)
        return tok

    @staticmethod
    def _train_spm(spm, lines, proto, vocab_size, model_type, character_coverage, input_sentence_size, num_threads):
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=proto,
            vocab_size=vocab_size,
            model_type=model_type,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            unk_id=UNK_ID,
            pad_piece=PAD,
            bos_piece=BOS,
            eos_piece=EOS,
            unk_piece=UNK,
            control_symbols=[SEP],
            byte_fallback=True,
            character_coverage=character_coverage,
            split_digits=True,
            normalization_rule_name="identity",  # normalise_text is our one normaliser (encode applies it)
            hard_vocab_limit=False,  # a tiny corpus gets a smaller vocabulary instead of an error
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            num_threads=num_threads or max(1, min(4, os.cpu_count() or 1)),
            max_sentence_length=4192,
            minloglevel=2,
        )

    # -- persistence
    def save(self, out_dir: str | os.PathLike) -> Path:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "spm.model").write_bytes(self.model_proto)
        (d / "tokenizer.json").write_text(json.dumps({**self.meta, "vocab_size": self.vocab_size}, indent=2))
        return d

    @classmethod
    def load(cls, in_dir: str | os.PathLike) -> Tokenizer:
        d = Path(in_dir)
        model = d / "spm.model"
        if not model.is_file():
            raise FileNotFoundError(
                f"No tokenizer at {d} (expected {model}). Train one with Tokenizer.train(...) "
                f"and save it with tok.save({str(d)!r})."
            )
        meta = json.loads((d / "tokenizer.json").read_text()) if (d / "tokenizer.json").is_file() else {}
        return cls(model.read_bytes(), meta)

    # -- use
    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` after :func:`normalise_text`: the one road from text to ids.

        Training text is normalised by ``clean_pairs`` already (normalising twice changes nothing); text typed
        into ``translate`` or read by ``evaluate`` is not, and a no-break space before "?" or a decomposed "é"
        would otherwise become pieces the model never saw in training.
        """
        return self.sp.encode(normalise_text(text))

    def encode_sampled(self, texts: Sequence[str], alpha: float, seed: int) -> list[list[int]]:
        """One segmentation of each text drawn from the unigram model (subword regularisation, Kudo 2018) instead
        of the most likely one: "inconnu" may come out as "in|connu" one epoch and "inconnu" the next, so a model
        trained on the draws has seen words in pieces, as it will see words it never met. ``alpha`` sharpens the
        draw (1.0: almost always the best segmentation; 0.5: about a third of sentences change, 6 % more pieces on
        Tatoeba). The same ``seed`` gives the same draws (one text at a time: sentencepiece's batch call shares
        its generator between threads)."""
        import sentencepiece as spm

        spm.set_random_generator_seed(int(seed))
        return [self.sp.encode(normalise_text(t), enable_sampling=True, alpha=alpha, nbest_size=-1) for t in texts]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.sp.encode([normalise_text(t) for t in texts])

    def decode(self, ids) -> str:
        """Text from ids; special tokens (<pad>, <bos>, <sep>, <eos>) are left out."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return self.sp.decode([int(i) for i in ids])

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(normalise_text(text), out_type=str)

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(int(i))

    def __repr__(self) -> str:
        return f"Tokenizer({self.meta.get('model_type', '?')}, vocab_size={self.vocab_size})"


# ============================================================================ examples and batches


@dataclass
class Example:
    input_ids: list[int]  # <bos> French <sep> English <eos>
    prefix_len: int  # len(<bos> French <sep>): positions from here on are the target


def max_source_tokens(max_len: int) -> int:
    """The most French tokens ``translate`` reads: half the positions, less <bos> and <sep>; the rest is for the
    English. A longer source is cut, and the cut is counted (``evaluate``) and named (``translate``)."""
    return max(1, max_len // 2 - 2)


def prompt_ids(tok: Tokenizer, fr: str) -> list[int]:
    """What a translation starts from at inference: <bos> French <sep>."""
    return [tok.bos_id, *tok.encode(fr), tok.sep_id]


def _example(fr_ids: list[int], en_ids: list[int], max_len: int, truncate: bool, report: TruncationReport | None):
    if not fr_ids or not en_ids:
        if report:
            report.dropped_empty += 1
        return None
    ids = [BOS_ID, *fr_ids, SEP_ID, *en_ids, EOS_ID]
    prefix = len(fr_ids) + 2
    if report:
        report.longest = max(report.longest, len(ids))
    if len(ids) > max_len:
        if not truncate or prefix >= max_len:  # nothing of the English would be left to learn from
            if report:
                report.dropped_too_long += 1
            return None
        if report:
            report.truncated += 1
            report.tokens_lost += len(ids) - max_len
        ids = ids[:max_len]
    return Example(ids, prefix)


def make_example(tok: Tokenizer, fr: str, en: str, max_len: int, *, truncate: bool = False) -> Example | None:
    """One training sequence, or None if it is longer than ``max_len`` (or cut to it with ``truncate``)."""
    return _example(tok.encode(fr), tok.encode(en), max_len, truncate, None)


def encode_pairs(
    tok: Tokenizer, pairs: Sequence[tuple[str, str]], max_len: int, *, truncate: bool = False
) -> tuple[list[Example], TruncationReport]:
    """Examples for all pairs; over-long ones are dropped (or, with ``truncate``, cut) and counted."""
    if max_len < 4:
        raise DataError(f"max_len={max_len} cannot hold <bos> x <sep> y <eos>: use at least 4 (64 is typical).")
    report = TruncationReport(n_pairs=len(pairs), max_len=max_len)
    fr_ids = tok.encode_batch([fr for fr, _ in pairs])
    en_ids = tok.encode_batch([en for _, en in pairs])
    examples = []
    for f, e in zip(fr_ids, en_ids):
        ex = _example(f, e, max_len, truncate, report)
        if ex is not None:
            examples.append(ex)
    report.kept = len(examples)
    return examples, report


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

    # -- how well it packs (SampledBucketBatcher below re-encodes per epoch)
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


def pair_lengths(pairs: Sequence[tuple[str, str]], tok: Tokenizer | None = None) -> dict[str, np.ndarray]:
    """Lengths of the French and English sides, in tokens with ``tok``, else in words (for histograms)."""
    if tok is None:
        return {
            "fr": np.array([len(fr.split()) for fr, _ in pairs]),
            "en": np.array([len(en.split()) for _, en in pairs]),
        }
    return {
        "fr": np.array([len(x) for x in tok.encode_batch([fr for fr, _ in pairs])]),
        "en": np.array([len(x) for x in tok.encode_batch([en for _, en in pairs])]),
    }


class SampledBucketBatcher(BucketBatcher):
    """A :class:`BucketBatcher` whose examples are encoded anew each epoch with sampled segmentations
    (:meth:`Tokenizer.encode_sampled`, seeded by the batcher's seed and the epoch): subword regularisation.

    The plan, the cursor and resuming work as in the parent; the state's size and fingerprint are those of the
    plain encoding, so a resumed run re-draws exactly the epoch it stopped in. A pair whose draw no longer fits
    ``max_len`` is left out of that epoch only, and counted in ``dropped``.
    """

    def __init__(self, examples, pairs, tokenizer: Tokenizer, max_len: int, alpha: float, max_tokens: int, **kw):
        if not 0.0 < alpha:
            raise DataError(f"subword sampling needs alpha > 0 (0.5 is typical), got {alpha!r}.")
        super().__init__(examples, max_tokens, **kw)
        self.pairs, self.tokenizer, self.max_len, self.alpha = list(pairs), tokenizer, int(max_len), float(alpha)
        self._plain = (self.examples, self.lengths)
        self._drawn_for: int | None = None
        self.dropped: dict[int, int] = {}

    def _draw(self, epoch: int) -> None:
        if self._drawn_for == epoch:
            return
        seed = self.seed * 1_000_003 + epoch
        fr = self.tokenizer.encode_sampled([f for f, _ in self.pairs], self.alpha, seed)
        en = self.tokenizer.encode_sampled([e for _, e in self.pairs], self.alpha, seed + 500_000)
        examples = [ex for f, e in zip(fr, en) if (ex := _example(f, e, self.max_len, False, None)) is not None]
        self.dropped[epoch] = len(self.pairs) - len(examples)
        self.examples = examples
        self.lengths = np.array([len(x.input_ids) for x in examples])
        self._drawn_for, self._plan_cache = epoch, None

    def _plan(self, epoch: int) -> list[list[int]]:
        self._draw(epoch)
        return super()._plan(epoch)

    def __iter__(self) -> Iterator[Batch]:
        self._draw(self.epoch)
        return super().__iter__()

    def _fingerprint(self) -> str:
        return hashlib.sha1(self._plain[1].astype(np.int64).tobytes()).hexdigest()[:16]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "n_examples": len(self._plain[0]), "alpha": self.alpha}

    def load_state_dict(self, state: dict) -> None:
        if state.get("alpha") != self.alpha:
            raise DataError(
                f"This batcher cannot resume that state: subword alpha was {state.get('alpha')!r} and is {self.alpha!r}."
            )
        drawn = (self.examples, self.lengths)
        self.examples, self.lengths = self._plain  # the parent checks size and fingerprint of the plain encoding
        try:
            super().load_state_dict(state)
        finally:
            self.examples, self.lengths = drawn
