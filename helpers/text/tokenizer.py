"""From text to token ids and back: one normaliser and a sentencepiece tokenizer (notebook 03, "The tokenizer").

    tok = Tokenizer.train(train_pairs, vocab_size=4000)   # on the TRAIN split only
    tok.encode("Où es-tu\u202f?")                         # normalise_text, then sentencepiece
    tok.decode(ids)                                       # special tokens left out

:meth:`Tokenizer.encode` normalises first, so training, ``translate`` and ``evaluate`` take the same road from text
to ids. The special ids are fixed (``<pad>`` 0, ``<bos>`` 1, ``<sep>`` 2, ``<eos>`` 3, ``<unk>`` 4): the example
format (:mod:`helpers.text.encoding`) and the batches (:mod:`helpers.text.batches`) are built from them.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm
import torch

from .. import runtime
from ..run_folder import TOKENIZER_META, TOKENIZER_MODEL, RunFolder
from .sources import DataError

PAD, BOS, SEP, EOS, UNK = "<pad>", "<bos>", "<sep>", "<eos>", "<unk>"
PAD_ID, BOS_ID, SEP_ID, EOS_ID, UNK_ID = 0, 1, 2, 3, 4

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


class Tokenizer:
    """A joint French+English sentencepiece model (unigram or BPE) with our four special tokens.

    ids: <pad>=0, <bos>=1, <sep>=2, <eos>=3, <unk>=4, then 256 byte pieces (byte fallback: any character
    the model never saw is spelt as UTF-8 bytes, so it round-trips instead of becoming <unk>), then pieces.
    Train it on the training split only: pieces learnt from test sentences would leak them.
    """

    pad_id, bos_id, sep_id, eos_id, unk_id = PAD_ID, BOS_ID, SEP_ID, EOS_ID, UNK_ID

    def __init__(self, model_proto: bytes, meta: dict | None = None):
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
        (d / TOKENIZER_MODEL).write_bytes(self.model_proto)
        (d / TOKENIZER_META).write_text(
            json.dumps({**self.meta, "vocab_size": self.vocab_size}, indent=2), encoding="utf-8"
        )
        return d

    @classmethod
    def load(cls, in_dir: str | os.PathLike) -> Tokenizer:
        d = Path(in_dir)
        model = d / TOKENIZER_MODEL
        if not model.is_file():
            raise FileNotFoundError(
                f"No tokenizer at {d} (expected {model}). Train one with Tokenizer.train(...) "
                f"and save it with tok.save({str(d)!r})."
            )
        meta = json.loads((d / TOKENIZER_META).read_text(encoding="utf-8")) if (d / TOKENIZER_META).is_file() else {}
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


def tokenizer_for(
    train_pairs: Sequence[tuple[str, str]],
    cfg,
    out_dir: str | Path | None = None,
    *,
    seed: int = 0,
    progress: bool = False,
    reuse: bool | None = None,
) -> Tokenizer:
    """The run's tokenizer: reloaded from ``out_dir/tokenizer``, or trained on ``train_pairs`` (the training split
    only) and saved there.

    ``reuse`` is the caller's decision: True for a run that continues a checkpoint (reloading, not retraining, keeps
    the vocabulary the checkpoint was trained with; a saved tokenizer made with another ``vocab_size`` or type is
    refused, naming both), False for a fresh run (trained anew, replacing one an unfinished earlier run left), None
    (a notebook cell run again) to reload whatever the folder holds.
    """
    tok_dir = RunFolder(out_dir).tokenizer if out_dir is not None else None
    if reuse and (tok_dir is None or not tok_dir.is_dir()):
        raise FileNotFoundError(
            f"This run reads the tokenizer saved in {out_dir} (it continues a checkpoint there, or another process of "
            "the run saved it), but the folder has no tokenizer/: a checkpoint cannot be read without the vocabulary "
            "it was trained with. Restore the folder's tokenizer/ (under torchrun: a folder every process can see), "
            "or start a fresh run in a new output folder."
        )
    if tok_dir is not None and tok_dir.is_dir() and reuse is not False:
        tokenizer = Tokenizer.load(tok_dir)
        made = (tokenizer.meta.get("requested_vocab_size"), tokenizer.meta.get("model_type"))
        if made != (cfg.vocab_size, cfg.tokenizer_type):
            raise runtime.ConfigMismatchError(
                f"{tok_dir} holds a tokenizer made with vocab_size={made[0]}, type={made[1]!r}, but this run asks for "
                f"vocab_size={cfg.vocab_size}, type={cfg.tokenizer_type!r}. Use a new output folder, or rerun with the "
                "settings that made it."
            )
        if progress:
            print(f"Tokenizer: reusing {tok_dir} ({tokenizer.vocab_size} pieces).", file=sys.stderr)
        return tokenizer
    t0 = time.perf_counter()
    tokenizer = Tokenizer.train(train_pairs, vocab_size=cfg.vocab_size, model_type=cfg.tokenizer_type, seed=seed)
    if out_dir is not None:
        runtime.save_tokenizer_once(tokenizer, tok_dir, replace=reuse is False)
    if progress:
        took = time.perf_counter() - t0
        print(
            f"Tokenizer: trained {tokenizer.vocab_size} {cfg.tokenizer_type} pieces in {took:.1f} s.", file=sys.stderr
        )
    return tokenizer
