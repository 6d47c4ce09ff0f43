"""Figures for the report: every figure saved as PDF and PNG under a stable name."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

from .. import runtime

_NAME = re.compile(r"^[0-9]{2}_[a-z0-9_]+$")


# Every saved figure is at least this large (inches, before bbox cropping), so it stays legible in a report.
MIN_WIDTH_IN, MIN_HEIGHT_IN = 4.5, 1.6
META_SUFFIX = ".json"  # beside each figure: title, caption, question, numbers (read by helpers.course.report)
QUICK_MARK = "QUICK MODE: small sizes, few steps. Not the full run's result."
HEADLESS = "HELPERS_HEADLESS"  # set by the headless runner and the grader: no live widgets to build


def mark_quick_mode(fig) -> bool:
    """Stamp ``QUICK_MARK`` on ``fig`` (once) when quick mode is on, so a quick figure is never taken for a result."""
    if not runtime.quick_mode() or any(t.get_text() == QUICK_MARK for t in fig.texts):
        return runtime.quick_mode()
    fig.text(
        0.995,
        0.005,
        QUICK_MARK,
        ha="right",
        va="bottom",
        fontsize=7,
        color="tab:red",
        alpha=0.9,
        bbox={"facecolor": "white", "edgecolor": "tab:red", "alpha": 0.8, "pad": 1.5},
    )
    return True


def figure_titles(fig) -> list[str]:
    """The figure's suptitle and every axes' title, in order (empty ones left out)."""
    titles = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) is not None else []
    for ax in fig.get_axes():
        titles += [t.get_text() for t in (ax.title, ax._left_title, ax._right_title)]
    return [t.strip() for t in titles if t and t.strip()]


def save_figure(
    fig,
    name: str,
    folder: str | Path | None = None,
    *,
    caption: str = "",
    question: str = "",
    numbers: dict | None = None,
) -> tuple[Path, Path]:
    """Save ``fig`` as ``<name>.pdf`` and ``<name>.png`` in ``reports/figures`` (or ``folder``).

    Names are stable so a report can include them: the notebook number, then what the figure
    shows, e.g. ``01_copying_sharpness``. ``question`` is what the figure answers, ``caption`` what it
    shows, ``numbers`` the values behind it: ``helpers.course.report.export`` puts all three in ``index.md``
    with a LaTeX snippet. A figure without a title, or smaller than ``MIN_WIDTH_IN`` x ``MIN_HEIGHT_IN``
    inches, is refused: in a report it would be unreadable or unexplained. In quick mode the figure is
    stamped ``QUICK_MARK`` (and its record says so), so a quick run's figure is never read as a result.
    """
    if not _NAME.match(name):
        raise ValueError(
            f"figure name {name!r} should look like '01_copying_sharpness': the notebook number, an underscore, "
            "then lower-case words joined by underscores (no extension; PDF and PNG are both written)."
        )
    titles = figure_titles(fig)
    if not titles:
        raise ValueError(f"figure {name!r} has no title: give it one (ax.set_title or fig.suptitle) before saving.")
    width, height = (float(x) for x in fig.get_size_inches())
    if width < MIN_WIDTH_IN or height < MIN_HEIGHT_IN:
        raise ValueError(
            f"figure {name!r} is {width:.1f} x {height:.1f} in; make it at least {MIN_WIDTH_IN} x {MIN_HEIGHT_IN} "
            "(plt.subplots(figsize=...)) so it stays readable in a report."
        )
    quick = mark_quick_mode(fig)
    out = Path(folder) if folder is not None else runtime.figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    pdf, png = out / f"{name}.pdf", out / f"{name}.png"
    fig.savefig(pdf, bbox_inches="tight")
    fig.savefig(png, bbox_inches="tight", dpi=150)
    meta = {
        "name": name,
        "title": titles[0] if len(titles) == 1 or getattr(fig, "_suptitle", None) is not None else " · ".join(titles),
        "question": question.strip(),
        "caption": caption.strip(),
        "numbers": {k: _plain(v) for k, v in (numbers or {}).items()},
        "size_inches": [round(width, 2), round(height, 2)],
        "quick_mode": quick,
    }
    (out / f"{name}{META_SUFFIX}").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return pdf, png


def _plain(value):
    """A JSON-friendly number or text (tensors and NumPy scalars become floats)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return float(f"{value:.4g}")
    return value if isinstance(value, (int, str, bool)) or value is None else str(value)


