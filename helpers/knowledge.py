"""What pretraining knows (notebook 06): facts read only in pretraining.

**Knowledge access** (the experiment of the Stanford assignment this course follows, offline). Short
biographies of invented people are the pretraining text::

    Varo Tesimal was born in Dunmere in 1874. She worked as a miller and later moved to Ostrava.

A model is then fine-tuned to answer ``Where was Varo Tesimal born?`` → ``Dunmere`` for *some* people and
asked about the others, whose birthplace it can only have read in pretraining. Three numbers answer the
question "does pretraining let the model reach facts it only read?": the accuracy of the model fine-tuned
from scratch, of the model span-corruption pretrained first (:mod:`helpers.training.pretrain`, the machinery of
``train --pretrain span``), and of always answering the most common birthplace of the fine-tuning people
(the "London" baseline of the original). Birthplaces follow a skewed (Zipf) law, so that baseline is not zero,
and every biography carries distractors (a job, a year, another city the person moved to).

Notebook 06's other study, token embeddings at equal budget, is :mod:`helpers.embeddings`.
"""

from __future__ import annotations

import copy
import math
import random
import string
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from . import runtime
from .evaluation.translation import translate
from .nn.model import DecoderOnlyTransformer
from .nn.variants import build_model
from .text.batches import IGNORE_INDEX, BucketBatcher
from .text.encoding import Example, encode_pairs, make_example
from .text.tokenizer import Tokenizer
from .training.config import TrainConfig, preset_config
from .training.pretrain import MASK_ID, SpanCorruptionBatcher, corrupt_span
from .training.train import train

# ---------------------------------------------------------------------------------------------------------------
# the people and their biographies

# Town names, most made up (a few exist: Ostrava, Lorne), from the most common birthplace down.
PLACES = (
    "Dunmere", "Ostrava", "Kelby", "Marrowind", "Tessaly", "Brumholt", "Quarne", "Valdor", "Siltby", "Hollin",
    "Pendrake", "Ardenne", "Corvey", "Lindqvist", "Mossgard", "Ravensby", "Tarquay", "Eskholm", "Fennick",
    "Glimmerdale", "Harrowgate", "Iselmoor", "Jorvale", "Kestrel Bay", "Lorne", "Mirefield", "Norwick", "Oakhaven",
    "Pryddon", "Rushmoor", "Sablon", "Thornby",
)  # fmt: skip
JOBS = (
    "baker", "miller", "teacher", "sailor", "painter", "doctor", "carpenter", "weaver", "lawyer", "farmer",
    "printer", "nurse", "mason", "tailor", "clerk", "brewer", "potter", "surveyor", "chemist", "jeweller",
)  # fmt: skip
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "st", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
_CODAS = ("", "", "", "n", "r", "l", "s", "m")


@dataclass(frozen=True)
class Person:
    name: str  # "Varo Tesimal": unique among the people of one data set
    she: bool  # the pronoun of the biography
    born: str  # the birthplace: the fact asked about
    year: int  # distractor: the year of birth
    job: str  # distractor
    moved_to: str  # distractor: another town, never the birthplace


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)).title()


def place_weights(n_places: int = len(PLACES), skew: float = 1.0) -> np.ndarray:
    """Zipf weights 1 / rank^skew, normalised: how often each town of :data:`PLACES` is a birthplace."""
    w = 1.0 / np.arange(1, n_places + 1) ** skew
    return w / w.sum()


