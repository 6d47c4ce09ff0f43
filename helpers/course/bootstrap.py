"""The first cell's installer: how a notebook gets the course package on Colab, and what it says when it cannot.

The package is not importable before it is installed, so every notebook's first cell carries a verbatim copy
of :func:`ensure_course` (``tests/test_notebooks.py`` checks each copy against this one, and
``tests/test_bootstrap.py`` runs this one for real against a local git repository and an unreachable address).
It uses the standard library only.
"""


def ensure_course(pinned, drive_copy, version, *, install=None, pip_args=()):
    """Make `helpers` importable; try in order: already installed, a copy in Google Drive, the pinned release.

    pinned: "git+https://...@vX.Y.Z"; drive_copy: a folder or .zip of the repository; version: the one to expect.
    Installs only on Colab (or with install=True); never touches torch. Returns where the package came from.
    """
    import importlib
    import importlib.metadata as metadata
    import subprocess
    import sys
    from pathlib import Path

    class CourseSetupError(RuntimeError):
        def _render_traceback_(self):  # Jupyter shows these lines instead of a traceback
            return ["Course set-up failed.", *str(self).splitlines()]

    try:
        if metadata.version("transformers-by-building") == version:
            return "already installed"
    except metadata.PackageNotFoundError:
        pass
    if not (("google.colab" in sys.modules) if install is None else install):
        return "this checkout (not on Colab: install it once with pip install -e .)"
    copy, tried = Path(drive_copy), []
    sources = [("the copy in Drive", str(copy))] if copy.is_dir() or copy.suffix == ".zip" and copy.is_file() else []
    for label, target in sources + [("the pinned release", pinned)]:
        print(f"Installing the course package from {label}: {target}", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", *pip_args, target], capture_output=True, text=True
        )
        if done.returncode == 0:
            importlib.invalidate_caches()
            return label
        why = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        tried.append(f"  - {label}: {why[-1] if why else 'pip failed'}")
    raise CourseSetupError(
        "The course package could not be installed. Tried:\n" + "\n".join(tried) + "\nTwo ways out:\n"
        "  1. Check this runtime's internet (open any web page from Colab), then run this cell again.\n"
        f"  2. Put the course repository (its folder, or the .zip GitHub gives you) in Google Drive at {copy},\n"
        "     mount Drive (Files panel > Mount Drive), then run this cell again."
    )
