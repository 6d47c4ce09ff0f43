"""Translating with a model (helpers.evaluation.translation): budgets, aligned output, the cache and batching change
nothing, the one translator interface, long sources split and joined."""

from __future__ import annotations

import io

import torch

from helpers.evaluation import translation
from helpers.hf.translator import HFTranslator
from helpers.nn.model import ModelConfig
from helpers.text.encoding import max_source_tokens


def test_max_new_tokens_grows_with_the_source_and_respects_max_len():
    assert translation.max_new_tokens_for(prefix_len=7, max_len=64) == 2 * 5 + 10
    assert translation.max_new_tokens_for(prefix_len=30, max_len=64) == 64 - 30
    assert translation.max_new_tokens_for(prefix_len=63, max_len=64) == 1


# ----------------------------------------------------------------------------------------------
# translating with a (barely trained) tiny model


def test_translate_keeps_lines_aligned_and_handles_bad_input(run):
    err = io.StringIO()
    long_line = " ".join(["chat"] * 200)
    lines = ["Je mange une pomme.", "", "   ", "日本語 ☃ 🦄 ŋ", long_line, "Il dort."]
    out = translation.translate_lines(translation.ScratchTranslator(run.model, run.tokenizer), lines, err=err)
    assert len(out) == len(lines)
    assert out[1] == "" and out[2] == ""  # empty in, empty out, no model call
    assert all(isinstance(o, str) for o in out)
    text = err.getvalue()
    # the 200 words have no punctuation: split between words into pieces that fit, every piece translated
    assert "line 5 has" in text and "pieces" in text and "truncated" not in text
    assert "line 4" not in text  # unseen characters are spelt as bytes, not an error


