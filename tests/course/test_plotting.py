"""helpers.course.plotting: figures saved for the report (PDF, PNG and their record), the quick-mode mark, and what a
headless run or a live kernel shows (sliders, the text box).

The same functions in a real page (JupyterLab, classic Notebook) are tests/browser's (the page-free half of its checks,
in a live kernel faked here, is at the end of this file); a headless Jupyter kernel running them is
tests/notebooks/test_every_notebook.py's."""

from __future__ import annotations

import json
import types

import pytest


def _titled_figure(title: str = "A line", size=(5, 3)):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    ax.plot([0, 1], [1, 0])
    ax.set_title(title)
    return fig


def test_save_figure_writes_pdf_and_png(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from helpers.course.plotting import QUICK_MARK, save_figure

    monkeypatch.setenv("QUICK", "0")

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [1, 0])
    with pytest.raises(ValueError, match="no title"):
        save_figure(fig, "99_test_line", folder=tmp_path)
    ax.set_title("A line")
    pdf, png = save_figure(fig, "99_test_line", folder=tmp_path, caption="c", question="q?", numbers={"x": 0.123456})
    assert pdf.read_bytes()[:4] == b"%PDF" and png.read_bytes()[:4] == b"\x89PNG"
    meta = json.loads((tmp_path / "99_test_line.json").read_text())
    assert meta == {
        "name": "99_test_line",
        "title": "A line",
        "question": "q?",
        "caption": "c",
        "numbers": {"x": 0.1235},
        "size_inches": [5.0, 3.0],
        "quick_mode": False,
    }
    assert not [t for t in fig.texts if t.get_text() == QUICK_MARK], "no mark in full mode"
    monkeypatch.setenv("QUICK", "1")
    save_figure(fig, "99_test_line", folder=tmp_path, caption="c", question="q?")
    save_figure(fig, "99_test_line", folder=tmp_path, caption="c", question="q?")
    assert [t.get_text() for t in fig.texts].count(QUICK_MARK) == 1, "quick mode stamps the mark, once"
    assert json.loads((tmp_path / "99_test_line.json").read_text())["quick_mode"] is True
    with pytest.raises(ValueError, match="01_copying_sharpness"):
        save_figure(fig, "Bad Name.png", folder=tmp_path)
    fig.set_size_inches(3, 3)
    with pytest.raises(ValueError, match="at least"):
        save_figure(fig, "99_test_line", folder=tmp_path)
    plt.close(fig)


def test_the_record_holds_plain_numbers_whatever_their_type(tmp_path):
    """Tensors and NumPy scalars become numbers of 4 significant digits, text and ints stay, anything else is text:
    report.py reads the record back as JSON."""
    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    from helpers.course.plotting import save_figure

    fig = _titled_figure()
    numbers = {"tensor": torch.tensor(2 / 3), "numpy": np.float32(1234.5678), "int": np.int64(7), "count": 3,
               "text": "beam 4", "none": None, "list": [1, 2]}  # fmt: skip
    save_figure(fig, "99_numbers", folder=tmp_path, caption="c", question="q?", numbers=numbers)
    plt.close(fig)
    saved = json.loads((tmp_path / "99_numbers.json").read_text())["numbers"]
    assert saved == {"tensor": 0.6667, "numpy": 1235.0, "int": 7, "count": 3, "text": "beam 4", "none": None,
                     "list": "[1, 2]"}  # fmt: skip


def test_figure_titles_reads_the_suptitle_then_every_axes_titles_in_order():
    import matplotlib.pyplot as plt

    from helpers.course.plotting import figure_titles

    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3))
    assert figure_titles(fig) == [], "no title anywhere: nothing (save_figure then refuses the figure)"
    left.set_title("left panel", loc="left")
    right.set_title("  right panel ")
    right.set_title("its note", loc="right")
    assert figure_titles(fig) == ["left panel", "right panel", "its note"]
    fig.suptitle("The whole figure")
    assert figure_titles(fig) == ["The whole figure", "left panel", "right panel", "its note"]
    plt.close(fig)


