#!/usr/bin/env python3
"""A stand-in for Colab's GPU runtime, and every notebook run in it from its first cell's install path.

One command builds a virtual environment from ``../shared/colab/pip-freeze.gpu.txt`` (Colab's own ``pip freeze``):
every package the course installs or imports, and Jupyter's kernel stack, at Colab's exact version; pip itself at
Colab's version; no sacrebleu, no gensim. uv builds it (pinned, fetched into .cache/uv-tool on first use; its cache
is .cache/uv, so a second build on the same machine links rather than downloads). It then runs every notebook top to
bottom in quick mode, headless, in a kernel of that environment, from a scratch folder (as /content on Colab), with
the first cell's installer (pip, as on Colab) pointed at a copy of this checkout standing in for the copy in Google
Drive. pip's log and ``pip freeze`` before and after are kept; the run fails if the course's install changed or
removed anything the runtime had (additions only), or if a notebook fails.

    python3 .ci/colab_standin.py            # Colab's Python (3.13) and torch (2.11.0) when this machine has them
    python3 .ci/colab_standin.py --floor --pytest ARGS   # CI's floor job (.ci/run): see below

``--floor``: this Python, torch 2.13.0 from the local wheel, and only notebook 01 from its first cell (the install
path); ``--pytest ARGS`` then starts pytest in the environment as soon as that install is done, beside the rest of
notebook 01: CI names the figure test, which runs every other notebook in-process, and the widget tests. A failure
of the notebook or of the install check stops the tests at once.

Everything lands in ``.cache/colab-standin/<name>/`` (ignored by git): ``venv/``, ``report/`` (pip.log, the
freezes, freeze-diff.txt, summary.json with seconds and CPU seconds per stage, executed notebooks). The environment
is put back to its state before the install at the end (the additions are uninstalled and the freeze compared), so a
second run reuses it; ``--rebuild`` starts afresh. Needs PyPI (Colab's versions and, for the course's install, what
Colab lacks). Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.environments import clean_env  # noqa: E402  (the one definition, shared with the tests)

FREEZE = ROOT.parent / "shared" / "colab" / "pip-freeze.gpu.txt"
CACHE = ROOT / ".cache" / "colab-standin"
FLOOR_TORCH = "2.13.0"  # the wheel on this machine's disk (requirements.txt's pin); CI's floor job uses it
UV_VERSION = "0.13.8"  # builds the environment: parallel downloads, links from its cache
# CI's floor job runs these from their first cell (the install path, in a kernel); the others run in-process through
# --pytest (tests/notebooks/test_every_notebook.py's figure test runs each notebook solved), which is cheaper on 2 cores
FLOOR_NOTEBOOKS = ["01"]

# Jupyter's kernel and widget stack, as Colab runs it (besides what the course's own dependencies pull in)
KERNEL_STACK = [
    "ipython", "ipykernel", "jupyter_client", "jupyter_core", "nbclient", "nbformat", "traitlets", "pyzmq", "tornado",
    "ipywidgets", "widgetsnbextension", "jupyterlab_widgets", "notebook", "matplotlib-inline", "pytest",
]  # fmt: skip
# Colab's GPU stack (a CUDA 12.8 build from PyTorch's own index) cannot be pinned from PyPI: torch is asked for by
# version alone, and what its PyPI wheel needs comes unpinned
NOT_PINNED = re.compile(
    r"^(torch|torchvision|torchaudio|torchao|torchcodec|torchdata|torchtune|triton|nvidia-.*|cuda-.*)$"
)
TEST_TOOLS = [
    "pytest-xdist"
]  # not on Colab: lets --pytest run on two workers (-n 2), as the README's test command does
ABSENT_ON_COLAB = ["sacrebleu", "gensim"]  # the premise: the first cell must add these


def norm(name: str) -> str:
    """PEP 503 normalised name: ``Jupyter_Client`` and ``jupyter-client`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_freeze(text: str) -> dict[str, str]:
    """``pip freeze`` text as {normalised name: version}; ``name @ url`` lines get the version ``@ url``."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            continue
        if " @ " in line:
            name, url = line.split(" @ ", 1)
            out[norm(name)] = "@ " + url.strip()
        elif "==" in line:
            name, version = line.split("==", 1)
            out[norm(name)] = version.strip()
        else:
            raise ValueError(f"not a pip freeze line: {raw!r}")
    return out


def colab_pins(colab: dict[str, str]) -> list[str]:
    """Colab's versions as pip constraints: everything pinnable from PyPI (no URLs, no CUDA builds)."""
    return [f"{n}=={v}" for n, v in sorted(colab.items()) if not v.startswith("@") and not NOT_PINNED.match(n)]


def wanted_packages(colab: dict[str, str], constraints_txt: str) -> list[str]:
    """What the stand-in installs at Colab's versions: the Jupyter stack, and every package of the course's locked
    dependency closure (constraints.txt: the course, its dependencies and theirs) that Colab ships."""
    lock = parse_freeze(constraints_txt)
    names = {norm(n) for n in KERNEL_STACK} | set(lock)
    return sorted(n for n in names if n in colab and not NOT_PINNED.match(n) and not colab[n].startswith("@"))


def freeze_diff(before: dict[str, str], after: dict[str, str]) -> dict[str, dict]:
    """What an install did: added {name: version}, changed {name: [old, new]}, removed {name: version}."""
    return {
        "added": {n: after[n] for n in sorted(after) if n not in before},
        "changed": {n: [before[n], after[n]] for n in sorted(after) if n in before and before[n] != after[n]},
        "removed": {n: before[n] for n in sorted(before) if n not in after},
    }


def standin_gaps(installed: dict[str, str], colab: dict[str, str], torch: str) -> dict[str, dict]:
    """Where the built environment differs from Colab: packages at another version, and packages Colab lacks."""
    other = {}
    for n, v in installed.items():
        if n in colab and colab[n] != v:
            other[n] = [colab[n], v]
    extra = {n: v for n, v in installed.items() if n not in colab and not NOT_PINNED.match(n)}
    other = {n: v for n, v in other.items() if not NOT_PINNED.match(n) or n == "torch"}
    if "torch" in other and other["torch"][0].split("+")[0] == torch:
        other.pop("torch")  # the same release, PyPI's build rather than Colab's CUDA 12.8 one
    return {"other_version": other, "not_on_colab": extra}


FIRST_CELL_CALL = "ensure_course(COURSE, COURSE_IN_DRIVE, version="
DRIVE_LINE = re.compile(r'^COURSE_IN_DRIVE = "[^"]*"', re.M)


def point_first_cell_at(source: str, drive_copy: Path) -> str:
    """The first cell as Colab would run it with the course in Drive at ``drive_copy``: same installer, same call,
    with install=True (on Colab it installs because google.colab is imported)."""
    if FIRST_CELL_CALL not in source or not DRIVE_LINE.search(source):
        raise ValueError(
            "The notebook's first code cell no longer sets COURSE_IN_DRIVE and calls "
            f"{FIRST_CELL_CALL}...): update point_first_cell_at in .ci/colab_standin.py to the new first cell."
        )
    source = DRIVE_LINE.sub(f"COURSE_IN_DRIVE = {json.dumps(str(drive_copy))}", source, count=1)
    return source.replace(FIRST_CELL_CALL, "ensure_course(COURSE, COURSE_IN_DRIVE, install=True, version=", 1)


# ----------------------------------------------------------------------------------------------------------------


def find_python(version: str) -> str | None:
    """A ``pythonX.Y`` on PATH, or under pyenv's versions; None when this machine has none."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-V"], capture_output=True).returncode == 0:
        return found
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(root.glob(f"{version}*/bin/python{version}"), reverse=True):
        return str(candidate)
    return None


def uv_env() -> dict[str, str]:
    """uv's environment: its cache under .cache/ (a second run on the same machine links from it), no Python
    downloads (the interpreter is this machine's), no config files of the user's."""
    return {
        **os.environ,
        "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(ROOT / ".cache" / "uv"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_CONFIG": "1",
        "UV_NO_PROGRESS": "1",
    }


def find_uv() -> str:
    """uv at UV_VERSION: from .cache/uv-tool, installed there from PyPI on first use (seconds); else one on PATH."""
    tool = ROOT / ".cache" / "uv-tool"
    uv = tool / "bin" / "uv"
    if (
        not uv.exists()
        or f"uv {UV_VERSION}" not in subprocess.run([uv, "--version"], capture_output=True, text=True).stdout
    ):
        if tool.exists():
            shutil.rmtree(tool)
        got = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-warn-script-location", "--target", tool,
             f"uv=={UV_VERSION}"], capture_output=True, text=True,
        )  # fmt: skip
        if got.returncode != 0:
            if shutil.which("uv"):
                print(f"NOTE: could not install uv {UV_VERSION}; using {shutil.which('uv')}", flush=True)
                return shutil.which("uv")
            sys.exit(f"Could not install uv {UV_VERSION} (it builds the environment):\n{got.stderr[-2000:]}")
    return str(uv)


def pip_find_links() -> list[str]:
    """The find-links folders pip is configured with: PIP_FIND_LINKS and the config files (read, not asked of pip)."""
    import configparser

    folders = os.environ.get("PIP_FIND_LINKS", "").split()
    files = [
        "/etc/pip.conf",
        "/etc/xdg/pip/pip.conf",
        Path.home() / ".config/pip/pip.conf",
        Path.home() / ".pip/pip.conf",
    ]
    for file in [*files, os.environ.get("PIP_CONFIG_FILE", "")]:
        config = configparser.ConfigParser()
        try:
            config.read(file)
        except (configparser.Error, OSError):
            continue
        for section in ("global", "install"):
            folders += config.get(section, "find-links", fallback="").split()
    return [f.removeprefix("file://") for f in dict.fromkeys(folders)]


def local_torch_wheel(torch: str, py_version: str) -> str | None:
    """A torch ``torch`` wheel for this Python in pip's find-links folders (this machine keeps torch there: PyPI's
    Linux wheel is the CUDA build, gigabytes); None when there is none (then uv takes torch from PyPI)."""
    tag = "cp" + "".join(py_version.split(".")[:2])
    for folder in map(Path, pip_find_links()):
        found = sorted(folder.glob(f"torch-{torch}*-{tag}-{tag}-*linux*_x86_64.whl")) if folder.is_dir() else []
        if found:
            return str(found[0])
    return None


def run(cmd: list[str], log: Path | None = None, **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if log is not None:
        with log.open("a") as f:
            f.write(f"$ {' '.join(str(c) for c in cmd)}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        sys.exit(f"FAILED (exit {done.returncode}): {' '.join(str(c) for c in cmd)}\n{tail}")
    return done


def pip_freeze(py: Path) -> str:
    return run([py, "-m", "pip", "freeze", "--all"]).stdout


def copy_checkout(dest: Path) -> None:
    """The files of this checkout that git would commit (tracked and new, not ignored): the 'copy in Drive'."""
    if dest.exists():
        shutil.rmtree(dest)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    )
    if listed.returncode != 0:
        sys.exit(f"git ls-files failed in {ROOT}: the stand-in copies a git checkout.\n{listed.stderr}")
    for rel in filter(None, listed.stdout.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


DRIVER = r"""
import datetime, json, os, sys, time
import nbclient, nbformat
spec = json.loads(sys.argv[1])
results = []

def cell_seconds(cell):
    ex = cell.metadata.get("execution", {})
    a, b = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not (a and b):
        return None
    when = [datetime.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (a, b)]
    return round((when[1] - when[0]).total_seconds(), 1)

for path in spec["notebooks"]:
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")

    def executed(cell, cell_index, execute_reply, first=first):  # the first cell's install is done: say so at once
        if cell is first and execute_reply.get("content", {}).get("status") == "ok":
            print("FIRST_CELL_DONE " + os.path.basename(path), flush=True)

    client = nbclient.NotebookClient(nb, timeout=spec["timeout"], kernel_name="python3", on_cell_executed=executed,
                                     resources={"metadata": {"path": spec["cwd"]}})
    t0, error = time.perf_counter(), None
    try:
        client.execute()
    except Exception as err:
        error = f"{type(err).__name__}: {err}"[-3000:]
    seconds = round(time.perf_counter() - t0, 1)
    out = os.path.join(spec["out"], os.path.basename(path))
    nbformat.write(nb, out)
    text = "".join(o.get("text", "") for o in first.get("outputs", []) if o.get("output_type") == "stream")
    results.append({"notebook": os.path.basename(path), "seconds": seconds, "first_cell_seconds": cell_seconds(first),
                    "error": error, "first_cell": text})
    print(f"  {os.path.basename(path)}: {'FAILED' if error else 'ok'} in {seconds} s "
          f"(first cell, the install: {cell_seconds(first)} s)", flush=True)
    if error:
        break
print("RESULTS " + json.dumps(results))
"""


def wait_with_usage(proc: subprocess.Popen) -> float:
    """Wait for ``proc``; return the CPU seconds (user + system) it and the children it waited for used."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return round(usage.ru_utime + usage.ru_stime, 1)


def stop(proc: subprocess.Popen | None) -> None:
    """End ``proc`` and what it started (it leads its own session: pytest's workers), if it is still running."""
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--floor", action="store_true", help="CI's floor job: this Python and torch 2.13.0 (local wheel)")
    ap.add_argument("--python", help="interpreter for the environment (default: Colab's Python version if found)")
    ap.add_argument("--torch", help="torch version (default: Colab's; with --floor, 2.13.0)")
    ap.add_argument(
        "--only", nargs="*", help="notebook numbers to run from their first cell (default: all; with --floor, 01)"
    )
    ap.add_argument("--rebuild", action="store_true", help="build the environment afresh even if a clean one exists")
    ap.add_argument(
        "--pytest", nargs=argparse.REMAINDER, help="then run pytest with these arguments in the environment"
    )
    ap.add_argument("--freeze", type=Path, default=FREEZE, help=f"Colab's pip freeze (default {FREEZE})")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    if not args.freeze.is_file():
        sys.exit(f"{args.freeze} not found: the stand-in is built from Colab's pip freeze in ../shared/colab/.")
    colab_text = args.freeze.read_text()
    colab = parse_freeze(colab_text)
    colab_python = re.search(r"cp3(\d+)-", colab.get("cucim-cu12", "")) or None
    want_py = f"3.{colab_python.group(1)}" if colab_python else "3.13"
    colab_torch = colab["torch"].split("+")[0]
    if args.floor:
        python, torch = args.python or sys.executable, args.torch or FLOOR_TORCH
    else:
        python = args.python or find_python(want_py)
        if python is None:
            print(f"NOTE: no Python {want_py} on this machine; using {sys.executable} instead.")
            python = sys.executable
        torch = args.torch or colab_torch
    py_version = run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"]).stdout.strip()
    name = ("floor-" if args.floor else "") + f"py{py_version}-torch{torch}"
    home = CACHE / name
    venv, report = home / "venv", home / "report"
    py = venv / "bin" / "python"
    if report.exists():
        shutil.rmtree(report)
    report.mkdir(parents=True)
    (report / "executed").mkdir()
    pip_log = report / "pip.log"
    print(f"Colab stand-in {name}: Python {py_version}, torch {torch}; Colab has Python {want_py}, torch {colab_torch}")

    # 1. the environment: Colab's versions of everything the course touches
    names = wanted_packages(colab, (ROOT / "constraints.txt").read_text())
    # another torch than Colab's may need more than Colab's setuptools (torch 2.13.0: setuptools>=77.0.3)
    loose = set() if torch == colab_torch else {"setuptools"}
    pins = [p for p in colab_pins(colab) if p.split("==")[0] not in loose]
    key = hashlib.sha256("\n".join([colab_text, python, torch, UV_VERSION, *TEST_TOOLS, *names]).encode()).hexdigest()[
        :16
    ]
    base_file = home / "base-freeze.txt"
    t0, cpu0 = time.perf_counter(), children_cpu()
    reused = (
        not args.rebuild
        and py.exists()
        and (home / "key").is_file()
        and (home / "key").read_text() == key
        and base_file.is_file()
        and parse_freeze(pip_freeze(py)) == parse_freeze(base_file.read_text())
    )
    if not reused:
        if venv.exists():
            shutil.rmtree(venv)
        for stale in (home / "key", base_file):
            stale.unlink(missing_ok=True)
        (home / "colab-pins.txt").write_text("\n".join(pins) + "\n")
        uv = find_uv()
        run([uv, "venv", "-q", "-p", python, venv], log=pip_log, env=uv_env())
        wheel = local_torch_wheel(torch, py_version)
        tools = [f"{n}=={colab[n]}" if n in colab and n not in loose else n for n in ("pip", "setuptools", "wheel")]
        run(
            [
                uv,
                "pip",
                "install",
                "-p",
                py,
                "-c",
                home / "colab-pins.txt",
                wheel or f"torch=={torch}",
                *tools,
                *TEST_TOOLS,
                *names,
            ],
            log=pip_log,
            env=uv_env(),
        )
        base_file.write_text(pip_freeze(py))
        (home / "key").write_text(key)
    build_seconds, build_cpu = round(time.perf_counter() - t0, 1), round(children_cpu() - cpu0, 1)
    before_text = pip_freeze(py)
    (report / "freeze-before.txt").write_text(before_text)
    before = parse_freeze(before_text)
    gaps = standin_gaps(before, colab, torch)
    present = [n for n in ABSENT_ON_COLAB if n in before]
    if present:
        sys.exit(f"The stand-in already has {', '.join(present)}: Colab does not, and the first cell must add them.")
    print(f"Environment {'reused' if reused else 'built'} in {build_seconds} s: {len(before)} packages; "
          f"differs from Colab in {sorted(gaps['other_version'])}; not on Colab: {sorted(gaps['not_on_colab'])}")  # fmt: skip

    # 2. the notebooks, from their first cell, in a scratch folder (as /content), with the checkout as the Drive copy
    headless = re.search(r'^HEADLESS = "(\w+)"', (ROOT / "helpers/course/plotting.py").read_text(), re.M)
    drive = home / "drive" / "course"
    copy_checkout(drive)
    content = home / "content"
    if content.exists():
        shutil.rmtree(content)
    content.mkdir(parents=True)
    sources = sorted((ROOT / "notebooks" / "solutions").glob("[0-9][0-9]_*.ipynb"))
    only = args.only if args.only is not None else (FLOOR_NOTEBOOKS if args.floor else None)
    if only:
        sources = [p for p in sources if any(p.name.startswith(o.zfill(2) + "_") for o in only)]
    if not sources:
        sys.exit(f"No notebook matches {only} in {ROOT / 'notebooks' / 'solutions'}.")
    notebooks = []
    for src in sources:
        nb = json.loads(src.read_text())
        first = next(c for c in nb["cells"] if c["cell_type"] == "code")
        text = "".join(first["source"]) if isinstance(first["source"], list) else first["source"]
        first["source"] = point_first_cell_at(text, drive)
        (content / src.name).write_text(json.dumps(nb, indent=1))
        notebooks.append(str(content / src.name))
    # the stand-in's Python sees nothing of ours (PYTHONPATH, a virtual environment); pip keeps this machine's settings
    env = {k: v for k, v in clean_env(keep_installer=True).items() if k != "MPLBACKEND"}
    env.update(
        QUICK="1",
        PIP_LOG=str(pip_log),  # pip appends its verbose log of the first cell's install here
        REPORTS_DIR=str(report / "reports"),
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env[headless.group(1) if headless else "HELPERS_HEADLESS"] = "1"
    spec = {"notebooks": notebooks, "cwd": str(content), "out": str(report / "executed"), "timeout": 300}
    print(f"Running {len(notebooks)} notebook(s) in quick mode from their first cell (Drive copy: {drive})", flush=True)
    t0 = time.perf_counter()
    tester, tests = None, None
    with (report / "driver.log").open("w") as log:
        driver = subprocess.Popen([py, "-c", DRIVER, json.dumps(spec)], cwd=content, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=log)  # fmt: skip
        out = []
        for x in driver.stdout:  # the per-notebook lines as they come, the rest to the log
            out.append(x)
            log.write(x)
            if x.startswith("  "):
                print(x, end="", flush=True)
            if x.startswith("FIRST_CELL_DONE ") and args.pytest and tester is None:
                # the course is installed (what the runtime lacked is added): the tests need nothing more, so they
                # start now, beside the rest of the notebook (2 cores: the kernel and pytest each keep one busy)
                print("+ pytest " + " ".join(args.pytest), flush=True)
                t_tests = time.perf_counter()
                tester = subprocess.Popen([py, "-m", "pytest", "-p", "no:cacheprovider", *args.pytest], cwd=ROOT,
                                          env={**env, "QUICK": "1"}, start_new_session=True)  # fmt: skip
        driver_cpu = wait_with_usage(driver)
    notebook_seconds = round(time.perf_counter() - t0, 1)
    line = next((x for x in out if x.startswith("RESULTS ")), None)
    if line is None:
        stop(tester)
        sys.exit(f"The notebook driver failed (exit {driver.returncode}); see {report / 'driver.log'}")
    results = json.loads(line[len("RESULTS ") :])

    # 3. what the install did
    after_text = pip_freeze(py)
    (report / "freeze-after.txt").write_text(after_text)
    diff = freeze_diff(before, parse_freeze(after_text))
    problems = []
    for r in results:
        if r["error"]:
            problems.append(
                f"{r['notebook']} failed: {r['error']} (executed copy: {report / 'executed' / r['notebook']})"
            )
    expected = ["the copy in Drive"] + ["already installed"] * (len(results) - 1)
    for r, said in zip(results, expected):
        if f"Course package: {said}" not in r["first_cell"]:
            problems.append(
                f"{r['notebook']}'s first cell said {r['first_cell'].strip()!r}, expected 'Course package: {said}'"
            )
    if diff["changed"] or diff["removed"]:
        problems.append(
            "The course's install changed what the runtime had: "
            + ", ".join(f"{n} {a} -> {b}" for n, (a, b) in diff["changed"].items())
            + "".join(f", removed {n} {v}" for n, v in diff["removed"].items())
        )
    missing = [n for n in ABSENT_ON_COLAB if n not in diff["added"]]
    if missing and results and not results[0]["error"]:
        problems.append(f"The course's install did not add {', '.join(missing)} (Colab lacks them)")
    shipped = [n for n in diff["added"] if n in colab and not NOT_PINNED.match(n)]
    if shipped:
        problems.append(f"Added {', '.join(shipped)}, which Colab ships: add it to the stand-in (wanted_packages)")
    if tester is not None:
        if problems:  # already red: stop the tests (and their workers) rather than wait minutes for them
            print("Stopping pytest: the floor job has already failed (see below).", flush=True)
            stop(tester)
        tests_cpu = wait_with_usage(tester)
        tests = {"args": args.pytest, "exit": tester.returncode, "seconds": round(time.perf_counter() - t_tests, 1),
                 "cpu_seconds": tests_cpu, "stopped": bool(problems)}  # fmt: skip
    if args.pytest and tests is None:
        problems.append("pytest did not run: the first notebook's first cell (the course's install) failed")
    elif tests is not None and tests["exit"] != 0 and not tests["stopped"]:
        problems.append(f"pytest {' '.join(args.pytest)} failed (exit {tests['exit']}) on Colab's versions")
    installed_lines = [
        x for x in (pip_log.read_text() if pip_log.exists() else "").splitlines() if "Successfully installed" in x
    ]
    lines = [f"{n}=={v}" for n, v in diff["added"].items()]
    lines += [f"CHANGED {n} {a} -> {b}" for n, (a, b) in diff["changed"].items()]
    lines += [f"REMOVED {n}=={v}" for n, v in diff["removed"].items()]
    (report / "freeze-diff.txt").write_text("\n".join(lines) + "\n")

    # 4. put the environment back (uninstall the additions), so that the next run starts from the same state
    restored = False
    if diff["added"] and not diff["changed"] and not diff["removed"]:
        run([py, "-m", "pip", "uninstall", "-y", *diff["added"]], log=report / "restore.log")
        restored = parse_freeze(pip_freeze(py)) == parse_freeze(base_file.read_text())
    if not restored:
        (home / "key").unlink(missing_ok=True)  # the next run rebuilds
    summary = {
        "name": name,
        "python": py_version,
        "torch": torch,
        "colab": {"python": want_py, "torch": colab_torch, "freeze": str(args.freeze)},
        "environment": {
            "reused": reused,
            "seconds": build_seconds,
            "cpu_seconds": build_cpu,
            "packages": len(before),
            **gaps,
        },  # fmt: skip
        "notebooks": results,
        "notebook_seconds": notebook_seconds,
        "notebook_cpu_seconds": driver_cpu,
        "pytest": tests,
        "pip_successfully_installed": installed_lines,
        "install": diff,
        "problems": problems,
        "total_seconds": round(time.perf_counter() - t_start, 1),
    }
    (report / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"Added by the course's install ({len(diff['added'])}): " + ", ".join(lines[: len(diff["added"])]))
    print(f"Changed: {diff['changed'] or 'nothing'}; removed: {diff['removed'] or 'nothing'}")
    print(f"Notebooks: {notebook_seconds} s; total {summary['total_seconds']} s. Report: {report}")
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"Colab stand-in OK: {len(results)} notebook(s) passed, and the install only added packages.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