def make_people(n: int, seed: int = 0, *, skew: float = 1.0, n_places: int = len(PLACES)) -> list[Person]:
    """``n`` invented people with unique names (built from syllables), seeded.

    Birthplaces are drawn from the first ``n_places`` towns with :func:`place_weights` (Zipf, ``skew``), so the
    most common birthplace is a real baseline; the town each person moved to is drawn the same way, but never
    equals the birthplace, so a model that answers with the wrong town of the biography is wrong.
    """
    if not 2 <= n_places <= len(PLACES):
        raise ValueError(f"n_places must lie in [2, {len(PLACES)}], got {n_places}.")
    rng = random.Random(f"people-{seed}")
    weights = place_weights(n_places, skew).tolist()
    places = list(PLACES[:n_places])
    people, names = [], set()
    while len(people) < n:
        name = f"{_word(rng, rng.choice((1, 2)))} {_word(rng, rng.choice((2, 3)))}"
        if name in names:
            continue
        names.add(name)
        born = rng.choices(places, weights)[0]
        moved = born
        while moved == born:
            moved = rng.choices(places, weights)[0]
        people.append(Person(name, rng.random() < 0.5, born, rng.randint(1820, 1990), rng.choice(JOBS), moved))
    return people


# Three ways to tell the same life, the name always first (as a Wikipedia article starts with it).
TEMPLATES = (
    "{name} was born in {born} in {year}. {He} worked as a {job} and later moved to {moved}.",
    "{name} was born in {year} in {born}. {He} later moved to {moved}, where {he} worked as a {job}.",
    "{name}, a {job}, was born in {born} in {year} and moved to {moved} as an adult.",
)


def biography(person: Person, template: int = 0) -> str:
    """The person's biography in one of :data:`TEMPLATES`: the birthplace among distractors."""
    he = "she" if person.she else "he"
    return TEMPLATES[template % len(TEMPLATES)].format(
        name=person.name, born=person.born, year=person.year, job=person.job, moved=person.moved_to, he=he,
        He=he.title(),
    )  # fmt: skip


QUESTION_FORMATS = {
    "question": "Where was {name} born?",  # the seed's question
    "biography": "{name} was born in",  # the same question in the words of the biographies
}


def question(person: Person, fmt: str = "question") -> str:
    """What the fine-tuned model is asked: ``Where was <name> born?`` (or, ``fmt="biography"``, ``<name> was born in``)."""
    if fmt not in QUESTION_FORMATS:
        raise ValueError(f"fmt={fmt!r} is not known: choose one of {sorted(QUESTION_FORMATS)}.")
    return QUESTION_FORMATS[fmt].format(name=person.name)


@dataclass
class KnowledgeData:
    """Everyone's biography (the pretraining text); questions for the fine-tuning people only.

    ``test`` people appear in the biographies and nowhere else: their birthplaces can only have been read.
    """

    people: list[Person]
    finetune: list[Person]
    test: list[Person]
    biographies: list[str]  # one per person, in ``people`` order

    @staticmethod
    def pairs(people: Sequence[Person], fmt: str = "question") -> list[tuple[str, str]]:
        """(question, birthplace) for each person."""
        return [(question(p, fmt), p.born) for p in people]

    @property
    def finetune_pairs(self) -> list[tuple[str, str]]:
        return self.pairs(self.finetune)

    @property
    def test_pairs(self) -> list[tuple[str, str]]:
        return self.pairs(self.test)


def make_knowledge_data(n_people: int, n_test: int, seed: int = 0, *, skew: float = 1.0) -> KnowledgeData:
    """``n_people`` people, ``n_test`` of them (chosen at random, seeded) held out of fine-tuning."""
    if not 0 < n_test < n_people:
        raise ValueError(f"n_test must lie strictly between 0 and n_people={n_people}, got {n_test}.")
    people = make_people(n_people, seed, skew=skew)
    order = list(range(n_people))
    random.Random(f"split-{seed}").shuffle(order)
    test_idx = set(order[:n_test])
    rng = random.Random(f"templates-{seed}")
    bios = [biography(p, rng.randrange(len(TEMPLATES))) for p in people]
    return KnowledgeData(
        people,
        [p for i, p in enumerate(people) if i not in test_idx],
        [p for i, p in enumerate(people) if i in test_idx],
        bios,
    )


