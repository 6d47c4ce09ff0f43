"""Tiny random stand-ins for pretrained models: offline, seconds to build, for the tests and quick mode.

:func:`tiny_marian` and :func:`tiny_causal_lm` build tiny *random* models of notebook 04's two families (a MarianMT
encoder-decoder, a Llama decoder-only LM) from configurations, with a tokenizer trained on the given pairs, and save
them in a folder that :func:`helpers.hf.loading.load_pretrained` reads as it reads a downloaded model. They say
plainly that they are not pretrained (:data:`helpers.hf.translator.NOT_PRETRAINED`, shown by
:meth:`helpers.hf.translator.HFTranslator.describe`).
"""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MarianConfig,
    MarianMTModel,
    MarianTokenizer,
    PreTrainedTokenizerFast,
)

from .loading import quiet_transformers
from .translator import NOT_PRETRAINED


def _text_file(pairs, folder: Path) -> Path:
    path = folder / "tokenizer_text.txt"
    path.write_text("".join(f"{fr}\n{en}\n" for fr, en in pairs), encoding="utf-8")
    return path


def tiny_marian(pairs, folder: str | Path, *, vocab_size: int = 600, d_model: int = 32, seed: int = 0) -> Path:
    """A 2-layer MarianMT with random weights and a sentencepiece tokenizer trained on ``pairs``, saved in
    ``folder`` the way a downloaded opus-mt model is (``source.spm``, ``target.spm``, ``vocab.json``)."""
    quiet_transformers()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = _text_file(pairs, folder)
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(folder / "sp"), vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, pad_id=-1, bos_id=-1, eos_id=1, unk_id=2, hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    for side in ("source", "target"):
        (folder / f"{side}.spm").write_bytes((folder / "sp.model").read_bytes())
    tok = MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"))
    torch.manual_seed(seed)
    config = MarianConfig(
        vocab_size=len(tok), d_model=d_model, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=2 * d_model, decoder_ffn_dim=2 * d_model,
        max_position_embeddings=256, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id, forced_eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    setattr(config, NOT_PRETRAINED, True)
    model = MarianMTModel(config)
    model.generation_config.num_beams = 1
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    for name in ("sp.model", "sp.vocab", text.name):
        (folder / name).unlink(missing_ok=True)
    return folder


def tiny_causal_lm(pairs, folder: str | Path, *, vocab_size: int = 700, hidden: int = 32, seed: int = 0) -> Path:
    """A 2-layer Llama with random weights and a byte-level BPE tokenizer trained on ``pairs`` whose only special
    token is ``<|endoftext|>`` (begin and end, no pad token: as with many real LMs), saved in ``folder``."""
    quiet_transformers()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    # trained on running text, as a real LM's tokenizer is: words after a space get pieces of their own ("ĠNous")
    bpe.train_from_iterator([f"French: {fr}\nEnglish: {en}\n" for fr, en in pairs], trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    setattr(config, NOT_PRETRAINED, True)
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