def test_a_figure_of_several_titles_is_recorded_under_its_suptitle_or_all_of_them(tmp_path):
    import matplotlib.pyplot as plt

    from helpers.course.plotting import save_figure

    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3))
    a.set_title("loss")
    b.set_title("BLEU")
    save_figure(fig, "99_two", folder=tmp_path)
    assert json.loads((tmp_path / "99_two.json").read_text())["title"] == "loss · BLEU"
    fig.suptitle("Training")
    save_figure(fig, "99_two", folder=tmp_path)
    assert json.loads((tmp_path / "99_two.json").read_text())["title"] == "Training"
    plt.close(fig)


def test_in_live_kernel_only_with_a_kernel_and_never_headless(monkeypatch):
    import IPython

    from helpers.course import plotting

    monkeypatch.delenv(plotting.HEADLESS, raising=False)
    assert plotting.in_live_kernel() is False, "pytest has no IPython shell"
    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=None))
    assert plotting.in_live_kernel() is False, "a terminal IPython has no kernel to draw widgets"
    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=object()))
    assert plotting.in_live_kernel() is True
    monkeypatch.setenv(plotting.HEADLESS, "1")
    assert plotting.in_live_kernel() is False, "the headless runner and the grader build no widget"


def test_interactive_headless_calls_once_with_defaults():
    from helpers.course.plotting import interactive

    calls = []
    interactive(lambda beta, n: calls.append((beta, n)), beta=(0.0, 10.0, 0.5, 3.0), n=(2, 64, 1, 8))
    assert calls == [(3.0, 8)]
    with pytest.raises(ValueError, match="min, max, step, default"):
        interactive(lambda beta: None, beta=(0, 1))


def test_interactive_in_a_live_kernel_gives_int_and_float_sliders_or_falls_back_to_the_defaults(monkeypatch, capsys):
    widgets = pytest.importorskip("ipywidgets")
    from helpers.course import plotting

    monkeypatch.setattr(plotting, "in_live_kernel", lambda: True)
    built = {}
    monkeypatch.setattr(widgets, "interact", lambda fn, **controls: built.update(controls) or "the view")
    calls = []

    def draw(beta, n):
        calls.append((beta, n))

    assert plotting.interactive(draw, beta=(0.0, 10.0, 0.5, 3.0), n=(2, 64, 1, 8)) == "the view"
    assert calls == [], "the sliders call it, not interactive"
    assert type(built["beta"]) is widgets.FloatSlider and type(built["n"]) is widgets.IntSlider
    assert (built["beta"].value, built["beta"].max, built["n"].min, built["n"].value) == (3.0, 10.0, 2, 8)
    assert built["n"].continuous_update is False, "redrawn when the slider is let go, not at every pixel"

    def broken(fn, **controls):
        raise RuntimeError("no widget front-end")

    monkeypatch.setattr(widgets, "interact", broken)
    plotting.interactive(draw, beta=(0.0, 10.0, 0.5, 3.0), n=(2, 64, 1, 8))
    assert calls == [(3.0, 8)], "a front-end without widgets still gets the default plot"
    assert "sliders unavailable: no widget front-end" in capsys.readouterr().out