def unseen_people(data: KnowledgeData, n: int, seed: int) -> list[Person]:
    """``n`` new people drawn as :func:`make_people` draws them, none of whose names occurs in ``data``: nobody wrote
    about them, in the biographies or the fine-tuning questions (notebook 06, Question 6.4)."""
    known = {p.name for p in data.people}
    found, extra = [], n
    while len(found) < n:
        found = [p for p in make_people(n + extra, seed=seed) if p.name not in known][:n]
        extra *= 2
    return found


def named_after_places(people: Sequence[Person], seed: int, n_places: int = len(PLACES)) -> list[Person]:
    """Copies of ``people`` whose surname is a town of :data:`PLACES` (uniformly drawn) and who were born there:
    "Varo Kelby", born in Kelby (notebook 06, Question 6.5). Nothing in :func:`make_knowledge_data` ties names to
    towns; the towns are drawn uniformly, so ``answer_profile`` reports what the baseline scores on them."""
    rng = random.Random(f"place-names-{seed}")
    out = []
    for person in people:
        town = rng.choice(PLACES[:n_places])
        out.append(replace(person, name=f"{person.name.split()[0]} {town}", born=town))
    return out


def answer_profile(predictions: Sequence[str], answers: Sequence[str], baseline_place: str) -> dict:
    """What a set of answers looks like: exact-match accuracy, the share naming the baseline's town, the share that
    is a town of :data:`PLACES` at all, the share of the commonest answer and how many distinct answers there are."""
    right = accuracy(predictions, answers)  # refuses predictions and answers that do not pair up, or none
    said = [normalise_answer(p) for p in predictions]
    towns = {normalise_answer(t) for t in PLACES}
    top, top_count = Counter(said).most_common(1)[0]
    n = len(said)
    return {
        "accuracy": right,
        "always the baseline's town would score": accuracy([baseline_place] * n, answers),
        "the baseline's town": sum(a == normalise_answer(baseline_place) for a in said) / n,
        "a town of the data set": sum(a in towns for a in said) / n,
        f"the commonest answer ({top!r})": top_count / n,
        "distinct answers": len(set(said)),
    }


# ---------------------------------------------------------------------------------------------------------------
# scoring: exact match, the most-common-place baseline, and the verdict


def normalise_answer(text: str) -> str:
    """Case, surrounding spaces and punctuation ignored, inner spaces collapsed: ' kestrel  bay. ' -> 'kestrel bay'."""
    return " ".join(text.strip().strip(string.punctuation + " ").casefold().split())


def accuracy(predictions: Sequence[str], answers: Sequence[str]) -> float:
    """The share of predictions equal to their answer after :func:`normalise_answer` (exact match, not containment)."""
    if len(predictions) != len(answers):
        raise ValueError(f"{len(predictions)} predictions for {len(answers)} answers: they must pair up.")
    if not answers:
        raise ValueError("no answers to score.")
    return sum(normalise_answer(p) == normalise_answer(a) for p, a in zip(predictions, answers)) / len(answers)


def majority_answer(train_answers: Sequence[str]) -> str:
    """The most common (normalised) answer of the *training* answers; ties go to the one seen first."""
    counts = Counter(normalise_answer(a) for a in train_answers)
    best = max(counts.values())
    return next(a.strip() for a in train_answers if counts[normalise_answer(a)] == best)


def standard_error(acc: float, n: int) -> float:
    """The binomial standard error of an accuracy measured on ``n`` questions."""
    return math.sqrt(max(acc * (1 - acc), 1.0 / n) / n)  # floor: an accuracy of 0 or 1 is not certain either


