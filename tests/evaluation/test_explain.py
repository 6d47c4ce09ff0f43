"""Issue 30: your own sentences. `explain_translation` (pieces, candidates, unseen words, the cut, attention), the
terminal prompt of `translate` (through a pseudo-terminal) and bad input. Each check names the mistake it catches."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers.evaluation.explain import explain_translation
from helpers.evaluation.translation import ScratchTranslator, translate
from helpers.nn import build_model
from helpers.text.corpus import builtin_corpus
from helpers.text.encoding import max_source_tokens
from helpers.text.testsets import WordTable
from helpers.text.tokenizer import Tokenizer
from helpers.training.config import preset_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny():
    pairs = builtin_corpus(400, seed=3, difficulty=2)
    tok = Tokenizer.train(pairs, vocab_size=500)
    torch.manual_seed(0)
    model = build_model(preset_config("tiny").model_config(tok.vocab_size)).eval()
    return model, tok, WordTable.from_pairs(pairs), pairs


def test_explanation_pieces_candidates_and_attention(tiny):
    model, tok, words, pairs = tiny
    text = pairs[0][0]
    e = explain_translation(model, tok, text, beams=3, word_table=words)
    assert e.pieces == tok.pieces(text)  # what the model read, piece by piece
    assert e.translation == translate(model, tok, [text], beams=3)[0]  # the same answer as translate and evaluate
    scores = [a["score"] for a in e.alternatives]
    assert len(e.alternatives) == 3 and scores == sorted(scores, reverse=True)  # unsorted candidates fail here
    assert e.alternatives[0]["text"] == e.translation
    # the log-probability is the model's, token by token: a candidate scored without its <eos>, or a score not
    # divided by its length, fails here
    ids = [tok.bos_id, *tok.encode(text), tok.sep_id]
    best = e.alternatives[0]["tokens"]
    assert tok.decode(best) == e.translation
    seq = torch.tensor([ids + best + [tok.eos_id]])
    with torch.no_grad():
        logp = torch.log_softmax(model(seq, torch.tensor([len(ids)]))[0].float(), -1)
    want = float(sum(logp[len(ids) - 1 + k, t] for k, t in enumerate(best + [tok.eos_id])))
    assert e.alternatives[0]["logprob"] == pytest.approx(want, abs=1e-3)
    assert e.alternatives[0]["score"] == pytest.approx(want / (len(best) + 1), abs=1e-4)
    # attention: one array per layer, (heads, output pieces incl. <eos>, source pieces); a map taken from the wrong
    # rows (the source's own) or columns (with <bos>/<sep>) has the wrong shape or does not match attention_maps
    cfg = model.config
    assert len(e.attention) == cfg.n_layer and e.output_pieces[-1] == "<eos>"
    assert all(a.shape == (cfg.n_head, len(e.output_pieces), len(e.pieces)) for a in e.attention)
    with torch.no_grad():
        full = model.attention_maps(seq, torch.tensor([len(ids)]))
    expected = full[-1][0, :, len(ids) - 1 : -1, 1 : len(ids) - 1]  # output rows, source columns
    assert torch.allclose(torch.from_numpy(e.attention[-1]), expected, atol=1e-5)
    assert (torch.from_numpy(e.attention[0]).sum(-1) <= 1 + 1e-5).all() and e.seconds > 0


def test_unseen_words_are_flagged_against_the_training_pairs(tiny):
    # flagging by the tokenizer (every word has pieces) or by case ("Sophie" vs "sophie") fails here
    model, tok, words, pairs = tiny
    known = pairs[0][0].rstrip(".")
    e = explain_translation(model, tok, f"{known} zorglub.", beams=1, word_table=words)
    assert e.unseen == ["zorglub"] and all(not new for w, new in e.words if w != "zorglub")
    # the pieces that spell it, and only those (matching pieces by substring would also flag an "s" or an "o")
    assert "".join(p for p, new in zip(e.pieces, e.piece_unseen) if new).replace("▁", "") == "zorglub"
    assert "unseen in training: zorglub" in e.to_text()
    assert explain_translation(model, tok, known, beams=1).unseen == []  # no table: nothing claimed


def test_a_long_source_says_where_it_was_cut_and_is_still_translated_whole(tiny):
    model, tok, words, pairs = tiny
    text = " ".join(fr for fr, _ in pairs[:10])
    keep = max_source_tokens(model.config.max_len)
    e = explain_translation(model, tok, text, beams=2, word_table=words)
    assert e.cut["tokens"] == len(tok.encode(text)) > keep and e.cut["kept"] == len(e.pieces) == keep
    assert e.cut["after"] in tok.decode(tok.encode(text)[:keep]).lower()  # a word the model read whole
    assert e.translation == translate(model, tok, [text], beams=2)[0]  # translated in pieces, nothing dropped
    assert "cut:" in e.to_text()
    assert explain_translation(model, tok, pairs[0][0], beams=1).cut is None


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "an empty line"),
        ("   \t", "an empty line"),
        ("😀🎉", "no French word"),
        ("<b>Bonjour</b> &amp; merci", "markup"),
        ("Привет мир", "is it French"),
        ("Where is the zzkx qwv?", "is it French"),
    ],
)
def test_bad_input_gets_an_answer_not_a_traceback(tiny, text, says):
    model, tok, words, _ = tiny
    e = explain_translation(model, tok, text, beams=2, word_table=words)
    assert says in e.note and isinstance(e.to_text(), str)


def _train_tiny(tmp_path) -> Path:
    from helpers.commands import train_command

    out = tmp_path / "run"
    train_command("builtin", steps=30, out=out, preset="tiny", limit=2000, progress=False, stderr=io.StringIO())
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return _train_tiny(tmp_path_factory.mktemp("explain"))


def test_translate_explain_from_a_pipe(run_dir):
    from helpers.commands import translate_command

    out = io.StringIO()
    n = translate_command(run_dir, stdin=io.StringIO("Il dort.\n\n"), stdout=out, stderr=io.StringIO(), explain=True)
    text = out.getvalue()
    assert n == 2 and "unseen in training" in text and "an empty line" in text and "log-prob" in text


def test_the_prompt_answers_each_line_and_hints_on_an_empty_one(run_dir):
    from helpers.commands import translate_command

    out = io.StringIO()
    n = translate_command(run_dir, stdin=io.StringIO("Il dort.\n\nElle mange.\n"), stdout=out, stderr=io.StringIO(),
                          interactive=True)  # fmt: skip
    text = out.getvalue()
    assert n == 2 and text.count("en> ") == 2 and text.count("fr> ") == 4 and "an empty line" in text


def _read_until(fd, marker: bytes, seconds: float = 60) -> bytes:
    got, end = b"", time.monotonic() + seconds
    while marker not in got and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                got += os.read(fd, 4096)
            except OSError:
                break
    return got


@pytest.mark.training
def test_the_terminal_prompt_through_a_pseudo_terminal(run_dir):
    """A real terminal on stdin: a prompt, two sentences in, two translations out, Ctrl-D leaves with status 0."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "helpers", "translate", "--checkpoint", str(run_dir)], cwd=ROOT,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)  # fmt: skip
    os.close(slave)
    try:
        assert b"Ctrl-D" in _read_until(master, b"fr> ")  # the prompt says how to leave
        answers = []
        for sentence in (b"Il dort.\n", b"Elle mange une pomme.\n"):
            os.write(master, sentence)
            answers.append(_read_until(master, b"fr> "))
        assert all(b"en> " in a for a in answers)
        os.write(master, b"\x04")  # Ctrl-D
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_side_by_side_gives_each_model_its_own_translation_and_time(tiny):
    # every row translated by the first model, or a blank line sent to the models, fails here
    from helpers.evaluation.explain import draw_side_by_side, side_by_side

    model, tok, _, pairs = tiny
    torch.manual_seed(1)
    other = build_model(preset_config("tiny").model_config(tok.vocab_size)).eval()
    with torch.no_grad():  # far from the init: two untrained rotary models of GPT's init both end at once
        for p in other.parameters():
            p.normal_(0.0, 0.3)
    text = pairs[1][0]
    rows = side_by_side({"a": ScratchTranslator(model, tok), "b": ScratchTranslator(other, tok)}, text, beams=1)
    assert [r["model"] for r in rows] == ["a", "b"] and all(r["seconds"] > 0 for r in rows)
    assert [r["translation"] for r in rows] == [translate(m, tok, [text])[0] for m in (model, other)]
    assert rows[0]["translation"] != rows[1]["translation"]
    assert [r["translation"] for r in side_by_side({"a": ScratchTranslator(model, tok)}, "  ")] == [""]
    assert draw_side_by_side(text, rows).axes
