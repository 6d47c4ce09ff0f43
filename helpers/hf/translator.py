"""A pretrained Hugging Face model behind our translator interface (notebook 04), and our example format.

Notebook 04 compares two pretrained families with our scratch model, scored by the same
:func:`helpers.evaluation.evaluate.evaluate_pairs`, through the same
:class:`helpers.evaluation.translation.Translator` interface (``translate(sources, beams)``):

* an encoder-decoder trained for translation (``Helsinki-NLP/opus-mt-fr-en``, MarianMT): French in, English out;
* a decoder-only language model (``HuggingFaceTB/SmolLM2-135M``) taught our format: ``<bos> French <sep>
  English <eos>``, with the model's own ``<bos>``/``<eos>`` and, since such models have no separator token,
  a short text separator (:class:`PromptFormat`). The loss covers the English and the ``<eos>`` only, as for
  our model.

:class:`HFTranslator` holds the model and its tokenizer: the example format fine-tuning trains on
(:meth:`HFTranslator.encode_pair`, :meth:`HFTranslator.collate`) and decoding in batches sized in tokens
(:func:`token_batches`). :func:`helpers.hf.loading.load_pretrained` builds one.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import torch

from ..evaluation.translation import TranslateReport, sources_to_decode
from ..progress import progress_bar

SEQ2SEQ, CAUSAL = "seq2seq", "causal"
NOT_PRETRAINED = "tbb_not_pretrained"  # a config attribute set by the tiny stand-ins (helpers.hf.tiny)


class ModelLoadError(ValueError):
    """A model or tokenizer could not be loaded or cannot translate; the message says why and what to use instead."""


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

    def text(self, fr: str, en: str) -> str:
        """The whole pair as text, without ``<bos>`` and ``<eos>``."""
        return self.prompt(fr) + self.target(en)


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
    """A Hugging Face model and its tokenizer as a :class:`helpers.evaluation.translation.Translator`, the interface
    evaluation calls for every model (ours is :class:`helpers.evaluation.translation.ScratchTranslator`).

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

    def source_budget(self) -> str:
        """The source budget in words, for warnings about cut sources (the Translator interface)."""
        return f"source budget: {self.max_source_tokens} tokens"

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
        shots = "".join(self.prompt.text(f, e) + "\n" for f, e in self.examples)
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
        sources: list[str],
        beams: int = 1,
        *,
        batch_size: int = 32,
        length_penalty: float = 1.0,
        report: TranslateReport | None = None,
        max_tokens: int | None = None,
    ) -> list[str]:
        """English for each French line, in order, as :func:`helpers.evaluation.translation.translate` does for our model
        (the :class:`helpers.evaluation.translation.Translator` contract): blank lines give blank output, over-long
        sources are cut and counted in ``report.truncated``, decoding is greedy (``beams=1``) or beam search, and
        stops at ``<eos>`` (a decoder-only model also at the end of the line, which a few-shot prompt needs).

        Batches hold sentences of similar length and are sized in tokens (:func:`token_batches`): at most
        ``batch_size`` sentences, and rows × longest source within ``max_tokens`` (default: a full batch of
        median-length sources), so the batches of the longest sources hold fewer sentences."""
        report = report if report is not None else TranslateReport()
        t0 = time.perf_counter()
        self.model.eval()
        outputs = [""] * len(sources)
        planned = sources_to_decode(sources, self._ids, self.max_source_tokens, report)
        todo = [(i, text, len(ids)) for i, text, ids in planned]
        batches = token_batches([n for _, _, n in todo], batch_size, max_tokens)
        if len(todo) >= 500:  # a 135 M model on a CPU needs minutes for a test set: show that it moves
            batches = progress_bar(iterable=batches, desc=f"translating {len(todo):,} sentences", unit="batch", leave=False,
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
