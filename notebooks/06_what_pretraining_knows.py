# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

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
#    You write the scoring (Exercise 6.1) and the baseline (Exercise 6.2).
# 2. **Embeddings at equal budget.** The translation model of notebook 03 with four starts for its token
#    embeddings: learned from scratch (the default), random and frozen, word2vec vectors trained on our own
#    training text, and a pretrained language model's; each pair compared with a paired bootstrap.
#
# Each **Question 6.N** has a *Your answer* cell for your report and a code cell under it where you compute
# what supports your answer.
#
# **How to run.** On Colab, *Run all*: the knowledge experiment takes a few minutes on a CPU and less on a T4;
# the embeddings, four translation runs of 3 minutes each. Quick mode (`python -m helpers run-notebooks --only
# 06`, the tests) runs every code path with tiny models in seconds: its numbers say that the code runs, not
# what pretraining does. The full-mode knowledge-access numbers, measured on a CPU, are in
# `benchmarks/RESULTS.md` (`python benchmarks/knowledge_access.py`).
#
# Figures go to `reports/figures/06_*.pdf` and `.png`, the numbers to `reports/metrics/06_knowledge.json`.

# %% tags=["parameters"]
# Set-up and parameters. On Colab this installs the course package at the release these notebooks belong
# to (from a copy in Drive first, if there is one) and what the runtime lacks; torch is never reinstalled.
# If it cannot, it says what to do. QUICK=1 (the headless runner and the tests set it) shrinks sizes and
# steps but runs every code path; on Colab the default is the full run.
COURSE = "git+https://github.com/transformers-by-building/course@v0.2.0"
COURSE_IN_DRIVE = "/content/drive/MyDrive/transformers-by-building/course"  # a folder or .zip of the repository


def ensure_course(pinned, drive_copy, version, *, install=None, pip_args=()):
    """Make `helpers` importable; try in order: already installed, a copy in Google Drive, the pinned release.

    pinned: "git+https://...@vX.Y.Z"; drive_copy: a folder or .zip of the repository; version: the one to expect.
    Installs only on Colab (or with install=True); never touches torch. Returns where the package came from.
    """
    import importlib
    import importlib.metadata as metadata
    import subprocess
    import sys
    from pathlib import Path

    class CourseSetupError(RuntimeError):
        def _render_traceback_(self):  # Jupyter shows these lines instead of a traceback
            return ["Course set-up failed.", *str(self).splitlines()]

    try:
        if metadata.version("transformers-by-building") == version:
            return "already installed"
    except metadata.PackageNotFoundError:
        pass
    if not (("google.colab" in sys.modules) if install is None else install):
        return "this checkout (not on Colab: install it once with pip install -e .)"
    copy, tried = Path(drive_copy), []
    sources = [("the copy in Drive", str(copy))] if copy.is_dir() or copy.suffix == ".zip" and copy.is_file() else []
    for label, target in sources + [("the pinned release", pinned)]:
        print(f"Installing the course package from {label}: {target}", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", *pip_args, target], capture_output=True, text=True
        )
        if done.returncode == 0:
            importlib.invalidate_caches()
            return label
        why = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        tried.append(f"  - {label}: {why[-1] if why else 'pip failed'}")
    raise CourseSetupError(
        "The course package could not be installed. Tried:\n" + "\n".join(tried) + "\nTwo ways out:\n"
        "  1. Check this runtime's internet (open any web page from Colab), then run this cell again.\n"
        f"  2. Put the course repository (its folder, or the .zip GitHub gives you) in Google Drive at {copy},\n"
        "     mount Drive (Files panel > Mount Drive), then run this cell again."
    )


print("Course package:", ensure_course(COURSE, COURSE_IN_DRIVE, version=COURSE.rsplit("@v", 1)[1]))
from helpers import runtime  # noqa: E402
from helpers.course import colab  # noqa: E402

QUICK = runtime.quick_mode()
SEED = 0
ACCELERATOR = colab.setup()

