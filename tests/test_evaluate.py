"""Translation and scoring: sacreBLEU/chrF with signatures, the copy baseline, BLEU by length, and bad input."""

from __future__ import annotations

import io
import json

import pytest

from helpers import evaluate as E
from helpers.train import train_command


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as `python -m helpers train` leaves it: 3 steps of the tiny preset on invented pairs."""
    from helpers.corpus import builtin_corpus

    folder = tmp_path_factory.mktemp("eval")
    data = folder / "pairs.tsv"
    data.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(300, seed=5, difficulty=1)), encoding="utf-8")
    train_command(str(data), None, None, 3, folder / "run", "tiny", 0, progress=False)
    return folder / "run"


@pytest.fixture(scope="module")
def run(run_dir):
    return E.load_run(run_dir, device="cpu")


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


def test_copy_baseline_scores_the_source_not_the_output():
    sources = ["Tom est là.", "Paris !", "Je mange."]
    refs = ["Tom is here.", "Paris!", "I am eating."]
    base = E.copy_baseline(sources, refs)
    assert base == E.score(sources, refs)
    assert 0 < base["chrf"] < 100  # names overlap, the rest does not
    assert E.copy_baseline(refs, refs)["bleu"] == 100.0


def test_bleu_by_length_puts_each_sentence_in_one_bucket():
    sources = ["a b", "a b c", "a b c d e f g", "a " * 40]
    refs = ["one two three four", "five six seven eight", "nine ten eleven twelve", "x y z w"]
    hyps = [refs[0], refs[1], "wrong words entirely here", "x y z w"]
    rows = E.bleu_by_length(sources, hyps, refs, buckets=(5, 10))
    assert [r["bucket"] for r in rows] == ["1-5", "6-10", ">10"]
    assert [r["n"] for r in rows] == [2, 1, 1]
    assert rows[0]["bleu"] == 100.0 and rows[1]["bleu"] == 0.0 and rows[2]["bleu"] == 100.0


def test_sample_table_is_fixed_and_aligned():
    src, ref, hyp = [f"s{i}" for i in range(30)], [f"r{i}" for i in range(30)], [f"h{i}" for i in range(30)]
    rows = E.sample_table(src, ref, hyp, n=5)
    assert rows == E.sample_table(src, ref, hyp, n=5) and len(rows) == 5
    assert all(r["source"][1:] == r["reference"][1:] == r["ours"][1:] for r in rows)
    assert "source | reference | ours" in E.format_table(rows)


def test_max_new_tokens_grows_with_the_source_and_respects_max_len():
    assert E.max_new_tokens_for(prefix_len=7, max_len=64) == 2 * 5 + 10
    assert E.max_new_tokens_for(prefix_len=30, max_len=64) == 64 - 30
    assert E.max_new_tokens_for(prefix_len=63, max_len=64) == 1


# ----------------------------------------------------------------------------------------------
# translating with a (barely trained) tiny model


def test_translate_keeps_lines_aligned_and_handles_bad_input(run):
    err = io.StringIO()
    long_line = " ".join(["chat"] * 200)
    lines = ["Je mange une pomme.", "", "   ", "日本語 ☃ 🦄 ŋ", long_line, "Il dort."]
    out = E.translate_lines(run.model, run.tokenizer, lines, err=err)
    assert len(out) == len(lines)
    assert out[1] == "" and out[2] == ""  # empty in, empty out, no model call
    assert all(isinstance(o, str) for o in out)
    text = err.getvalue()
    assert "line 5 has" in text and "1 of 6 lines were truncated" in text
    assert "line 4" not in text  # unseen characters are spelt as bytes, not an error


def test_cache_and_beams_give_valid_output(run):
    src = ["Je mange une pomme.", "Le chat dort.", "Nous sommes partis."]
    greedy = E.translate(run.model, run.tokenizer, src, beams=1)
    assert greedy == E.translate(run.model, run.tokenizer, src, beams=1, use_cache=False)
    assert greedy == E.translate(run.model, run.tokenizer, src, beams=1, batch_size=1)  # batching changes nothing
    beam = E.translate(run.model, run.tokenizer, src, beams=3)
    assert len(beam) == 3 and all(isinstance(b, str) for b in beam)


def test_translate_command_reads_stdin_and_writes_one_line_per_line(run_dir):
    stdin, stdout, stderr = io.StringIO("Bonjour.\n\nJe suis là.\n"), io.StringIO(), io.StringIO()
    n = E.translate_command(run_dir, beams=1, stdin=stdin, stdout=stdout, stderr=stderr)
    lines = stdout.getvalue().split("\n")
    assert n == 3 and len(lines) == 4 and lines[1] == "" and lines[3] == ""


def test_evaluate_command_prints_signatures_and_writes_json(run_dir, tmp_path):
    test_file = run_dir / "test.tsv"  # written by train: French<TAB>English
    out_json = tmp_path / "eval.json"
    stdout = io.StringIO()
    result = E.evaluate_command(run_dir, test_file, beams=1, out_json=out_json, stdout=stdout)
    printed = stdout.getvalue()
    assert f"BLEU = {result['bleu']:.2f}" in printed and result["bleu_signature"] in printed
    assert f"chrF = {result['chrf']:.2f}" in printed and result["chrf_signature"] in printed
    saved = json.loads(out_json.read_text())
    for key in ("bleu", "chrf", "bleu_signature", "chrf_signature", "copy_baseline", "by_length", "samples", "step"):
        assert key in saved
    pairs = E.read_test_file(test_file)
    assert saved["n"] == len(pairs) == sum(r["n"] for r in saved["by_length"])
    assert saved["copy_baseline"]["bleu"] == E.score([fr for fr, _ in pairs], [en for _, en in pairs])["bleu"]
    hyps = out_json.with_suffix(".hyp.txt").read_text().splitlines()
    assert len(hyps) == len(pairs) and saved["bleu"] == E.score(hyps, [en for _, en in pairs])["bleu"]


def test_a_malformed_test_file_names_the_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("Bonjour.\tHello.\nno tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: expected 'French<TAB>English'"):
        E.read_test_file(bad)
    with pytest.raises(FileNotFoundError, match="French<TAB>English"):
        E.read_test_file(tmp_path / "missing.tsv")


def test_a_folder_without_checkpoint_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m helpers train"):
        E.load_run(tmp_path)