def knowledge_verdict(scratch: float, pretrained: float, baseline: float, n_test: int) -> str:
    """One sentence on three accuracies and the number of people they were measured on."""
    best_other = max(scratch, baseline)
    other = "the most-common-place baseline" if baseline >= scratch else "the model fine-tuned from scratch"
    margin = 2 * standard_error(best_other, n_test)
    numbers = (
        f"{pretrained:.1%} of the {n_test} held-out people with pretraining, {scratch:.1%} from scratch, "
        f"{baseline:.1%} for always answering the most common birthplace"
    )
    if pretrained - best_other > margin:
        return (
            f"Yes: pretraining let the model reach facts it only read ({numbers}); the pretrained model beats "
            f"{other} by {pretrained - best_other:.1%}, more than two standard errors ({margin:.1%})."
        )
    if pretrained > best_other:
        return (
            f"Not shown: the pretrained model is ahead of {other} by only {pretrained - best_other:.1%} ({numbers}), "
            f"within two standard errors ({margin:.1%}) of noise on {n_test} questions."
        )
    return (
        f"No: pretraining did not let the model reach facts it only read ({numbers}); it does no better than {other}."
    )


# ---------------------------------------------------------------------------------------------------------------
# the experiment: tokenizer, span-corruption pretraining, fine-tuning, answers


@dataclass
class KnowledgeConfig:
    """Sizes and budgets of one knowledge-access run; the model's shape and optimiser are a :class:`TrainConfig`."""

    n_people: int = 300
    n_test: int = 100
    skew: float = 1.0
    vocab_size: int = 800
    pretrain_steps: int = 5000
    finetune_steps: int = 300
    finetune_lr: float = 3e-4  # lower than pretraining's (notebook 06, Question 6.3, asks why)
    curve_points: int = 4  # pretraining snapshots fine-tuned along the way (the last is the finished run)
    seed: int = 0


def knowledge_configs(quick: bool) -> tuple[KnowledgeConfig, TrainConfig]:
    """Notebook 06's sizes: quick mode (seconds, noise) and full mode (minutes on a CPU; benchmarks/RESULTS.md)."""
    model = dict(n_head=4, max_len=64, max_tokens=1024, dropout=0.0, label_smoothing=0.0, weight_decay=0.01)
    # learned positions, not the recipe's rotary: the synthesizer row beside this model (Question 6.6) cannot turn q
    # and k, so both add positions to the tokens; and the full-mode figures (RESULTS.md, issue 48) were measured so
    model["positional"] = "learned"
    if quick:
        kcfg = KnowledgeConfig(n_people=90, n_test=30, vocab_size=400, pretrain_steps=60, finetune_steps=40,
                               finetune_lr=5e-3, curve_points=2)  # fmt: skip
        return kcfg, preset_config("tiny", d_model=32, n_layer=2, d_ff=128, lr=3e-3, warmup_steps=20, **model)
    kcfg = KnowledgeConfig()
    return kcfg, preset_config("tiny", d_model=128, n_layer=2, d_ff=512, lr=2e-3, warmup_steps=50, **model)


def knowledge_tokenizer(data: KnowledgeData, vocab_size: int, seed: int = 0) -> Tokenizer:
    """A sentencepiece tokenizer trained on the biographies and the fine-tuning questions and answers."""
    texts = list(data.biographies) + [t for pair in data.finetune_pairs for t in pair]
    return Tokenizer.train(texts, vocab_size=vocab_size, seed=seed, num_threads=1)


def pretrain_on_biographies(model, tok: Tokenizer, data: KnowledgeData, cfg: TrainConfig, *, device=None,
                            progress: bool = False, callback=None):  # fmt: skip
    """Span corruption on every biography (:class:`helpers.training.pretrain.SpanCorruptionBatcher`), for ``cfg``'s budget."""
    ids = tok.encode_batch(data.biographies)
    if any(MASK_ID in s for s in ids):
        raise ValueError("a biography encodes to the <mask> id: train the tokenizer with Tokenizer.train.")
    batcher = SpanCorruptionBatcher(ids, cfg.max_len, cfg.max_tokens, seed=cfg.seed)
    return train(model, batcher, None, cfg, None, device=device, extra_config={"phase": "pretrain-span"},
                 progress=progress, callback=callback)  # fmt: skip