# %%
# Sizes. Quick mode: a tiny model, a few dozen people, a hundred steps. Full mode: minutes on a CPU.
import math
import string
import tempfile
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from helpers import knowledge as K
from helpers.course import plotting
from helpers.evaluation import evaluate as E
from helpers.hf import pretrained as PT
from helpers.text import data as D
from helpers.text import sources as S
from helpers.training import config as C

DEVICE = runtime.pick_device()
if QUICK:
    torch.set_num_threads(1)  # tiny models: a second thread only waits (see notebook 03)
KCFG, KMODEL = K.knowledge_configs(QUICK)  # the people and budgets; the model's shape and optimiser
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
DATA = K.make_knowledge_data(KCFG.n_people, KCFG.n_test, SEED, skew=KCFG.skew)
for bio in DATA.biographies[:3]:
    print(bio)
print()
for q, a in DATA.finetune_pairs[:2]:
    print(f"{q}  ->  {a}")
held_out = {p.name for p in DATA.test}
asked = {q for q, _ in DATA.finetune_pairs}
assert not any(K.question(p) in asked for p in DATA.test), "a held-out person is asked about in fine-tuning"
assert len(DATA.biographies) == len(DATA.people) and held_out <= {p.name for p in DATA.people}
print(
    f"\n{len(DATA.biographies)} biographies (everyone), {len(asked)} fine-tuning questions, {len(held_out)} held-out people"
)

# %% [markdown]
# **How skewed are the birthplaces?** The shares of the most common towns among the fine-tuning people and
# among the held-out people, beside the Zipf law they were drawn from.

# %%
TOP = 10
towns = list(K.PLACES[:TOP])
share = {
    who: [Counter(p.born for p in people)[t] / len(people) for t in towns]
    for who, people in (("fine-tuning people", DATA.finetune), ("held-out people", DATA.test))
}
law = K.place_weights(skew=KCFG.skew)[:TOP]
fig, ax = plt.subplots(figsize=(9, 3.8))
x = torch.arange(TOP).float()
ax.bar(x - 0.2, share["fine-tuning people"], width=0.4, label="fine-tuning people")
ax.bar(x + 0.2, share["held-out people"], width=0.4, label="held-out people")
ax.plot(x, law, "k.--", label="Zipf law (weight 1/rank)")
ax.set_xticks(x.tolist(), towns, rotation=30, ha="right")
ax.set_ylabel("share of people born there")
ax.set_title(f"Birthplaces of {len(DATA.people)} invented people: the {TOP} most common of 32 towns")
ax.legend()
fig.tight_layout()
plotting.save_figure(
    fig,
    "06_birthplaces",
    question="How skewed are the birthplaces, and is the most common one the same for the fine-tuning and the held-out people?",
    caption=f"Share of each of the {TOP} most common towns among the {len(DATA.finetune)} fine-tuning and the {len(DATA.test)} held-out people, with the Zipf law they were drawn from.",
    numbers={"zipf_top_share": float(law[0]), "finetune_top_share": share["fine-tuning people"][0], "held_out_top_share": share["held-out people"][0]},
)  # fmt: skip
plt.show()

# %% [markdown]
# ## Exercise 6.1 · Exact-match accuracy (2 points)
#
# The model answers with free text, so scoring needs a rule. The original assignment counts an answer as
# right when it **is** the place, not when it contains it: a model that says *Dunmere Ostrava* has not
# answered. Ignore only what does not change the answer: case, spaces around it and inside it, and
# punctuation at either end (` dunmere. ` is *Dunmere*; *Kestrel  Bay* is *Kestrel Bay*).
#
# Write `normalise_place` (the rule) and `exact_match_accuracy` (the share of predictions whose normalised
# text equals their answer's). Hints: `str.strip(chars)` removes any of `chars` from both ends, and
# `string.punctuation` holds the punctuation characters; `str.casefold()`; `" ".join(text.split())`.


