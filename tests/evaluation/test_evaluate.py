"""Translation and scoring: sacreBLEU/chrF with signatures, the copy baseline, BLEU by length, and bad input."""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path

import pytest
import torch

from helpers import cli, pipeline
from helpers.evaluation import evaluate as E
from helpers.evaluation import translation
from helpers.nn import build_model
from helpers.nn import generate as G
from helpers.nn import model as M
from helpers.nn.model import ModelConfig
from helpers.text.sources import load_path

# ----------------------------------------------------------------------------------------------
# scores


def test_references_against_themselves_score_100():
    refs = ["The cat is black.", "I don't know.", "We left early yesterday."]
    s = E.score(refs, refs)
    assert s["bleu"] == 100.0 and s["chrf"] == 100.0
    assert s["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert s["chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    worse = E.score(["The dog is black.", "I know.", "We left late today."], refs)
    assert worse["bleu"] < 100 and worse["chrf"] < 100


# Two "French" sentences whose every word and n-gram occurs in their reference: 8 source words for 12 reference
# words. Copying them has n-gram precisions 8/8, 6/6, 4/4, 2/2 = 1, so its BLEU is the brevity penalty alone.
COPY_SOURCES = ["a b c d", "w x y z"]
COPY_REFS = ["a b c d e f g h", "w x y z"]
COPY_BLEU = round(100 * math.exp(1 - 12 / 8), 2)  # 60.65


def copy_baseline_misses(copy_baseline) -> list[str]:
    """The hand-derived expectations that `copy_baseline` misses ([] when it meets them all); none calls E.score."""
    copy = copy_baseline(COPY_SOURCES, COPY_REFS)
    same = copy_baseline(COPY_REFS, COPY_REFS)
    disjoint = copy_baseline(["xyz qqq", "vvv"], ["abc def", "ghi"])
    checks = {
        f"the copy's BLEU is its brevity penalty, 100 * exp(1 - 12/8) = {COPY_BLEU}": copy["bleu"] == COPY_BLEU,
        "the copy's chrF is strictly between 0 and 100 (right characters, too few)": 0 < copy["chrf"] < 100,
        "a source identical to its reference scores 100": same["bleu"] == same["chrf"] == 100.0,
        "a source sharing no character with its reference scores 0": disjoint["bleu"] == disjoint["chrf"] == 0.0,
        "every sentence is scored": copy["n"] == 2,
    }
    return [name for name, ok in checks.items() if not ok]


def test_copy_baseline_scores_the_source_not_the_output():
    misses = copy_baseline_misses(E.copy_baseline)
    assert not misses, "copy_baseline misses: " + "; ".join(misses)


@pytest.mark.parametrize(
    "mutant, its_bleu",
    [
        (lambda s, r: E.score(r, r), 100.0),  # scores the references against themselves
        (lambda s, r: E.score(r, s), round(100 * (8 / 12 * 6 / 10 * 4 / 8 * 2 / 6) ** 0.25, 2)),  # swapped: 50.81
        (lambda s, r: E.score(s[:-1], r[:-1]), round(100 * math.exp(1 - 8 / 4), 2)),  # last pair dropped: 36.79
        (lambda s, r: E.score(s[1:], r[1:]), 100.0),  # first pair dropped (a "header" skipped)
    ],
    ids=["refs vs refs", "hyps and refs swapped", "last pair dropped", "first pair dropped"],
)
def test_the_copy_baseline_check_fails_on_plausible_mistakes(mutant, its_bleu):
    """Each mutant copy_baseline is caught, and gives the BLEU worked out by hand beside it (BLEU is asymmetric:
    swapped, the brevity penalty vanishes and the precisions drop), which also checks the arithmetic above."""
    assert mutant(COPY_SOURCES, COPY_REFS)["bleu"] == its_bleu != COPY_BLEU
    assert copy_baseline_misses(mutant) != []


def test_slices_put_each_sentence_in_one_length_bucket_and_one_unseen_word_group():
    from helpers.text.testsets import WordTable

    sources = ["a b", "a b c", "a b c d e f g", "a " * 40, "a zèbre"]
    refs = ["one two three four", "five six seven eight", "nine ten eleven twelve", "x y z w", "p q r s"]
    hyps = [refs[0], refs[1], "wrong words entirely here", "x y z w", "nothing alike at all"]
    words = WordTable.from_pairs([("a b c d e f g", "A b.")])  # "zèbre" is the only unseen word
    got = E.slices(sources, hyps, refs, words=words, buckets=(5, 10))
    rows = got["length"]
    assert [r["slice"] for r in rows] == ["1-5", "6-10", "11+"]
    assert [r["n"] for r in rows] == [3, 1, 1]
    assert rows[1]["bleu"] == 0.0 and rows[2]["bleu"] == 100.0 and rows[2]["chrf"] == 100.0
    unseen = {r["slice"]: r for r in got["unseen_word"]}
    assert unseen["with an unseen word"]["n"] == 1 and unseen["with an unseen word"]["bleu"] == 0.0
    assert unseen["all words seen in training"]["n"] == 4 and unseen["all words seen in training"]["bleu"] > 60
    assert [r["slice"] for r in E.slices(sources, hyps, refs)["length"]] == ["1-5", "6-10", "26+"]
    assert E.slices(sources, hyps, refs)["unseen_word"] == []  # no word table: no such slice, not a guess


def test_sample_table_is_fixed_and_aligned():
    src, ref, hyp = [f"s{i}" for i in range(30)], [f"r{i}" for i in range(30)], [f"h{i}" for i in range(30)]
    rows = E.sample_table(src, ref, hyp, n=5)
    assert rows == E.sample_table(src, ref, hyp, n=5) and len(rows) == 5
    assert all(r["source"][1:] == r["reference"][1:] == r["ours"][1:] for r in rows)
    assert "source | reference | ours" in E.format_table(rows)


def test_evaluate_pairs_scores_a_translator_with_its_own_translate():
    """The dispatch is real: a translator object's own output is what gets scored, even when it is a torch module
    (evaluation once sent every module to our model's decoder)."""
    pairs = EMPTY_PAIRS

    class Echo(torch.nn.Module):
        def translate(self, sources, beams=1, *, batch_size=32, length_penalty=1.0, report=None):
            report.seconds += 0.01
            return [en for _, en in pairs[: len(sources)]]

        def source_budget(self) -> str:
            return "source budget: any"

    ev, hyps = E.evaluate_pairs(Echo(), pairs, test_set="echo")
    assert ev["bleu"] == 100.0 and hyps == [en for _, en in pairs] and ev["seconds"] == 0.01


def test_score_newer_dev_scores_greedy_writes_the_translations_and_restores_training_mode(run, tmp_path, monkeypatch):
    """The end of `train`: greedy BLEU on the newer-sentence file ($TATOEBA_NEWER_DEV here), the translations beside
    the run, the model left in the mode it was in; without the file, one line says so and nothing is scored."""

    pairs = [(f"Le chat numéro {i} dort.", f"Cat number {i} is sleeping.") for i in range(6)]
    dev = tmp_path / "dev.fr-en.tsv"
    dev.write_text("".join(f"{fr}\t{en}\n" for fr, en in pairs), encoding="utf-8")
    monkeypatch.setenv("TATOEBA_NEWER_DEV", str(dev))
    out, err = tmp_path / "run", io.StringIO()
    out.mkdir()
    run.model.train()
    try:
        result = E.score_newer_dev(run.model, run.tokenizer, out, err)
        assert run.model.training, "the model must be back in training mode"
    finally:
        run.model.eval()
    want = translation.translate(run.model, run.tokenizer, [fr for fr, _ in pairs], beams=1)
    assert (out / "eval_dev.greedy.hyp.txt").read_text(encoding="utf-8").splitlines() == want
    scored = E.score(want, [en for _, en in pairs])
    assert result == {"test_file": str(dev), "n": 6, "beams": 1, "bleu": scored["bleu"], "chrf": scored["chrf"],
                      "truncated": 0}  # fmt: skip
    assert f"Newer sentences (dev.fr-en.tsv, 6 pairs, greedy): BLEU {scored['bleu']:.2f}" in err.getvalue()
    monkeypatch.setattr(E, "find_newer_dev", lambda: None)  # the file is not on this machine
    err = io.StringIO()
    assert E.score_newer_dev(run.model, run.tokenizer, tmp_path / "none", err) is None
    assert "is not on this machine: no score on newer sentences" in err.getvalue()
    assert not (tmp_path / "none").exists()


# ----------------------------------------------------------------------------------------------
# beam search against brute force, on a tiny random model (no training, no tokenizer)

V, EOS, BUDGET = 8, 2, 4  # ids 0-7, <eos> = 2, at most 4 new tokens: 1 + 7 + 7**2 + 7**3 + 7**4 = 2,801 endings
PREFIXES = [[0, 3, 5, 1], [0, 6, 1], [0, 4, 4, 7, 1], [0, 5, 1]]  # "<bos> French <sep>", 3 to 5 ids long


@pytest.fixture(scope="module")
def tiny_random_lm():
    torch.manual_seed(2)
    # GELU: seed 2 and std 0.5 below were chosen for this model's distributions (ReLU² squares std-0.5 activations
    # into near one-hot next tokens, where a beam and greedy agree and the checks below would have nothing to catch)
    config = ModelConfig(vocab_size=V, max_len=12, n_layer=2, n_head=2, d_model=16, activation="gelu")
    model = build_model(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:  # the default std 0.02 makes every next-token distribution nearly uniform (near-ties
                p.normal_(0.0, 0.5)  # everywhere); std 0.5 gives a first token of 35-65%: peaked, not one-hot
    return model.eval()


@pytest.fixture
def lm(tiny_random_lm):
    """The tiny model, run on one thread: for tensors this small, extra threads only wait on each other (on a
    busy 2-core machine they made these tests 7 times slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_random_lm
    torch.set_num_threads(threads)


@torch.no_grad()
def next_logp(model, prefix, tokens) -> torch.Tensor:
    """Log-probabilities of the token after prefix + tokens, from one full forward pass (no cache, no batch)."""
    ids = torch.tensor([prefix + list(tokens)])
    return model(ids, prefix_len=torch.tensor([len(prefix)]))[0, -1].log_softmax(-1)


def greedy_by_hand(model, prefix, budget) -> list[int]:
    out = []
    while len(out) < budget and (tok := int(next_logp(model, prefix, out).argmax())) != EOS:
        out.append(tok)
    return out


@torch.no_grad()
def every_ending(model, prefix, budget, length_penalty) -> dict[tuple, float]:
    """Every hypothesis beam search can finish, with the score generate's docstring ranks them by, by brute force:
    k < budget tokens then <eos> (length k + 1: the eos counts), or `budget` tokens cut off (length `budget`);
    score = sum of the log-probabilities (the eos's included) / length ** length_penalty. Keys leave out the eos."""
    words = [t for t in range(V) if t != EOS]
    seqs = [[*c, EOS] for k in range(budget) for c in itertools.product(words, repeat=k)]
    seqs += [list(c) for c in itertools.product(words, repeat=budget)]
    n = len(prefix)
    ids = torch.tensor([prefix + s + [0] * (budget - len(s)) for s in seqs])  # causal: the padding is never seen
    logp = model(ids, prefix_len=torch.full((len(seqs),), n)).log_softmax(-1)
    token_logp = logp[:, n - 1 : -1].gather(-1, ids[:, n:, None])[..., 0]  # (S, budget): each new token
    lengths = torch.tensor([len(s) for s in seqs])
    total = (token_logp * (torch.arange(budget)[None, :] < lengths[:, None])).sum(1)
    scores = total / lengths.double() ** length_penalty
    return {tuple(s[:-1] if s[-1:] == [EOS] else s): float(x) for s, x in zip(seqs, scores)}


def best(scores: dict[tuple, float]) -> list[int]:
    (top, first), (_, second) = sorted(scores.items(), key=lambda kv: -kv[1])[:2]
    assert first - second > 1e-3, "a near-tie: the comparison would hang on rounding; choose another seed"
    return list(top)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_beam_search_of_width_1_is_greedy_decoding(lm, length_penalty):
    """A theorem: one beam keeps the single best token each step. Catches a width-1 beam that finishes, extends
    or reorders rows differently from greedy (generate(beams=1) decodes greedily, so beam_search is called here)."""
    greedy = [greedy_by_hand(lm, p, BUDGET) for p in PREFIXES]
    assert lm.generate(PREFIXES, BUDGET, eos_id=EOS, beams=1) == greedy
    beam_1 = G.beam_search(lm, PREFIXES, BUDGET, EOS, beams=1, length_penalty=length_penalty)
    assert [found[0].ids for found in beam_1] == greedy


def full_width_beam_and_brute_force(model, length_penalty) -> tuple[list, list]:
    """What generate returns with beams >= the 2,801 endings, and the brute-force optimum it must equal."""
    tables = [every_ending(model, p, BUDGET, length_penalty) for p in PREFIXES]
    beam = model.generate(PREFIXES, BUDGET, eos_id=EOS, beams=len(tables[0]), length_penalty=length_penalty)
    return beam, [best(t) for t in tables]


@pytest.mark.parametrize("length_penalty", [1.0, 0.0])
def test_a_beam_as_wide_as_the_search_space_finds_the_brute_force_optimum(lm, length_penalty):
    """A theorem: with beams >= the 2,801 endings nothing is pruned and no sentence stops before all have
    finished, so generate must return the brute-force optimum. Catches a missing or wrong length normalisation,
    scores added to another hypothesis's row, cache rows that do not follow their hypothesis."""
    beam, optimum = full_width_beam_and_brute_force(lm, length_penalty)
    assert beam == optimum
    # the check has something to catch: greedy misses the optimum, and the other normalisation picks another one
    assert optimum != [greedy_by_hand(lm, p, BUDGET) for p in PREFIXES]
    assert optimum != [best(every_ending(lm, p, BUDGET, 1.0 - length_penalty)) for p in PREFIXES]


@pytest.mark.parametrize("beams", [2, 3, 4])
def test_a_narrow_beam_scores_no_lower_than_greedy_for_this_seed(lm, beams):
    """NOT a theorem: a narrow beam can prune the greedy path and end lower (this model built with std 1.0
    instead of 0.5 does, at width 3 on [0, 4, 4, 7, 1] with length_penalty 1). It holds, deterministically, for
    seed 2 and std 0.5 on these prefixes. Catches a beam that keeps the worst hypotheses, or picks its answer by
    another rule than it ranks by."""
    gains = []
    for length_penalty in (0.0, 1.0):
        for p in PREFIXES:
            scores = every_ending(lm, p, BUDGET, length_penalty)
            beam = lm.generate([p], BUDGET, eos_id=EOS, beams=beams, length_penalty=length_penalty)[0]
            gains.append(scores[tuple(beam)] - scores[tuple(greedy_by_hand(lm, p, BUDGET))])
    assert min(gains) > -1e-6, gains
    assert max(gains) > 0.01  # the beam does find something greedy misses


def textbook_beam(model, prefix, budget, beams, length_penalty) -> list[int]:
    """Beam search as generate's docstring and beam_decode's comments state it, one forward pass per hypothesis:
    each step, rank every one-token extension of the live hypotheses and walk the best 2 * beams in order: an
    <eos> among the top `beams` finishes its hypothesis, other tokens extend theirs until `beams` are kept; one
    reaching the budget finishes. Once `beams` have finished, stop; return the best finished one."""
    live, finished = [((), 0.0)] if budget else [], []
    while live:
        steps = [(h, t, s + lp) for h, s in live for t, lp in enumerate(next_logp(model, prefix, h).tolist())]
        kept = []
        for rank, (h, t, s) in enumerate(sorted(steps, key=lambda e: -e[2])[: 2 * beams]):
            if t == EOS and rank < beams:
                finished.append((s / (len(h) + 1) ** length_penalty, h))
            elif t != EOS and len(kept) < beams:
                kept.append((h + (t,), s))
        finished += [(s / budget**length_penalty, h) for h, s in kept if len(h) == budget]
        live = [(h, s) for h, s in kept if len(h) < budget] if len(finished) < beams else []
    return list(max(finished)[1]) if finished else []


@pytest.mark.parametrize("beams", [2, 3, 4])
@pytest.mark.parametrize("budgets", [[BUDGET] * 4, [4, 0, 3, 4]], ids=["same budgets", "a zero budget"])
def test_a_narrow_beam_follows_the_textbook_algorithm(lm, beams, budgets):
    """Compares generate with a plain re-telling of its rules (no cache, no batching, no row bookkeeping), at the
    widths people use. Catches an eos counted wrongly in the length, an eos below the top `beams` counted as
    finished, and the row bookkeeping mistakes of the tests above. With a zero budget in second place, decoder
    rows and sentences stop sharing numbers."""
    for length_penalty in (0.0, 1.0, 2.0):
        expected = [textbook_beam(lm, p, n, beams, length_penalty) for p, n in zip(PREFIXES, budgets)]
        assert lm.generate(PREFIXES, budgets, eos_id=EOS, beams=beams, length_penalty=length_penalty) == expected


def decode_every_way(model, beams) -> dict[str, tuple]:
    """The same sentences decoded batched and one at a time, with the cache and without."""
    budgets = [4, 0, 3, 4]  # a zero budget in second place: decoder rows and sentences stop sharing numbers
    out = {}
    for use_cache in (True, False):
        kw = dict(eos_id=EOS, beams=beams, use_cache=use_cache)
        batched = model.generate(PREFIXES, budgets, **kw)
        alone = [model.generate([p], [n], **kw)[0] for p, n in zip(PREFIXES, budgets)]
        out[f"batched, use_cache={use_cache}"] = tuple(map(tuple, batched))
        out[f"one at a time, use_cache={use_cache}"] = tuple(map(tuple, alone))
    return out


@pytest.mark.parametrize("beams", [1, 3])
def test_batching_and_the_cache_do_not_change_what_is_decoded(lm, beams):
    """Catches scores read from another sentence's row, cache rows not following their hypothesis, padding that
    leaks into attention, or budgets paired with the wrong sentence."""
    results = decode_every_way(lm, beams)
    assert len(set(results.values())) == 1, results
    assert len(set(results[f"batched, use_cache={True}"])) > 1  # the sentences differ: a mix-up would show


def test_the_brute_force_check_catches_cache_rows_that_do_not_follow_their_hypothesis(lm, monkeypatch):
    """The plausible bug planted here: a cache reorder written for greedy decoding, where rows are only ever
    dropped and stay in order. Beam search also repeats and permutes them: the right parents, the wrong children."""

    def gather_in_row_order(self, index):
        index = index.sort().values
        self.k, self.v, self.pos = (t.index_select(0, index) for t in (self.k, self.v, self.pos))

    monkeypatch.setattr(M.LayerCache, "reorder", gather_in_row_order)
    assert len(set(decode_every_way(lm, beams=1).values())) == 1  # greedy never permutes rows: it cannot tell
    for length_penalty in (0.0, 1.0):
        beam, optimum = full_width_beam_and_brute_force(lm, length_penalty)
        assert beam != optimum


# sources of different lengths: even a barely trained model gives each its own output, so an order mix-up shows
TRANSLATE_LINES = ["Bonjour.", "", "Je suis là.", "Il fait très beau aujourd'hui dans le jardin.", "Le chat dort."]


def translate_command_problems(run_dir, run) -> list[str]:
    """What is wrong with `translate`'s output for TRANSLATE_LINES ([] when nothing is): it must be, line for line
    and in order, what translation.translate gives with the same model (an empty line stays empty), not the sources."""
    stdin, stdout, stderr = io.StringIO("".join(line + "\n" for line in TRANSLATE_LINES)), io.StringIO(), io.StringIO()
    n = cli.translate_command(run_dir, beams=1, stdin=stdin, stdout=stdout, stderr=stderr)
    got = stdout.getvalue().split("\n")
    want = translation.translate(run.model, run.tokenizer, TRANSLATE_LINES)
    assert len(set(want)) == len(want), f"the model's outputs must differ line by line for this check: {want}"
    problems = []
    if n != len(TRANSLATE_LINES) or got[-1] != "" or len(got) != len(TRANSLATE_LINES) + 1:
        problems.append(f"{n} lines counted, {len(got) - 1} written, for {len(TRANSLATE_LINES)} read")
    if got[:-1] != want:
        problems.append(f"not the model's translations, in order: {got[:-1]} instead of {want}")
    if any(g == src and src for g, src in zip(got, TRANSLATE_LINES)):
        problems.append("a source came back unchanged")
    return problems


def test_translate_command_writes_the_models_translation_of_each_line_in_order(run_dir, run):
    assert translate_command_problems(run_dir, run) == []


def test_a_run_of_the_default_rotary_model_loads_and_translates_line_for_line(tmp_path):
    """The fixture's run pins learned positions (the checks above need outputs that differ line by line); a run folder
    of the default, rotary positions, must load as notebook 02's model and translate through the command too."""
    from helpers.text.corpus import builtin_corpus

    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(300, seed=5, difficulty=1)), encoding="utf-8")
    cli.train_command(str(data), None, None, 3, tmp_path / "run", "tiny", 0, progress=False)
    run = pipeline.load_run(tmp_path / "run", device="cpu")
    assert run.model.config.positional == "rotary" and type(run.model) is M.DecoderOnlyTransformer
    stdin, stdout = io.StringIO("".join(line + "\n" for line in TRANSLATE_LINES)), io.StringIO()
    n = cli.translate_command(tmp_path / "run", beams=1, stdin=stdin, stdout=stdout, stderr=io.StringIO())
    assert n == len(TRANSLATE_LINES)
    assert stdout.getvalue().split("\n")[:-1] == translation.translate(run.model, run.tokenizer, TRANSLATE_LINES)


def _echo(translator, lines, **kw):
    return list(lines)


def _reversed(translator, lines, **kw):
    return translator.translate(list(lines))[::-1]


def _sorted_by_length(translator, lines, **kw):  # the batches' length order, never put back
    return sorted(translator.translate(list(lines)), key=len)


def _first_only(translator, lines, **kw):  # every line gets the first line's translation
    return translator.translate(list(lines)[:1]) * len(lines)


@pytest.mark.parametrize("mutant", [_echo, _reversed, _sorted_by_length, _first_only], ids=lambda f: f.__name__[1:])
def test_the_translate_check_fails_on_output_that_is_not_the_models(run_dir, run, monkeypatch, mutant):
    monkeypatch.setattr(
        translation, "translate_lines", mutant
    )  # translate_command reads it from the module on each call
    monkeypatch.setattr(pipeline, "load_run", lambda *a, **k: run)
    assert translate_command_problems(run_dir, run) != []


def test_evaluate_command_prints_signatures_and_writes_the_shared_metrics_layout(run_dir, tmp_path):
    test_file = run_dir / "test.tsv"  # written by train: French<TAB>English
    out_json = tmp_path / "eval.json"
    stdout = io.StringIO()
    record = cli.evaluate_command(run_dir, [test_file], beams=1, out_json=out_json, stdout=stdout)
    ev = record["evaluations"][0]
    printed = stdout.getvalue()
    assert f"BLEU = {ev['bleu']:.2f}" in printed and ev["bleu_signature"] in printed
    assert f"chrF = {ev['chrf']:.2f}" in printed and ev["chrf_signature"] in printed
    saved = json.loads(out_json.read_text())
    assert saved["schema"] == E.METRICS_SCHEMA and saved["model"]["step"] == 3
    assert set(E.EVALUATION_KEYS) <= set(saved["evaluations"][0]) and ev["test_set"] == "test.tsv"
    pairs, _ = load_path(test_file)
    assert ev["n"] == len(pairs) == sum(r["n"] for r in ev["slices"]["length"])
    assert ev["n"] == sum(r["n"] for r in ev["slices"]["unseen_word"])
    assert ev["copy_baseline"]["bleu"] == E.score([fr for fr, _ in pairs], [en for _, en in pairs])["bleu"]
    words = pipeline.load_run(run_dir).words
    word_by_word = [words.word_by_word(fr) for fr, _ in pairs]
    assert ev["word_baseline"]["bleu"] == E.score(word_by_word, [en for _, en in pairs])["bleu"]
    assert "word by word BLEU" in printed and "by source length" in printed
    hyps = (tmp_path / "eval.test.hyp.txt").read_text().splitlines()
    assert len(hyps) == len(pairs) and ev["bleu"] == E.score(hyps, [en for _, en in pairs])["bleu"]


def test_evaluate_without_a_test_file_scores_the_runs_own_sets_new_sentences_first(run_dir, tmp_path):
    from helpers.text.data import IN_DISTRIBUTION, NEW_SENTENCES

    stdout = io.StringIO()
    record = cli.evaluate_command(run_dir, None, beams=1, out_json=tmp_path / "own.json", stdout=stdout)
    names = [ev["test_set"] for ev in record["evaluations"]]
    assert names == [NEW_SENTENCES, IN_DISTRIBUTION]
    sizes = [len(load_path(run_dir / f)[0]) for f in ("test_new.tsv", "test.tsv")]
    assert [ev["n"] for ev in record["evaluations"]] == sizes and min(sizes) > 0
    assert stdout.getvalue().index(NEW_SENTENCES) < stdout.getvalue().index(IN_DISTRIBUTION)
    assert (tmp_path / "own.test_new.hyp.txt").is_file() and (tmp_path / "own.test.hyp.txt").is_file()


def test_evaluate_defaults_to_beam_search(run_dir, tmp_path):
    record = cli.evaluate_command(run_dir, [run_dir / "test.tsv"], out_json=tmp_path / "b.json", stdout=io.StringIO())
    assert record["evaluations"][0]["beams"] == E.DEFAULT_BEAMS > 1


def test_evaluate_reads_other_column_orders_and_reports_every_line_it_skipped(run_dir, tmp_path):
    raw = tmp_path / "tatoeba-style.tsv"  # English<TAB>French<TAB>attribution, as the Tatoeba release
    raw.write_text(
        "The cat sleeps.\tLe chat dort.\tCC-BY 2.0\nno tab here\nI eat.\tJe mange.\tCC-BY 2.0\n\tVide.\tx\n",
        encoding="utf-8",
    )
    stdout = io.StringIO()
    record = cli.evaluate_command(
        run_dir, raw, out_json=tmp_path / "e.json", columns=("en", "fr", "attribution"), stdout=stdout
    )
    assert record["evaluations"][0]["n"] == 2
    report = record["data"]["test_sets"]["tatoeba-style.tsv"]["report"]
    assert report["lines_read"] == 4 and report["pairs_kept"] == 2
    assert report["skipped"]["missing tab (fewer than 2 columns)"] == {"count": 1, "first_line": 2}
    assert report["skipped"]["empty English side"] == {"count": 1, "first_line": 4}
    assert "missing tab (fewer than 2 columns) (first at line 2)" in stdout.getvalue()


def test_evaluate_refuses_more_column_names_than_the_file_has(run_dir, tmp_path, capsys):
    # a file of three columns read with four names used to be scored silently (exit 0): now the command refuses,
    # naming the columns it found; the same file with its three names is scored (the control)
    raw = tmp_path / "three.tsv"
    raw.write_text("The cat sleeps.\tLe chat dort.\tCC-BY 2.0\nI eat.\tJe mange.\tCC-BY 2.0\n", encoding="utf-8")
    args = ["evaluate", "--checkpoint", str(run_dir), "--test", str(raw), "--beams", "1"]
    assert cli.main([*args, "--columns", "en,fr,attribution,id", "--json", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "names 4 columns" in err and "2 lines with 3" in err and "en,fr,col3" in err, err
    assert cli.main([*args, "--columns", "en,fr,attribution", "--json", str(tmp_path / "y.json")]) == 0


def test_a_test_file_that_is_missing_or_holds_no_pair_says_what_to_do(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"No valid \(French, English\) pair[\s\S]*missing tab"):
        load_path(bad)
    with pytest.raises(FileNotFoundError, match="French<TAB>English"):
        load_path(tmp_path / "missing.tsv")


def test_a_folder_without_checkpoint_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m helpers train"):
        pipeline.load_run(tmp_path)


# ----------------------------------------------------------------------------------------------
# one road from text to ids: what a user types reaches the model as training text did

TYPED = [
    "Où est l’homme\u202f?",  # curly apostrophe, narrow no-break space before "?" (as Tatoeba writes French)
    "Il a dit «\u00a0oui\u00a0».",  # no-break spaces inside guillemets
    "Le cafe\u0301 est fermé\u200b.",  # a decomposed "é" (e + combining accent) and a zero-width space
]


def _spy_on_prefixes(model, monkeypatch) -> list:
    """Record the token ids every call of model.generate receives, and still generate."""
    seen, real = [], model.generate

    def spy(prefixes, *args, **kwargs):
        seen.extend(tuple(p) for p in prefixes)
        return real(prefixes, *args, **kwargs)

    monkeypatch.setattr(model, "generate", spy)
    return seen


def test_typed_text_and_its_normalised_form_reach_the_model_as_the_same_ids(run, monkeypatch):
    from helpers.text.tokenizer import normalise_text

    normalised = [normalise_text(t) for t in TYPED]
    assert normalised[0] == "Où est l'homme ?" and normalised[2] == "Le café est fermé."
    # without normalisation these would be other pieces: the check below has something to catch
    assert all(run.tokenizer.sp.encode(t) != run.tokenizer.sp.encode(n) for t, n in zip(TYPED, normalised))
    seen = _spy_on_prefixes(run.model, monkeypatch)
    typed_out = translation.translate(run.model, run.tokenizer, TYPED)
    typed_ids = sorted(seen)
    seen.clear()
    normal_out = translation.translate(run.model, run.tokenizer, normalised)
    assert typed_ids == sorted(seen), "translate gave the model other ids for typed text than for its normalised form"
    assert typed_out == normal_out


def test_evaluate_reads_typed_text_the_way_training_text_was_read(run, run_dir, tmp_path, monkeypatch):
    from helpers.text.tokenizer import normalise_text

    typed, clean = tmp_path / "typed.tsv", tmp_path / "clean.tsv"
    typed.write_text("".join(f"{t}\tA sentence.\n" for t in TYPED), encoding="utf-8")
    clean.write_text("".join(f"{normalise_text(t)}\tA sentence.\n" for t in TYPED), encoding="utf-8")
    monkeypatch.setattr(pipeline, "load_run", lambda *a, **k: run)
    seen = _spy_on_prefixes(run.model, monkeypatch)
    out = {}
    for name, path in (("typed", typed), ("clean", clean)):
        seen.clear()
        cli.evaluate_command(run_dir, path, out_json=tmp_path / f"{name}.json", stdout=io.StringIO())
        out[name] = (sorted(seen), (tmp_path / f"{name}.{name}.hyp.txt").read_text())
    assert out["typed"] == out["clean"], "evaluate gave the model other ids for typed text than for its normalised form"


# ----------------------------------------------------------------------------------------------
# empty translations: counted per test set, and a warning when most are empty (BLEU 0.00 alone says nothing)

EMPTY_PAIRS = [(f"Le chat numéro {i} dort.", f"Cat number {i} is sleeping.") for i in range(8)]


class MostlySilent:
    """A translator (the interface translation.Translator, as helpers.hf.translator.HFTranslator implements it) whose
    first `empty` outputs are empty."""

    name, config = "mostly silent", None

    def __init__(self, empty: int):
        self.empty = empty

    def parameters(self) -> int:
        return 1

    def translate(self, sources, beams=1, *, batch_size=64, length_penalty=1.0, report=None):
        return ["" if i < self.empty else f"Cat number {i} is sleeping." for i in range(len(sources))]

    def source_budget(self) -> str:
        return "source budget: any"


@pytest.mark.parametrize("empty, warns", [(6, True), (5, True), (4, False), (1, False), (0, False)])
def test_evaluation_counts_empty_translations_and_warns_when_most_are_empty(empty, warns):
    ev, hyps = E.evaluate_pairs(MostlySilent(empty), EMPTY_PAIRS, test_set="t")
    assert ev["empty_outputs"] == empty == sum(h == "" for h in hyps)
    text = E.format_evaluation(ev, checkpoint="runs/x")
    assert text.splitlines()[0].endswith(f", {empty} of 8 translations are empty")
    assert ("warning:" in text) is warns, f"more than half empty ({empty} of 8) must warn, and only then"
    if warns:
        assert f"warning: {empty} of 8 translations ({empty / 8:.0%}) are empty" in text
        assert "Train longer" in text and "python -m helpers translate --checkpoint runs/x" in text


def test_evaluate_command_prints_and_records_the_empty_translations(run, run_dir, tmp_path, monkeypatch):
    translator = MostlySilent(7)
    silent = pipeline.Run(translator, None, {}, 30, run_dir, None, translator=translator, scratch=False)
    monkeypatch.setattr(pipeline, "load_run", lambda *a, **k: silent)
    test = tmp_path / "t.tsv"
    test.write_text("".join(f"{fr}\t{en}\n" for fr, en in EMPTY_PAIRS), encoding="utf-8")
    stdout = io.StringIO()
    record = cli.evaluate_command(run_dir, test, out_json=tmp_path / "e.json", stdout=stdout)
    printed = stdout.getvalue()
    assert "7 of 8 translations are empty" in printed and "warning: 7 of 8 translations (88%) are empty" in printed
    assert f"--checkpoint {run_dir}" in printed
    assert json.loads((tmp_path / "e.json").read_text())["evaluations"][0]["empty_outputs"] == 7
    assert record["evaluations"][0]["empty_outputs"] == 7
    # the control: our (barely trained, but never silent) model on the same file is counted, and not warned about
    monkeypatch.setattr(pipeline, "load_run", lambda *a, **k: run)
    stdout = io.StringIO()
    record = cli.evaluate_command(run_dir, test, beams=1, out_json=tmp_path / "f.json", stdout=stdout)
    hyps = (tmp_path / "f.t.hyp.txt").read_text().splitlines()
    assert record["evaluations"][0]["empty_outputs"] == sum(h == "" for h in hyps) == 0
    assert "0 of 8 translations are empty" in stdout.getvalue() and "warning" not in stdout.getvalue()


# ----------------------------------------------------------------------------------------------
# the one paired bootstrap, against Exercise 4.3's saved reference (written by tests/notebooks/test_notebook04.py's oracle)

BOOTSTRAP_REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference" / "04_paired_bootstrap.json"


def test_the_package_bootstrap_is_the_saved_reference():
    """bootstrap_bleu_difference draws the resamples the reference draws (numpy's default_rng(seed).integers, one
    (resamples, n) draw shared by both systems), so the same seed gives the saved p exactly, and the difference and
    the interval to their two decimals. Catches a test that is not paired (the saved unpaired p is 0.31 against
    0.07), another draw, the interval's percentiles or the sign of the difference."""
    saved = json.loads(BOOTSTRAP_REFERENCE.read_text(encoding="utf-8"))
    got = E.bootstrap_bleu_difference(
        saved["hyps_a"], saved["hyps_b"], saved["refs"], resamples=saved["n_samples"], seed=saved["seed"]
    )
    assert got["p"] == saved["p_value"] and got["resamples"] == saved["n_samples"]
    assert got["delta"] == pytest.approx(saved["difference"], abs=0.005)
    assert [got["low"], got["high"]] == pytest.approx(saved["interval"], abs=0.005)
    assert abs(saved["not_paired_p_value"] - saved["p_value"]) > 0.2, "the case must tell a paired test apart"
    counts_a = E.sentence_bleu_counts(saved["hyps_a"], saved["refs"])
    assert E.corpus_bleu_from_counts(counts_a.sum(0)) == pytest.approx(saved["bleu_a"], abs=1e-9)


# ---------------------------------------------------------------------------------------------- the tokenizer
