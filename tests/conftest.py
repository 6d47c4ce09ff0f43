"""Shared test set-up: quick mode, no display, no network, reports in a temporary folder."""

import os

os.environ["QUICK"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
# Nothing may reach a hub during tests (rule 3): these make the HF libraries fail fast instead.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402

from tests.solved import SOLVED_RUNS  # noqa: E402  (after the environment above)


@pytest.fixture(scope="session", autouse=True)
def _newer_sentences(tmp_path_factory):
    """The newer-sentence development file is beside the repository on our machines but not in CI: tests see a
    small stand-in of invented pairs instead, everywhere, so notebook 03 scores a third set the same way in both."""
    from helpers import runtime
    from helpers.text.corpus import builtin_corpus

    path = tmp_path_factory.mktemp("newer") / "dev.fr-en.tsv"
    path.write_text("".join(f"{fr}\t{en}\n" for fr, en in builtin_corpus(60, seed=99, difficulty=2)), encoding="utf-8")
    old = runtime.environment_snapshot("TATOEBA_NEWER_DEV")
    os.environ["TATOEBA_NEWER_DEV"] = str(path)
    yield path
    runtime.restore_environment(old)


@pytest.fixture(scope="session", autouse=True)
def _reports_dir(tmp_path_factory):
    """Figures and metrics written by tests go to a temporary folder, not the checkout's reports/."""
    from helpers import runtime

    path = tmp_path_factory.mktemp("reports")
    old = runtime.environment_snapshot("REPORTS_DIR")
    os.environ["REPORTS_DIR"] = str(path)
    yield path
    runtime.restore_environment(old)


@pytest.fixture(params=[False, True], ids=["cpu-without-bf16", "cpu-with-bf16"])
def cpu_bf16(request, monkeypatch) -> bool:
    """Both answers of ``runtime.cpu_has_native_bf16`` on any machine (issue 47): what depends on it (``bf16_if_native``,
    Muon's iteration format) runs each branch here, and in what the test starts (the variable is inherited), so a
    change that breaks the bf16 branch is red on a machine without bf16 instructions too, and the other way round."""
    from helpers import runtime

    monkeypatch.setenv(runtime.CPU_BF16_VARIABLE, "1" if request.param else "0")
    return request.param


def pytest_configure(config):
    """The controller makes one folder that its workers share, where each solved run is claimed."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and getattr(config.option, "numprocesses", None):
        import tempfile

        os.environ["SOLVED_RUNS_DIR"] = tempfile.mkdtemp(prefix="solved-runs-")


if os.environ.get("PYTEST_XDIST_WORKER"):  # two workers on two cores: one torch thread each, not two
    import torch

    torch.set_num_threads(1)
    # and the same for what a test starts (the CLI in a subprocess, torchrun's ranks, a Jupyter kernel): a process
    # with two threads beside a busy worker waits at every operation (the tiny preset's training steps ran 15 times
    # slower: 618 against 9,544 target tokens/s)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_sessionfinish(session, exitstatus):
    import shutil

    for run in SOLVED_RUNS.values():  # run folders the notebooks made outside the reports folder
        for key in ("RUN_DIR", "RUNS", "stand_ins"):
            if isinstance(run.namespace.get(key), (str, os.PathLike)):
                shutil.rmtree(run.namespace[key], ignore_errors=True)
