"""Figures for the report: every figure saved as PDF and PNG under a stable name."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from . import runtime

_NAME = re.compile(r"^[0-9]{2}_[a-z0-9_]+$")


def save_figure(fig, name: str, folder: str | Path | None = None) -> tuple[Path, Path]:
    """Save ``fig`` as ``<name>.pdf`` and ``<name>.png`` in ``reports/figures`` (or ``folder``).

    Names are stable so a report can include them: the notebook number, then what the figure
    shows, e.g. ``01_copying_sharpness``.
    """
    if not _NAME.match(name):
        raise ValueError(
            f"figure name {name!r} should look like '01_copying_sharpness': the notebook number, an underscore, "
            "then lower-case words joined by underscores (no extension; PDF and PNG are both written)."
        )
    out = Path(folder) if folder is not None else runtime.figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    pdf, png = out / f"{name}.pdf", out / f"{name}.png"
    fig.savefig(pdf, bbox_inches="tight")
    fig.savefig(png, bbox_inches="tight", dpi=150)
    return pdf, png


def in_live_kernel() -> bool:
    """True inside a Jupyter/Colab kernel that can show widgets; False in scripts and plain exec."""
    try:
        from IPython import get_ipython
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
            import ipywidgets as widgets

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


def save_then_explore(plot: Callable, name: str, **sliders):
    """Save ``plot(**defaults)`` for the report, then explore it with sliders.

    ``plot`` returns a figure. The figure for the default setting is always saved (PDF and PNG), so a
    report never depends on where a slider was left; a live notebook then shows sliders, while a
    headless run shows the saved figure once.
    """
    import matplotlib.pyplot as plt

    fig = plot(**{key: spec[3] for key, spec in sliders.items()})
    save_figure(fig, name)
    if not in_live_kernel():
        plt.show()
        return fig
    plt.close(fig)

    def show(**kwargs):
        plot(**kwargs)
        plt.show()

    interactive(show, **sliders)
    return fig
