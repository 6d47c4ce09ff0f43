"""The first cell's installer: how a notebook gets the course package on Colab, and what it says when it cannot.

The package is not importable before it is installed, so every notebook's first cell carries a verbatim copy
of :func:`ensure_course` (``tests/notebooks/test_every_notebook.py`` checks each copy against this one, and
``tests/course/test_bootstrap.py`` runs this one for real against a local git repository and an unreachable address).
It uses the standard library only.
"""


def ensure_course(pinned, drive_copy, version, *, install=None, pip_args=()):
    """Make `helpers` importable; try in order: already installed, a copy in Google Drive, the pinned release.

    pinned: "git+https://...@vX.Y.Z"; drive_copy: a folder or .zip of the repository; version: the one to expect.
    Installs only on Colab (or with install=True); never touches torch. Returns where the package came from.
    pip adds what the runtime lacks and upgrades nothing it need not (the package's ranges admit Colab's versions);
    if it did upgrade a package, this says which, and stops with a restart notice when this session had loaded it.
    """
    import importlib
    import importlib.metadata as metadata
    import re
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

    def installed():
        return {re.sub(r"[-_.]+", "-", d.metadata["Name"] or "").lower(): d.version for d in metadata.distributions()}

    copy, tried = Path(drive_copy), []
    sources = [("the copy in Drive", str(copy))] if copy.is_dir() or copy.suffix == ".zip" and copy.is_file() else []
    for label, target in sources + [("the pinned release", pinned)]:
        print(f"Installing the course package from {label}: {target}", flush=True)
        before = installed()
        pip = [sys.executable, "-m", "pip", "install", "-q", "--upgrade-strategy", "only-if-needed", *pip_args, target]
        done = subprocess.run(pip, capture_output=True, text=True)
        if done.returncode == 0:
            importlib.invalidate_caches()
            after = installed()
            changed = {n: f"{v} -> {after.get(n, 'removed')}" for n, v in before.items() if after.get(n) != v}
            if not changed:
                return label
            modules = metadata.packages_distributions()
            loaded = {re.sub(r"[-_.]+", "-", d).lower() for m in list(sys.modules) for d in modules.get(m, ())}
            said = "; ".join(f"{n} {v}" for n, v in sorted(changed.items()))
            if not loaded & set(changed):
                print(f"Note: pip also replaced {said}. This session had not loaded them: no restart needed.")
                return label
            raise CourseSetupError(
                f"The course package is installed, but pip replaced {said}, and this session had already loaded "
                f"{', '.join(sorted(loaded & set(changed)))}.\nRestart the session (Runtime > Restart session), "
                "then run this cell again: it will find the course installed and go on."
            )
        why = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        tried.append(f"  - {label}: {why[-1] if why else 'pip failed'}")
    raise CourseSetupError(
        "The course package could not be installed. Tried:\n" + "\n".join(tried) + "\nTwo ways out:\n"
        "  1. Check this runtime's internet (open any web page from Colab), then run this cell again.\n"
        f"  2. Put the course repository (its folder, or the .zip GitHub gives you) in Google Drive at {copy},\n"
        "     mount Drive (Files panel > Mount Drive), then run this cell again."
    )