def finetune(model, tok: Tokenizer, pairs: Sequence[tuple[str, str]], cfg: TrainConfig, *, device=None,
             progress: bool = False):  # fmt: skip
    """Fine-tune on ``<bos> question <sep> answer <eos>`` (loss on the answer only) for ``cfg``'s budget."""
    examples, report = encode_pairs(tok, pairs, cfg.max_len)
    if report.kept != len(pairs):
        raise ValueError(f"{len(pairs) - report.kept} questions did not fit in max_len={cfg.max_len}.")
    batcher = BucketBatcher(examples, cfg.max_tokens, seed=cfg.seed)
    return train(model, batcher, None, cfg, None, device=device, extra_config={"phase": "finetune"}, progress=progress)


def cloze_prompts(tok: Tokenizer, data: KnowledgeData, people: Sequence[Person]) -> list[list[int]]:
    """``<bos> text before <mask> text after <sep>``: each person's biography with the birthplace cut out.

    That is the pretraining task itself, so it measures what pretraining stored, before any fine-tuning."""
    index = {p.name: i for i, p in enumerate(data.people)}
    prompts = []
    for p in people:
        ids = tok.encode(data.biographies[index[p.name]])
        place = tok.encode(p.born)
        # the birthplace's pieces as they occur in the whole biography (where pretraining read them)
        at = next((i for i in range(len(ids)) if ids[i : i + len(place)] == place), None)
        if at is None:
            raise ValueError(f"{p.born!r} is not cut into the same pieces inside {p.name}'s biography")
        prompts.append([tok.bos_id, *ids[:at], MASK_ID, *ids[at + len(place) :], tok.sep_id])
    return prompts


def cloze_accuracy(model, tok: Tokenizer, data: KnowledgeData, people: Sequence[Person]) -> float:
    """How often the model writes the birthplace back into its masked biography (greedy). A masked biography that
    leaves no room for an answer within the model's ``max_len`` counts as not written back."""
    prompts = cloze_prompts(tok, data, people)
    fits = [i for i, p in enumerate(prompts) if len(p) < model.config.max_len]
    out = [[] for _ in prompts]
    for start in range(0, len(fits), 64):
        chunk = [prompts[i] for i in fits[start : start + 64]]
        budgets = [min(8, model.config.max_len - len(p)) for p in chunk]  # a birthplace is a few pieces
        for i, ids in zip(fits[start : start + 64], model.generate(chunk, budgets, eos_id=tok.eos_id)):
            out[i] = ids
    return accuracy([tok.decode(ids) for ids in out], [p.born for p in people])


