"""The environment for a Python that a test builds for itself (a throw-away venv, a browser's Jupyter server).

Such a Python must see only what the test put in it: a ``PYTHONPATH`` pointing at the checkout (as many people set it
while developing) makes the checkout's ``helpers`` look installed there, ``PYTHONHOME`` or an active virtual
environment's variables point it at another interpreter's files, and ``PIP_*`` settings (find-links, constraints,
an index) change what its pip installs. Issue 47: a bootstrap test failed under ``PYTHONPATH=$PWD``.
"""

from __future__ import annotations

import os

# Variables that tell a Python where its modules and packages are, or that it runs inside another environment.
PYTHON_LOCATION = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONSAFEPATH", "VIRTUAL_ENV",
                   "VIRTUAL_ENV_PROMPT", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "__PYVENV_LAUNCHER__")  # fmt: skip
# Prefixes of installers' settings: pip's and uv's.
INSTALLER_PREFIXES = ("PIP_", "UV_")


def clean_env(base: dict[str, str] | None = None, *, keep_installer: bool = False, **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) without the variables above, then ``extra`` added.

    ``keep_installer``: keep ``PIP_*`` and ``UV_*``, for a build that must install the way this machine is set up to
    (the Colab stand-in reads its wheel folders from them).
    """
    env = dict(os.environ if base is None else base)
    for key in list(env):
        if key in PYTHON_LOCATION or (not keep_installer and key.startswith(INSTALLER_PREFIXES)):
            del env[key]
    env.update(extra)
    return env