# %%
def normalise_place(text: str) -> str:
    """Case, surrounding spaces and punctuation at either end ignored, inner spaces collapsed."""
    # BEGIN SOLUTION
    return " ".join(text.strip().strip(string.punctuation + " ").casefold().split())
    # END SOLUTION


def exact_match_accuracy(predictions: list[str], answers: list[str]) -> float:
    """The share (0 to 1) of predictions equal to their answer after normalise_place; containment is not a match."""
    assert len(predictions) == len(answers) and answers, "one prediction per answer, and at least one answer"
    # BEGIN SOLUTION
    hits = [normalise_place(p) == normalise_place(a) for p, a in zip(predictions, answers)]
    return sum(hits) / len(answers)
    # END SOLUTION


# %% tags=["check"]
# Reference cases (data/reference/06_exact_match.json), each about one rule; the message names the rule.
load_reference = runtime.reference_outputs  # outputs saved with the course (data/reference/*.json)
for case in load_reference("06_exact_match.json")["cases"]:
    got = exact_match_accuracy(case["predictions"], case["answers"])
    assert isinstance(got, float) and 0 <= got <= 1, (
        f"exact_match_accuracy returns a share from 0 to 1, not a count: got {got!r}"
    )
    assert math.isclose(got, case["accuracy"]), (
        f"{case['what']}: predictions {case['predictions']} for answers {case['answers']} should score "
        f"{case['accuracy']}, got {got}"
    )
print("exact-match accuracy: every reference case agrees")
print(
    f"  {exact_match_accuracy(['Dunmere', ' dunmere. ', 'Dunmere Ostrava', 'Kelby'], ['Dunmere'] * 3 + ['Kestrel Bay']):.2f} on four example answers (two right)"
)

# %% [markdown]
# ## Exercise 6.2 · The most-common-place baseline (2 points)
#
# The baseline of the original assignment always answers "London", the most common birthplace. *Most common
# where?* Among the **fine-tuning** answers: the baseline may learn from the data the model learns from, and
# no more. Choosing the town on the test answers would score the baseline on answers it was fitted to, a leak
# that makes it look better than any honest guess can be. Count towns the way `exact_match_accuracy` compares
# them (normalised), break a tie by the town seen first, and return the town as first written in the
# fine-tuning answers with its accuracy on the test answers. `collections.Counter` counts.


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
for case in load_reference("06_baseline.json")["cases"]:
    place, acc = most_common_place_baseline(case["train"], case["test"])
    assert normalise_place(place) == normalise_place(case["place"]), (
        f"{case['what']}: with training answers {case['train']} the baseline answers {case['place']!r}, not {place!r}"
    )
    assert math.isclose(acc, case["accuracy"]), (
        f"{case['what']}: always answering {case['place']!r} scores {case['accuracy']} on {case['test']}, got {acc}"
    )
TRAIN_ANSWERS = [p.born for p in DATA.finetune]
TEST_ANSWERS = [p.born for p in DATA.test]
BASELINE_PLACE, BASELINE = most_common_place_baseline(TRAIN_ANSWERS, TEST_ANSWERS)
print(f"always answering {BASELINE_PLACE!r}: {BASELINE:.1%} of the {len(TEST_ANSWERS)} held-out people")

# %% [markdown]
# ## 2. What the baseline measures

# %% [markdown] tags=["question"]
# **Question 6.1.** The baseline answers the same town for everyone. From the way the birthplaces were drawn
# (a Zipf law over 32 towns, weight 1/rank), what accuracy should it reach on the held-out people, and how far
# from that may this run's number be by chance alone? Why must the town come from the fine-tuning answers
# only: what would the same baseline report if the town were picked on the test answers, and why is that
# number not a baseline?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the law's share of the most common town, and the baseline
# if the town were picked on the test answers instead (the leak).
print(f"Zipf share of {K.PLACES[0]!r}: {K.place_weights(skew=KCFG.skew)[0]:.1%}")
print(f"picked on the test answers: {most_common_place_baseline(TEST_ANSWERS, TEST_ANSWERS)}")