def in_live_kernel() -> bool:
    """True inside a Jupyter/Colab kernel that can show widgets; False in scripts, plain exec and headless runs."""
    if os.environ.get(HEADLESS):
        return False  # nobody will move a slider, and a widget cell can stall a headless run (jupyter/nbclient#312)
    try:
        from IPython import get_ipython  # slow start-up (0.1 s)
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def interactive(fn: Callable, **sliders):
    """Show ``fn`` with ipywidgets sliders in a live notebook; otherwise call it once with the defaults.

    Each slider is given as ``name=(min, max, step, default)``. Headless (the runner, the tests,
    a script) this draws the static plot for the defaults and raises nothing.
    """
    defaults = {}
    for key, spec in sliders.items():
        if not (isinstance(spec, tuple) and len(spec) == 4):
            raise ValueError(f"slider {key!r} must be (min, max, step, default), got {spec!r}")
        defaults[key] = spec[3]
    if in_live_kernel():
        try:
            import ipywidgets as widgets  # slow start-up (0.14 s)

            controls = {}
            for key, (lo, hi, step, value) in sliders.items():
                cls = (
                    widgets.IntSlider if all(isinstance(v, int) for v in (lo, hi, step, value)) else widgets.FloatSlider
                )
                controls[key] = cls(min=lo, max=hi, step=step, value=value, description=key, continuous_update=False)
            return widgets.interact(fn, **controls)
        except Exception as err:  # a frontend without widget support still gets the static plot
            print(f"(sliders unavailable: {err}; showing the default setting)")
    return fn(**defaults)


def text_box(show: Callable, default: str, *, live: bool | None = None, description: str = "French:", **choices):
    """A text box, a button and a drop-down per entry of ``choices`` (ipywidgets): pressing the button (or Enter)
    calls ``show(text, **chosen)`` and shows what it prints and draws below. Like the sliders of
    :func:`save_then_explore`, it comes under a static view the caller has drawn and saved for ``default``: without a
    live kernel there is nothing to type into, and it returns None. ``live=True`` builds it anyway, undisplayed
    (tests drive it through ``box.children``: the text, the drop-downs, the button, the output area)."""
    if not (in_live_kernel() if live is None else live):
        return None
    import ipywidgets as widgets  # slow start-up (0.14 s)

    # continuous_update=False: the value changes on Enter (or leaving the box), not at every key
    text = widgets.Text(value=default, description=description, continuous_update=False,
                        layout=widgets.Layout(width="70%"))  # fmt: skip
    menus = {key: widgets.Dropdown(options=values, value=values[0], description=key) for key, values in choices.items()}
    button = widgets.Button(description="Translate", button_style="primary")
    out = widgets.Output()
    shown = []  # the (text, choices) the output area shows now

    def run(_=None):
        chosen = {key: menu.value for key, menu in menus.items()}
        shown[:] = [(text.value, tuple(chosen.items()))]
        out.clear_output(wait=True)
        with out:
            _figures_drawn_apart(show, text.value, **chosen)

    def click(_=None):
        # Typing then pressing the button changes the value first (the box loses focus), which already ran it:
        # the same text and choices are not translated (and the output area cleared and redrawn) a second time.
        if shown != [(text.value, tuple((key, menu.value) for key, menu in menus.items()))]:
            run()

    button.on_click(click)
    text.observe(run, names="value")
    box = widgets.VBox([text, *menus.values(), button, out])
    if live is None:
        from IPython.display import display  # slow start-up (0.1 s)

        display(box)
    return box


