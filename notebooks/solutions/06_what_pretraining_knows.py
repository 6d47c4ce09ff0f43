# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] tags=["badge"]
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/06_what_pretraining_knows.ipynb) [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/06_what_pretraining_knows.ipynb)
#
# **Solutions**: the solved notebook, with model answers and grading rubrics. Learners start from the exercise version, [`notebooks/06_what_pretraining_knows.ipynb`](https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/06_what_pretraining_knows.ipynb).

# %% [markdown]
# # 06 · What pretraining knows: facts read once, and word vectors at equal budget
#
# Notebook 05 pretrained on unpaired sentences and asked whether that helps translation. This notebook asks two
# sharper questions, the two experiments of the original assignment that notebook 05 leaves out:
#
# 1. **Knowledge access.** Can a model answer a question about a fact it only *read* in pretraining? We invent
#    people, write a short biography of each (where they were born, their job, the year, another town they
#    moved to), pretrain on the biographies with span corruption, then fine-tune on *Where was X born?* for
#    some people and ask about the others. Three numbers decide: fine-tuned from scratch, pretrained then
#    fine-tuned, and always answering the most common birthplace (the original's "London" baseline).
#    You write the pipeline: the scoring (Exercise 6.1), the baseline (6.2), the fine-tuning examples (6.3), the
#    span-corruption examples of the biographies (6.4), and the driver that pretrains, fine-tunes and evaluates (6.5).
#    Then the same model is asked about people nobody wrote about, and about strangers whose surname is a town,
#    and notebook 05's synthesizer attention reads the same biographies beside dot-product attention.
# 2. **Embeddings at equal budget.** The translation model of notebook 03 with four starts for its token
#    embeddings: learned from scratch (the default), random and frozen, word2vec vectors trained on our own
#    training text, and a pretrained language model's; each pair compared with a paired bootstrap. You write the
#    code that puts the word vectors into the embedding table (Exercise 6.7).
#
# Each **Question 6.N** has a *Your answer* cell for your report and a code cell under it where you compute
# what supports your answer.
#
# **How to run.** On Colab, *Run all*: the knowledge experiment takes a few minutes on a CPU and less on a T4;
# the embeddings, four translation runs of 3 minutes each. Quick mode (`python -m helpers run-notebooks --only
# 06`, the tests) runs every code path with tiny models in seconds: its numbers say that the code runs, not
# what pretraining does.
#
# Figures go to `reports/figures/06_*.pdf` and `.png`, the numbers to `reports/metrics/06_knowledge.json`.

# %% tags=["parameters"]
# @title Set-up: install the course and check the runtime { display-mode: "form" }
# On Colab this installs the course package at these notebooks' release (from a copy in Drive first, if
# any) and what the runtime lacks, never torch, or says what to do. QUICK=1 shrinks sizes and steps.
COURSE = "git+https://github.com/transformers-by-building/course@v0.3.0"
COURSE_IN_DRIVE = "/content/drive/MyDrive/transformers-by-building/course"  # a folder or .zip of the repository


