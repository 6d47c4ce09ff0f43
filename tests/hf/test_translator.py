"""A pretrained model as a translator (helpers.hf.translator): our example format and decoding.

Both families are tested with the tiny random models of helpers.hf.tiny: a decoder-only example is <bos> prompt |
English <eos> with the loss on the English only (the format check is shown to catch four mistakes), a few-shot
prompt is tokenized as one text, padding changes no sentence, and the collated batch masks padding out of the
attention and the loss. Translation batches are sized in tokens (token_batches): with a fixed number of sentences
per batch the last batch (the longest sources) is the largest by far; sized in tokens, no batch of several
sentences costs more than the budget, and the order of the translations is the order of the sources whatever the
batches. The check of the bound is shown to fail on the fixed-size batches it replaces.
"""

from __future__ import annotations

import random
import statistics

import pytest
import torch

from helpers.evaluation.translation import TranslateReport
from helpers.hf.translator import HFTranslator, ModelLoadError, PromptFormat, token_batches
from tests.hf.test_tiny import load

# ---------------------------------------------------------------------------------------------- the format


def check_causal_format(tr, fr, en, ex) -> None:
    """What a decoder-only example must be: <bos> prompt | English <eos>, loss right of the bar only."""
    ids, labels = ex["input_ids"], ex["labels"]
    assert len(ids) == len(labels)
    n_prompt = sum(1 for label in labels if label == -100)
    assert labels[:n_prompt] == [-100] * n_prompt, "the masked positions must be the prompt, at the start"
    assert ids[0] == tr.bos_id, "the example starts with the model's own <bos>"
    prompt = tr.tokenizer.decode(ids[1:n_prompt])
    assert prompt == f"French: {fr}\nEnglish:", prompt
    whole = tr.tokenizer(f"French: {fr}\nEnglish:", add_special_tokens=False)["input_ids"]
    assert ids[1:n_prompt] == whole, "the prompt must be the pieces the text gives whole, as in any document"
    assert labels[n_prompt:] == ids[n_prompt:], "the loss covers the whole English side"
    assert ids[-1] == tr.eos_id, "the English ends with the model's own <eos>"
    assert tr.tokenizer.decode(ids[n_prompt:-1]) == f" {en}"


def test_causal_example_format_and_its_check_catches_mistakes(folders, pairs):
    tr = load(folders, "causal")
    fr, en = pairs[0]
    ex = tr.encode_pair(fr, en)
    check_causal_format(tr, fr, en, ex)
    n = ex["labels"].count(-100)
    mutants = {
        "loss on the prompt too": {**ex, "labels": list(ex["input_ids"])},
        "no <eos>": {"input_ids": ex["input_ids"][:-1], "labels": ex["labels"][:-1]},
        "separator masked out of the prompt": {**ex, "labels": [-100] * (n - 1) + ex["input_ids"][n - 1 :]},
        "no <bos>": {"input_ids": ex["input_ids"][1:], "labels": ex["labels"][1:]},
    }
    for name, bad in mutants.items():
        with pytest.raises(AssertionError):
            check_causal_format(tr, fr, en, bad)
            pytest.fail(f"the format check missed: {name}")


def test_prompt_format_text_is_the_prompt_then_the_target():
    """The whole pair's text, which notebook 04's check of Exercise 4.1 compares with, without telling where it is cut."""
    fmt = PromptFormat()
    assert fmt.text("Je lis.", "I read.") == "French: Je lis.\nEnglish: I read."
    assert fmt.text("Je lis.", "I read.") == fmt.prompt("Je lis.") + fmt.target("I read.")


def test_few_shot_prompt_is_tokenized_as_one_text(folders, pairs):
    """Tokenized piecewise, "French: " + "Je" gives a lone space piece the examples never contain (a bug we had)."""
    tr = load(folders, "causal").with_examples(pairs[1:4])
    # a sentence whose first word has a piece with its leading space ("ĠNous"), as most do in a real model
    fr = next(f for f, _ in pairs[4:] if tr._ids("French: ") + tr._ids(f) != tr._ids("French: " + f))
    text = "".join(f"French: {f}\nEnglish: {e}\n" for f, e in pairs[1:4]) + f"French: {fr}\nEnglish:"
    assert tr.prompt_ids(fr) == [tr.bos_id] + tr.tokenizer(text, add_special_tokens=False)["input_ids"]


