"""helpers.run_folder: every path a run writes, named once; no other module spells one of those names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import run_folder
from helpers.run_folder import IN_DISTRIBUTION, NEW_SENTENCES, RunFolder, hypotheses_beside

ROOT = Path(__file__).resolve().parents[1]

# the names today's run folders hold, spelled out: a rename here breaks every run folder already on a Drive
EXPECTED = {
    "checkpoint": "checkpoint.pt",
    "checkpoint_info": "checkpoint.json",
    "tokenizer": "tokenizer",
    "pretrain": "pretrain",
    "train_summary": "train_summary.json",
    "dev_hypotheses": "eval_dev.greedy.hyp.txt",
    "words": "train_words.tsv",
    "eval_record": "eval.json",
    "curves": "size_curves.json",
    "finetune_info": "finetune.json",
    "hf_checkpoint": "checkpoint",
    "trainer": "trainer",
}


@pytest.mark.parametrize("prop, name", EXPECTED.items())
def test_each_path_has_the_name_existing_run_folders_hold(tmp_path, prop, name):
    assert getattr(RunFolder(tmp_path), prop) == tmp_path / name
    assert getattr(RunFolder(str(tmp_path)), prop) == tmp_path / name  # a str is taken as a path


def test_every_path_property_is_checked_above():
    """A property added to RunFolder without a literal name in EXPECTED would escape the rename check."""
    props = {n for n, v in vars(RunFolder).items() if isinstance(v, property)} - {"test_sets"}
    assert props == set(EXPECTED)


def test_the_test_sets_come_new_sentences_first_with_todays_files(tmp_path):
    assert RunFolder(tmp_path).test_sets == {
        NEW_SENTENCES: tmp_path / "test_new.tsv",
        IN_DISTRIBUTION: tmp_path / "test.tsv",
    }
    assert list(RunFolder(tmp_path).test_sets) == [NEW_SENTENCES, IN_DISTRIBUTION]  # evaluate's order


def test_the_tokenizer_folder_and_trainer_state_keep_their_names():
    assert (run_folder.TOKENIZER_MODEL, run_folder.TOKENIZER_META) == ("spm.model", "tokenizer.json")
    assert run_folder.TRAINER_STATE == "trainer_state.json"  # Trainer's own name: a different one finds no checkpoint


def test_hypotheses_go_beside_their_record_named_after_the_test_set(tmp_path):
    record = tmp_path / "eval.json"
    assert hypotheses_beside(record, tmp_path / "test_new.tsv") == tmp_path / "eval.test_new.hyp.txt"
    assert hypotheses_beside(tmp_path / "own.json", "elsewhere/t.tsv") == tmp_path / "own.t.hyp.txt"
    assert hypotheses_beside(str(record), "tatoeba-test") == tmp_path / "eval.tatoeba-test.hyp.txt"  # a public set


def test_a_run_folder_is_a_value():
    assert RunFolder("a") == RunFolder(Path("a")) and hash(RunFolder("a")) == hash(RunFolder(Path("a")))
    with pytest.raises(AttributeError):
        RunFolder("a").path = Path("b")  # frozen: one folder, one set of paths


# ----------------------------------------------------------------------------------------------
# nobody else spells a run folder's name


def run_folder_names() -> set[str]:
    """Every file and folder name run_folder.py defines (its upper-case string constants and the test-set files)."""
    names = {v for k, v in vars(run_folder).items() if k.isupper() and isinstance(v, str)}
    names -= {NEW_SENTENCES, IN_DISTRIBUTION, run_folder.HYPOTHESES_SUFFIX}  # labels and a suffix, not names
    return names | set(run_folder.TEST_FILES.values())


def spelled_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, text) of each string in ``source`` that spells one of ``names`` as a path would, or that ends with the
    hypotheses' suffix. A bare word (``tokenizer``, ``checkpoint``) is also a JSON key or a config field: it counts
    only where a path is built from it (beside ``/``, passed to a call, assigned); a dotted file name counts anywhere.
    """
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text, parent = node.value, parents.get(node)
        if text.endswith(run_folder.HYPOTHESES_SUFFIX) or (text in names and "." in text):
            found.append((node.lineno, text))
        elif text in names:
            as_path = isinstance(parent, ast.BinOp | ast.Assign | ast.AnnAssign) or (
                isinstance(parent, ast.Call) and node in parent.args
            )
            if as_path:
                found.append((node.lineno, text))
    return found


def test_no_other_module_spells_a_run_folder_name():
    names = run_folder_names()
    assert {"checkpoint.pt", "tokenizer", "test.tsv", "finetune.json", "trainer"} <= names  # the scan looks for them
    spelled = {}
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        if path.name != "run_folder.py":
            hits = spelled_names(path.read_text(encoding="utf-8"), names)
            if hits:
                spelled[str(path.relative_to(ROOT))] = hits
    assert not spelled, f"use helpers.run_folder.RunFolder instead of spelling its names: {spelled}"


@pytest.mark.parametrize(
    "planted",
    [
        'out = Path(out_dir) / "checkpoint.pt"',
        'NAME = "train_summary.json"',
        'x = {"tests": ("test.tsv",)}',
        'p = folder / "tokenizer"',
        'p = Path(out, "trainer")',
        'FOLDER = "pretrain"',
        'p = out.with_name(f"{out.stem}.{stem}.hyp.txt")',
    ],
)
def test_the_scan_finds_a_planted_name(planted):
    assert spelled_names(planted, run_folder_names()), planted


@pytest.mark.parametrize(
    "innocent",
    [
        'info["tokenizer"] = {"vocab_size": 1}',  # a JSON key
        'record = {"checkpoint": str(path)}',
        'FIELDS = ("pretrain", "dropout")',  # a config field
        'p = out / "checkpoint.ptx"',
    ],
)
def test_the_scan_leaves_record_keys_and_config_fields_alone(innocent):
    assert spelled_names(innocent, run_folder_names()) == []