def answer_questions(model, tok: Tokenizer, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Greedy answers to each question of ``pairs`` (the decoding every translation in the course uses)."""
    return translate(model, tok, [q for q, _ in pairs])


# ---------------------------------------------------------------------------------------------------------------
# the pipeline in pieces: examples as (input_ids, labels),
# a batcher over them, the phases' budgets, and the driver that makes the accuracy table


def labels_for(input_ids: Sequence[int], n_source: int) -> list[int]:
    """Next-token labels on the target only: position t holds ``input_ids[t + 1]`` from the last source position
    (``n_source - 1``, the ``<sep>``) to the one before the end, and :data:`IGNORE_INDEX` everywhere else."""
    labels = [IGNORE_INDEX] * len(input_ids)
    for t in range(n_source - 1, len(input_ids) - 1):
        labels[t] = int(input_ids[t + 1])
    return labels


def finetune_example(tok: Tokenizer, question: str, answer: str, max_len: int) -> tuple[list[int], list[int]] | None:
    """``<bos> question <sep> answer <eos>`` and its labels (the loss on the answer and ``<eos>`` only), or None
    when it is longer than ``max_len`` or either side is empty."""
    ex = make_example(tok, question, answer, max_len)
    return None if ex is None else (list(ex.input_ids), labels_for(ex.input_ids, ex.prefix_len))


def corrupt_biography(ids: Sequence[int], rng: random.Random, max_len: int) -> tuple[list[int], list[int]] | None:
    """One span-corruption example of one biography's ids, with its labels (the loss on ``span <eos>`` only):
    :func:`helpers.training.pretrain.corrupt_span`'s cut, from the same three draws of ``rng``."""
    ex = corrupt_span(ids, rng, max_len)
    return None if ex is None else (list(ex.input_ids), labels_for(ex.input_ids, ex.prefix_len))


def pretraining_examples(biography_ids: Sequence[Sequence[int]], epoch: int, seed: int, max_len: int,
                         corrupt=corrupt_biography) -> list[tuple[list[int], list[int]]]:  # fmt: skip
    """Epoch ``epoch``'s cuts of every biography, in order, drawn from ``random.Random(f"{seed}-{epoch}")`` (the
    seeding of :class:`helpers.training.pretrain.SpanCorruptionBatcher`); biographies too short to cut are left out."""
    rng = random.Random(f"{seed}-{epoch}")
    return [e for e in (corrupt(ids, rng, max_len) for ids in biography_ids) if e is not None]


def as_example(input_ids: Sequence[int], labels: Sequence[int]) -> Example:
    """The batcher's :class:`helpers.text.encoding.Example` of one (input_ids, labels) pair; refuses labels that are not
    the next token on the target only (what :func:`helpers.text.batches.collate` builds from ``prefix_len``)."""
    ids, labels = [int(i) for i in input_ids], [int(y) for y in labels]
    scored = [t for t, y in enumerate(labels) if y != IGNORE_INDEX]
    if len(labels) != len(ids) or not scored or labels != labels_for(ids, scored[0] + 1):
        raise ValueError(
            "labels must have one entry per input id: the next token from the <sep> on (the target and <eos>), "
            f"{IGNORE_INDEX} everywhere else (the source, and the last position)."
        )
    return Example(ids, scored[0] + 1)


class ExampleBatcher(BucketBatcher):
    """A :class:`helpers.text.batches.BucketBatcher` over (input_ids, labels) pairs: a list (the same examples every
    epoch) or a function ``epoch -> list`` (new examples each epoch, as span corruption cuts afresh)."""

    def __init__(self, examples, max_tokens: int, *, seed: int = 0, **kw):
        self.make = examples if callable(examples) else None
        first = self.make(0) if self.make else examples
        self._examples_epoch = 0
        super().__init__([as_example(i, y) for i, y in first], max_tokens, seed=seed, **kw)

    def _plan(self, epoch: int) -> list[list[int]]:
        if self.make is not None and epoch != self._examples_epoch:
            self.examples = [as_example(i, y) for i, y in self.make(epoch)]
            self.lengths = np.array([len(e.input_ids) for e in self.examples])
            self._examples_epoch, self._plan_cache = epoch, None
        return super()._plan(epoch)


def training_config(model_cfg: TrainConfig, steps: int, lr: float, seed: int) -> TrainConfig:
    """``model_cfg`` with one phase's budget: ``steps`` at peak learning rate ``lr`` (a warm-up of at most a tenth of
    the steps), no time limit, and ``seed`` for the batches."""
    return replace(model_cfg, steps=steps, minutes=None, lr=lr, seed=seed,
                   warmup_steps=min(model_cfg.warmup_steps, max(1, steps // 10)))  # fmt: skip


def new_model(tok: Tokenizer, model_cfg: TrainConfig, seed: int, device=None) -> DecoderOnlyTransformer:
    """A fresh model of ``model_cfg``'s shape for ``tok``'s vocabulary: the same initial weights for the same seed."""
    device = runtime.pick_device(device)
    runtime.set_seed(seed)
    return build_model(model_cfg.model_config(tok.vocab_size, device)).to(device)


def train_phase(model, batcher, cfg: TrainConfig, phase: str, *, device=None, progress: bool = False, callback=None):
    """Train ``model`` in place on ``batcher`` for ``cfg``'s budget (no validation, no checkpoints); ``phase`` names it."""
    return train(model, batcher, None, cfg, None, device=device, extra_config={"phase": phase}, progress=progress,
                 callback=callback)  # fmt: skip


def knowledge_table(data: KnowledgeData, tok: Tokenizer, kcfg: KnowledgeConfig, model_cfg: TrainConfig, *,
                    device=None) -> dict:  # fmt: skip
    """Pretrain, fine-tune, evaluate: the accuracy table of the knowledge-access experiment, with ``kcfg``'s people,
    steps and rates and ``model_cfg``'s model. Returns the accuracies (``scratch``, ``pretrained``, ``baseline``),
    ``baseline_place``, and per model its ``answers`` and ``models``.
    """
    seed, max_len, max_tokens = kcfg.seed, model_cfg.max_len, model_cfg.max_tokens
    finetune_set = [finetune_example(tok, q, a, max_len) for q, a in data.finetune_pairs]
    bios = tok.encode_batch(data.biographies)
    pre_cfg = training_config(model_cfg, kcfg.pretrain_steps, model_cfg.lr, seed)
    ft_cfg = training_config(model_cfg, kcfg.finetune_steps, kcfg.finetune_lr, seed)
    models = {}
    for name in ("scratch", "pretrained"):
        model = new_model(tok, model_cfg, seed, device)
        if name == "pretrained":
            cuts = ExampleBatcher(lambda epoch: pretraining_examples(bios, epoch, seed, max_len), max_tokens, seed=seed)
            train_phase(model, cuts, pre_cfg, "pretrain-span", device=device)
        train_phase(model, ExampleBatcher(finetune_set, max_tokens, seed=seed), ft_cfg, "finetune", device=device)
        models[name] = model
    gold = [p.born for p in data.test]
    answers = {name: answer_questions(m, tok, data.test_pairs) for name, m in models.items()}
    place = majority_answer([p.born for p in data.finetune])
    return {
        "scratch": accuracy(answers["scratch"], gold),
        "pretrained": accuracy(answers["pretrained"], gold),
        "baseline": accuracy([place] * len(gold), gold),
        "baseline_place": place,
        "answers": answers,
        "models": models,
    }


@dataclass
class KnowledgeResult:
    scratch: float  # fine-tuned from scratch, asked "Where was X born?"
    pretrained: float  # pretrained for every step, then fine-tuned the same way
    pretrained_biography_words: float  # the same pretrained model, fine-tuned and asked "X was born in"
    baseline: float  # always the most common birthplace of the fine-tuning people
    baseline_answer: str
    n_test: int
    n_finetune: int
    curve: list[dict] = field(default_factory=list)  # per pretraining snapshot: steps, accuracy, cloze accuracy
    finetune_accuracy: dict = field(default_factory=dict)  # on (some) fine-tuning people: each model learnt its task
    moved_to_answers: dict = field(default_factory=dict)  # share of test answers that name the town moved to instead
    examples: list[dict] = field(default_factory=list)  # a few test questions with both models' answers
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def verdict(self) -> str:
        return knowledge_verdict(self.scratch, self.pretrained, self.baseline, self.n_test)


def run_knowledge(kcfg: KnowledgeConfig, model_cfg: TrainConfig, *, device=None, progress: bool = False,
                  data: KnowledgeData | None = None, tokenizer: Tokenizer | None = None,
                  ) -> tuple[KnowledgeResult, dict]:  # fmt: skip
    """The whole experiment: data, tokenizer, the scratch model, the pretrained model, the baseline.

    Every model has the same shape, initial weights (same seed) and fine-tuning budget
    (``kcfg.finetune_steps`` at ``kcfg.finetune_lr``); the pretrained ones first read every biography with
    span corruption, for ``kcfg.pretrain_steps`` (the final model) or part of them (``kcfg.curve_points``
    snapshots of the same run, each fine-tuned from a copy). Returns the result and ``{"data", "tokenizer",
    "scratch", "pretrained", "answers"}``: the two main fine-tuned models and their answers to the test questions.
    """
    t0 = time.perf_counter()
    device = runtime.pick_device(device)
    data = data if data is not None else make_knowledge_data(kcfg.n_people, kcfg.n_test, kcfg.seed, skew=kcfg.skew)
    tok = tokenizer if tokenizer is not None else knowledge_tokenizer(data, kcfg.vocab_size, kcfg.seed)
    ft_cfg = training_config(model_cfg, kcfg.finetune_steps, kcfg.finetune_lr, kcfg.seed)
    pre_cfg = replace(training_config(model_cfg, kcfg.pretrain_steps, model_cfg.lr, kcfg.seed), log_interval=1)
    gold = [p.born for p in data.test]
    seen = data.finetune[: len(data.test)]

    def fresh():
        runtime.set_seed(kcfg.seed)  # the same initial weights for every model
        return build_model(model_cfg.model_config(tok.vocab_size, device)).to(device)

    def tuned(start_state, fmt: str):
        model = fresh()
        model.load_state_dict(start_state)
        finetune(model, tok, data.pairs(data.finetune, fmt), ft_cfg, device=device, progress=progress)
        return model, accuracy(answer_questions(model, tok, data.pairs(data.test, fmt)), gold)

    # pretraining, with snapshots of the weights along the way
    model = fresh()
    initial = copy.deepcopy(model.state_dict())
    wanted = sorted({max(1, kcfg.pretrain_steps * k // kcfg.curve_points) for k in range(1, kcfg.curve_points + 1)})
    snapshots = {}

    def keep(record, history):
        if record["step"] in wanted:
            snapshots[record["step"]] = (copy.deepcopy(model.state_dict()), cloze_accuracy(model, tok, data, data.test))

    pretrain_on_biographies(model, tok, data, pre_cfg, device=device, progress=progress, callback=keep)
    scratch, scratch_acc = tuned(initial, "question")
    curve = [{"pretrain_steps": 0, "accuracy": scratch_acc, "cloze": cloze_accuracy(fresh(), tok, data, data.test)}]
    pretrained = None
    for steps in wanted:
        state, cloze = snapshots[steps]
        pretrained, acc = tuned(state, "question")
        curve.append({"pretrain_steps": steps, "accuracy": acc, "cloze": cloze})
    _, words_acc = tuned(snapshots[wanted[-1]][0], "biography")
    answers = {
        k: answer_questions(m, tok, data.test_pairs) for k, m in (("scratch", scratch), ("pretrained", pretrained))
    }
    place = majority_answer([p.born for p in data.finetune])
    result = KnowledgeResult(
        scratch=scratch_acc,
        pretrained=curve[-1]["accuracy"],
        pretrained_biography_words=words_acc,
        baseline=accuracy([place] * len(gold), gold),
        baseline_answer=place,
        n_test=len(gold),
        n_finetune=len(data.finetune),
        curve=curve,
        moved_to_answers={k: accuracy(a, [p.moved_to for p in data.test]) for k, a in answers.items()},
        finetune_accuracy={
            k: accuracy(answer_questions(m, tok, data.pairs(seen, "question")), [p.born for p in seen])
            for k, m in (("scratch", scratch), ("pretrained", pretrained))
        },
        examples=[
            {"question": q, "answer": a, "scratch": answers["scratch"][i], "pretrained": answers["pretrained"][i]}
            for i, (q, a) in enumerate(data.test_pairs[:8])
        ],
    )
    result.seconds = time.perf_counter() - t0
    extra = {"data": data, "tokenizer": tok, "scratch": scratch, "pretrained": pretrained, "answers": answers}
    return result, extra