def test_batched_translation_equals_one_sentence_at_a_time(folders, pairs):
    """Left padding (decoder-only) and right padding (encoder-decoder) must not change any sentence, nor may the
    length budget of the batch's longest sentence (these random models never stop: greedy shows both)."""
    for kind in ("causal", "seq2seq"):
        tr = load(folders, kind)
        sources = [fr for fr, _ in pairs[:12]]
        alone = [tr.translate([src])[0] for src in sources]
        assert tr.translate(sources, batch_size=12) == alone, kind


def test_seq2seq_example_is_french_in_english_out(folders, pairs):
    tr = load(folders, "seq2seq")
    fr, en = pairs[1]
    ex = tr.encode_pair(fr, en)
    assert ex["input_ids"][-1] == tr.eos_id and ex["labels"][-1] == tr.eos_id
    assert tr.tokenizer.decode(ex["input_ids"], skip_special_tokens=True) == fr
    assert tr.tokenizer.decode(ex["labels"], skip_special_tokens=True) == en


def test_collate_masks_padding_out_of_attention_and_loss(folders, pairs):
    for kind in ("causal", "seq2seq"):
        tr = load(folders, kind)
        exs = [tr.encode_pair(fr, en) for fr, en in pairs[:6]]
        batch = tr.collate(exs)
        for i, ex in enumerate(exs):
            n = len(ex["input_ids"])
            assert batch["attention_mask"][i, :n].all() and not batch["attention_mask"][i, n:].any()
            assert (batch["input_ids"][i, n:] == tr.pad_id).all()
            assert batch["labels"][i, : len(ex["labels"])].tolist() == ex["labels"]
            assert (batch["labels"][i, len(ex["labels"]) :] == -100).all()


def test_no_pad_token_is_handled_by_padding_with_eos(folders):
    tr = load(folders, "causal")
    assert tr.pad_id == tr.eos_id
    assert any("no pad token" in n for n in tr.notes)


def test_causal_loss_is_on_target_tokens_only(folders, pairs):
    """The model's loss equals cross-entropy over the English and <eos> positions alone, and differs from the
    loss over every position (the mistake of leaving the prompt unmasked)."""
    tr = load(folders, "causal")
    batch = tr.collate([tr.encode_pair(fr, en) for fr, en in pairs[:4]])
    with torch.no_grad():
        out = tr.model(**batch)
    logits, labels = out.logits[:, :-1], batch["labels"][:, 1:]
    by_hand = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
    torch.testing.assert_close(out.loss, by_hand)
    everything = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    with torch.no_grad():
        unmasked = tr.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=everything)
    assert abs(float(unmasked.loss) - float(out.loss)) > 1e-3


def test_source_budget_names_the_tokens_a_source_may_have(folders):
    tr = load(folders, "seq2seq")
    assert tr.source_budget() == f"source budget: {tr.max_source_tokens} tokens"
    assert tr.max_source_tokens == 128, "half of the tiny Marian's 256 positions: the rest is for the translation"


def test_a_tokenizer_without_eos_is_refused(folders):
    tr = load(folders, "causal")
    tr.tokenizer.eos_token = None
    with pytest.raises(ModelLoadError, match="no end-of-sequence token"):
        HFTranslator(tr.model, tr.tokenizer, name="no-eos")


# ---------------------------------------------------------------------------------------------- batches in tokens


def _lengths(n: int = 300, seed: int = 0) -> list[int]:
    """Source lengths with a long tail, as a test set has: mostly 5-20 tokens, a few up to 120."""
    rng = random.Random(seed)
    return [rng.randint(5, 20) if rng.random() < 0.9 else rng.randint(21, 120) for _ in range(n)]


def bound_violations(batches: list[list[int]], lengths: list[int], max_rows: int, max_tokens: int) -> list[str]:
    """What breaks the contract of token_batches: every index once, sorted by length (ties in input order),
    at most ``max_rows`` rows, rows × longest ≤ ``max_tokens`` unless the batch is one sentence."""
    problems = []
    flat = [i for b in batches for i in b]
    if flat != sorted(range(len(lengths)), key=lambda i: lengths[i]):
        problems.append("not every source exactly once, shortest first")
    for k, b in enumerate(batches):
        if not b or len(b) > max_rows:
            problems.append(f"batch {k} has {len(b)} rows")
        elif len(b) > 1 and len(b) * max(lengths[i] for i in b) > max_tokens:
            problems.append(f"batch {k}: {len(b)} rows × {max(lengths[i] for i in b)} > {max_tokens}")
    return problems


