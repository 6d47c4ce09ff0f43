"""Run one notebook's cells top to bottom in this process, from its jupytext ``.py`` pair, and time each cell.

For a machine that has torch but no Jupyter (a lent GPU machine: no nbclient, ipykernel or ipywidgets there),
so that a notebook's full-mode path (``QUICK`` unset) runs on its hardware. No kernel means no live page: the
figures are saved and the widgets fall back to one call with their defaults, as in the headless runner.

    python benchmarks/notebook_in_process.py notebooks/solutions/03_translate_fr_en.py --out reports/gpu-nb03 \\
        --replace 'else (45.0 if DEVICE' 'else (4.0 if DEVICE' --capability 7.5

``--replace OLD NEW`` edits the source before it runs (each OLD must occur exactly once, so a stale edit fails
instead of silently doing nothing): a shorter time budget where the device time is short. Say so next to any number.
``--capability 7.5`` makes ``torch.cuda.get_device_capability`` answer 7.5, so the course's own choices (precision,
Muon's Newton-Schulz dtype, the attention kernel it expects) are a T4's; the GPU's kernels are still its own.
Prints one line per code cell (index, seconds, first line) and everything the cells print; writes
``cells.json`` (index, seconds, error) to ``--out``; exits 1 at the first failing cell (with ``--keep-going``, at
the end, after trying the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_cells(text: str) -> list[str]:
    """The code cells of a jupytext percent-format file, in order (markdown cells skipped). Not
    ``helpers.course.notebooks.code_cells``: it needs jupytext, which the GPU machine does not have."""
    chunks = re.split(r"^# %%(.*)$", text, flags=re.M)
    cells = []
    for header, body in zip(chunks[1::2], chunks[2::2]):
        if "[markdown]" not in header and body.strip():
            cells.append(body.strip("\n"))
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, help="a notebook's jupytext .py pair")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "in-process")
    parser.add_argument("--replace", nargs=2, action="append", default=[], metavar=("OLD", "NEW"))
    parser.add_argument("--capability", help="what torch.cuda.get_device_capability answers, e.g. 7.5 for a T4")
    parser.add_argument(
        "--keep-going", action="store_true", help="run the cells after a failing one (exit 1 at the end)"
    )
    args = parser.parse_args(argv)

    text = args.notebook.read_text(encoding="utf8")
    for old, new in args.replace:
        if text.count(old) != 1:
            parser.error(f"--replace: {old!r} occurs {text.count(old)} times in {args.notebook}, not once")
        text = text.replace(old, new)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("REPORTS_DIR", str(args.out / "reports"))
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    if args.capability:
        import torch

        major, minor = (int(x) for x in args.capability.split("."))
        torch.cuda.get_device_capability = lambda device=None: (major, minor)
    import matplotlib.pyplot as plt

    namespace: dict = {"__name__": "__main__"}
    timings, start = [], time.perf_counter()
    for index, source in enumerate(code_cells(text), start=1):
        first = next((line for line in source.splitlines() if line.strip()), "")[:90]
        print(f"--- cell {index} at +{time.perf_counter() - start:.0f}s: {first}", flush=True)
        t0 = time.perf_counter()
        error = None
        try:
            exec(compile(source, f"<{args.notebook.stem} cell {index}>", "exec"), namespace)
        except BaseException as err:  # noqa: BLE001 - recorded, then the run stops
            traceback.print_exc()
            error = f"{type(err).__name__}: {err}"
        finally:
            plt.close("all")
        timings.append(
            {"cell": index, "seconds": round(time.perf_counter() - t0, 2), "first_line": first, "error": error}
        )
        (args.out / "cells.json").write_text(json.dumps(timings, indent=1))
        if error:
            print(f"--- cell {index} failed after {timings[-1]['seconds']}s: {error}", flush=True)
            if not args.keep_going:
                return 1
    failed = [t["cell"] for t in timings if t["error"]]
    print(
        f"--- {len(timings)} code cells ran in {time.perf_counter() - start:.0f}s; failed: {failed or 'none'}",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