def test_save_then_explore_headless_saves_the_default_figure_and_shows_it_once(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from helpers.course import plotting

    monkeypatch.setenv("REPORTS_DIR", str(tmp_path))
    shows, drawn = [], []
    monkeypatch.setattr(plt, "show", lambda *a, **k: shows.append(1))

    def plot(scale=1.0, n=3):
        drawn.append((scale, n))
        return _titled_figure(f"slope {scale}")

    back = plotting.save_then_explore(plot, "99_explore", caption="a line", question="Q?", scale=(0.5, 2.0, 0.5, 1.5),
                                      n=(1, 9, 1, 4))  # fmt: skip
    assert back is None, "a returned figure would be shown a second time by Jupyter"
    assert drawn == [(1.5, 4)] and shows == [1]
    meta = json.loads((tmp_path / "figures" / "99_explore.json").read_text())
    assert meta["numbers"] == {"scale": 1.5, "n": 4} and meta["title"] == "slope 1.5"
    assert meta["question"] == "Q?" and meta["caption"] == "a line"
    assert (tmp_path / "figures" / "99_explore.pdf").is_file() and (tmp_path / "figures" / "99_explore.png").is_file()
    plt.close("all")


def test_the_text_box_is_built_only_for_a_live_kernel(monkeypatch):
    pytest.importorskip("ipywidgets")
    from helpers.course import plotting

    seen = []
    assert plotting.text_box(lambda text: seen.append(text), "Il dort.", live=False) is None
    monkeypatch.setattr(plotting, "in_live_kernel", lambda: False)
    assert plotting.text_box(lambda text: seen.append(text), "Il dort.") is None
    assert seen == [], "nothing to type into: nothing translated either (the caller drew the default already)"
    box = plotting.text_box(lambda text: seen.append(text), "Il dort.", live=True, description="Source:")
    text, button, _ = box.children
    assert text.value == "Il dort." and text.description == "Source:" and button.description == "Translate"
    assert seen == [], "built, not yet pressed"


def test_mark_quick_mode_stamps_only_in_quick_mode(monkeypatch):
    import matplotlib.pyplot as plt

    from helpers.course.plotting import QUICK_MARK, mark_quick_mode

    fig = _titled_figure()
    monkeypatch.setenv("QUICK", "0")
    assert mark_quick_mode(fig) is False and not fig.texts
    monkeypatch.setenv("QUICK", "1")
    assert mark_quick_mode(fig) is True and mark_quick_mode(fig) is True
    assert [t.get_text() for t in fig.texts] == [QUICK_MARK]
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------------
# a live kernel's side of what tests/browser checks in a real page: each explorable figure shown once, the text box
# translating once per sentence and drawing apart from another thread's pyplot hooks (no browser needed)

SENTENCE = "Je suis content."  # the sentence tests/browser types into notebook 03's text box


def test_an_explorable_figure_is_drawn_once_in_a_live_kernel(tmp_path, monkeypatch):
    """The page-free half of "each explorable figure shows once": in a live kernel save_then_explore draws the
    default figure once, saves it, and shows that figure (under the sliders) once; headless, it shows it once too."""
    pytest.importorskip("ipywidgets")
    import IPython.display
    import matplotlib.figure
    import matplotlib.pyplot as plt

    from helpers.course import plotting

    def plot(scale=1.0):
        drawn.append(scale)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([0, 1], [0, scale])
        ax.set_title(f"a line of slope {scale}")
        return fig

    def show(*args, **kwargs):
        shown.extend(plt.figure(n) for n in plt.get_fignums())
        plt.close("all")

    monkeypatch.setenv("REPORTS_DIR", str(tmp_path))
    monkeypatch.setattr(plt, "show", show)
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    open_at_interact = []

    def interactive(fn, **sliders):  # ipywidgets 8's interact first shows every open figure, outside its sliders
        open_at_interact.extend(plt.get_fignums())
        return real_interactive(fn, **sliders)

    real_interactive = plotting.interactive
    monkeypatch.setattr(plotting, "interactive", interactive)
    for live in (True, False):
        drawn, shown = [], []
        plt.close("all")
        monkeypatch.setattr(plotting, "in_live_kernel", lambda live=live: live)
        plotting.save_then_explore(plot, "99_once", question="Is it shown once?", caption="a line, " * 6,
                                   scale=(0.5, 2.0, 0.5, 1.0))  # fmt: skip
        figures = [o for o in shown if isinstance(o, matplotlib.figure.Figure)]
        assert drawn == [1.0], f"live={live}: plot called for {drawn}, once for the default expected"
        assert len(figures) == 1, f"live={live}: the default figure shown {len(figures)} times"
        assert (tmp_path / "figures" / "99_once.png").exists() and (tmp_path / "figures" / "99_once.pdf").exists()
        assert not plt.get_fignums(), "no figure left open for the inline backend to show again"
    assert not open_at_interact, "a figure left open when the sliders are built is shown outside them"


def test_the_text_box_translates_a_typed_sentence_once():
    """Typing then pressing the button changes the text (the box loses focus) and clicks: one translation, not two
    (the second would clear the first's picture and draw it again: the page flickers and a reader sees it vanish)."""
    pytest.importorskip("ipywidgets")
    from helpers.course.plotting import text_box

    seen = []
    box = text_box(lambda text, layer: seen.append((text, layer)), "Il dort.", live=True, layer=[1, 0])
    text, layer, button, _ = box.children
    button.click()
    button.click()
    assert seen == [("Il dort.", 1)], "the default once by the button, not again for the same text and layer"
    text.value = SENTENCE
    button.click()
    assert seen[1:] == [(SENTENCE, 1)], "typed, then the button: translated once"
    layer.value = 0
    button.click()
    assert seen[2:] == [(SENTENCE, 0)], "a new choice in a drop-down: the button translates again"


def test_the_text_box_draws_its_figures_apart_from_another_threads_hooks(monkeypatch):
    """The cause of the blank attention picture in Lab (ipykernel 7, 2026-11-26): while the box's callback ran, a
    kernel subshell's thread ran pyplot's post-execute hook (``draw_all`` of every open figure, in interactive mode)
    into the same Agg buffer the inline backend was turning into a PNG. Here a thread runs that hook in a loop while
    the box draws: each figure the callback opens is shown once, from its ``plt.show()`` or (left open) when it
    returns, closed, and its PNG (rendered as the inline backend's formatter does) has ink in every third."""
    pytest.importorskip("ipywidgets")
    import io
    import threading

    import IPython.display
    import matplotlib
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    from helpers.course.plotting import text_box

    def ink_by_third(fig) -> list[float]:
        buf = io.BytesIO()
        fig.canvas.print_figure(buf, format="png", bbox_inches="tight")
        a = np.asarray(Image.open(buf).convert("RGBA")).astype(int)
        drawn = (a[..., 3] >= 128) & (a[..., :3].min(-1) < 235)
        return [float(band.mean()) for band in np.array_split(drawn, 3, axis=0)]

    def show(text, calls_show=True):
        fig, ax = plt.subplots(figsize=(6, 4.8))
        ax.imshow(np.random.default_rng(len(text)).random((11, 11)), cmap="Blues", vmin=0, aspect="auto")
        ax.set_title(f"“{text}”")
        fig.tight_layout()
        if calls_show:
            plt.show()
        return fig

    shown = []
    monkeypatch.setattr(
        IPython.display, "display", lambda *objs, **kw: shown.extend((o, ink_by_third(o)) for o in objs)
    )
    monkeypatch.setitem(matplotlib.rcParams, "interactive", matplotlib.is_interactive())  # restored after the test
    plt.close("all")
    matplotlib.interactive(True)  # as in a kernel with the inline backend
    stop = threading.Event()

    def hooks():  # pyplot's post-execute hook, as another thread's cells would run it
        while not stop.is_set():
            if matplotlib.is_interactive():
                plt.draw_all()
            stop.wait(0.001)

    other = threading.Thread(target=hooks, daemon=True)
    other.start()
    real_show = plt.show
    try:
        box = text_box(show, "Il dort.", live=True, calls_show=[True, False])
        text, calls_show, button, _ = box.children
        for i in range(6):
            calls_show.value = bool(i % 2 == 0)
            text.value = f"Je suis content, {i}."
    finally:
        stop.set()
        other.join(10)
    assert matplotlib.is_interactive(), "interactive mode back as it was"
    assert plt.show is real_show, "plt.show given back"
    assert len(shown) == 6, f"each drawing shown once, from plt.show() or at the callback's end: {len(shown)} shown"
    assert not plt.get_fignums(), "every figure closed: no other thread's hook or inline show() reaches it"
    thin = [(i, [f"{t:.1%}" for t in thirds]) for i, (_, thirds) in enumerate(shown) if min(thirds) < 0.05]
    assert not thin, f"figures drawn blank or cut off while another thread drew: {thin}"