def ensure_course(pinned, drive_copy, version, *, install=None, pip_args=()):
    """Install the course package unless it is here; return where it came from and what the runtime had before."""
    import importlib.metadata
    import importlib.util
    import os
    import subprocess
    import sys

    class CourseSetupError(RuntimeError):
        def _render_traceback_(self):  # Jupyter shows these lines instead of a traceback
            return ["Course set-up failed.", *str(self).splitlines()]

    if any(d.version == version for d in importlib.metadata.distributions(name="transformers-by-building")):
        return "already installed", None
    kaggle = "KAGGLE_KERNEL_RUN_TYPE" in os.environ  # a Kaggle notebook: no Drive, and its internet may be off
    if not ("google.colab" in sys.modules or kaggle if install is None else install):
        if importlib.util.find_spec("helpers") is None:  # a checkout that this kernel's Python cannot import
            raise CourseSetupError("This kernel can't import the course: pip install -e . in its folder, then restart.")
        return "this checkout (not on Colab or Kaggle)", None
    # what the runtime had and had loaded, so that after_install can say what pip replaced (pip runs apart)
    before = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()}, set(sys.modules)
    sources, tried = [("the pinned release", pinned)], []
    if not kaggle and (os.path.isdir(drive_copy) or str(drive_copy).endswith(".zip") and os.path.isfile(drive_copy)):
        sources.insert(0, ("the copy in Drive", drive_copy))
    for label, target in sources:
        print(f"Installing the course package from {label}: {target}", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--upgrade-strategy", "only-if-needed", *pip_args, target]
        done = subprocess.run(pip, capture_output=True, text=True, encoding="utf-8", errors="replace")
        if done.returncode == 0:
            importlib.invalidate_caches()  # so that the import right after this finds the new package
            return label, before
        why = (done.stderr or done.stdout).strip().splitlines() or ["pip failed"]  # pip's last line says why
        tried.append(f"  - {label}: {why[-1].strip()}")
    first = "Turn Internet on in Session options (the right-hand panel)" if kaggle else "Check this runtime's internet"
    raise CourseSetupError(
        "The course package could not be installed. Tried:\n" + "\n".join(tried) + "\nTwo ways out:\n"
        f"  1. {first}, then run this cell again.\n"
        f"  2. Put the course repository (its folder, or the .zip GitHub gives you) in Google Drive at {drive_copy},\n"
        "     mount Drive (Files panel > Mount Drive), then run this cell again (on Colab)."
    )


installed_from, before_install = ensure_course(COURSE, COURSE_IN_DRIVE, version=COURSE.rsplit("@v", 1)[1])
from helpers.course import bootstrap  # importable now: it says what pip replaced, and when to restart

bootstrap.after_install(installed_from, before_install)
from helpers import runtime
from helpers.course import colab

QUICK = runtime.quick_mode()
SEED = 0
ACCELERATOR = colab.setup()

# %%
# Sizes. Quick mode: a tiny model, a few dozen people, a hundred steps. Full mode: minutes on a CPU.
import math
import random
import string
import tempfile
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from helpers import embeddings, knowledge
from helpers.course import plotting, probes
from helpers.evaluation import evaluate
from helpers.hf import loading, tiny
from helpers.nn import build_model
from helpers.nn.model import DecoderOnlyTransformer
from helpers.text import sources
from helpers.text.data import prepare_data  # `data` names the experiment's data set in Exercise 6.5
from helpers.training import config

DEVICE = runtime.pick_device()
if QUICK:
    torch.set_num_threads(1)  # tiny models: a second thread only waits (see notebook 03)
KCFG, KMODEL = knowledge.knowledge_configs(QUICK)  # the people and budgets; the model's shape and optimiser
print(f"{KCFG.n_people} people, {KCFG.n_test} of them held out of fine-tuning; {runtime.hardware_name(DEVICE)}")

# %% [markdown]
# ## 1. Invented people and their biographies
#
# Names are built from random syllables, so no pretrained model has read about these people; the towns are
# made up or obscure (and our model reads nothing but these biographies anyway). Each person gets one
# biography in one of three phrasings, always starting with the name, with the birthplace among distractors:
# a year, a job, and a town they moved to (never the birthplace). The birthplaces follow a Zipf law over 32
# towns (weight 1/rank): a few towns are common, most are rare.
#
# The people are split once, at random: the **fine-tuning people**, whose *Where was X born?* questions the
# model is trained on, and the **held-out people**, who appear in the biographies and nowhere else.

# %%
DATA = knowledge.make_knowledge_data(KCFG.n_people, KCFG.n_test, SEED, skew=KCFG.skew)
for bio in DATA.biographies[:3]:
    print(bio)
print()
for q, a in DATA.finetune_pairs[:2]:
    print(f"{q}  ->  {a}")
held_out = {p.name for p in DATA.test}
asked = {q for q, _ in DATA.finetune_pairs}
assert not any(knowledge.question(p) in asked for p in DATA.test), "a held-out person is asked about in fine-tuning"
assert len(DATA.biographies) == len(DATA.people) and held_out <= {p.name for p in DATA.people}
print(
    f"\n{len(DATA.biographies)} biographies (everyone), {len(asked)} fine-tuning questions, {len(held_out)} held-out people"
)

# %% [markdown]
# **How skewed are the birthplaces?** The shares of the most common towns among the fine-tuning people and
# among the held-out people. (What the law they were drawn from predicts is Question 6.1's to work out.)

# %%
TOP = 10
towns = list(knowledge.PLACES[:TOP])
share = {
    who: [Counter(p.born for p in people)[t] / len(people) for t in towns]
    for who, people in (("fine-tuning people", DATA.finetune), ("held-out people", DATA.test))
}
fig, ax = plt.subplots(figsize=(9, 3.8))
x = torch.arange(TOP).float()
ax.bar(x - 0.2, share["fine-tuning people"], width=0.4, label="fine-tuning people")
ax.bar(x + 0.2, share["held-out people"], width=0.4, label="held-out people")
ax.set_xticks(x.tolist(), towns, rotation=30, ha="right")
ax.set_ylabel("share of people born there")
ax.set_title(f"Birthplaces of {len(DATA.people)} invented people: the {TOP} most common of 32 towns")
ax.legend()
fig.tight_layout()
plotting.save_figure(
    fig,
    "06_birthplaces",
    question="How skewed are the birthplaces, and is the most common one the same for the fine-tuning and the held-out people?",
    caption=f"Share of each of the {TOP} most common towns (by the Zipf law's ranks) among the {len(DATA.finetune)} fine-tuning and the {len(DATA.test)} held-out people.",
    numbers={"finetune_top_share": share["fine-tuning people"][0], "held_out_top_share": share["held-out people"][0]},
)  # fmt: skip
plt.show()

# %% [markdown]
# ## Exercise 6.1 · Exact-match accuracy (2 points)
#
# The model answers with free text, so scoring needs a rule. The original assignment counts an answer as
# right when it **is** the place. A grader marked these answers by hand (the dots stand for spaces):
#
# | the model's answer | the birthplace | right? |
# |---|---|---|
# | `Dunmere` | Dunmere | yes |
# | `DUNMERE` | Dunmere | yes |
# | `·dunmere.·` | Dunmere | yes |
# | `"Kelby!"` | Kelby | yes |
# | `(Lorne)` | Lorne | yes |
# | `Hollin?` | Hollin | yes |
# | `Ostrava,;·` | Ostrava | yes |
# | `Kestrel···Bay` | Kestrel Bay | yes |
# | `kestrel·bay` | Kestrel Bay | yes |
# | `Kestrel-Bay` | Kestrel Bay | no |
# | `Dunmere·Ostrava` | Dunmere | no |
# | `born·in·Kelby` | Kelby | no |
# | `Dunmereby` | Dunmere | no |
# | `Kestrel` | Kestrel Bay | no |
# | (nothing) | Dunmere | no |
#
# Work out the rule behind these marks: what may differ between an answer and the place while it still counts,
# and what may not. Write it as `normalise_place`, which maps every way of writing a place that counts as that
# place to one string, and `exact_match_accuracy`, the share of predictions that the rule counts as right. The
# check compares your rule with the grader's on these answers and on many others made the same way.


# %%
def normalise_place(text: str) -> str:
    """One string for every way of writing a place that the grader counts as that place."""
    # BEGIN SOLUTION
    return " ".join(text.strip().strip(string.punctuation + " ").casefold().split())
    # END SOLUTION


def exact_match_accuracy(predictions: list[str], answers: list[str]) -> float:
    """The share (0 to 1) of predictions that the rule counts as their answer."""
    assert len(predictions) == len(answers) and answers, "one prediction per answer, and at least one answer"
    # BEGIN SOLUTION
    hits = [normalise_place(p) == normalise_place(a) for p, a in zip(predictions, answers)]
    return sum(hits) / len(answers)
    # END SOLUTION


# %% tags=["check"]
from helpers.course import check_inputs


# The graded answers above, one at a time; then the reference cases saved with the course
# (data/reference/06_exact_match.json); then many answers made the same way, against the grader's rule.
def marked_answers():
    """The table above: (the model's answer, the birthplace, 1 if the grader marked it right, else 0)."""
    return [("Dunmere", "Dunmere", 1), ("DUNMERE", "Dunmere", 1), (" dunmere. ", "Dunmere", 1), ('"Kelby!"', "Kelby", 1),
            ("(Lorne)", "Lorne", 1), ("Hollin?", "Hollin", 1), ("Ostrava,; ", "Ostrava", 1),
            ("Kestrel   Bay", "Kestrel Bay", 1), ("kestrel bay", "Kestrel Bay", 1), ("Kestrel-Bay", "Kestrel Bay", 0),
            ("Dunmere Ostrava", "Dunmere", 0), ("born in Kelby", "Kelby", 0), ("Dunmereby", "Dunmere", 0),
            ("Kestrel", "Kestrel Bay", 0), ("", "Dunmere", 0)]  # fmt: skip


def drawn_answer_sets(seed, n_sets=300):
    """(predictions, answers) sets made the way the table's answers are, drawn from `seed`."""
    return check_inputs.drawn_answer_sets(seed, knowledge.PLACES, n_sets)


def plain_number(x):
    """A float (NumPy's float64 included) as Python's float; anything else as it is."""
    return float(x) if isinstance(x, float) else x


def probe_exact_match(accuracy_fn, seed=6):
    """Runs your function on each marked answer alone, on the saved cases, and on the sets drawn from `seed`."""
    saved = runtime.reference_outputs("06_exact_match.json")["cases"]  # outputs saved with the course
    share = lambda predictions, answers: plain_number(accuracy_fn(predictions, answers))
    return {
        "marked": [share([said], [place]) for said, place, _ in marked_answers()],
        "saved": [share(case["predictions"], case["answers"]) for case in saved],
        "drawn": [share(made, answers) for made, answers in drawn_answer_sets(seed)],
    }


# %% tags=["check"]
def verify_exact_match(values, seed=6):
    """The grader's marks, the saved scores, and the grader's rule (helpers.knowledge.accuracy) on the drawn sets."""
    for (said, place, right), got in zip(marked_answers(), values["marked"], strict=True):
        assert isinstance(got, float) and 0 <= got <= 1, (
            f"exact_match_accuracy returns a share from 0 to 1: got {got!r}"
        )
        assert got == right, f"the answer {said!r} for {place!r} is marked {'right' if right else 'wrong'}; got {got}"
    for case, got in zip(runtime.reference_outputs("06_exact_match.json")["cases"], values["saved"], strict=True):
        assert math.isclose(got, case["accuracy"]), (
            f"predictions {case['predictions']} for answers {case['answers']} should score {case['accuracy']}, got {got}"
        )
    for (made, answers), got in zip(drawn_answer_sets(seed), values["drawn"], strict=True):
        want = knowledge.accuracy(made, answers)
        assert math.isclose(got, want), (
            f"predictions {made} for answers {answers}: the grader's rule gives {want}, got {got}"
        )


verify_exact_match(probe_exact_match(exact_match_accuracy))
print(f"exact-match accuracy: the {len(marked_answers())} marked answers, the saved cases and 300 drawn sets agree")

# %% [markdown]
# ## Exercise 6.2 · The most-common-place baseline (2 points)
#
# The baseline of the original assignment always answers "London", the most common birthplace. *Most common
# where?* Among the **fine-tuning** answers (Question 6.1 asks why there). Count towns the way `exact_match_accuracy` compares them (normalised),
# break a tie by the town seen first, and return the town as first written in the fine-tuning answers with its
# accuracy on the test answers. `collections.Counter` counts.


# %%
def most_common_place_baseline(train_answers: list[str], test_answers: list[str]) -> tuple[str, float]:
    """(the place to always answer, its exact-match accuracy on the test answers); the place comes from
    the training answers only."""
    # BEGIN SOLUTION
    counts = Counter(normalise_place(a) for a in train_answers)
    top = max(counts.values())
    place = next(a.strip() for a in train_answers if counts[normalise_place(a)] == top)  # a tie: seen first
    return place, exact_match_accuracy([place] * len(test_answers), test_answers)
    # END SOLUTION


# %% tags=["check"]
# The reference cases saved with the course (data/reference/06_baseline.json), then answers drawn at random against
# the package's baseline (helpers.knowledge.majority_answer, scored with helpers.knowledge.accuracy).
def check_baseline(what, train, test, want_place, want_acc, got):
    """One case: the place (compared normalised) and its accuracy on the test answers."""
    assert len(got) == 2, f"the baseline returns (place, accuracy): got {got!r}"
    place, acc = got
    assert isinstance(place, str) and knowledge.normalise_answer(place) == knowledge.normalise_answer(want_place), (
        f"{what}: with training answers {train} the baseline answers {want_place!r}, not {place!r}"
    )
    assert math.isclose(acc, want_acc), (
        f"{what}: always answering {want_place!r} scores {want_acc} on {test}, got {acc}"
    )


def probe_saved_baseline(baseline_fn, seed=0):
    """Runs your function on the saved cases ([place, accuracy] for each; `seed` is not used)."""
    saved = runtime.reference_outputs("06_baseline.json")["cases"]
    return [[plain_number(v) for v in baseline_fn(case["train"], case["test"])] for case in saved]


def verify_saved_baseline(values, seed=0):
    """The saved places and scores."""
    for case, got in zip(runtime.reference_outputs("06_baseline.json")["cases"], values, strict=True):
        check_baseline(case["what"], case["train"], case["test"], case["place"], case["accuracy"], got)


def drawn_baseline_cases(seed, n_cases=50):
    """(training answers, test answers) drawn from `seed` from a few towns (so that counts tie), each answer written
    in one of several ways."""
    draw, cases = random.Random(seed), []
    ways = [lambda t: t, str.upper, str.lower, lambda t: t + " ", lambda t: " " + t + ".", lambda t: t + "!"]
    for _ in range(n_cases):
        towns = draw.sample(knowledge.PLACES, draw.randint(1, 4))
        train = [draw.choice(ways)(draw.choice(towns)) for _ in range(draw.randint(1, 8))]
        test = [
            draw.choice(ways)(draw.choice([*towns, draw.choice(knowledge.PLACES)])) for _ in range(draw.randint(1, 6))
        ]
        cases.append((train, test))
    return cases


def probe_baseline(baseline_fn, seed=7):
    """Runs your function on the cases drawn from `seed`."""
    return [[plain_number(v) for v in baseline_fn(train, test)] for train, test in drawn_baseline_cases(seed)]


def verify_baseline(values, seed=7):
    """The package's place and its score, on the drawn cases."""
    for (train, test), got in zip(drawn_baseline_cases(seed), values, strict=True):
        place = knowledge.majority_answer(train)
        check_baseline(
            "answers drawn at random", train, test, place, knowledge.accuracy([place] * len(test), test), got
        )


verify_saved_baseline(probe_saved_baseline(most_common_place_baseline))
verify_baseline(probe_baseline(most_common_place_baseline))
TRAIN_ANSWERS = [p.born for p in DATA.finetune]
TEST_ANSWERS = [p.born for p in DATA.test]
BASELINE_PLACE, BASELINE = most_common_place_baseline(TRAIN_ANSWERS, TEST_ANSWERS)
print(f"always answering {BASELINE_PLACE!r}: {BASELINE:.1%} of the {len(TEST_ANSWERS)} held-out people")

# %% [markdown]
# ## 2. What the baseline measures

# %% [markdown] tags=["question"]
# **Question 6.1 (3 points).** The baseline answers the same town for everyone. From the way the birthplaces were drawn
# (a Zipf law over 32 towns, weight 1/rank), what accuracy should it reach on the held-out people, and how far
# from that may this run's number be by chance alone? Why must the town come from the fine-tuning answers
# only: what would the same baseline report if the town were picked on the test answers, and why is that
# number not a baseline?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: this run's baseline and the number of held-out people.
print(f"this run's baseline: always {BASELINE_PLACE!r}, {BASELINE:.1%} of {len(TEST_ANSWERS)} held-out people")


# %% [markdown] tags=["answer"]
# **Model answer.** Always answering the most common town scores that town's share of the held-out people.
# Under the Zipf law that share is $1/H_{32}$ with $H_{32} = \sum_{r=1}^{32} 1/r \approx 4.06$: about
# **24.6 %**. On $n$ held-out people the measured share wanders around it with a standard error of
# $\sqrt{p(1-p)/n}$: 4.3 points for $n = 100$ (full mode), 6.8 for quick mode's 40, so a baseline anywhere
# within two standard errors of 24.6 % (between about 16 % and 33 %) is what the law predicts. The town must
# come from the fine-tuning answers because a baseline stands for the best guess *without* the answers being
# scored. Picked on the test answers, it is scored on the answers it was fitted to: the maximum over 32 towns
# of their shares in this sample, which is biased upwards (and can even choose another town when two are
# close); that number measures the test sample, not a method, and no model could be
# compared with it fairly. In the full-mode runs of `benchmarks/RESULTS.md` the fine-tuning people's most
# common town is Dunmere, as the law says, and the baseline scores 22 % (seed 0) and 21 % (seed 1) of the 100
# held-out people: within the noise of the law's 24.6 %. ($H_{32}$ is the 32nd harmonic number.)


# %% tags=["answer"]
# The numbers of the model answer, from this run: the law's share of the most common town, its standard error
# on this many people, and the baseline if the town were picked on the test answers.
LAW_TOP = float(knowledge.place_weights(skew=KCFG.skew)[0])
print(f"Zipf share of {knowledge.PLACES[0]!r}: {LAW_TOP:.1%} (1/H_32)")
print(
    f"standard error of a share of {LAW_TOP:.1%} on {len(TEST_ANSWERS)} people: {knowledge.standard_error(LAW_TOP, len(TEST_ANSWERS)):.1%}"
)
print(f"picked on the test answers: {most_common_place_baseline(TEST_ANSWERS, TEST_ANSWERS)}")


def compare_with_law(measured: float, expected: float, n: int) -> str:
    """Whether the baseline's accuracy is what the Zipf law predicts, within two standard errors."""
    se = knowledge.standard_error(expected, n)
    verdict = "within" if abs(measured - expected) <= 2 * se else "outside"
    return (
        f"The baseline's {measured:.1%} is {verdict} two standard errors ({2 * se:.1%}) of the {expected:.1%} that the "
        f"law predicts for {n} held-out people."
    )


print(compare_with_law(BASELINE, LAW_TOP, len(TEST_ANSWERS)))

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 6.1 (3 points).**
# - **3 points:** the expected accuracy is the top town's Zipf share, $1/H_{32} \approx$ 24.6 % (the harmonic
#   number of 32); the chance spread is a binomial standard error $\sqrt{p(1-p)/n}$ (about 4 to 7 points here),
#   so the run's baseline is compared with 24.6 % ± 2 SE; and picking the town on the test answers is a leak:
#   the maximum share of the sample, biased upwards, a number about the test sample and not a method.
# - **2 points:** two of those three parts right (e.g. the 24.6 % and the leak, but no standard error).
# - **1 point:** one part right, or the right ideas without numbers.
# - **0 points:** the baseline should score 1/32, or picking on the test answers is called fine because it
#   uses the same rule.
#
# *Key phrases:* "harmonic number", "24.6", "biased upwards", "answers it was fitted to"

# %% [markdown]
# ## 3. Pretraining on the biographies, then fine-tuning
#
# The model is notebook 02's decoder-only Transformer, in our translation format with the question as the
# source: `<bos> Where was X born? <sep> Dunmere <eos>`. Pretraining is notebook 05's span corruption, here on
# the biographies. You build both kinds of examples, then the run that compares the models. One tokenizer,
# trained on the biographies and the fine-tuning questions, serves every model:

# %%
TOK = knowledge.knowledge_tokenizer(DATA, KCFG.vocab_size, SEED)
MAX_LEN, IGNORE = KMODEL.max_len, -100  # IGNORE: the label that torch's cross-entropy skips
print(
    f"{TOK.vocab_size} pieces; <bos> {TOK.bos_id}, <sep> {TOK.sep_id}, <eos> {TOK.eos_id}, <mask> {knowledge.MASK_ID}"
)
print(DATA.finetune_pairs[0][0], "->", [TOK.id_to_piece(i) for i in TOK.encode(DATA.finetune_pairs[0][0])])

# %% [markdown]
# ## Exercise 6.3 · The fine-tuning examples (3 points)
#
# Fine-tuning reads one sequence per question, `<bos> question <sep> answer <eos>`, and at every position the
# model predicts the next token. Beside the ids, training needs the **labels**: for each position, the id the
# loss asks the model to predict *there*, or `IGNORE` where it asks nothing. The question is given, never
# predicted: the loss is on the answer only, its pieces and the `<eos>` that ends it (so the model learns to
# stop). Work out which positions carry a label, and which id each one asks for.
#
# - `answer_labels(input_ids, n_source)`: the labels of a sequence whose first `n_source` positions are the
#   source (everything up to and including `<sep>`) and the rest the target. Exercise 6.4 needs it again.
# - `finetune_example(tok, question, answer, max_len)`: `(input_ids, labels)` as lists of ints, or `None` when
#   the sequence would be longer than `max_len` or the question or the answer encodes to no pieces. Use
#   `tok.encode(text)`, `tok.bos_id`, `tok.sep_id` and `tok.eos_id`.


# %%
def answer_labels(input_ids: list[int], n_source: int) -> list[int]:
    """One label per position of input_ids: the id the loss asks for there, IGNORE where it asks nothing."""
    # BEGIN SOLUTION
    labels = [IGNORE] * len(input_ids)
    for t in range(n_source - 1, len(input_ids) - 1):
        labels[t] = input_ids[t + 1]
    return labels
    # END SOLUTION


def finetune_example(tok, question: str, answer: str, max_len: int) -> tuple[list[int], list[int]] | None:
    """(input_ids, labels) of <bos> question <sep> answer <eos>, the loss on the answer only; None if it cannot be made."""
    # BEGIN SOLUTION
    q, a = tok.encode(question), tok.encode(answer)
    if not q or not a or len(q) + len(a) + 3 > max_len:
        return None
    ids = [tok.bos_id, *q, tok.sep_id, *a, tok.eos_id]
    return ids, answer_labels(ids, len(q) + 2)
    # END SOLUTION


# %% tags=["check"]
# One example piece by piece, then every question of a small data set (both wordings) and the edge cases against
# the package's examples (helpers.knowledge.finetune_example), then the labels of arbitrary sequences. The data set
# and its tokenizer are drawn like DATA and TOK, from the check's seed.
def small_knowledge(seed, n_people=40, n_test=10):
    """A small data set of invented people drawn from `seed`, and a tokenizer trained on it (as TOK is on DATA)."""
    data = knowledge.make_knowledge_data(n_people, n_test, seed)
    return data, knowledge.knowledge_tokenizer(data, 400, seed)


def example_lists(example):
    """An example (input_ids, labels) as two lists of ints; None stays None."""
    return None if example is None else [[int(i) for i in example[0]], [int(y) for y in example[1]]]


def finetune_cases(seed, max_len=64):
    """The tokenizer, every person's question in both wordings, the edge cases (the first question and answer with
    max_len just long enough and one short, an empty answer, an empty question) and 200 (sequence, n_source)."""
    data, tok = small_knowledge(seed)
    pairs = data.pairs(data.people) + data.pairs(data.people, "biography")
    (q, a), n = pairs[0], len(knowledge.finetune_example(tok, *pairs[0], max_len)[0])
    edges = [(q, a, n), (q, a, n - 1), (q, "", max_len), ("", a, max_len)]
    draw, sequences = random.Random(seed), []
    for _ in range(200):
        seq = [draw.randrange(5, 400) for _ in range(draw.randint(2, 12))]
        sequences.append((seq, draw.randint(1, len(seq) - 1)))
    return tok, [(q_, a_, max_len) for q_, a_ in pairs], edges, sequences


def probe_finetune(example_fn, labels_fn, seed=3):
    """Runs your finetune_example on every question and edge case, and your answer_labels on each sequence."""
    tok, pairs, edges, sequences = finetune_cases(seed)
    return {
        "examples": [example_lists(example_fn(tok, *case)) for case in pairs],
        "edges": [example_lists(example_fn(tok, *case)) for case in edges],
        "labels": [[int(y) for y in labels_fn(list(seq), n_source)] for seq, n_source in sequences],
    }


# %% tags=["check"]
def verify_finetune(values, seed=3):
    """The first example piece by piece, every example against the package's, the edge cases, and the labels."""
    tok, pairs, edges, sequences = finetune_cases(seed)
    (q, a, _), first, IGNORE_ID = pairs[0], values["examples"][0], knowledge.IGNORE_INDEX
    Q, A = tok.encode(q), tok.encode(a)
    assert first is not None, f"{(q, a)} makes an example, not None"
    ids, labels = first
    assert ids == [tok.bos_id, *Q, tok.sep_id, *A, tok.eos_id], (
        "input_ids: <bos>, the question, <sep>, the answer, <eos>"
    )
    assert len(labels) == len(ids), f"one label per position: {len(labels)} labels for {len(ids)} ids"
    assert [y for y in labels if y != IGNORE_ID] == [*A, tok.eos_id], (
        "the labels ask for the answer's pieces and <eos>, once each"
    )
    assert labels == knowledge.labels_for(ids, len(Q) + 2), f"labels {labels} are in the wrong positions for ids {ids}"
    for (q_, a_, max_len), got in zip(pairs, values["examples"], strict=True):
        want = knowledge.finetune_example(tok, q_, a_, max_len)
        assert got is not None and tuple(got) == want, f"{(q_, a_)}: expected {want}, got {got}"
    (fits, short, no_answer, no_question), n = values["edges"], edges[0][2]
    assert fits is not None and short is None, f"an example of {n} tokens fits max_len={n} and not max_len={n - 1}"
    assert no_answer is None and no_question is None, "an empty question or answer makes no example"
    for (seq, n_source), got in zip(sequences, values["labels"], strict=True):
        assert got == knowledge.labels_for(seq, n_source), (
            f"answer_labels({seq}, n_source={n_source}) should be {knowledge.labels_for(seq, n_source)}"
        )


verify_finetune(probe_finetune(finetune_example, answer_labels))
print(f"fine-tuning examples: {len(finetune_cases(3)[1])} questions and 200 label sets agree with the package's")

# %% [markdown]
# ## Exercise 6.4 · Span-corruption examples of the biographies (3 points)
#
# Pretraining reads each biography the way notebook 05 read sentences (Exercise 5.4): keep a beginning, cut one
# span out of it, and ask for the span back, `<bos> prefix <mask> suffix <sep> span <eos>`, the loss on
# `span <eos>` only. The cut, as the original assignment states it (the *room* is what `max_len` leaves after
# the four special tokens):
#
# - the kept beginning's length *n* is drawn uniformly from 4 to the longest allowed, 7/8 of the room (rounded
#   down, at least 2) and no more than the biography (when that longest is under 4, *n* is drawn from the longest to the longest: still one draw);
# - the span's length is drawn uniformly from 1 to half of *n* (rounded down, at least 1), never all *n* tokens;
# - where it starts is drawn uniformly among the places where it fits.
#
# A biography of fewer than 2 tokens, or a room under 2, makes no example (`None`, and nothing drawn). Draw
# with Python's `random.Random` (`rng.randint(a, b)` includes both ends), once per item above and in that order,
# so that your cuts are the ones the package's pretraining makes. Write
#
# - `corrupt_biography(ids, rng, max_len)`: `(input_ids, labels)` or `None` (`MASK` below is `<mask>`);
# - `pretraining_epoch(biography_ids, epoch, seed, max_len)`: the examples of one epoch, one per biography in
#   order (those that make none left out), all cut with one generator, `random.Random(f"{seed}-{epoch}")`.

# %%
MASK = knowledge.MASK_ID


def corrupt_biography(ids: list[int], rng: random.Random, max_len: int) -> tuple[list[int], list[int]] | None:
    """(input_ids, labels) of <bos> prefix <mask> suffix <sep> span <eos>, the loss on span <eos>; or None."""
    # BEGIN SOLUTION
    room = max_len - 4
    if len(ids) < 2 or room < 2:
        return None
    longest = min(len(ids), max(2, room * 7 // 8))
    n = rng.randint(min(4, longest), longest)
    span_len = min(rng.randint(1, max(1, n // 2)), n - 1)
    start = rng.randint(0, n - span_len)
    prefix, span, suffix = ids[:start], ids[start : start + span_len], ids[start + span_len : n]
    example = [TOK.bos_id, *prefix, MASK, *suffix, TOK.sep_id, *span, TOK.eos_id]
    return example, answer_labels(example, len(prefix) + len(suffix) + 3)
    # END SOLUTION


def pretraining_epoch(biography_ids: list[list[int]], epoch: int, seed: int, max_len: int) -> list[tuple]:
    """Epoch `epoch`'s examples: one cut of each biography (None left out), from random.Random(f"{seed}-{epoch}")."""
    # BEGIN SOLUTION
    rng = random.Random(f"{seed}-{epoch}")
    examples = [corrupt_biography(ids, rng, max_len) for ids in biography_ids]
    return [e for e in examples if e is not None]
    # END SOLUTION


# %% tags=["check"]
# Many cuts against the package's (helpers.knowledge.corrupt_biography, the same draws from the same seed), with
# what each part must be first; then whole epochs against helpers.knowledge.pretraining_examples. The biographies
# are those of a small data set drawn from the check's seed, as its tokenizer encodes them.
def cut_cases(seed):
    """The tokenizer; the sequences to cut (too short to cut, 2 and 3 tokens, 4 to 39, the biographies, 20 drawn);
    the max_lens (6, 16, 64 and one drawn); the biographies of the epochs (one too short to cut among them) and
    the (epoch, seed) of each epoch."""
    data, tok = small_knowledge(seed, 60, 10)
    bios = tok.encode_batch(data.biographies)
    odd = [[], [9], [9, 10], [9, 10, 11]] + [list(range(100, 100 + n)) for n in range(4, 40)]
    draw = random.Random(seed)
    drawn = [[draw.randrange(5, 400) for _ in range(draw.randint(1, 70))] for _ in range(20)]
    max_lens = (6, 16, 64, draw.randint(5, 70))
    epochs = [(0, 5), (1, 5), (2, 5), (draw.randrange(100), draw.randrange(1000))]
    return tok, odd + bios + drawn, max_lens, bios[:30] + [[9]] + bios[30:], epochs


def probe_cuts(cut_fn, epoch_fn, seed=4):
    """Runs your corrupt_biography on every sequence with each max_len (a generator seeded by max_len), and your
    pretraining_epoch on the biographies for each (epoch, seed)."""
    _, sequences, max_lens, some, epochs = cut_cases(seed)
    cuts = []
    for max_len in max_lens:
        rng = random.Random(max_len)
        cuts.append([example_lists(cut_fn(list(ids), rng, max_len)) for ids in sequences])
    return {
        "cuts": cuts,
        "epochs": [[example_lists(e) for e in epoch_fn(some, epoch, s, 64)] for epoch, s in epochs],
    }


# %% tags=["check"]
def verify_cuts(values, seed=4):
    """Each cut's parts, then the cut itself against the package's; each epoch against the package's."""
    tok, sequences, max_lens, some, epochs = cut_cases(seed)
    for max_len, cuts in zip(max_lens, values["cuts"], strict=True):
        ref = random.Random(max_len)
        for ids, got in zip(sequences, cuts, strict=True):
            want = knowledge.corrupt_biography(ids, ref, max_len)
            if want is None:
                assert got is None, f"{ids} with max_len {max_len} makes no example: return None, got {got}"
                continue
            assert got is not None, f"{ids} with max_len {max_len} makes an example, not None"
            inp, labels = got
            assert inp.count(knowledge.MASK_ID) == 1 and inp.count(tok.sep_id) == 1, (
                "one <mask> (where the span was) and one <sep>"
            )
            assert inp[0] == tok.bos_id and inp[-1] == tok.eos_id and len(inp) <= max_len, (
                "<bos> ... <eos>, within max_len"
            )
            s = inp.index(tok.sep_id)
            assert labels == knowledge.labels_for(inp, s + 1), "the labels ask for span <eos> only, as in Exercise 6.3"
            assert (inp, labels) == want, (
                f"cut of {ids} (max_len {max_len}): expected {want[0]}, got {inp}. Check the three draws: their ranges "
                "and their order"
            )
    for (epoch, s), got in zip(epochs, values["epochs"], strict=True):
        want = knowledge.pretraining_examples(some, epoch, s, 64)
        assert len(got) == len(want) == len(some) - 1, (
            f"one example per biography long enough to cut: {len(want)}, got {len(got)}"
        )
        assert [None if e is None else tuple(e) for e in got] == want, (
            f"epoch {epoch} (seed {s}): the examples differ from the package's"
        )


verify_cuts(probe_cuts(corrupt_biography, pretraining_epoch))
print(f"span corruption: {4 * len(cut_cases(4)[1])} cuts and 4 epochs agree with the package's")

# %% [markdown]
# ## Exercise 6.5 · Pretrain, fine-tune, evaluate (4 points)
#
# Now the experiment, from your pieces. Write `knowledge_table(data, tok, kcfg, model_cfg, device)`: the models
# that the three numbers of the knowledge-access question (item 1 at the top) need, trained and asked, and the
# baseline. It must be a fair test of one thing, pretraining on the biographies: decide which people's text each
# phase may see, which models must share what, and which settings each phase takes from `kcfg` (the people,
# steps, fine-tuning learning rate, seed) and `model_cfg` (the model's shape and learning rate, `max_len`,
# `max_tokens`). Every seed is `kcfg.seed`. The package gives the machinery:
#
# - `knowledge.new_model(tok, model_cfg, seed, device)`: a fresh model, the same initial weights for the same seed;
# - `knowledge.training_config(model_cfg, steps, lr, seed)`: one phase's budget;
# - `knowledge.ExampleBatcher(examples, model_cfg.max_tokens, seed=seed)`: batches of `(input_ids, labels)` examples,
#   from a list, or from a function `epoch -> list` (new examples each epoch);
# - `knowledge.train_phase(model, batcher, cfg, phase, device=device)`: trains in place (`phase`: a name for the log);
# - `knowledge.answer_questions(model, tok, pairs)`: the model's greedy answers to the questions of `(question, answer)`
#   pairs; the held-out people's pairs are `data.test_pairs` (in `data.test` order), the fine-tuning people's
#   `data.finetune_pairs`.
#
# Return a dict: `"scratch"`, `"pretrained"` and `"baseline"` (accuracies by your Exercise 6.1),
# `"baseline_place"`, `"answers"` (per model, `"scratch"` and `"pretrained"`: its answers to the held-out
# people's questions, in `data.test` order) and `"models"` (the two trained models, same keys).


# %%
def knowledge_table(data, tok, kcfg, model_cfg, device=None) -> dict:
    """The knowledge-access experiment: two models trained and asked about the held-out people, and the baseline."""
    # BEGIN SOLUTION
    seed, max_len, max_tokens = kcfg.seed, model_cfg.max_len, model_cfg.max_tokens
    questions = [finetune_example(tok, q, a, max_len) for q, a in data.finetune_pairs]
    bios = tok.encode_batch(data.biographies)  # everyone's: the held-out people are read only here
    pre_cfg = knowledge.training_config(model_cfg, kcfg.pretrain_steps, model_cfg.lr, seed)
    ft_cfg = knowledge.training_config(model_cfg, kcfg.finetune_steps, kcfg.finetune_lr, seed)
    models = {}
    for name in ("scratch", "pretrained"):
        model = knowledge.new_model(tok, model_cfg, seed, device)  # the same start for both
        if name == "pretrained":
            cuts = knowledge.ExampleBatcher(
                lambda epoch: pretraining_epoch(bios, epoch, seed, max_len), max_tokens, seed=seed
            )
            knowledge.train_phase(model, cuts, pre_cfg, "pretrain-span", device=device)
        knowledge.train_phase(
            model, knowledge.ExampleBatcher(questions, max_tokens, seed=seed), ft_cfg, "finetune", device=device
        )
        models[name] = model
    gold = [p.born for p in data.test]
    answers = {name: knowledge.answer_questions(m, tok, data.test_pairs) for name, m in models.items()}
    place, baseline = most_common_place_baseline([p.born for p in data.finetune], gold)
    return {
        "scratch": exact_match_accuracy(answers["scratch"], gold),
        "pretrained": exact_match_accuracy(answers["pretrained"], gold),
        "baseline": baseline,
        "baseline_place": place,
        "answers": answers,
        "models": models,
    }
    # END SOLUTION


# %% tags=["check"]
# A small run (30 people drawn from the check's seed, a few steps, on the CPU) against the package's driver,
# helpers.knowledge.knowledge_table: the same data and settings must give the same weights, answers and numbers.
from dataclasses import replace  # noqa: E402


def driver_case(seed):
    """The small run: a data set of 30 people (10 held out) and its tokenizer, and quick mode's settings with a few
    steps, every seed `seed`."""
    data, tok = small_knowledge(seed, 30, 10)
    kcfg, model_cfg = knowledge.knowledge_configs(True)
    kcfg = replace(kcfg, n_people=30, n_test=10, pretrain_steps=12, finetune_steps=8, seed=seed)
    return data, tok, kcfg, replace(model_cfg, warmup_steps=2)


def on_one_thread(driver, *args, **kwargs):
    """driver(*args, **kwargs) with torch on one thread, so that a run repeats number for number in any process."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return driver(*args, **kwargs)
    finally:
        torch.set_num_threads(threads)


def probe_driver(table_fn, seed=1):
    """Runs your driver on the small run: what it returns, the models as their parameters."""
    mine = on_one_thread(table_fn, *driver_case(seed), device="cpu")
    models, answers = mine.get("models", {}), mine.get("answers", {})
    return {
        "keys": sorted(str(k) for k in mine),
        "is_model": {name: isinstance(m, DecoderOnlyTransformer) for name, m in models.items()},
        "weights": {
            name: {k: v.detach().cpu().clone() for k, v in m.named_parameters()}
            for name, m in models.items()
            if isinstance(m, torch.nn.Module)
        },
        "answers": {name: list(a) for name, a in answers.items()},
        **{k: plain_number(mine[k]) for k in ("scratch", "pretrained", "baseline", "baseline_place") if k in mine},
    }


# %% tags=["check"]
def verify_driver(values, seed=1):
    """Both models' weights, their answers and the three accuracies against the package's run of the same case."""
    ref = on_one_thread(knowledge.knowledge_table, *driver_case(seed), device="cpu")
    mine, needed = values, {"scratch", "pretrained", "baseline", "baseline_place", "answers", "models"}
    assert set(mine["keys"]) >= needed, f"the driver returns a dict with {sorted(needed)}: got {mine['keys']}"
    for name in ("scratch", "pretrained"):
        assert mine["is_model"].get(name) is True, f"models[{name!r}] is a trained model"
        theirs, weights = dict(ref["models"][name].named_parameters()), mine["weights"].get(name, {})
        assert sorted(weights) == sorted(theirs), (
            f"the {name} model has {len(weights)} named parameters, not the {len(theirs)} of knowledge.new_model's model"
        )
        for key, value in weights.items():
            assert probes.close(value, theirs[key].detach().cpu(), rtol=0, atol=1e-6), (
                f"the {name} model's {key} differs from the reference run's: check its start, which people's text "
                "each phase reads, and each phase's steps, learning rate and seed"
            )
        assert mine["answers"].get(name) == ref["answers"][name], (
            f"the {name} model's answers: expected the answers to the held-out people's questions, {ref['answers'][name]}"
        )
        assert math.isclose(mine[name], ref[name]), f"{name}: accuracy {ref[name]} expected, got {mine[name]}"
    place, ref_place = mine["baseline_place"], ref["baseline_place"]
    assert isinstance(place, str) and knowledge.normalise_answer(place) == knowledge.normalise_answer(ref_place), (
        f"baseline: always {ref_place!r}, {ref['baseline']} expected; got {place!r}, {mine['baseline']}"
    )
    assert math.isclose(mine["baseline"], ref["baseline"]), (
        f"baseline: always {ref_place!r}, {ref['baseline']} expected; got {place!r}, {mine['baseline']}"
    )


verify_driver(probe_driver(knowledge_table))
print("the driver: both models, their answers and the three accuracies agree with the reference run")

# %% [markdown]
# ## The accuracy table
#
# Your driver at this notebook's sizes.

# %%
TABLE = knowledge_table(DATA, TOK, KCFG, KMODEL, device=DEVICE)
ANSWERS = TABLE["answers"]  # the held-out people's answers, per model
for name, acc in (("fine-tuned from scratch", TABLE["scratch"]),
                  (f"pretrained ({KCFG.pretrain_steps:,} steps), then fine-tuned", TABLE["pretrained"]),
                  (f"always {TABLE['baseline_place']!r}", TABLE["baseline"])):  # fmt: skip
    print(f"{name:<48} {acc:6.1%}  (± {2 * knowledge.standard_error(acc, len(DATA.test)):.1%})")

# %% [markdown]
# ## More of the same run: how much reading, and in which words
#
# The package's `helpers.knowledge.run_knowledge` runs the same experiment and more: it keeps snapshots of the
# pretraining run and fine-tunes a copy of each, to see how much reading it takes. It also measures two more
# numbers: how often a snapshot, before any fine-tuning, writes the birthplace back into a held-out person's
# biography with the birthplace masked, and the accuracy of the finished pretrained model fine-tuned on the
# question in the biographies' own words, *Varo Tesimal was born in* → *Dunmere*.

# %%
RESULT, RUN = knowledge.run_knowledge(KCFG, KMODEL, device=DEVICE, data=DATA, tokenizer=TOK)
SCORES = {
    "fine-tuned from scratch": TABLE["scratch"],
    f"pretrained ({KCFG.pretrain_steps:,} steps), then fine-tuned": TABLE["pretrained"],
    "the same, asked in the biographies' words": RESULT.pretrained_biography_words,
    f"always {BASELINE_PLACE!r} (Exercise 6.2)": BASELINE,
}  # fmt: skip
if DEVICE.type == "cpu":  # on a GPU, training is not bit-for-bit repeatable
    assert (TABLE["scratch"], TABLE["pretrained"], BASELINE) == (RESULT.scratch, RESULT.pretrained, RESULT.baseline)
for name, acc in SCORES.items():
    print(f"{name:<48} {acc:6.1%}  (± {2 * knowledge.standard_error(acc, RESULT.n_test):.1%})")
print(f"\nfine-tuning people answered correctly: {RESULT.finetune_accuracy}; {RESULT.seconds:.0f} s in all")
if QUICK:
    print(
        f"Quick mode: a width-{KMODEL.d_model} model read the biographies for {KCFG.pretrain_steps} steps, so these "
        "numbers are noise: they say that the code runs."
    )

# %% [markdown] tags=["answer"]
# The answer to the knowledge-access question (item 1 at the top), printed from this run's numbers (it changes when they change):

# %% tags=["answer"]
print(RESULT.verdict())

# %% [markdown]
# **How much reading does it take?** Accuracy on the held-out people after fine-tuning each pretraining
# snapshot (0 steps: from scratch), and how often each snapshot writes the birthplace back into a masked
# biography.

# %%
steps = [c["pretrain_steps"] for c in RESULT.curve]
fig, ax = plt.subplots(figsize=(7.5, 4.2))
ax.plot(steps, [c["accuracy"] for c in RESULT.curve], "o-", label='fine-tuned, asked "Where was X born?"')
ax.plot(steps, [c["cloze"] for c in RESULT.curve], "s--", label="birthplace written back into the masked biography")
ax.plot([steps[-1]], [RESULT.pretrained_biography_words], "D", label='fine-tuned, asked "X was born in"')
ax.axhline(BASELINE, color="grey", ls=":", label=f"always {BASELINE_PLACE!r}")
ax.set_xlabel("span-corruption pretraining steps on the biographies")
ax.set_ylabel(f"accuracy, {RESULT.n_test} held-out people")
ax.set_ylim(0, 1)
ax.set_title("Facts read only in pretraining, asked after fine-tuning")
ax.legend(fontsize=8)
fig.tight_layout()
plotting.save_figure(
    fig,
    "06_knowledge_access",
    question="Does pretraining on biographies let a fine-tuned model answer where people it was never asked about were born?",
    caption=f"Exact-match accuracy on {RESULT.n_test} people seen only in pretraining, after fine-tuning on {RESULT.n_finetune} others, against pretraining steps (0: from scratch); dashed: the birthplace written back into the masked biography before fine-tuning; dotted: the most-common-place baseline.",
    numbers={"scratch": RESULT.scratch, "pretrained": RESULT.pretrained, "biography_words": RESULT.pretrained_biography_words, "baseline": RESULT.baseline, "pretrain_steps": steps[-1]},
)  # fmt: skip
plt.show()

# %% [markdown] tags=["question"]
# **Question 6.2 (3 points).** Does pretraining let the model reach facts it only read? Answer with the three accuracies
# (from scratch, pretrained, baseline) and their uncertainty, and say what the model from scratch does
# instead of answering: look at its answers.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: some held-out questions with both models' answers, and how
# often each model gives its most frequent answer.
for e in RESULT.examples[:5]:
    print(f"{e['question']:<44} {e['answer']:<12} scratch: {e['scratch']!r:<14} pretrained: {e['pretrained']!r}")
for kind in ("scratch", "pretrained"):
    top, count = Counter(ANSWERS[kind]).most_common(1)[0]
    print(f"{kind}: its most frequent answer, {top!r}, is {count / len(ANSWERS[kind]):.0%} of its answers")

# %% [markdown] tags=["answer"]
# **Model answer.** In the full-mode runs of `benchmarks/RESULTS.md` (300 people, 100 held out; a 2-layer,
# width-128 model; 5,000 steps of span corruption, then 300 fine-tuning steps at a learning rate of 3e-4), yes:
# **60 %** of the held-out people's birthplaces after pretraining, against **17 %** fine-tuned from scratch and
# **22 %** for always answering Dunmere (seed 0; seed 1: 50 %, 11 % and 21 %). Two standard errors on 100
# people are 8 to 10 points, so the gap of 29 to 38 points over the baseline is not noise. The model from
# scratch never read the held-out people, so the best it can learn from the fine-tuning questions is the prior:
# it answers the common towns (mostly Dunmere) whoever is asked, and lands at or below the baseline, even
# though it answers 98 to 99 % of its own fine-tuning questions right (it memorised them). The pretrained model
# answers a different town per person, mostly the right one, through a question form it never read in
# pretraining: fine-tuning on other people taught it *how to ask*, pretraining supplied *what* to answer. The
# distractor is not what limits it: 8 % and 7 % of its answers name the town the person moved to, fewer than the
# model from scratch hits by answering common towns (12 % and 17 %). Quick mode's
# numbers say nothing about this: its model is too small and reads too little to store anything.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 6.2 (3 points).**
# - **3 points:** gives the three accuracies with their uncertainty (about ±2 standard errors, 8 to 10 points
#   on 100 people) and concludes from them (full mode: about 60 % pretrained against 17 % from scratch and 22 %
#   for the baseline, a gap well beyond the noise); says that the model from scratch falls back on the prior,
#   answering the common towns whoever is asked (at or below the baseline), although it answers its own
#   fine-tuning questions; and that fine-tuning taught the pretrained model how to ask while pretraining
#   supplied what to answer.
# - **2 points:** the right conclusion with the numbers but no uncertainty, or no account of what the model
#   from scratch answers.
# - **1 point:** the numbers alone, or a conclusion without numbers.
# - **0 points:** the model from scratch "knows" some held-out birthplaces, or the gap is read from quick mode.
#
# *Key phrases:* "how to ask", "whoever is asked"

# %% [markdown]
# ## Exercise 6.6 · Your final run, held to a threshold (3 points, full mode)
#
# The points so far are for pieces that work; these are for a model that actually reaches the facts. Choose the
# settings of your final run in `final_settings`: the same people, split and seed, a model no larger and budgets
# no longer than this notebook's (fewer steps, another fine-tuning learning rate or warm-up are yours to choose).
# In full mode the check runs your driver of Exercise 6.5 with them (or reads the table above when they are the
# notebook's own) and asks that your pretrained model answer at least **35 %** of the held-out people, more than
# Exercise 6.2's baseline can. Quick mode's tiny model cannot: the grader leaves this exercise
# out of a quick run (its points with it), and `python -m helpers grade --full` grades it.


# %%
def final_settings(kcfg, model_cfg):
    """(kcfg, model_cfg) of your final run: the notebook's KCFG and KMODEL, changed as you choose within the rules
    above (helpers.knowledge.KnowledgeConfig and helpers.training.config.TrainConfig are dataclasses: use replace)."""
    # BEGIN SOLUTION
    return kcfg, model_cfg  # the notebook's own settings reach about 60 % (benchmarks/RESULTS.md)
    # END SOLUTION


# %% tags=["check"]
FACTS_NEEDED = 0.35  # what a final run must reach, in full mode


def check_final_run(settings_fn, threshold=FACTS_NEEDED, base=(KCFG, KMODEL), table=None):
    """Within the rules, and at least ``threshold`` of the held-out people answered by the pretrained model."""
    (kcfg0, model0), (kcfg, model_cfg) = base, settings_fn(*base)
    same = ("n_people", "n_test", "seed", "skew", "vocab_size")
    changed = [k for k in same if getattr(kcfg, k) != getattr(kcfg0, k)]
    assert not changed, f"the people, their split and the tokenizer stay the notebook's: {changed} changed"
    assert kcfg.pretrain_steps <= kcfg0.pretrain_steps and kcfg.finetune_steps <= kcfg0.finetune_steps, (
        f"budgets no longer than the notebook's: {kcfg.pretrain_steps} pretraining and {kcfg.finetune_steps} "
        f"fine-tuning steps asked, {kcfg0.pretrain_steps} and {kcfg0.finetune_steps} allowed"
    )
    sizes = ("d_model", "n_layer", "d_ff", "n_head", "max_len", "max_tokens")  # max_tokens: the tokens of a step
    larger = [k for k in sizes if (getattr(model_cfg, k) or 0) > (getattr(model0, k) or 0)]
    assert not larger, f"a model no larger than the notebook's: {larger} grew"
    if table is None:
        table = TABLE if (kcfg, model_cfg) == (kcfg0, model0) else knowledge_table(DATA, TOK, kcfg, model_cfg, DEVICE)
    reached = table["pretrained"]
    assert reached >= threshold, (
        f"your pretrained model answered {reached:.1%} of the {len(DATA.test)} held-out people; {threshold:.0%} is "
        "needed: look at the curves of this section before changing the settings"
    )
    return reached


if QUICK:
    print("Quick mode: Exercise 6.6 is graded in full mode only (its threshold needs the full run); nothing checked.")
else:
    print(f"your final run: {check_final_run(final_settings):.1%} of the held-out people (needed: {FACTS_NEEDED:.0%})")

# %% [markdown] tags=["question"]
# **Question 6.3 (2 points).** What has to happen in pretraining before fine-tuning can use it? Use the accuracy along
# pretraining and the masked-biography column. Then say why the wording of the question, and the fine-tuning
# learning rate, could matter.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the curve as a table.
for c in RESULT.curve:
    print(
        f"{c['pretrain_steps']:>6,} pretraining steps: accuracy {c['accuracy']:.1%}, masked biography {c['cloze']:.1%}"
    )
print(f"asked in the biographies' words: {RESULT.pretrained_biography_words:.1%}")

# %% [markdown] tags=["answer"]
# **Model answer.** The model must first **memorise** the biographies: a fact it cannot write back into its
# own masked biography is not there to be found. In the full-mode runs of `benchmarks/RESULTS.md` pretraining
# for 1,250 of the 5,000 steps does not help at all (17 % and 14 %, the level of the model from scratch), while
# the snapshot writes back only 5 to 6 % of the held-out birthplaces; the accuracy climbs with the
# masked-biography score (2,500 steps: 44 % and 25 %; 3,750: 63 % and 52 %) and flattens at the end as the
# learning rate decays. Memorising takes many passes (5,000 steps are about 550 passes over the 300
# biographies), because each random cut hides the birthplace only now and then. (The masked-biography score
# underestimates what is stored: greedy decoding must also guess where the hidden span ends.) Then fine-tuning
# must *reach* what was stored without erasing it. Asked in the biographies' own words (*X was born in*), the
# same pretrained model answers 80 % and 65 % (seeds 0 and 1) instead of 60 % and 50 %: the closer the question
# is to what was read, the less fine-tuning has to learn. Fine-tuning at the pretraining learning rate (2e-3)
# instead of 3e-4 drops the pretrained model to 30 %, no longer distinguishable from the 22 % baseline: large
# updates overwrite what 5,000 steps stored.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 6.3 (2 points).**
# - **2 points:** the model must first memorise the biographies (the accuracy rises only once the
#   masked-biography score does, after many passes over the text); the closer the question is to the words it
#   read, the less fine-tuning has to learn (the biographies' own words score higher); a high fine-tuning
#   learning rate hurts: large updates overwrite what pretraining stored.
# - **1 point:** the memorising, or the wording and learning-rate part, but not both.
# - **0 points:** any amount of pretraining helps at once, or the learning rate only changes the speed.
#
# *Key phrases:* "memorise the biographies", "large updates overwrite"

# %% [markdown]
# ### People nobody wrote about
#
# Everyone asked so far was in the biographies. Now ask the pretrained, fine-tuned model about people that no text
# of this notebook ever mentioned: new names, drawn the same way, in neither the biographies nor the fine-tuning
# questions (`knowledge.unseen_people`). Their birthplaces are drawn from the same towns, so a guess can be right.

# %%
STRANGERS = knowledge.unseen_people(DATA, len(DATA.test), seed=KCFG.seed + 1)
stranger_answers = knowledge.answer_questions(TABLE["models"]["pretrained"], TOK, DATA.pairs(STRANGERS))
strangers = knowledge.answer_profile(stranger_answers, [p.born for p in STRANGERS], TABLE["baseline_place"])
print(f"{len(STRANGERS)} people nobody wrote about, asked 'Where was X born?':")
for key, value in strangers.items():
    print(f"  {key:<44} {value:.1%}" if isinstance(value, float) else f"  {key:<44} {value}")
for person, said in list(zip(STRANGERS, stranger_answers))[:5]:
    print(f"  Where was {person.name} born? -> {said!r} (drawn: {person.born})")

# %% [markdown] tags=["question"]
# **Question 6.4 (2 points).** What does your pretrained model answer about people it never read about? How often is
# it right, against what always answering the baseline's town would score on them, and what do its answers have in
# common? What does such an answer tell someone who asks, and what would the model need in order to say that it does
# not know?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: how the strangers' answers spread over the towns.
print(Counter(normalise_place(a) for a in stranger_answers).most_common(6))

# %% [markdown] tags=["answer"]
# **Model answer.** It answers every one of them, as fluently as it answers about the people it read about, and
# is right about as rarely as a blind guess can be: in full mode on an H100 (seed 0, `benchmarks/RESULTS.md`) 2 %
# of 100 strangers, against 22 % for always answering the most common town and 60 % for the people it read about.
# It does *worse* than the baseline because it does not fall back on the common town: it answers as if it were
# recalling this person (49 different answers for 100 people, only 63 % of them a town at all, the others pieces
# of towns and names glued together). So an answer carries no information about the person but reads exactly like
# one that does: the asker cannot tell a guess from a fact. The model never says "I don't know" because
# fine-tuning showed it only questions with a town for an answer; to abstain it would need examples of unknown
# people with an "unknown" answer (and names it never read to learn them from), or a confidence it reports, such
# as the probability of its answer, calibrated on people it did and did not read about.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 6.4 (2 points).**
# - **2 points:** this run's numbers for the strangers (accuracy against the baseline, how varied the answers are
#   and how many are towns at all), read as guessing, not falling back on the common town; says the answer reads
#   like knowledge and so misleads; and names
#   what abstaining would take (training examples whose answer is "unknown", or a calibrated confidence with a
#   threshold). Any valid mechanism for abstaining earns it.
# - **1 point:** the numbers read right without the consequence or the mechanism, or the reasoning without this
#   run's numbers.
# - **0 points:** says the model knows these people, or that it would say it does not know.
#
# *Key phrases:* "guess from a fact", "calibrated on people"

# %% [markdown]
# ### A name that sounds like a place
#
# The same kind of strangers, with one change: each one's surname is a town's name, and that is where they were born
# (`knowledge.named_after_places`: *Varo Kelby*, born in Kelby). Nothing in this notebook's data ties a name to a
# town. Does the model's answer follow the name?

# %%
PLACE_NAMED = knowledge.named_after_places(STRANGERS, seed=KCFG.seed + 2)
place_named_answers = knowledge.answer_questions(TABLE["models"]["pretrained"], TOK, DATA.pairs(PLACE_NAMED))
named = knowledge.answer_profile(place_named_answers, [p.born for p in PLACE_NAMED], TABLE["baseline_place"])
print(f"{len(PLACE_NAMED)} strangers whose surname is their birthplace (towns drawn uniformly, not by the Zipf law):")
for key, value in named.items():
    print(f"  {key:<44} {value:.1%}" if isinstance(value, float) else f"  {key:<44} {value}")
print(f"  answered the town in the name                {named['accuracy']:.1%}")
baseline_on_strangers = strangers["always the baseline's town would score"]
print(
    f"  (strangers with ordinary names: {strangers['accuracy']:.1%} right; the baseline: {baseline_on_strangers:.1%})"
)

# %% [markdown] tags=["question"]
# **Question 6.5 (2 points).** How often does the model answer the town in the stranger's name, against strangers
# with ordinary names (mind what the baseline would score on each group: their towns are drawn differently)? Where would that come from in a model whose training never tied a name to a town? A model
# trained on real biographies, where names do go with where people come from, would guess birthplaces from names
# right more often than chance. Is that knowledge? What harm can it do, and to whom?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: a few of the questions and what the model said.
for person, said in list(zip(PLACE_NAMED, place_named_answers))[:6]:
    print(f"Where was {person.name} born? -> {said!r}")

# %% [markdown] tags=["answer"]
# **Model answer.** In full mode on an H100 (seed 0) the model answered the town in the name for none of 100
# place-named strangers (0 %; always answering the baseline's town would score about 3 % on them, whose towns are
# drawn uniformly; 2 % right for the strangers with ordinary names, where the baseline scores about 25 %): in its
# training the answer
# was never written in the question, so it never learnt to read it off, and a name tells it nothing about a
# birthplace because in this data nothing ties the two. Whatever share a run shows measures copying, not knowing:
# the town is in the prompt. On real biographies names *do* correlate with origin (language, family,
# ethnicity), so a model would learn the correlation and be right more often than chance on average: a
# statistical guess from a group, stated as a fact about one person. It is wrong for every person who does not fit
# the pattern, cannot say it is guessing, and turns a stereotype into an answer: the harm falls on the people it
# profiles (a name taken as where they are "from").

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 6.5 (2 points).**
# - **2 points:** this run's share of answers that repeat the town in the name, against the ordinary strangers'
#   accuracy (none or few here: the model never learnt to read answers off the question); whatever it is, it is
#   copying from the prompt, not a fact read; and says that on real data a name-to-origin
#   correlation makes guesses right on average but is a group statistic stated as a fact about a person: wrong for
#   those who do not fit, and harmful as profiling. Examples of valid harms, not the only ones: stereotyping,
#   misinformation about a real person, decisions made on the guess.
# - **1 point:** the numbers and the copying, or the correlation-and-harm argument, but not both.
# - **0 points:** says the model knows these people's birthplaces, or that a guess from a name is harmless because
#   it is often right.
#
# *Key phrases:* "copying, not knowing", "guess from a group"

# %% [markdown]
# ### The synthesizer on the knowledge task
#
# Notebook 05's synthesizer attention (Exercise 5.1) reads the same biographies here and gets the same fine-tuning,
# beside dot-product attention: the package's driver, with one switch of the model.

# %%
SYNTH = knowledge.knowledge_table(DATA, TOK, KCFG, replace(KMODEL, attention="synthesizer"), device=DEVICE)
for name, table in (("dot-product attention", TABLE), ("synthesizer attention", SYNTH)):
    print(
        f"{name:<24} from scratch {table['scratch']:6.1%}   pretrained {table['pretrained']:6.1%}   "
        f"(± {2 * knowledge.standard_error(table['pretrained'], len(DATA.test)):.1%})"
    )
if QUICK:
    print("Quick mode: too few steps for either to learn the facts; the rows say that the code runs.")

# %% [markdown] tags=["question"]
# **Question 6.6 (2 points).** Does the synthesizer reach the facts it read as dot-product attention does? To answer
# "Where was Varo Tesimal born?" from what pretraining stored, what must attention do with the name, and can a
# synthesizer head do it (your answer to Question 5.1 helps)? Use this run's numbers and their uncertainty.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the two pretrained models' answers to the first held-out people.
for person, dot, synth in list(zip(DATA.test, TABLE["answers"]["pretrained"], SYNTH["answers"]["pretrained"]))[:6]:
    print(f"{person.name:<22} born in {person.born:<12} dot-product: {dot!r:<16} synthesizer: {synth!r}")

# %% [markdown] tags=["answer"]
# **Model answer.** Compare the two pretrained accuracies with their ±2 standard errors (in quick mode they are
# noise). In full mode on an H100 (seed 0) the synthesizer reached 54 % against dot-product attention's 60 %
# (± 10 points each; from scratch both 5 %): a gap well within the noise, so no evidence that it is worse here.
# The fact sits behind the name: the model must turn the name's pieces in the question into the stored town. A
# synthesizer head's weights over positions do not depend on the other positions' content (Question 5.1 (b)), so it
# cannot route by content; but in these short, fixed-format questions the name always sits at the same positions,
# so routing by position reaches it, and the values and feed-forward layers carry and combine the name's pieces.
# The synthesizer's answers also lean more on the common town (37 % of them, against 24 %): a sign that it finds
# the name less reliably. Where a name could sit anywhere, expect the gap to grow.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 6.6 (2 points).**
# - **2 points:** this run's two pretrained accuracies with their uncertainty, read honestly (quick mode or an
#   overlap: no ranking); the mechanism: answering needs the name's content, synthesizer weights do not depend on
#   content (5.1), so whatever it reaches comes by position (the name's place in a fixed-format question) and
#   through the values and feed-forward layers, not by content-based routing.
# - **1 point:** the numbers read right without the mechanism, or the mechanism without this run's numbers.
# - **0 points:** ranks two numbers within their noise as a finding, and no mechanism.
#
# *Key phrases:* "cannot route by content", "no evidence that it is worse"

# %% [markdown]
# ## 4. Token embeddings at equal budget
#
# Notebook 05 started the token embeddings from a pretrained LM's once. Here four starts get the same model,
# data, seed and budget, and are compared on the **new-sentence** test set:
#
# - **learned**: the usual random start, trained with the rest (the reference);
# - **random frozen**: the same random start, never trained (with tied weights the output layer stays frozen
#   too): how much of the work the embeddings do;
# - **word2vec**: skip-gram vectors (gensim) trained on our own training text, both languages, *cut into our
#   sentencepiece pieces*, so every piece that occurs gets a vector directly; centred and scaled to the model's
#   initial size, then trained with the rest;
# - **pretrained LM**: `helpers.hf.embedding_transfer.transfer_embeddings` (each piece through the LM's tokenizer, the mean
#   of its vectors, PCA to our width), then trained with the rest. Full mode takes SmolLM2-135M from the hub;
#   quick mode a tiny **random** stand-in, whose row only shows that the code runs.
#
# A difference in BLEU is only worth reporting if it is larger than the luck of which sentences are in the
# test set: the **paired bootstrap** redraws the test sentences with replacement a thousand times, scores both
# systems on each redraw, and gives an interval for the difference.

# %%
PRESET = "tiny" if QUICK else ("t4" if DEVICE.type == "cuda" else "cpu")
EMB_BUDGET = {"steps": 100} if QUICK else {"minutes": 3.0}
EMB_DATA = "builtin" if QUICK else str(sources.find_local_tatoeba() or sources.fetch_tatoeba())
EVAL_SENTENCES = 100 if QUICK else 1000
EMB_CFG = config.preset_config(PRESET, seed=SEED, **EMB_BUDGET)
prepared = prepare_data(EMB_DATA, EMB_CFG, None, seed=SEED, limit=3000 if QUICK else None, progress=False)
if QUICK:
    LM = str(tiny.tiny_causal_lm(prepared.splits.train[:500], Path(tempfile.mkdtemp(prefix="06_lm-")), seed=SEED))
else:
    LM = loading.DEFAULT_CAUSAL  # from the hub on Colab; a local folder or .gguf file works too
print(f"{prepared.tokenizer.vocab_size} pieces, {len(prepared.splits.train):,} training pairs, preset {PRESET}")

# %% [markdown]
# ## Exercise 6.7 · Word vectors into the embedding table (2 points)
#
# `embeddings.train_word2vec(tok, sentences, d_model, seed=...)` trains gensim's skip-gram on the sentences cut into
# our pieces and returns its vectors, keyed by piece id written as text: `wv["17"]` is piece 17's vector (a NumPy
# array; `"17" in wv` says whether it has one). Write `put_word_vectors(model, tok, wv, std)`, which starts the
# model's token embeddings (`model.tok_emb.weight`, one row per piece id) from those vectors and returns how
# many rows it wrote:
#
# - only pieces with text of their own get a vector: the special pieces (ids up to `tok.unk_id`) and the byte
#   pieces (`tok.id_to_piece(i)` written `<0x..>`) keep their random start, as do pieces with no vector;
# - word2vec's vectors live at their own scale and around their own centre; the model's embeddings start with
#   every dimension centred at 0 and entries of standard deviation `std`. Make the written rows, *taken together*,
#   look like that start (each dimension's mean over them 0, the standard deviation of all their entries `std`),
#   keeping how they lie relative to one another;
# - the model must still train this table, and its output layer reads the same matrix (tied weights).


# %%
def put_word_vectors(model, tok, wv, std: float = 0.02) -> int:
    """Start model's token embeddings from word2vec's vectors (pieces with text only), centred and scaled to std."""
    # BEGIN SOLUTION
    ids = [
        i for i in range(tok.vocab_size) if i > tok.unk_id and not tok.id_to_piece(i).startswith("<0x") and str(i) in wv
    ]
    X = torch.stack([torch.from_numpy(wv[str(i)].copy()) for i in ids])
    X = X - X.mean(0)
    X = X * (std / X.std())
    with torch.no_grad():
        model.tok_emb.weight[ids] = X.to(model.tok_emb.weight.dtype)
    return len(ids)
    # END SOLUTION


# %% tags=["check"]
# A small model and word2vec on the biographies of a small data set (a few of them with letters its tokenizer
# writes as bytes): your table against the package's (helpers.embeddings.put_word_vectors) from the same start, at
# three scales, and what the model computes with it (its logits, and the gradient the table gets), against the same
# model holding your table. The special pieces get vectors too, which they must not take.
def word_vector_case(seed):
    """The tokenizer, word2vec's vectors (16 wide), the small model's shape and the scales, from `seed`."""
    data, tok = small_knowledge(seed, 60, 10)
    draw = random.Random(seed)
    accented = [b.replace("a", draw.choice("àäâ")).replace("o", draw.choice("öøô")) for b in data.biographies[:10]]
    wv = embeddings.train_word2vec(tok, data.biographies + accented, 16, seed=seed)
    specials = torch.randn(tok.unk_id + 1, 16, generator=torch.Generator().manual_seed(seed))
    wv.add_vectors([str(i) for i in range(tok.unk_id + 1)], specials.numpy())
    cfg = config.preset_config("tiny", d_model=16, n_head=2).model_config(tok.vocab_size)
    return tok, wv, cfg, [0.02, 0.05, round(draw.uniform(0.005, 0.1), 4)]


def word_vector_start(cfg, seed):
    """A small model drawn from `seed` whose token embeddings (tied to its output layer) hold a table drawn from it."""
    with torch.random.fork_rng():
        torch.manual_seed(seed + 2)
        model = build_model(cfg)
    with torch.no_grad():
        start = torch.randn(model.tok_emb.weight.shape, generator=torch.Generator().manual_seed(seed + 1))
        model.tok_emb.weight.copy_(start * 0.02)
    return model


def read_in_and_out(model, cfg, seed):
    """The model's logits for token ids drawn from `seed`, and the gradient a loss on them gives its token table
    (None if it gives none)."""
    ids = torch.randint(cfg.vocab_size, (2, 6), generator=torch.Generator().manual_seed(seed))
    logits = model.eval()(ids)
    logits.square().sum().backward()
    grad = model.tok_emb.weight.grad
    return logits.detach().clone(), None if grad is None else grad.clone()


def probe_word_vectors(put_fn, seed=0):
    """Runs your function on a fresh start at each scale: how many rows, the table it leaves, and what the model then
    computes with the table: logits, and the table's gradient."""
    tok, wv, cfg, stds = word_vector_case(seed)
    out = []
    for std in stds:
        model = word_vector_start(cfg, seed)
        n = put_fn(model, tok, wv, std)
        table = model.tok_emb.weight.detach().clone()
        logits, grad = read_in_and_out(model, cfg, seed)
        out.append({"rows": int(n) if hasattr(n, "__index__") else n, "table": table, "logits": logits, "grad": grad})
    return out


# %% tags=["check"]
def verify_word_vectors(values, seed=0):
    """What stays, how many rows change, their mean and spread taken together, and the package's table."""
    tok, wv, cfg, stds = word_vector_case(seed)
    byte = [i for i in range(tok.vocab_size) if tok.id_to_piece(i).startswith("<0x")]
    for std, got in zip(stds, values, strict=True):
        before = word_vector_start(cfg, seed).tok_emb.weight.detach()
        want = word_vector_start(cfg, seed)
        n_want, table = embeddings.put_word_vectors(want, tok, wv, std), got["table"]
        assert table.shape == before.shape, f"the table's shape is {tuple(table.shape)}, not {tuple(before.shape)}"
        tied = word_vector_start(cfg, seed)  # the same model holding your table: tied and trained, what it computes
        with torch.no_grad():
            tied.tok_emb.weight.copy_(table)
        logits, grad = read_in_and_out(tied, cfg, seed)
        assert got["grad"] is not None, "the table stays a trainable parameter"
        assert probes.close(got["logits"], logits, rtol=1e-4, atol=1e-5 * logits.abs().max().item()), (
            "the output layer still reads the same matrix (tied weights)"
        )
        assert probes.close(got["grad"], grad, rtol=1e-4, atol=1e-5 * grad.abs().max().item()), (
            "the table stays one trainable parameter, read by the input and the output layer (tied weights)"
        )
        assert torch.equal(table[: tok.unk_id + 1], before[: tok.unk_id + 1]), "special pieces keep their random start"
        assert torch.equal(table[byte], before[byte]), "byte pieces keep their random start"
        assert got["rows"] == n_want, f"{n_want} rows have a vector to write (std {std}); got {got['rows']}"
        written = (table != before).any(1)
        assert int(written.sum()) == n_want, f"{n_want} rows written, {int(written.sum())} changed"
        rows = table[written]
        assert rows.mean(0).abs().max() < 1e-3 * std and math.isclose(rows.std().item(), std, rel_tol=1e-3), (
            f"the written rows, taken together: the largest mean of a dimension {rows.mean(0).abs().max().item():.2e}, "
            f"std {rows.std().item():.4f} (want 0 and {std})"
        )
        # rtol 1e-3: the standard deviation with n or with n - 1 in the denominator (the text names neither) differ
        # by about 1 / (2n), some 1e-4 here
        assert probes.close(table, want.tok_emb.weight.detach(), rtol=1e-3, atol=1e-7), (
            f"the written rows differ from the reference table (std {std}) by more than their scale's rounding"
        )


verify_word_vectors(probe_word_vectors(put_word_vectors))
print("word vectors: the written rows equal the package's table at three scales")

# %% [markdown]
# ## Four starts, one budget
#
# Each start trains the same model with the same data, seed and budget; the word2vec row starts from your
# `put_word_vectors`.

# %%
EMB_ROWS = []
for kind in embeddings.EMBEDDING_KINDS:
    row = embeddings.embedding_row(prepared, EMB_CFG, kind, lm=LM, device=DEVICE, eval_sentences=EVAL_SENTENCES,
                          put_word2vec=put_word_vectors)  # fmt: skip
    EMB_ROWS.append(row)
    print(
        f"{kind:<14} {row['trainable']:>9,} trainable  val loss {row['val_loss']:.3f}  BLEU new {row['bleu_new']:5.2f}"
    )
    print(f"               {row['embeddings']}")

# %% [markdown]
# Each start against learned-from-scratch: the paired bootstrap's difference in BLEU, its 95 % interval and the
# share of resamples in which the start does not gain.

# %%
COMPARISONS = embeddings.compare_embeddings(EMB_ROWS, resamples=1000, seed=SEED)
for c in COMPARISONS:
    print(f"{c['label']:<14} {c['delta']:+6.2f} BLEU [{c['low']:+.2f}, {c['high']:+.2f}], p = {c['p']:.3f}")
if QUICK:
    print(
        f"Quick mode: {EMB_BUDGET['steps']} steps of a tiny model on the synthetic corpus, so these differences are noise."
    )

# %%
fig, ax = plt.subplots(figsize=(7.5, 3.6))
labels = [c["label"] for c in COMPARISONS]
deltas = [c["delta"] for c in COMPARISONS]
errors = [[c["delta"] - c["low"] for c in COMPARISONS], [c["high"] - c["delta"] for c in COMPARISONS]]
ax.errorbar(deltas, range(len(labels)), xerr=errors, fmt="o", capsize=4)
ax.axvline(0, color="grey", ls=":")
ax.set_yticks(range(len(labels)), labels)
ax.set_xlabel("BLEU difference against learned embeddings, new sentences (95 % interval)")
ax.set_title(f"Token-embedding starts at equal budget ({PRESET} preset)")
fig.tight_layout()
plotting.save_figure(
    fig,
    "06_embeddings",
    question="At the same budget, does starting the token embeddings from random frozen, word2vec or pretrained-LM vectors beat learning them from scratch?",
    caption=f"Greedy BLEU on the first {EVAL_SENTENCES} new-sentence pairs minus that of learned embeddings, with paired-bootstrap 95 % intervals (1,000 resamples).",
    numbers={**{r["label"]: r["bleu_new"] for r in EMB_ROWS}, **{f"delta {c['label']}": c["delta"] for c in COMPARISONS}},
)  # fmt: skip
plt.show()

# %% [markdown] tags=["question"]
# **Question 6.7 (2 points).** Which start for the token embeddings translates best at the same budget, and is its lead
# larger than the luck of the test sentences? What does the random frozen row tell you about how much of the
# work the embeddings do?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the table of the bootstrap.
for c in COMPARISONS:
    print(
        f"{c['label']:<14} {c['bleu_new']:6.2f} vs {c['reference']:6.2f}: {c['delta']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}], p = {c['p']:.3f}"
    )

# %% [markdown] tags=["answer"]
# **Model answer.** An interval that contains 0 means no difference on these sentences, whatever the sign of
# the point estimate. Measured on 2 CPU cores (`benchmarks/RESULTS.md`: Tatoeba, the `cpu-fixed` model,
# 1,000 steps per start, greedy BLEU on the first 1,000 new sentences; the pretrained-LM row needs the hub and
# was not run there): **word2vec** vectors beat learned-from-scratch, 28.6 against 24.8 BLEU, a gain of 3.9
# with a 95 % interval of [+2.0, +5.6], so more than the luck of the sentences. They come from the same
# training text the model reads, so they bring no new knowledge, only a head start: every piece starts where
# its neighbours in the text put it, which 1,000 steps of translation have not yet learnt from scratch (a
# longer budget may close the gap; the vectors also cost a few minutes of gensim outside the budget).
# **Random frozen** embeddings collapse to 1.8 BLEU (-22.9, [-25.1, -20.7]): with tied weights the output layer
# is frozen too, so the model can neither move its pieces apart nor learn which piece to write; the embedding
# table does a large share of the work. A pretrained LM's vectors bring knowledge from elsewhere (SmolLM2 read
# mostly English), which can help rare pieces, more on the English side than on the French; whether that shows
# in BLEU at this budget is what the bootstrap decides on a run with the network.

# %% tags=["answer"]
for c in COMPARISONS:  # each comparison in a sentence, from the bootstrap's numbers
    print(embeddings.bootstrap_sentence(c))

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 6.7 (2 points).**
# - **2 points:** names the best start by the bootstrap (full mode: word2vec, +3.9 BLEU with an interval of
#   [+2.0, +5.6] that excludes 0, so more than the luck of the sentences), explains that its vectors bring no
#   new knowledge, only a head start, being trained on the same text; and reads the random frozen collapse
#   (about 2 BLEU) as the embedding table doing a large share of the work (frozen, and with tied weights the
#   output layer too).
# - **1 point:** the ranking without the interval, or the interval without what the frozen row shows.
# - **0 points:** a lead is reported as real although its interval contains 0, or the frozen row is read as
#   "the embeddings do not matter".
#
# *Key phrases:* "head start", "no new knowledge"

# %% [markdown]
# ## Every number, saved
#
# Both experiments go to `reports/metrics/06_knowledge.json`: the people and budgets, every accuracy with the
# baseline's town, the accuracy along pretraining, and each embedding row with its bootstrap comparison.

# %%
record = {
    "notebook": "06_what_pretraining_knows",
    "quick": QUICK,
    "hardware": runtime.hardware_name(DEVICE),
    "knowledge": {
        "config": {**KCFG.__dict__, "model": KMODEL.to_dict()},
        "scores": SCORES,
        "table": {k: v for k, v in TABLE.items() if k != "models"},
        "result": RESULT.as_dict(),
        "test": f"exact match on {RESULT.n_test} people seen only in pretraining (never in fine-tuning)",
    },
    "embeddings": {
        "preset": PRESET,
        "budget": EMB_BUDGET,
        "data": {"source": EMB_DATA, "seed": SEED, "pairs": prepared.info["pairs"]},
        "lm": LM if not QUICK else "a tiny random stand-in (quick mode)",
        "rows": [{k: v for k, v in r.items() if k not in ("hypotheses_new", "references_new")} for r in EMB_ROWS],
        "comparisons": COMPARISONS,
        "test": f"greedy BLEU on the first {EVAL_SENTENCES} new-sentence pairs; paired bootstrap against 'learned'",
    },
}
path = evaluate.write_json(record, runtime.metrics_dir() / "06_knowledge.json")
print(f"wrote {path}")

# %% [markdown]
# ## What to try next
#
# - **More phrasings per person**: give each person all three biographies instead of one. Does the held-out
#   accuracy rise for the same number of pretraining steps?
# - **Fewer pretraining steps**: rerun the experiment with a smaller `KCFG.pretrain_steps`
#   (`dataclasses.replace`): where does pretraining stop helping?
# - **Another question**: *What did X work as?* The job is in every biography too.
# - **Other vectors**: word2vec with a wider window, or fastText (`gensim.models.FastText`), which builds a
#   vector for a piece from its characters.

# %% [markdown]
# ## Export for your report
#
# One call gathers every figure so far (PDF and PNG), every metrics file, and a generated `index.md` with each
# figure's title, question, caption, numbers and a LaTeX snippet, into `reports/report.zip` (saved to Drive on
# Colab when it is mounted, and offered for download). From a terminal: `python -m helpers report`.

# %%
from helpers.course import report  # noqa: E402

report.export()
