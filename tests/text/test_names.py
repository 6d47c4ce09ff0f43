"""helpers.text.names: made-up names in the training pairs that share one. Every sentence is invented for these tests."""

from __future__ import annotations

import re

import pytest

from helpers.text import data as D
from helpers.text.names import NAME, shared_names, swap_names
from helpers.text.sources import LoadReport
from helpers.text.tokenizer import Tokenizer
from helpers.training import config as C

PAIRS = [
    ("Tom et Mary vont à Boston.", "Tom and Mary go to Boston."),
    ("C'est le livre de Tom.", "It's Tom's book."),
    ("Je lis.", "I read."),  # no name
    ("Oh, Paris est loin.", "Oh, it is far away."),  # Paris on one side only, Oh too short: nothing shared
]


def test_a_swapped_pair_keeps_its_text_and_writes_one_made_up_name_on_both_sides():
    out, report = swap_names(PAIRS, share=1.0, seed=0)
    fr, en = out[0]
    french = re.fullmatch(r"(\w+) et (\w+) vont à (\w+)\.", fr)
    english = re.fullmatch(r"(\w+) and (\w+) go to (\w+)\.", en)
    assert french and english, (fr, en)
    assert french.groups() == english.groups()  # each name replaced by the same made-up one on both sides
    assert len(set(french.groups())) == 3 and not {"Tom", "Mary", "Boston"} & set(french.groups())
    assert all(NAME.fullmatch(name) for name in french.groups())  # a name again: capitalised, three letters or more
    book_fr, book_en = out[1]
    new = book_fr.removeprefix("C'est le livre de ").removesuffix(".")
    assert book_en == f"It's {new}'s book." and new != "Tom"  # "Tom's" is Tom followed by 's
    assert out[2:] == PAIRS[2:]  # pairs without a shared name as they were
    assert (report.pairs, report.with_names, report.swapped) == (4, 2, 2)
    assert "2 of the 2 training pairs that share a name" in report.describe()


def test_share_zero_changes_nothing():
    out, report = swap_names(PAIRS, share=0, seed=0)
    assert out == PAIRS and report.swapped == 0 and report.with_names == 2
    assert report.describe().startswith("made-up names: none")


def test_shared_names_are_capitalised_words_written_the_same_on_both_sides():
    assert shared_names(*PAIRS[0]) == ["Tom", "Mary", "Boston"]
    assert shared_names(*PAIRS[3]) == []  # Paris on one side only; Oh has two letters
    assert shared_names("Je vois Élodie.", "I see Élodie.") == ["Élodie"]


def test_the_share_is_kept_and_the_choice_follows_the_seed():
    pairs = [(f"Tom voit le numéro {i}.", f"Tom sees number {i}.") for i in range(2000)]
    out, report = swap_names(pairs, share=0.5, seed=0)
    changed = [a != b for a, b in zip(out, pairs)]
    assert report.swapped == sum(changed) and 900 < report.swapped < 1100
    again, _ = swap_names(pairs, share=0.5, seed=0)
    other, _ = swap_names(pairs, share=0.5, seed=1)
    assert again == out != other
    assert len({fr.split()[0] for fr, _ in out if not fr.startswith("Tom")}) > 500  # many names, not a few


@pytest.mark.parametrize("share", [-0.1, 1.5, True, "half"])
def test_a_share_outside_zero_to_one_is_refused_with_what_to_give(share):
    with pytest.raises(ValueError, match=r"name_swap must be a share"):
        swap_names(PAIRS, share=share)
    with pytest.raises(ValueError, match=r"name_swap must be a share"):
        C.TrainConfig(name_swap=share)


def test_batches_for_swaps_names_in_the_training_pairs_only(tmp_path):
    pairs = [(f"Tom lit le livre {i}.", f"Tom reads book {i}.") for i in range(300)]
    pairs += [(f"Je vois le chat {i}.", f"I see cat {i}.") for i in range(300)]
    splits = D.split_pairs(pairs, seed=0)
    tokenizer = Tokenizer.train(splits.train, vocab_size=300, out_dir=tmp_path)
    common = dict(max_len=48, max_tokens=600, valid_sentences=200, seed=0)
    plain, valid, reports = D.batches_for(tokenizer, splits, **common)
    swapped, valid_swapped, swapped_reports = D.batches_for(tokenizer, splits, **common, name_swap=1.0)
    texts = {tokenizer.decode(e.input_ids) for e in swapped.examples}
    assert not any("Tom" in t for t in texts) and any("Tom" in tokenizer.decode(e.input_ids) for e in plain.examples)
    assert [b.input_ids.tolist() for b in valid_swapped] == [b.input_ids.tolist() for b in valid]  # not validation
    assert reports["names"].swapped == 0 and swapped_reports["names"].swapped == swapped_reports["names"].with_names
    summary = D.data_summary({"load": LoadReport(source="test"), **swapped_reports})
    assert "made-up names:" in D.format_data_summary(summary)
    unchanged = D.data_summary({"load": LoadReport(source="test"), **reports})
    assert "made_up_names" not in unchanged  # nothing changed: no line
