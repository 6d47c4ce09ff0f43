"""The built-in synthetic corpus: reproducible, big enough, grammatical where we can check it, and learnable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers.text import corpus as C
from helpers.text import data as D
from helpers.text import sources as S
from helpers.text.batches import BucketBatcher
from helpers.text.encoding import encode_pairs
from helpers.text.tokenizer import Tokenizer


def noun(fr: str) -> C.Noun:
    return next(n for n in C.vocabulary().nouns if n.fr == fr)


def adj(m: str) -> C.Adj:
    return next(a for a in C.vocabulary().adjectives if a.m == m)


def verb(inf: str) -> C.Verb:
    return next(v for v in C.vocabulary().verbs if v.inf == inf)


def pron(person: int, gender: str = "m") -> C.Subject:
    return C.Subject(person, gender)


def np_subject(np: C.NP) -> C.Subject:
    return C.Subject(np.person, np.noun.gender, np=np)


@pytest.fixture(scope="module")
def default_corpus():
    return C.builtin_corpus()


@pytest.fixture(scope="module")
def hard_corpus():
    return C.builtin_corpus(n=20_000, difficulty=3, seed=1)


# ============================================================================ size and reproducibility


def test_the_same_seed_gives_exactly_the_same_corpus():
    a = C.builtin_corpus(n=3000, seed=3)
    assert a == C.builtin_corpus(n=3000, seed=3)
    assert a != C.builtin_corpus(n=3000, seed=4)


def test_default_corpus_has_at_least_20k_distinct_pairs(default_corpus):
    assert C.DEFAULT_N >= 20_000 and len(default_corpus) == C.DEFAULT_N
    assert len(set(default_corpus)) == len(default_corpus)
    assert len({fr for fr, _ in default_corpus}) == len(default_corpus)  # one English per French sentence


def test_load_pairs_builtin_goes_through_the_same_generator():
    pairs, report = S.load_pairs("builtin", limit=500, seed=2, difficulty=1)
    assert pairs == C.builtin_corpus(n=500, seed=2, difficulty=1)
    assert "SYNTHETIC" in report.pretty() and report.kept == 500
    with pytest.raises(D.DataError, match="difficulty"):
        S.load_pairs("builtin", limit=10, difficult=2)


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="use 1"):
        C.builtin_corpus(n=10, difficulty=4)
    with pytest.raises(ValueError, match="positive number"):
        C.builtin_corpus(n=0)
    with pytest.raises(ValueError, match="fewer pairs or raise the difficulty"):
        C.builtin_corpus(n=20_000, difficulty=1)  # difficulty 1 has about 10,000 sentences in all


def test_an_ambiguous_grammar_is_refused(monkeypatch):
    """The generator checks that each French sentence gets one English translation; show the check can fire."""
    original = C.Clause.en
    calls = {"n": 0}

    def flaky_en(self):
        calls["n"] += 1
        text = original(self)
        return text.upper() if calls["n"] % 2 else text  # the same French, two different Englishes

    monkeypatch.setattr(C.Clause, "en", flaky_en)
    with pytest.raises(RuntimeError, match="ambiguous translation"):
        C.builtin_corpus(n=3000, difficulty=1)


# ============================================================================ the word file


def test_the_words_come_from_the_data_file_read_once():
    path = C._words_path()
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert "MIT" in raw["_about"] and "this project" in raw["_about"]
    words = C.vocabulary()
    assert words is C.vocabulary()  # cached: the file is read once
    assert [n.fr for n in words.nouns] == [e["fr"] for e in raw["nouns"]]  # in the file's order
    assert [a.m for a in words.adjectives] == [e["m"] for e in raw["adjectives"]]
    assert [v.inf for v in words.verbs] == [e["inf"] for e in raw["verbs"]]
    # regular plurals (+s) and -er presents are left out of the file and made by rule, irregular ones spelt out
    assert (noun("chat").fr_pl, noun("chat").en_pl) == ("chats", "cats")
    assert (noun("cheval").fr_pl, noun("souris").en_pl) == ("chevaux", "mice")
    assert verb("manger").present == ("mange", "manges", "mange", "mangeons", "mangez", "mangent")
    assert verb("acheter").present[0] == "achète" and verb("dormir").objects == () and verb("aimer").generic
    assert adj("beau").m_vowel == "bel" and adj("grand").english(("person",)) == "tall"
    assert words.names[0] == ("Tom", "m", 1) and ("près de", "near") in words.prepositions
    assert words.times["past"][0] == ("hier", "yesterday")


def test_the_word_file_ships_with_the_package():
    """pyproject.toml installs data/ as helpers.bundled, which is where a wheel install looks for the file."""
    tomllib = pytest.importorskip("tomllib")
    root = Path(C.__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        pytest.skip("helpers is installed outside a checkout")
    setuptools = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "helpers.bundled" in setuptools["packages"]
    assert setuptools["package-dir"]["helpers.bundled"] == "data"
    assert any(Path(C.WORDS_FILE).match(glob) for glob in setuptools["package-data"]["helpers.bundled"])
    assert (root / "data" / C.WORDS_FILE).is_file()


# ============================================================================ grammar spot checks


@pytest.mark.parametrize(
    "clause, fr, en",
    [
        (
            lambda: C.Clause(
                "copula",
                np_subject(C.NP(noun("maison"), True, "def", (adj("petit"),))),
                "present",
                False,
                "",
                adj=adj("blanc"),
            ),
            "Les petites maisons sont blanches.",
            "The small houses are white.",
        ),
        (
            lambda: C.Clause(
                "transitive", pron(0), "present", True, "", verb=verb("avoir"), obj=C.NP(noun("chat"), False, "indef")
            ),
            "Je n'ai pas de chat.",
            "I don't have a cat.",
        ),
        (
            lambda: C.Clause(
                "transitive", pron(3), "present", True, "", verb=verb("avoir"), obj=C.NP(noun("chat"), True, "indef")
            ),
            "Nous n'avons pas de chats.",
            "We don't have any cats.",
        ),
        (
            lambda: C.Clause("intransitive", pron(5, "f"), "past", False, "", verb=verb("partir")),
            "Elles sont parties.",
            "They left.",
        ),
        (
            lambda: C.Clause("intransitive", pron(0, "f"), "past", True, "", verb=verb("arriver")),
            "Je ne suis pas arrivée.",
            "I didn't arrive.",
        ),
        (
            lambda: C.Clause(
                "transitive",
                pron(2),
                "present",
                False,
                "inversion",
                verb=verb("manger"),
                obj=C.NP(noun("pomme"), False, "indef"),
            ),
            "Mange-t-il une pomme ?",
            "Does he eat an apple?",
        ),
        (
            lambda: C.Clause(
                "transitive",
                pron(2, "f"),
                "past",
                False,
                "estceque",
                verb=verb("manger"),
                obj=C.NP(noun("gâteau"), False, "def"),
            ),
            "Est-ce qu'elle a mangé le gâteau ?",
            "Did she eat the cake?",
        ),
        (
            lambda: C.Clause(
                "transitive", pron(0), "present", False, "", verb=verb("aimer"), obj=C.NP(noun("chat"), True, "def")
            ),
            "J'aime les chats.",
            "I like cats.",
        ),
        (
            lambda: C.Clause(
                "copula",
                np_subject(C.NP(noun("homme"), False, "indef", (adj("vieux"),))),
                "present",
                False,
                "",
                adj=adj("fatigué"),
            ),
            "Un vieil homme est fatigué.",
            "An old man is tired.",
        ),
        (
            lambda: C.Clause(
                "transitive",
                pron(3),
                "future",
                False,
                "",
                verb=verb("acheter"),
                obj=C.NP(noun("voiture"), True, "indef", (adj("grand"),)),
            ),
            "Nous allons acheter de grandes voitures.",
            "We're going to buy big cars.",
        ),
        (
            lambda: C.Clause(
                "copula", np_subject(C.NP(noun("garçon"), False, "def")), "future", True, "", adj=adj("content")
            ),
            "Le garçon ne va pas être content.",
            "The boy isn't going to be happy.",
        ),
        (
            lambda: C.Clause(
                "copula", np_subject(C.NP(noun("garçon"), False, "def")), "present", False, "", adj=adj("grand")
            ),
            "Le garçon est grand.",
            "The boy is tall.",
        ),
        (
            lambda: C.Clause(
                "transitive",
                pron(1),
                "past",
                False,
                "",
                verb=verb("lire"),
                obj=C.NP(noun("livre"), False, "def"),
                place=("près de", C.NP(noun("lac"), False, "def")),
                time=("hier", "yesterday"),
            ),
            "Tu as lu le livre près du lac hier.",
            "You read the book near the lake yesterday.",
        ),
        (
            lambda: C.Clause(
                "intransitive",
                pron(2, "f"),
                "future",
                False,
                "inversion",
                verb=verb("partir"),
                time=("demain", "tomorrow"),
            ),
            "Va-t-elle partir demain ?",
            "Is she going to leave tomorrow?",
        ),
        (
            lambda: C.Clause(
                "copula", np_subject(C.NP(noun("oiseau"), False, "this")), "past", False, "estceque", adj=adj("beau")
            ),
            "Est-ce que cet oiseau était beau ?",
            "Was this bird beautiful?",
        ),
        (
            lambda: C.Clause(
                "intransitive", np_subject(C.NP(noun("amie"), False, "my")), "past", False, "", verb=verb("venir")
            ),
            "Mon amie est venue.",
            "My friend came.",
        ),
        (
            lambda: C.Clause(
                "transitive",
                C.Subject(2, "m", name="Tom"),
                "present",
                False,
                "estceque",
                verb=verb("avoir"),
                obj=C.NP(noun("horloge"), False, "def"),
            ),
            "Est-ce que Tom a l'horloge ?",
            "Does Tom have the clock?",
        ),
    ],
)
def test_sentences_are_realised_with_agreement_elision_and_word_order(clause, fr, en):
    c = clause()
    assert (c.fr(), c.en()) == (fr, en)


def test_agreement_example_from_the_corpus_itself(default_corpus):
    found = [(f, e) for f, e in default_corpus if "petites maisons" in f]
    assert found and all("small houses" in e.lower() for _, e in found)
    assert not [f for f, _ in default_corpus if re.search(r"\bpetits maisons|\bpetite maisons|\bpetites maison\b", f)]


# ============================================================================ properties over whole corpora

_FORMS = {}
for _n in C.vocabulary().nouns:
    _FORMS.setdefault(_n.fr, set()).add((_n.gender, False))
    _FORMS.setdefault(_n.fr_pl, set()).add((_n.gender, True))


def _agreement_errors(sentence: str) -> list[str]:
    """Adjacent adjective+noun or noun+adjective words whose forms disagree in gender or number."""
    words = re.findall(r"[\wœé'-]+", sentence.lower())
    errors = []
    for i, w in enumerate(words):
        if w not in _FORMS:
            continue
        for j, pre in ((i - 1, True), (i + 1, False)):
            if not 0 <= j < len(words):
                continue
            for a in C.vocabulary().adjectives:
                if a.pre != pre or words[j] not in {a.m, a.f, a.mpl, a.fpl, a.m_vowel}:
                    continue
                ok = {a.form(g, pl) for g, pl in _FORMS[w]} | ({a.m_vowel} if a.m_vowel else set())
                if words[j] not in ok:
                    errors.append(f"{words[j]} {w}" if pre else f"{w} {words[j]}")
    return errors


@pytest.mark.parametrize("which", ["default_corpus", "hard_corpus"])
def test_corpus_wide_surface_rules(which, request):
    pairs = request.getfixturevalue(which)
    for fr, en in pairs:
        assert fr[0].isupper() and en[0].isupper(), (fr, en)
        assert re.fullmatch(r".*[^ ](\.| \?)", fr), fr  # French: "." or " ?"
        assert re.fullmatch(r".*[^ ][.?]", en), en  # English: no space before ?
        assert not re.search(r"\b(le|la|je|ne|de|que) [aeiouyéèêàâîôûœh]", fr, re.I), fr  # missed elision
        assert not re.search(r"\b(de|à) les?\b", fr.replace("de la", "")), fr  # missed du/des/au/aux
        assert not re.search(r"\ba [aeiou]|\ban [^aeiou]", en, re.I), en  # a/an
        assert not _agreement_errors(fr), (fr, _agreement_errors(fr))
        if re.search(r"\b[Ee]lles sont \w+", fr):
            assert re.search(r"\b[Ee]lles sont \w+es\b", fr), fr  # feminine plural participle / adjective
        if re.search(r"\b[Ee]lle est \w+", fr):
            assert re.search(r"\b[Ee]lle est \w*e\b", fr), fr


def test_the_agreement_check_catches_a_wrong_form():
    assert _agreement_errors("Les petits maisons sont blanches.") == ["petits maisons"]
    assert _agreement_errors("J'ai une voiture noir.") == ["voiture noir"]
    assert _agreement_errors("Un vieil homme dort.") == []


def test_difficulty_grows_vocabulary_constructions_and_length():
    corpora = {d: C.builtin_corpus(n=8000, seed=0, difficulty=d) for d in (1, 2, 3)}
    vocab = {d: len({w for fr, _ in c for w in fr.split()}) for d, c in corpora.items()}
    length = {d: sum(len(fr.split()) for fr, _ in c) / len(c) for d, c in corpora.items()}
    assert vocab[1] < vocab[2] < vocab[3]
    assert length[1] < length[2] < length[3]
    easy_fr = " ".join(fr for fr, _ in corpora[1])
    assert "?" not in easy_fr and " vais " not in easy_fr and " ai " not in easy_fr
    hard_fr = " ".join(fr for fr, _ in corpora[3])
    assert "-t-" in hard_fr and "-tu " in hard_fr and "près d" in hard_fr and "hier" in hard_fr


def test_describe_corpus_says_plainly_that_it_is_synthetic():
    for d in (1, 2, 3):
        text = C.describe_corpus(d)
        assert "SYNTHETIC" in text and f"difficulty {d}" in text and "nouns" in text


# ============================================================================ a small model learns it


class TinyGRU(nn.Module):
    """Fallback when helpers.nn.model is not there: an embedding and a GRU language model."""

    def __init__(self, vocab: int, d: int = 64):
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, d), nn.GRU(d, d, batch_first=True), nn.Linear(d, vocab)

    def forward(self, ids, prefix_len=None):
        return self.out(self.rnn(self.emb(ids))[0])


def tiny_model(vocab: int, max_len: int) -> nn.Module:
    try:
        from helpers.nn import build_model
        from helpers.nn.model import ModelConfig
    except ImportError:
        return TinyGRU(vocab)
    return build_model(ModelConfig(vocab_size=vocab, max_len=max_len, n_layer=2, n_head=2, d_model=32))


def train_losses(pairs, steps: int = 150, seed: int = 0) -> list[float]:
    torch.manual_seed(seed)
    tok = Tokenizer.train(pairs, vocab_size=400)
    examples, _ = encode_pairs(tok, pairs, max_len=40)
    model = tiny_model(tok.vocab_size, 40)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batcher = BucketBatcher(examples, max_tokens=1024, seed=seed)
    losses: list[float] = []
    while len(losses) < steps:
        for batch in batcher:
            logits = model(batch.input_ids, batch.prefix_len)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), batch.labels.view(-1), ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
    return losses


def test_a_tiny_model_learns_the_easy_corpus_within_seconds():
    pairs = C.builtin_corpus(n=3000, seed=0, difficulty=1)
    losses = train_losses(pairs, steps=100)
    first, last = sum(losses[:5]) / 5, sum(losses[-10:]) / 10
    assert last < 0.45 * first, (first, last)  # measured: about 5.8 -> 1.9 in 100 steps (2 to 10 s on 2 cores)


@pytest.mark.slow
def test_the_tiny_model_learns_to_translate_not_only_to_write_english():
    """With the English shuffled across pairs (the same English text, no longer a translation of its
    French) only an English language model can be learnt: the loss stays well above the real corpus's."""
    import random

    pairs = C.builtin_corpus(n=3000, seed=0, difficulty=1)
    real = train_losses(pairs, steps=400)
    english = [e for _, e in pairs]
    random.Random(0).shuffle(english)
    scrambled = train_losses([(f, e) for (f, _), e in zip(pairs, english)], steps=400)
    real_end, scrambled_end = sum(real[-10:]) / 10, sum(scrambled[-10:]) / 10
    assert real_end < scrambled_end - 0.3, (real_end, scrambled_end)  # measured: 0.35 vs 1.08


def test_every_reference_output_is_installed_with_the_package():
    """A check's saved outputs (data/reference/*.json) must reach a wheel install (Colab), not only this checkout."""
    import tomllib

    from helpers import runtime

    setuptools = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]
    globs = setuptools["package-data"]["helpers.bundled"]
    files = sorted((Path(__file__).resolve().parents[2] / "data" / "reference").glob("*"))
    assert files, "data/reference holds the saved outputs of the exercises' checks"
    for path in files:
        assert any(Path("reference", path.name).match(glob) for glob in globs), f"{path.name} is not package data"
        assert runtime.bundled_path("reference", path.name).is_file()
