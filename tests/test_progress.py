"""Progress of long work: a live bar in a terminal or a notebook, whole lines at intervals in a log file."""

from __future__ import annotations

import io

import torch
from tqdm import tqdm

from helpers import progress
from helpers.nn import build_model
from helpers.training import config as C
from helpers.training import train as T
from tests.training.test_train import toy_batcher


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self):
        return self.now


def test_a_log_gets_a_line_per_interval_and_a_last_one_never_a_carriage_return():
    out = io.StringIO()
    bar = progress.progress_bar(total=100, desc="train", unit="step", file=out, interval=30)
    assert isinstance(bar, progress.LogLines)
    bar._time = clock = Clock(bar.start_t)  # tqdm's own clock, from the bar's start
    for step in range(1, 96):  # a step a second, the caller redrawing at every one, as train does every 5
        clock.now += 1.0
        bar.n = step
        bar.set_postfix_str(f"step {step} loss 2.5", refresh=False)
        bar.refresh()
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    # the first line at the start, then one at 30, 60 and 90 seconds, and the last figures at the end
    assert len(lines) == 5, lines
    assert [line.split("step ")[-1] for line in lines[1:]] == [
        "30 loss 2.5",
        "60 loss 2.5",
        "90 loss 2.5",
        "95 loss 2.5",
    ]
    assert all(line.startswith("train:") and "|" not in line for line in lines)  # figures, no bar drawing
    # control: tqdm's own bar in the same file is carriage-return redraws on a single line
    plain = io.StringIO()
    with tqdm(total=3, file=plain, mininterval=0) as own:
        own.update(3)
    assert "\r" in plain.getvalue() and plain.getvalue().count("\n") == 1


def test_a_terminal_and_a_notebook_keep_the_live_bar_and_anything_else_gets_lines():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    notebook_stream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})()
    assert progress.is_live(Terminal()) and progress.is_live(notebook_stream)
    assert not progress.is_live(io.StringIO())
    closed = io.StringIO()
    closed.close()
    assert not progress.is_live(closed)
    with progress.progress_bar(total=2, file=Terminal()) as live:
        assert not isinstance(live, progress.LogLines)
    with progress.progress_bar(total=2, file=io.StringIO()) as logged:
        assert isinstance(logged, progress.LogLines)


def test_training_with_its_output_in_a_file_writes_readable_lines(monkeypatch):
    """What `train ... 2> train.log` leaves: a line per interval with the step, the loss, the speed and the time left."""
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)  # every redraw a line: train redraws every 5 steps
    torch.manual_seed(0)
    cfg = C.preset_config("tiny", steps=20, eval_interval=100)
    model = build_model(cfg.model_config(60))
    T.train(model, toy_batcher(), None, cfg, None, progress=True)
    text = err.getvalue()
    assert "\r" not in text
    lines = [line for line in text.splitlines() if line.startswith("train:")]
    assert len(lines) == 7, text  # the start; the redraws at steps 1, 5, 10, 15 and 20; the end
    last = lines[-1]
    for figure in ("step 20", "loss", "target tok/s", "left"):
        assert figure in last, last


def test_a_run_shorter_than_the_interval_still_ends_with_its_figures():
    out = io.StringIO()
    bar = progress.progress_bar(total=10, desc="x", file=out, interval=30.0)
    bar.update(10)
    bar.close()
    bar.close()  # twice: nothing more
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "10/10" in lines[-1]


def test_the_other_bars_of_the_course_read_well_as_lines():
    # fine-tune's time bar: its postfix follows the percentage directly; translating: an iterable bar that leaves no
    # bar behind (leave=False) still ends with a line; a count without a total shows no made-up percentage
    out = io.StringIO()
    bar = progress.progress_bar(
        total=60, desc="fine-tune", file=out, bar_format="{desc} {percentage:3.0f}%|{bar}|{postfix}"
    )
    bar.n = 6
    bar.set_postfix_str("step 12, loss 1.9", refresh=False)
    bar.close()
    assert out.getvalue().splitlines()[-1] == "fine-tune  10%, step 12, loss 1.9"
    out = io.StringIO()
    assert list(progress.progress_bar(iterable=range(3), desc="translating", file=out, leave=False)) == [0, 1, 2]
    assert out.getvalue().splitlines()[-1].startswith("translating: 100% 3/3")
    out = io.StringIO()
    with progress.progress_bar(desc="pairs", file=out) as counted:
        counted.update(37)
    assert out.getvalue().splitlines()[-1].startswith("pairs: 37 [") and "%" not in out.getvalue()
    with progress.progress_bar(total=3, file=out, disable=True) as off:
        off.update(3)
    assert out.getvalue().count("\n") == 2  # a disabled bar writes nothing
