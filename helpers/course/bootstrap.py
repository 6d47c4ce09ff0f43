"""The first cell's installer: how a notebook gets the course package on Colab, and what it says when it cannot.

The package is not importable before it is installed, so every notebook's first cell carries a verbatim copy of
:func:`ensure_course`, kept short enough to read at a glance: already installed, not on Colab, else pip from the
copy in Drive and then the pinned release, or a message naming both ways out. Right after it, the cell imports this
module from the package it just installed and calls :func:`after_install`, which says what pip replaced and stops
with a restart notice when this session had loaded it. (``tests/course/test_bootstrap.py`` checks each notebook's
copy against this one and runs both for real against a local git repository and an unreachable address.)
Standard library only: this module is imported before anything else of the package, so that the packages pip may
have replaced are not loaded by the check itself.
"""

import importlib
import importlib.metadata as metadata
import re


def ensure_course(pinned, drive_copy, version, *, install=None, pip_args=()):
    """Install the course package unless it is here; return where it came from and what the runtime had before."""
    import importlib.metadata
    import importlib.util
    import os
    import subprocess
    import sys

    class CourseSetupError(RuntimeError):
        def _render_traceback_(self):  # Jupyter shows these lines instead of a traceback
            return ["Course set-up failed.", *str(self).splitlines()]

    if any(d.version == version for d in importlib.metadata.distributions(name="transformers-by-building")):
        return "already installed", None
    kaggle = "KAGGLE_KERNEL_RUN_TYPE" in os.environ  # a Kaggle notebook: no Drive, and its internet may be off
    if not ("google.colab" in sys.modules or kaggle if install is None else install):
        if importlib.util.find_spec("helpers") is None:  # a checkout that this kernel's Python cannot import
            raise CourseSetupError("This kernel can't import the course: pip install -e . in its folder, then restart.")
        return "this checkout (not on Colab or Kaggle)", None
    # what the runtime had and had loaded, so that after_install can say what pip replaced (pip runs apart)
    before = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()}, set(sys.modules)
    sources, tried = [("the pinned release", pinned)], []
    if not kaggle and (os.path.isdir(drive_copy) or str(drive_copy).endswith(".zip") and os.path.isfile(drive_copy)):
        sources.insert(0, ("the copy in Drive", drive_copy))
    for label, target in sources:
        print(f"Installing the course package from {label}: {target}", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--upgrade-strategy", "only-if-needed", *pip_args, target]
        done = subprocess.run(pip, capture_output=True, text=True, encoding="utf-8", errors="replace")
        if done.returncode == 0:
            importlib.invalidate_caches()  # so that the import right after this finds the new package
            return label, before
        why = (done.stderr or done.stdout).strip().splitlines() or ["pip failed"]  # pip's last line says why
        tried.append(f"  - {label}: {why[-1].strip()}")
    first = "Turn Internet on in Session options (the right-hand panel)" if kaggle else "Check this runtime's internet"
    raise CourseSetupError(
        "The course package could not be installed. Tried:\n" + "\n".join(tried) + "\nTwo ways out:\n"
        f"  1. {first}, then run this cell again.\n"
        f"  2. Put the course repository (its folder, or the .zip GitHub gives you) in Google Drive at {drive_copy},\n"
        "     mount Drive (Files panel > Mount Drive), then run this cell again (on Colab)."
    )


class CourseSetupError(RuntimeError):
    """A set-up failure a learner can act on: Jupyter shows its lines (no traceback), as for the cell's own."""

    def _render_traceback_(self):
        return ["Course set-up failed.", *str(self).splitlines()]


def normalise(name: str) -> str:
    """PEP 503's form of a distribution name: ``Jupyter_Client`` and ``jupyter-client`` are one package."""
    return re.sub(r"[-_.]+", "-", name or "").lower()


def after_install(installed_from: str, before) -> dict[str, str]:
    """Say where the course package came from and which packages pip replaced ({name: "old -> new"}, returned).

    ``before`` is what :func:`ensure_course` returned beside ``installed_from``: the distributions the runtime had
    ({name: version}) and the modules this session had loaded, both taken before pip ran; None when nothing was
    installed. pip adds what the runtime lacks and upgrades nothing it need not (the package's ranges admit Colab's
    versions); if it did replace a package the session had loaded, the old version stays in memory beside the new
    files, so this stops with a restart notice (a CourseSetupError) rather than let the notebook run half-upgraded.
    """
    print("Course package:", installed_from)
    if before is None:
        return {}
    had, modules = before
    importlib.invalidate_caches()
    now = {normalise(d.metadata["Name"]): d.version for d in metadata.distributions()}
    had = {normalise(name): version for name, version in had.items()}
    changed = {n: f"{v} -> {now.get(n, 'removed')}" for n, v in had.items() if now.get(n) != v}
    if not changed:
        return changed
    owners = metadata.packages_distributions()  # top-level module -> the distributions that provide it
    loaded = {normalise(d) for m in modules for d in owners.get(m, ())} & set(changed)
    said = "; ".join(f"{n} {v}" for n, v in sorted(changed.items()))
    if not loaded:
        print(f"Note: pip also replaced {said}. This session had not loaded them: no restart needed.")
        return changed
    raise CourseSetupError(
        f"The course package is installed, but pip replaced {said}, and this session had already loaded "
        f"{', '.join(sorted(loaded))}.\nRestart the session (Runtime > Restart session), "
        "then run this cell again: it will find the course installed and go on."
    )