# %% [markdown] tags=["answer"]
# **Model answer.** Always answering the most common town scores that town's share of the held-out people.
# Under the Zipf law that share is $1/H_{32}$ with $H_{32} = \sum_{r=1}^{32} 1/r \approx 4.06$: about
# **24.6 %**. On $n$ held-out people the measured share wanders around it with a standard error of
# $\sqrt{p(1-p)/n}$: 4.3 points for $n = 100$ (full mode), 6.8 for quick mode's 40, so a baseline anywhere
# between about 16 % and 33 % is what the law predicts. The town must come from the fine-tuning answers because
# a baseline stands for the best guess *without* the answers being scored. Picked on the test answers, it is
# the maximum over 32 towns of their shares in this sample, which is biased upwards (and can even choose
# another town when two are close); that number measures the test sample, not a method, and no model could be
# compared with it fairly. In the full-mode runs of `benchmarks/RESULTS.md` the fine-tuning people's most
# common town is Dunmere, as the law says, and the baseline scores 22 % (seed 0) and 21 % (seed 1) of the 100
# held-out people: within the noise of the law's 24.6 %.


# %%
def compare_with_law(measured: float, expected: float, n: int) -> str:
    """Whether the baseline's accuracy is what the Zipf law predicts, within two standard errors."""
    se = K.standard_error(expected, n)
    verdict = "within" if abs(measured - expected) <= 2 * se else "outside"
    return (
        f"The baseline's {measured:.1%} is {verdict} two standard errors ({2 * se:.1%}) of the {expected:.1%} that the "
        f"law predicts for {n} held-out people."
    )


print(compare_with_law(BASELINE, float(K.place_weights(skew=KCFG.skew)[0]), len(TEST_ANSWERS)))

# %% [markdown]
# ## 3. Pretraining on the biographies, then fine-tuning
#
# The model is notebook 02's decoder-only Transformer, in our translation format with the question as the
# source: `<bos> Where was X born? <sep> Dunmere <eos>`, the loss on the answer only. Pretraining is notebook
# 05's span corruption (`helpers.training.pretrain`, what `train --pretrain span` runs), here on the biographies:
#
# `<bos> Varo Tesimal was born in <mask> in 1874. She worked as ... <sep> Dunmere <eos>`
#
# with a random cut each epoch (a random-length beginning of the biography, one span of it removed). Every
# model starts from the same random weights and gets the same fine-tuning (same questions, steps and
# learning rate); the pretrained ones first read every biography. We keep snapshots of the pretraining run and
# fine-tune a copy of each, to see how much reading it takes. Two more numbers explain the result: how often a
# snapshot writes the birthplace back into a held-out person's biography with the birthplace masked (what
# pretraining stored, before any fine-tuning), and the finished pretrained model fine-tuned on the question in
# the biographies' own words, *Varo Tesimal was born in* → *Dunmere*.

# %%
RESULT, RUN = K.run_knowledge(KCFG, KMODEL, device=DEVICE, data=DATA)
ANSWERS = RUN["answers"]  # the held-out people's answers, per model
SCORES = {
    "fine-tuned from scratch": exact_match_accuracy(ANSWERS["scratch"], TEST_ANSWERS),
    f"pretrained ({KCFG.pretrain_steps:,} steps), then fine-tuned": exact_match_accuracy(ANSWERS["pretrained"], TEST_ANSWERS),
    "the same, asked in the biographies' words": RESULT.pretrained_biography_words,
    f"always {BASELINE_PLACE!r} (Exercise 6.2)": BASELINE,
}  # fmt: skip
assert math.isclose(SCORES["fine-tuned from scratch"], RESULT.scratch) and math.isclose(BASELINE, RESULT.baseline)
for name, acc in SCORES.items():
    print(f"{name:<48} {acc:6.1%}  (± {2 * K.standard_error(acc, RESULT.n_test):.1%})")
print(f"\nfine-tuning people answered correctly: {RESULT.finetune_accuracy}; {RESULT.seconds:.0f} s in all")

