"""helpers.text.tokenizer: one normaliser, and a sentencepiece tokenizer whose special ids, round trip, saving and
messages the rest of the course relies on. The tokenizer is conftest's ``tok``, trained once on the built-in corpus."""

from __future__ import annotations

import pytest
import torch

from helpers.text import corpus
from helpers.text.sources import DataError
from helpers.text.tokenizer import BOS, EOS, PAD, SEP, UNK, Tokenizer, normalise_text

# ============================================================================ normalising


def test_normalise_text_handles_french_spaces_controls_and_composition():
    assert normalise_text("Va\u202f!") == "Va !"  # narrow no-break space, as Tatoeba writes French
    assert normalise_text("Qui\u00a0?  ") == "Qui ?"
    assert normalise_text("deux\u2009mots") == "deux mots"
    assert normalise_text("zé\u200bro\x07 \u00adX") == "zéro X"
    decomposed = "e\u0301te\u0301"  # é written as e + combining accent
    assert normalise_text(decomposed) == "\u00e9t\u00e9" and len(normalise_text(decomposed)) == 3
    assert normalise_text("  a \t b \n") == "a b"
    assert normalise_text("Ça 😀 !") == "Ça 😀 !"  # emoji survive


def test_normalising_twice_changes_nothing_and_encode_normalises_first(tok):
    typed = "  Où\u00a0es-tu\u202f?  L\u2019homme dit \u201cbonjour\u201d.\u200b"
    once = normalise_text(typed)
    assert once == 'Où es-tu ? L\'homme dit "bonjour".' and normalise_text(once) == once
    # the road from text to ids is normalise_text, then sentencepiece: typed text and clean text are the same ids
    assert tok.encode(typed) == tok.encode(once) == tok.sp.encode(once)
    assert tok.encode_batch([typed, once]) == [tok.encode(once)] * 2
    assert tok.pieces(typed) == tok.sp.encode(once, out_type=str)


# ============================================================================ the tokenizer


TRICKY = [
    "Les élèves ont mangé des crêpes à Noël.",
    "« Où ça ? » demanda-t-il… Ça coûte 12,50 € !",
    "Œuvre naïve, façade, Zoë, maïs, où, ÉTÉ.",
    "Call me at 555-0123 or 42.",
    "I'm happy 😀🇫🇷 — really!",
    "漢字 и кириллица never seen",  # not in the training text: spelt as UTF-8 bytes
    "<sep> is just text here",
]


def test_tokenizer_special_ids(tok):
    assert (tok.pad_id, tok.bos_id, tok.sep_id, tok.eos_id) == (0, 1, 2, 3)
    assert [tok.id_to_piece(i) for i in range(5)] == [PAD, BOS, SEP, EOS, UNK]
    assert 300 < tok.vocab_size <= 500


@pytest.mark.parametrize("text", TRICKY)
def test_tokenizer_round_trips_accents_punctuation_digits_emoji_and_unseen_characters(tok, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.unk_id not in ids  # byte fallback: nothing becomes <unk>
    assert all(i > tok.eos_id for i in ids)  # "<sep>" typed in text is not the separator


def test_tokenizer_splits_digits_and_decodes_without_special_tokens(tok):
    pieces = [p.strip("▁") for p in tok.pieces("2024") if p.strip("▁")]
    assert len(pieces) == 4  # one piece per digit (or its byte): numbers never merge into rare pieces
    ids = [tok.bos_id, *tok.encode("J'ai froid."), tok.sep_id, *tok.encode("I'm cold."), tok.eos_id, tok.pad_id]
    assert tok.decode(ids) == "J'ai froid. I'm cold."
    assert tok.decode(torch.tensor(tok.encode("Oui."))) == "Oui."


def test_tokenizer_save_load_gives_the_same_ids(tok, tmp_path):
    tok.save(tmp_path / "t")
    again = Tokenizer.load(tmp_path / "t")
    for text in TRICKY:
        assert again.encode(text) == tok.encode(text)
    assert again.vocab_size == tok.vocab_size and again.meta["model_type"] == "unigram"
    with pytest.raises(FileNotFoundError, match="Tokenizer.train"):
        Tokenizer.load(tmp_path / "nothing")


def test_tokenizer_training_is_deterministic_and_bpe_works():
    texts = [s for p in corpus.builtin_corpus(n=800, seed=1, difficulty=1) for s in p]
    a = Tokenizer.train(texts, vocab_size=400)
    b = Tokenizer.train(texts, vocab_size=400)
    assert a.model_proto == b.model_proto
    bpe = Tokenizer.train(texts, vocab_size=400, model_type="bpe")
    assert bpe.decode(bpe.encode(TRICKY[0])) == TRICKY[0]
    with pytest.raises(DataError, match="at least 300"):
        Tokenizer.train(texts, vocab_size=100)
    with pytest.raises(DataError, match="'unigram' or 'bpe'"):
        Tokenizer.train(texts, model_type="wordpiece")
    with pytest.raises(DataError, match="No text"):
        Tokenizer.train(["", "  "])


def test_a_vocabulary_smaller_than_the_alphabet_is_a_message():
    # sentencepiece's own error is an INTERNAL RuntimeError from C++; the user gets the number to use instead
    texts = ["".join(chr(0x4E00 + i) for i in range(k, k + 20)) for k in range(0, 400, 20)]  # 400 distinct characters
    with pytest.raises(DataError, match=r"vocab_size=300 is smaller than .* use vocab_size of at least \d+"):
        Tokenizer.train(texts, vocab_size=300)


def test_a_sentencepiece_model_with_other_special_ids_is_refused(tok, tmp_path):
    import sentencepiece as spm

    texts = [s for p in corpus.builtin_corpus(n=300, seed=2, difficulty=1) for s in p]
    spm.SentencePieceTrainer.train(  # sentencepiece's defaults: <unk> 0, <s> 1, </s> 2, no <pad> and no <sep>
        sentence_iterator=iter(texts),
        model_prefix=str(tmp_path / "plain"),
        vocab_size=300,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    with pytest.raises(DataError, match="train it with Tokenizer.train"):
        Tokenizer((tmp_path / "plain.model").read_bytes())
    assert Tokenizer(tok.model_proto).encode("Oui.") == tok.encode("Oui.")  # the control: ours loads