def _fixed(lengths: list[int], rows: int) -> list[list[int]]:
    """The batching this replaces: sorted by length, cut every ``rows`` sentences."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[s : s + rows] for s in range(0, len(order), rows)]


@pytest.mark.parametrize("max_rows, max_tokens", [(64, None), (64, 500), (8, 10_000), (32, 50)])
def test_batches_are_bounded_in_tokens_and_keep_every_source_once(max_rows, max_tokens):
    lengths = _lengths()
    batches = token_batches(lengths, max_rows, max_tokens)
    budget = max_tokens if max_tokens is not None else max_rows * statistics.median_high(lengths)
    assert bound_violations(batches, lengths, max_rows, budget) == []
    if max_tokens == 50:  # sources longer than the budget go alone
        assert any(len(b) == 1 and lengths[b[0]] > 50 for b in batches)


def test_default_budget_is_a_full_batch_of_median_sources_and_the_longest_batches_shrink():
    lengths = _lengths()
    batches = token_batches(lengths, 64)
    median = statistics.median_high(lengths)
    assert len(batches[0]) == 64, "short sources still fill a batch"
    costs = [len(b) * max(lengths[i] for i in b) for b in batches]
    assert all(cost <= 64 * median for cost, b in zip(costs, batches) if len(b) > 1), costs
    assert len(batches[-1]) < len(batches[len(batches) // 2]), "the longest sources must come in smaller batches"


def test_bound_check_catches_fixed_size_batches():
    """Control: cut every 64 sentences, the tail batch holds 64 rows of the longest sources, far over budget."""
    lengths = _lengths()
    fixed = _fixed(lengths, 64)
    problems = bound_violations(fixed, lengths, 64, 64 * statistics.median_high(lengths))
    assert problems and all(">" in p for p in problems), problems
    shuffled = [fixed[0][::-1], *fixed[1:]]  # and one batch out of length order
    assert "not every source exactly once, shortest first" in bound_violations(shuffled, lengths, 64, 10**9)


def test_edge_cases():
    assert token_batches([], 64) == []
    assert token_batches([0, 0, 3], 2) == [[0, 1], [2]]  # a source with no tokens costs nothing
    assert token_batches([5, 5, 5], 64, max_tokens=1) == [[0], [1], [2]]
    assert token_batches([3, 1, 2], 64) == [[1, 2, 0]]


def _fake_translator(max_source_tokens: int = 1000):
    """An HFTranslator whose tokenizer splits on spaces and whose 'model' upper-cases the sentence; it records
    each batch it is given. Enough to test the batching and the ordering in translate without a model."""
    tr = object.__new__(HFTranslator)
    tr.model = torch.nn.Linear(1, 1)
    tr.max_source_tokens = max_source_tokens
    tr._ids = lambda text: text.split()
    tr.seen = []

    def generate(texts, lengths, beams, length_penalty):
        tr.seen.append(list(lengths))
        return [t.upper() for t in texts]

    tr._generate_batch = generate
    return tr


def test_translate_batches_in_tokens_and_returns_the_sources_order():
    rng = random.Random(1)
    sources = [" ".join(f"w{k}" for k in range(n)) for n in _lengths(200, seed=1)]
    sources[3], sources[50] = "", "   "  # blank lines give blank output and are not sent to the model
    rng.shuffle(sources)
    tr = _fake_translator()
    out = tr.translate(sources, batch_size=16, max_tokens=200)
    assert out == [s.strip().upper() for s in sources]
    assert sum(map(len, tr.seen)) == 198
    for lengths in tr.seen:
        assert len(lengths) <= 16 and (len(lengths) == 1 or len(lengths) * max(lengths) <= 200), lengths
    assert [n for b in tr.seen for n in b] == sorted(n for b in tr.seen for n in b)


def test_translate_batches_a_cut_source_at_its_cut_length():
    tr = _fake_translator(max_source_tokens=30)
    report = TranslateReport()
    out = tr.translate(["a " * 100, "b c", "d " * 40], batch_size=64, max_tokens=60, report=report)
    assert out[1] == "B C" and report.truncated == [(1, 100, 30), (3, 40, 30)]
    assert tr.seen == [[2, 30], [30]]
