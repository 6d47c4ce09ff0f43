"""Shared test set-up: quick mode, no display, no network, reports in a temporary folder."""

import os

os.environ["QUICK"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
# Nothing may reach a hub during tests (rule 3): these make the HF libraries fail fast instead.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _reports_dir(tmp_path_factory):
    """Figures and metrics written by tests go to a temporary folder, not the checkout's reports/."""
    path = tmp_path_factory.mktemp("reports")
    old = os.environ.get("REPORTS_DIR")
    os.environ["REPORTS_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("REPORTS_DIR", None)
    else:
        os.environ["REPORTS_DIR"] = old