# %% [markdown]
# The answer to the seed's question, printed from this run's numbers (it changes when they change):

# %%
print(RESULT.verdict())
if QUICK:
    print(
        f"Quick mode: a width-{KMODEL.d_model} model read the biographies for {KCFG.pretrain_steps} steps, so these "
        "numbers are noise; the full-mode numbers are in benchmarks/RESULTS.md."
    )

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
# **Question 6.2.** Does pretraining let the model reach facts it only read? Answer with the three accuracies
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

# %% [markdown] tags=["question"]
# **Question 6.3.** What has to happen in pretraining before fine-tuning can use it? Use the accuracy along
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
# - **pretrained LM**: `helpers.hf.pretrained.transfer_embeddings` (each piece through the LM's tokenizer, the mean
#   of its vectors, PCA to our width), then trained with the rest. Full mode takes SmolLM2-135M from the hub;
#   quick mode a tiny **random** stand-in, whose row only shows that the code runs.
#
# A difference in BLEU is only worth reporting if it is larger than the luck of which sentences are in the
# test set: the **paired bootstrap** redraws the test sentences with replacement a thousand times, scores both
# systems on each redraw, and gives an interval for the difference.

# %%
PRESET = "tiny" if QUICK else ("t4" if DEVICE.type == "cuda" else "cpu")
EMB_BUDGET = {"steps": 100} if QUICK else {"minutes": 3.0}
EMB_DATA = "builtin" if QUICK else str(S.find_local_tatoeba() or S.fetch_tatoeba())
EVAL_SENTENCES = 100 if QUICK else 1000
EMB_CFG = C.preset_config(PRESET, seed=SEED, **EMB_BUDGET)
prepared = D.prepare_data(EMB_DATA, EMB_CFG, None, seed=SEED, limit=3000 if QUICK else None, progress=False)
if QUICK:
    LM = str(PT.tiny_causal_lm(prepared.splits.train[:500], Path(tempfile.mkdtemp(prefix="06_lm-")), seed=SEED))
else:
    LM = PT.DEFAULT_CAUSAL  # from the hub on Colab; a local folder or .gguf file works too
EMB_ROWS = []
for kind in K.EMBEDDING_KINDS:
    row = K.embedding_row(prepared, EMB_CFG, kind, lm=LM, device=DEVICE, eval_sentences=EVAL_SENTENCES)
    EMB_ROWS.append(row)
    print(
        f"{kind:<14} {row['trainable']:>9,} trainable  val loss {row['val_loss']:.3f}  BLEU new {row['bleu_new']:5.2f}"
    )
    print(f"               {row['embeddings']}")

# %% [markdown]
# Each start against learned-from-scratch, the sentences printed from the bootstrap's numbers:

# %%
COMPARISONS = K.compare_embeddings(EMB_ROWS, resamples=1000, seed=SEED)
for c in COMPARISONS:
    print(K.bootstrap_sentence(c))
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
    caption=f"Greedy BLEU on the first {EVAL_SENTENCES} new-sentence pairs minus that of learned embeddings, with paired-bootstrap 95 % intervals (1,000 resamples); an interval that crosses 0 is no difference.",
    numbers={**{r["label"]: r["bleu_new"] for r in EMB_ROWS}, **{f"delta {c['label']}": c["delta"] for c in COMPARISONS}},
)  # fmt: skip
plt.show()

# %% [markdown] tags=["question"]
# **Question 6.4.** Which start for the token embeddings translates best at the same budget, and is its lead
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
        "result": RESULT.as_dict(),
        "verdict": RESULT.verdict(),
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
path = E.write_json(record, runtime.metrics_dir() / "06_knowledge.json")
print(f"wrote {path}")

# %% [markdown]
# ## What to try next
#
# - **More phrasings per person**: give each person all three biographies instead of one. Does the held-out
#   accuracy rise for the same number of pretraining steps?
# - **Fewer pretraining steps**: `python benchmarks/knowledge_access.py --pretrain-steps 1500`: where does
#   pretraining stop helping?
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
