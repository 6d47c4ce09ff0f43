"""helpers.scratch_run: notebooks 04 and 07 find notebook 03's record, its data and its model, and say when they use
a stand-in instead. Records are written here by hand in the layout notebook 03 writes; the one run trained is the
tiny preset for a few steps on the built-in corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import commands, runtime, scratch_run


@pytest.fixture
def places(tmp_path, monkeypatch):
    """An empty metrics folder and no checkout, so that no real run of notebook 03 is found."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    monkeypatch.setattr(runtime, "metrics_dir", lambda: metrics)
    monkeypatch.setattr(runtime, "repo_root", lambda: None)
    return metrics


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("scratch") / "03_scratch-tiny"
    commands.train_command("builtin", steps=3, out=out, preset="tiny", limit=300, progress=False, dev_score=False)
    return out


def record(checkpoint: Path, *, quick=True, source="builtin", limit=300, seed=3) -> dict:
    """A record in notebook 03's layout (evaluate.metrics_record), with what scratch_run reads."""
    return {
        "quick": quick,
        "data": {"source": source, "limit": limit, "columns": None, "pairs": {}},
        "model": {"checkpoint": str(checkpoint)},
        "training": {
            "steps": 3,
            "minutes": 0.1,
            "tokens": 123,
            "tokens_per_s": 9.0,
            "preset": "tiny",
            "config": {"seed": seed, "minutes": None},
        },
        "evaluations": [],
    }


def write(folder: Path, rec: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / scratch_run.RECORD
    path.write_text(json.dumps(rec))
    return path


def test_the_record_of_this_mode_gives_notebook_03s_data_and_seed(places, trained):
    write(places, record(trained, limit=300, seed=3))
    found = scratch_run.find_scratch_data(quick=True, seed=0)
    assert (found.data, found.limit, found.seed) == ("builtin", 300, 3)
    assert found.record is not None and found.note.startswith("notebook 03's data: builtin (limit 300, seed 3)")


def test_a_record_of_the_other_mode_is_not_used_and_the_note_says_so(places, trained):
    write(places, record(trained, quick=False, limit=300, seed=3))
    found = scratch_run.find_scratch_data(quick=True, seed=0)
    assert (found.data, found.limit, found.seed, found.record) == ("builtin", 6000, 0, None)
    assert "of another mode" in found.note and str(places) in found.note


def test_without_a_record_the_defaults_are_used_and_the_note_says_where_it_looked(places):
    found = scratch_run.find_scratch_data(quick=True, seed=5)
    assert (found.data, found.limit, found.seed, found.record) == ("builtin", 6000, 5, None)
    assert "(none)" in found.note and str(places) in found.note


def test_on_colab_the_record_beside_the_checkpoint_in_drive_is_found(places, trained, tmp_path):
    drive = tmp_path / "drive"
    write(drive / "runs" / "03_scratch-cpu", record(trained, seed=4))
    assert scratch_run.find_scratch_data(quick=True, seed=0, drive=drive).seed == 4
    assert scratch_run.find_scratch_data(quick=True, seed=0).record is None  # without Drive it is not there
    write(places, record(trained, quick=False, seed=5))  # a full run's record first in line: passed over
    assert scratch_run.find_scratch_data(quick=True, seed=0, drive=drive).seed == 4


def test_the_checkpoint_the_record_names_is_the_model(places, trained):
    write(places, record(trained))
    found = scratch_run.find_scratch_data(quick=True, seed=0)
    model = scratch_run.find_scratch_model(found, "cpu", quick=True, progress=False)
    assert not model.stand_in and model.run.path == trained and model.run.step == 3
    assert (model.minutes, model.tokens) == (0.1, 123) and "notebook 03's model" in model.note


def test_a_missing_checkpoint_gets_a_stand_in_trained_on_the_same_data_and_labelled(places, tmp_path, monkeypatch):
    write(places, record(tmp_path / "gone", limit=300, seed=3))
    calls = []

    def short(data, **kwargs):  # the stand-in's own call, cut to a few steps
        calls.append((data, kwargs))
        return commands.train_command(data, **{**kwargs, "steps": 2, "dev_score": False})

    monkeypatch.setattr(scratch_run, "train_command", short)
    found = scratch_run.find_scratch_data(quick=True, seed=0)
    model = scratch_run.find_scratch_model(found, "cpu", quick=True, progress=False)
    ((data, kwargs),) = calls
    assert data == "builtin" and (kwargs["limit"], kwargs["seed"], kwargs["preset"]) == (300, 3, "tiny")
    assert model.stand_in and model.run.step == 2 and model.training["steps"] == 2
    assert "is missing" in model.note and str(tmp_path / "gone") in model.note