def _figures_drawn_apart(show: Callable, *args, **kwargs):
    """Call ``show(*args, **kwargs)`` from a widget's callback and display each pyplot figure it opens once, drawn
    on a canvas of its own after leaving pyplot's list: at its ``plt.show()``, or when it returns (a figure left
    open would otherwise come out under the next cell run).

    Why not the inline backend's own ``plt.show()``: a callback runs between cells, and with ipykernel 7 another
    thread can run code meanwhile (JupyterLab 4.6's page had a kernel subshell). The code it runs ends with IPython's
    post-execute hooks, pyplot's ``draw_all`` among them, which draws every open figure into that figure's one
    shared Agg buffer. A figure drawn there while the inline backend turns it into a PNG came out blank or cut off
    (issue 38, notebook 03's attention picture). So, while ``show`` runs, pyplot is not interactive (no new figure is
    queued for another thread's hooks), and each figure is closed before it is drawn, on a fresh canvas."""

    import matplotlib  # slow start-up (pyplot 0.3 s)
    import matplotlib.pyplot as plt  # slow start-up (pyplot 0.3 s)
    from IPython.display import display  # slow start-up (0.1 s)

    # slow start-up (pyplot 0.3 s)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    before, owner, real_show = set(plt.get_fignums()), threading.get_ident(), plt.show

    def flush():
        for fig in [plt.figure(n) for n in plt.get_fignums() if n not in before]:
            plt.close(fig)  # out of pyplot's list: no other thread's draw_all or inline show() reaches it any more
            FigureCanvasAgg(fig)  # a buffer of its own: what another thread drew into the old one cannot leak in
            display(fig)

    def show_here(*a, **kw):
        return flush() if threading.get_ident() == owner else real_show(*a, **kw)

    was_interactive = matplotlib.is_interactive()
    matplotlib.interactive(False)
    plt.show = show_here
    try:
        return show(*args, **kwargs)
    finally:
        plt.show = real_show
        matplotlib.interactive(was_interactive)
        flush()


def save_then_explore(plot: Callable, name: str, *, caption: str = "", question: str = "", **sliders):
    """Save ``plot(**defaults)`` for the report and show it once: as a plain image, or under sliders to explore.

    ``plot`` returns a figure. The figure for the default setting is always saved (PDF and PNG). Headless (the
    runner, the tests, a script) it is shown as a plain image, so the executed notebook, GitHub's preview and a report
    never depend on widget state or on where a slider was left. In a live notebook the sliders' output area shows that
    same saved figure first (not a second drawing of it: the figure shows once in the page), and a new drawing each
    time a slider moves. A front-end that draws no widgets still shows that first figure: the output area's content
    then falls through to the cell.
    """
    import matplotlib.pyplot as plt  # slow start-up (pyplot 0.3 s)

    defaults = {key: spec[3] for key, spec in sliders.items()}
    fig = plot(**defaults)
    save_figure(fig, name, caption=caption, question=question, numbers=dict(defaults))
    if not in_live_kernel():
        plt.show()  # the static default figure
        return None  # returning the figure would make Jupyter show it a second time
    print("Explore: move the sliders (the figure for their starting setting is the one saved for the report).")
    # Closed (out of pyplot's list, still drawable): ipywidgets' interact shows every open figure in the cell
    # before its output area exists, and the inline backend would show it again when the cell ends.
    plt.close(fig)
    saved = [fig]  # shown by the first call (the sliders at their defaults), then drawn anew

    def show(**kwargs):
        if saved and saved.pop() is not None and kwargs == defaults:
            from IPython.display import display  # slow start-up (0.1 s)

            display(fig)
            return
        plot(**kwargs)
        plt.show()

    interactive(show, **sliders)
    return None