def test_translate_gives_the_same_output_with_or_without_cache_and_batching(run, monkeypatch):
    """Catches translate mixing up sentences after sorting them by length, or a cache that disagrees with
    recomputation; and translate dropping the beam width or length penalty on the way to model.generate."""
    src = ["Je mange une pomme.", "Le chat dort.", "Nous sommes partis."]
    for beams in (1, 3):
        out = translation.translate(run.model, run.tokenizer, src, beams=beams)
        assert out == translation.translate(run.model, run.tokenizer, src, beams=beams, use_cache=False)
        assert out == translation.translate(run.model, run.tokenizer, src, beams=beams, batch_size=1)
    calls, real = [], run.model.generate
    monkeypatch.setattr(run.model, "generate", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    translation.translate(run.model, run.tokenizer, src, beams=3, length_penalty=0.5)
    assert [(kw["beams"], kw["length_penalty"]) for kw in calls] == [(3, 0.5)]


# ----------------------------------------------------------------------------------------------
# one translator interface: evaluation calls translate(sources, beams) on ours and on a pretrained model alike


def interface_problems(cls) -> list[str]:
    """How ``cls`` departs from translation.Translator ([] when it implements it): ``translate(sources, beams=1, *,
    batch_size, length_penalty, report)`` returning the translations, and ``source_budget()``."""
    import inspect

    problems = []
    translate = getattr(cls, "translate", None)
    if translate is None:
        return ["no translate"]
    params = inspect.signature(translate).parameters
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    if positional[:3] != ["self", "sources", "beams"] or params["beams"].default != 1:
        problems.append(f"translate takes {positional}, not (sources, beams=1)")
    missing = [k for k in ("batch_size", "length_penalty", "report") if k not in params]
    if missing:
        problems.append(f"translate takes no {missing}")
    if not callable(getattr(cls, "source_budget", None)):
        problems.append("no source_budget")
    return problems


def test_our_model_and_a_pretrained_one_implement_the_one_translator_interface():

    assert interface_problems(translation.Translator) == []
    assert interface_problems(translation.ScratchTranslator) == interface_problems(HFTranslator) == []

    class OptionsOnly:  # the shape notebook 03 wrapped its decoder in before: no beams, no budget
        def translate(self, sources, **options): ...

    assert interface_problems(OptionsOnly) == [
        "translate takes ['self', 'sources'], not (sources, beams=1)",
        "translate takes no ['batch_size', 'length_penalty', 'report']",
        "no source_budget",
    ]


def test_scratch_translator_is_translate_and_states_the_source_budget(run, monkeypatch):
    """Our model behind the interface is translation.translate, with every option passed on to model.generate."""
    src = ["Je mange une pomme.", "", "Le chat dort.", " ".join(["chat"] * 200)]
    mine, theirs = translation.TranslateReport(), translation.TranslateReport()
    translator = translation.ScratchTranslator(run.model, run.tokenizer)
    calls, real = [], run.model.generate
    monkeypatch.setattr(run.model, "generate", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    out = translator.translate(src, beams=2, length_penalty=0.5, report=mine, use_cache=False)
    assert {(kw["beams"], kw["length_penalty"], kw["use_cache"]) for kw in calls} == {(2, 0.5, False)}
    assert out == translation.translate(run.model, run.tokenizer, src, beams=2, length_penalty=0.5, report=theirs)
    assert (mine.empty, mine.split, mine.truncated) == (theirs.empty, theirs.split, theirs.truncated)
    assert mine.empty == 1 and [row[:2] for row in mine.split] == [(4, 200)] and not mine.truncated
    max_len = run.model.config.max_len
    budget = f"source budget: {max_source_tokens(max_len)} of the model's {max_len} tokens, the rest is for the English"
    assert translator.source_budget() == budget
    err = io.StringIO()
    translation.translate_lines(translator, src, err=err)
    pieces = mine.split[0][2]
    note = f"line 4 has 200 tokens; translated in {pieces} pieces, split at sentence ends, commas or words ({budget})."
    assert note in err.getvalue(), err.getvalue()


# ----------------------------------------------------------------------------------- long sources translated in pieces


def _words(text):  # a stand-in tokenizer: one token per word
    return text.split()


def test_split_to_fit_cuts_at_sentences_then_commas_then_words_and_loses_nothing():
    text = "Un deux trois. Quatre cinq, six sept huit neuf, dix. Onze"
    pieces = translation.split_to_fit(text, _words, 4)
    assert all(len(_words(p)) <= 4 for p in pieces)
    assert " ".join(pieces).split() == text.split()  # every word kept, in order (a cut would drop some)
    assert pieces[0] == "Un deux trois."  # the sentence end, not the 4th word, is the first boundary
    assert "Quatre cinq," in pieces  # then the comma
    assert translation.split_to_fit("Court.", _words, 4) == ["Court."]
    words = " ".join(f"m{i}" for i in range(10))  # no punctuation: between words, pieces as long as allowed
    assert [len(_words(p)) for p in translation.split_to_fit(words, _words, 4)] == [4, 4, 2]


class _EchoTokenizer:
    """Words as ids; decode gives the words back upper-cased, so a translation shows what was read."""

    bos_id, sep_id, eos_id = 0, 1, 2

    def __init__(self):
        self.vocab = {}

    def encode(self, text):
        return [self.vocab.setdefault(w, len(self.vocab) + 3) for w in text.split()]

    def decode(self, ids):
        inverse = {v: k for k, v in self.vocab.items()}
        return " ".join(inverse[i].upper() for i in ids if i in inverse)


class _CopyModel(torch.nn.Module):
    """generate() returns the source ids: a translator that copies, to follow what happens to long sources."""

    def __init__(self, max_len):
        super().__init__()
        self.config = ModelConfig(vocab_size=10, max_len=max_len, n_layer=1, n_head=1, d_model=4)

    def generate(self, prefixes, budgets, **kw):
        return [p[1:-1] for p in prefixes]


def test_translate_splits_a_long_source_and_joins_the_pieces_in_order():
    # max_len 12: a source budget of 4 tokens. Without the split the 9-word source would come back cut to 4 words
    tok, model = _EchoTokenizer(), _CopyModel(12)
    long = "a b c. d e f, g h i"
    report = translation.TranslateReport()
    out = translation.translate(model, tok, ["x y", long, ""], report=report)
    assert out == ["X Y", "A B C. D E F, G H I", ""]
    assert report.split == [(2, 9, 3)] and report.truncated == [] and report.empty == 1
    cut = translation.TranslateReport()
    assert translation.translate(model, tok, [long], report=cut, split_long=False) == ["A B C. D"]
    assert cut.truncated == [(1, 9, 4)] and cut.split == []
