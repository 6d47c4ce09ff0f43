"""The package itself: one dependency list, what the notebooks import, and the layout of helpers/."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from helpers.course import colab
from tests.environments import clean_env

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> list[str]:
    return [re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements]


def test_colab_installs_exactly_pyprojects_dependencies_except_torch():
    wanted = [n for n in _names(_pyproject()["project"]["dependencies"]) if n != "torch"]
    assert "torch" in _names(_pyproject()["project"]["dependencies"])
    assert colab.required_packages() == wanted, "helpers.course.colab must read pyproject.toml's list, torch left out"


def test_every_dependency_imports_under_its_pip_name():
    # colab.missing_packages looks modules up by pip name: a package such as scikit-learn (import sklearn)
    # would need a mapping there, and this test would say so
    for name in colab.required_packages():
        assert importlib.util.find_spec(name) is not None, f"{name} does not import as {name!r}"


def test_requirements_txt_adds_only_the_torch_pin_and_the_lock_to_the_package():
    lines = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    assert lines == ["-c constraints.txt", "torch==2.13.0", "-e .[dev]"], f"requirements.txt lists packages: {lines}"
    dev = _names(_pyproject()["project"]["optional-dependencies"]["dev"])
    assert {"pytest", "ruff", "nbclient", "jupytext"} <= set(dev)


def _locked() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(ln.split("==", 1) for ln in lines if ln and not ln.startswith("#"))


def test_the_lock_pins_every_dependency_within_pyprojects_ranges():
    from packaging.requirements import Requirement

    locked = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in _locked().items()}
    project = _pyproject()["project"]
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(spec)
        if req.name == "torch":
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in locked, f"{req.name} is not in constraints.txt: run .ci/lock"
        assert req.specifier.contains(locked[name], prereleases=True), (
            f"the lock's {req.name} {locked[name]} is outside {spec}"
        )


def test_this_environment_has_the_locked_versions():
    """A fresh clone installs the lock (requirements.txt reads it): the tests run on exactly those versions."""
    from importlib.metadata import PackageNotFoundError, version

    wrong = {}
    for name, pinned in _locked().items():
        try:
            got = version(name)
        except PackageNotFoundError:
            got = None
        if got != pinned:
            wrong[name] = (pinned, got)
    assert not wrong, f"installed versions differ from constraints.txt (locked, installed): {wrong}"


def test_readme_describes_every_helpers_module():
    """The README's module table is how a newcomer finds their way: a new module without a row is lost."""
    readme = (ROOT / "README.md").read_text()
    files = [p for p in (ROOT / "helpers").rglob("*.py") if not p.name.startswith("__")]
    missing = sorted(m for m in (_module_name(p).removeprefix("helpers.") for p in files) if f"| `{m}` |" not in readme)
    assert not missing, f"add a row to README.md's table of helpers modules for: {missing}"


# ---------------------------------------------------------------------------------------------
# the layers: each sub-package imports only from the rows below it; the course machinery only from the ground

# lowest first; a module may import its own layer and the layers before it
LAYERS = [
    ("ground", ("helpers.runtime", "helpers.run_folder", "helpers.progress")),
    ("model", ("helpers.nn",)),
    ("text", ("helpers.text",)),
    ("training", ("helpers.training",)),
    ("evaluation", ("helpers.evaluation",)),
    ("Hugging Face", ("helpers.hf",)),
    ("pipeline", ("helpers.pipeline",)),
    (
        "entry",
        (
            "helpers.cli",
            "helpers.commands",
            "helpers.experiments",
            "helpers.knowledge",
            "helpers.embeddings",
            "helpers.__main__",
            "helpers",
        ),
    ),
]
COURSE = "helpers.course"  # beside the stack: imports the ground and itself; imported only by the entry layer


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """Every helpers module ``source`` imports, at the top or inside a function (``from .x import y`` and
    ``from . import x`` both resolved to module names)."""
    import ast

    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("helpers")}
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if not module.startswith("helpers"):
                continue
            for alias in node.names:  # `from . import x` names a module, `from .x import y` a name in one
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module)
    return found


def _layer_of(module: str) -> str | None:
    if module == COURSE or module.startswith(COURSE + "."):
        return "course"
    best = None
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (layer, len(prefix))
    return best[0] if best else None


def layering_problems(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Back-imports, course code imported below the entry layer, and import cycles, among ``sources``
    (module name -> (source text, is a package's __init__))."""
    order = [layer for layer, _ in LAYERS]
    graph = {
        name: {m for m in _imports(name, text, pkg, set(sources)) if m in sources and m != name}
        for name, (text, pkg) in sources.items()
    }
    problems = []
    for name, targets in sorted(graph.items()):
        mine = _layer_of(name)
        for target in sorted(targets):
            theirs = _layer_of(target)
            if mine is None or theirs is None:
                problems.append(f"{name} or {target} belongs to no layer: add it to LAYERS")
            elif theirs == "course" and mine not in ("course", "entry"):
                problems.append(f"{name} ({mine}) imports course code {target}")
            elif mine == "course" and theirs not in ("course", "ground"):
                problems.append(f"the course machinery {name} imports {target} ({theirs})")
            elif "course" not in (mine, theirs) and order.index(theirs) > order.index(mine):
                problems.append(f"{name} ({mine}) imports {target} from a layer above it ({theirs})")
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:  # depth-first: a grey node met again closes a cycle
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                problems.append("import cycle: " + " -> ".join(path[path.index(nxt) :] + [node, nxt]))
            elif nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return problems


def _helpers_sources() -> dict[str, tuple[str, bool]]:
    return {_module_name(p): (p.read_text(), p.name == "__init__.py") for p in (ROOT / "helpers").rglob("*.py")}


def test_every_import_goes_down_the_layers_and_none_closes_a_cycle():
    sources = _helpers_sources()
    assert len([m for m in sources if m.startswith("helpers.")]) >= 25
    assert layering_problems(sources) == []


def test_the_layering_check_finds_a_planted_back_import_a_course_import_and_a_cycle():
    sources = _helpers_sources()
    train_text, pkg = sources["helpers.training.train"]
    planted = {**sources, "helpers.training.train": (train_text + "\nfrom ..pipeline import load_run\n", pkg)}
    assert any("from a layer above it (pipeline)" in p for p in layering_problems(planted))
    planted = {**sources, "helpers.training.train": (train_text + "\nfrom ..course import plotting\n", pkg)}
    assert any("imports course code helpers.course.plotting" in p for p in layering_problems(planted))
    batches_text, pkg = sources["helpers.text.batches"]
    planted = {**sources, "helpers.text.batches": (batches_text + "\n    from .data import clean_pairs\n", pkg)}
    planted["helpers.text.batches"] = (batches_text + "\ndef f():\n    from .data import clean_pairs\n", pkg)
    assert any(p.startswith("import cycle:") and "helpers.text.data" in p for p in layering_problems(planted))


# ---------------------------------------------------------------------------------------------
# no module reaches into another's private names: what another module needs is public


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_name_uses(source: str, filename: str, module: str | None, project: set[str]) -> list[str]:
    """``file:line: what`` for each ``from X import _name`` and each ``X._name`` in ``source`` where X is another
    module of this project: a ``helpers`` module, a relative import, or a top-level name in ``project`` (the
    benchmark scripts import each other). ``module`` is the file's own dotted name (None for a script or a notebook);
    its own private names are its business. Third-party modules (``google.colab._message``) are not checked."""
    import ast

    here = module.split(".")[:-1] if module else []  # the package a relative import starts from
    if module and filename.endswith("__init__.py"):
        here = module.split(".")

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        return ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))

    def ours(name: str) -> bool:
        return name.split(".")[0] in project

    tree = ast.parse(source, filename)
    bound: dict[str, str] = {}  # a local name -> the project module (or module attribute) it stands for
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name):
                    local = alias.asname or alias.name.split(".")[0]
                    bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            origin = resolve(node)
            if not (node.level or ours(origin)):
                continue
            for alias in node.names:
                if _is_private(alias.name) and origin != module:
                    problems.append(f"{filename}:{node.lineno}: from {origin} import {alias.name}")
                else:
                    bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            parts, value = [], node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                owner = ".".join([bound[value.id], *reversed(parts)])
                if owner != module:
                    problems.append(f"{filename}:{node.lineno}: {owner}.{node.attr}")
    return problems


def _project_sources() -> list[tuple[Path, str | None]]:
    """helpers/ (with each module's dotted name), benchmarks/*.py and notebooks/solutions/*.py (scripts: no module name)."""
    helpers = [(p, _module_name(p)) for p in sorted((ROOT / "helpers").rglob("*.py"))]
    scripts = sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "notebooks" / "solutions").glob("*.py"))
    return helpers + [(p, None) for p in scripts]


def _project_names() -> set[str]:
    return {"helpers", "benchmarks"} | {p.stem for p in (ROOT / "benchmarks").glob("*.py")}


def test_no_module_imports_another_modules_private_name():
    sources = _project_sources()
    assert len(sources) > 60 and any(m == "helpers.nn.generate" for _, m in sources)
    problems = [
        problem
        for path, module in sources
        for problem in private_name_uses(path.read_text(), str(path.relative_to(ROOT)), module, _project_names())
    ]
    assert not problems, "make these names public (no leading underscore) or move the code:\n" + "\n".join(problems)


def test_the_private_name_check_finds_planted_imports_and_attributes():
    project = _project_names()

    def check(source: str, module: str | None = "helpers.evaluation.explain", filename: str = "f.py") -> list[str]:
        return private_name_uses(source, filename, module, project)

    assert check("from helpers.nn.model import _x\n") == ["f.py:1: from helpers.nn.model import _x"]
    assert check("import torch\n\ndef f():\n    from ..nn.model import ok, _y\n") == [
        "f.py:4: from helpers.nn.model import _y"
    ]
    assert check("from . import evaluate as E\nE._private()\n") == ["f.py:2: helpers.evaluation.evaluate._private"]
    assert check("import helpers.nn.model as M\nM.DecoderOnlyTransformer._init_weights\n") == [
        "f.py:2: helpers.nn.model.DecoderOnlyTransformer._init_weights"
    ]
    assert check("import helpers\nhelpers.nn.model._x\n", module=None) == ["f.py:2: helpers.nn.model._x"]
    assert check("from helpers.course import notebooks\nnotebooks._read_py(p)\n", module=None) == [
        "f.py:2: helpers.course.notebooks._read_py"
    ]
    assert check("import bench_matmul\nbench_matmul._peak()\n", module=None) == ["f.py:2: bench_matmul._peak"]
    # what is allowed: a module's own private names, dunders, third-party private modules, public names
    assert check("from .explain import _note\n_note('x')\n") == []
    assert check("from helpers.nn import model as M\nM.__file__, M.generate\n") == []
    assert check("from google.colab import _message\nimport torch\ntorch._dynamo.reset()\n", module=None) == []
    assert check("from .model import _x\n", module="helpers.nn", filename="helpers/nn/__init__.py") == [
        "helpers/nn/__init__.py:1: from helpers.nn.model import _x"
    ]


# ---------------------------------------------------------------------------------------------
# tests/ mirrors helpers/: helpers/a/b.py is tested in tests/a/test_b.py

# modules whose tests live elsewhere for now (each entry must still lack its file: a test written for it must
# remove it from here)
WITHOUT_A_TEST_FILE: set[str] = set()  # none left


def modules_without_a_test_file(package: Path, tests: Path) -> list[str]:
    """Each module of ``package`` (but ``__init__`` and ``__main__``) whose mirrored test file is absent."""
    missing = []
    for path in sorted(package.rglob("*.py")):
        if path.name.startswith("__"):
            continue
        relative = path.relative_to(package)
        if not (tests / relative.parent / f"test_{relative.name}").is_file():
            missing.append(relative.as_posix())
    return missing


def test_every_helpers_module_has_its_test_file():
    missing = modules_without_a_test_file(ROOT / "helpers", ROOT / "tests")
    assert set(missing) - WITHOUT_A_TEST_FILE == set(), "write tests/<sub-package>/test_<module>.py for these"
    assert WITHOUT_A_TEST_FILE - set(missing) == set(), "these have a test file now: drop them from the list"


def test_the_mirror_check_finds_a_module_without_its_test_file(tmp_path):
    package, tests = tmp_path / "helpers", tmp_path / "tests"
    for name in ("__init__.py", "runtime.py", "nn/__init__.py", "nn/model.py", "nn/generate.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("")
    for name in ("test_runtime.py", "nn/test_model.py", "test_generate.py"):  # generate's test in the wrong folder
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text("")
    assert modules_without_a_test_file(package, tests) == ["nn/generate.py"]


# ---------------------------------------------------------------------------------------------------------------
# issue 49: text files are read and written as UTF-8 whatever the machine's code page (Windows: cp1252)

ENCODING_TESTS = [  # the unit tests of the modules that read and write text files (about 20 s)
    "tests/text",
    "tests/training/test_checkpoint.py",
    "tests/course/test_report.py",
    "tests/course/test_plotting.py",
    "tests/course/test_notebooks.py",
    "tests/course/test_written.py",
    "tests/hf/test_tiny.py",
    "tests/evaluation/test_evaluate.py",
    "tests/test_experiments.py",
    "tests/test_run_folder.py",
]


def test_helpers_opens_no_text_file_without_an_encoding():
    """The unit tests above under ``-X warn_default_encoding``: pyproject's filter turns an EncodingWarning raised
    from helpers/ into an error (a library's own warnings stay warnings)."""
    done = subprocess.run(
        [sys.executable, "-X", "warn_default_encoding", "-m", "pytest", "-q", "-p", "no:cacheprovider", *ENCODING_TESTS],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "EncodingWarning" not in "".join(line for line in done.stdout.splitlines() if "helpers/" in line)


def test_the_encoding_filter_catches_a_planted_read_without_encoding(tmp_path):
    """The control: a module of the package that reads a file without encoding= fails under the same filter."""
    text = tmp_path / "accents.txt"
    text.write_text("déjà vu\n", encoding="utf-8")
    planted = f"from pathlib import Path\nPath({str(text)!r}).read_text()\n"
    code = (
        "import types, warnings\n"
        "warnings.filterwarnings('error', category=EncodingWarning, module='helpers')\n"
        "module = types.ModuleType('helpers.planted')\n"
        f"exec(compile({planted!r}, 'helpers/planted.py', 'exec'), module.__dict__)\n"
    )
    done = subprocess.run([sys.executable, "-X", "warn_default_encoding", "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and "EncodingWarning: 'encoding' argument not specified" in done.stderr, done.stderr
    fixed = code.replace(".read_text()", ".read_text(encoding='utf-8')")
    assert (
        subprocess.run([sys.executable, "-X", "warn_default_encoding", "-c", fixed], capture_output=True).returncode
        == 0
    )


# Calls the static reading below lets through, each with why: (file under helpers/, the call as ast.unparse spells it)
TEXT_CALLS_WITHOUT_ENCODING = {
    ("runtime.py", "os.open(folder, os.O_RDONLY)"): "a file descriptor for fsync, no text",
    ("runtime.py", "open(tmp, mode, **{} if 'b' in mode else {'encoding': 'utf-8'})"): "encoding given unless binary",
    ("text/sources.py", "archive.open(names[0])"): "a zip member: ZipFile.open returns bytes",
    ("course/sandbox.py", "os.open(path, os.O_PATH | os.O_CLOEXEC)"): "a path descriptor for a Landlock rule",
    ("course/sandbox.py", "os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 384)"): "a descriptor to dup2",
    ("course/probes.py", "os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0))"): (
        "a probe's values read as bytes"
    ),
}


def text_calls_without_encoding(source: str) -> list[tuple[int, str]]:
    """(line, call) for each call in ``source`` that opens text without ``encoding=``: read_text, write_text, open
    (any object's, unless a string argument or ``mode=`` says binary) and a subprocess read as text (``text=True``
    or ``universal_newlines=True``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or any(k.arg == "encoding" for k in node.keywords):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", None))
        as_text = any(
            k.arg in ("text", "universal_newlines") and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in node.keywords
        )
        modes = [a.value for a in node.args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        modes += [k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
        binary = any("b" in str(m) for m in modes)
        if name in ("read_text", "write_text") or (name == "open" and not binary) or as_text:
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_every_text_file_call_in_helpers_names_its_encoding():
    """The run above sees only the modules its tests reach (helpers/scratch_run.py read two JSON files without an
    encoding and no test in the list ran them); this reads every module's source."""
    found = {
        (rel, call): line
        for path in sorted((ROOT / "helpers").rglob("*.py"))
        for rel in [path.relative_to(ROOT / "helpers").as_posix()]
        for line, call in text_calls_without_encoding(path.read_text(encoding="utf-8"))
    }
    missing = [
        f"helpers/{rel}:{line}: {call}"
        for (rel, call), line in found.items()
        if (rel, call) not in TEXT_CALLS_WITHOUT_ENCODING
    ]
    assert not missing, "add encoding='utf-8' (issue 49):\n" + "\n".join(missing)
    stale = [key for key in TEXT_CALLS_WITHOUT_ENCODING if key not in found]
    assert not stale, f"allowed calls no longer in helpers/ (remove them from TEXT_CALLS_WITHOUT_ENCODING): {stale}"
    # controls: what the reading must catch, and what it must let through
    planted = (
        "p.read_text()\np.write_text(s)\nopen(f)\nopen(f, 'w')\np.open()\nio.open(f, 'r')\njson.load(open(f))\n"
        "subprocess.run(c, text=True)\nsubprocess.run(c, universal_newlines=True)\n"
    )
    assert [line for line, _ in text_calls_without_encoding(planted)] == list(range(1, 10))
    fine = (
        "p.read_text(encoding='utf-8')\nopen(f, 'rb')\nopen(f, mode='wb')\np.write_text(s, encoding='utf-8')\n"
        "p.open('rb')\nsubprocess.run(c, text=True, encoding='utf-8')\nsubprocess.run(c, capture_output=True)\n"
    )
    assert text_calls_without_encoding(fine) == []


# ---------------------------------------------------------------------------------------------
# imports at the top of each module: the exceptions, each an optional dependency or one measured to slow start-up
# (`python -X importtime -m helpers --help`, 2-core CPU, torch already loaded), each with a comment that says which

LOCAL_IMPORTS = {  # (file under helpers/, module imported inside a function): why
    ("commands.py", "readline"): "optional: not on Windows",
    ("commands.py", ".hf.finetune"): "slow start-up: transformers, peft and datasets, 2.6 s",
    ("course/bootstrap.py", "importlib.metadata"): "ensure_course is copied verbatim into every notebook's first cell",
    ("course/bootstrap.py", "importlib.util"): "ensure_course is copied verbatim into every notebook's first cell",
    ("course/bootstrap.py", "os"): "ensure_course is copied verbatim into every notebook's first cell",
    ("course/bootstrap.py", "subprocess"): "ensure_course is copied verbatim into every notebook's first cell",
    ("course/bootstrap.py", "sys"): "ensure_course is copied verbatim into every notebook's first cell",
    ("course/colab.py", "google.colab"): "optional: Colab only",
    ("course/report.py", "google.colab"): "optional: Colab only",
    ("course/executors.py", "matplotlib"): "slow start-up: pyplot 0.3 s (and the Agg backend is chosen first)",
    ("course/executors.py", "matplotlib.pyplot"): "slow start-up: pyplot 0.3 s",
    ("course/notebooks.py", "matplotlib"): "slow start-up: pyplot 0.3 s (and the Agg backend is chosen first)",
    ("course/notebooks.py", "matplotlib.pyplot"): "slow start-up: pyplot 0.3 s",
    ("course/plotting.py", "matplotlib"): "slow start-up: pyplot 0.3 s",
    ("course/plotting.py", "matplotlib.pyplot"): "slow start-up: pyplot 0.3 s",
    ("course/plotting.py", "matplotlib.backends.backend_agg"): "slow start-up: pyplot 0.3 s",
    ("evaluation/explain.py", "matplotlib.pyplot"): "slow start-up: pyplot 0.3 s",
    ("course/executors.py", "nbclient"): "optional: the [dev] extra",
    (
        "course/exercises.py",
        "jupyter_core.paths",
    ): "optional: the [dev] extra (Jupyter's runtime folder, for the sandbox)",
    ("course/executors.py", "nbclient.exceptions"): "optional: the [dev] extra",
    ("course/executors.py", "nbformat"): "optional: the [dev] extra",
    ("course/notebooks.py", "nbclient"): "optional: the [dev] extra",
    ("course/notebooks.py", "nbclient.exceptions"): "optional: the [dev] extra",
    ("course/notebooks.py", "nbformat"): "optional: the [dev] extra",
    ("course/notebooks.py", "jupytext"): "optional: the [dev] extra",
    ("course/notebooks.py", "zmq"): "optional: the [dev] extra (with ipykernel)",
    ("course/exercises.py", "jupytext"): "optional: the [dev] extra",
    ("course/exercises.py", "nbformat"): "optional: the [dev] extra",
    ("course/report.py", "nbformat"): "optional: the [dev] extra",
    ("course/plotting.py", "IPython"): "slow start-up: 0.1 s, and only in a notebook",
    ("course/plotting.py", "IPython.display"): "slow start-up: 0.1 s, and only in a notebook",
    ("course/plotting.py", "ipywidgets"): "slow start-up: 0.14 s, and only in a notebook",
    ("embeddings.py", "gensim.models"): "slow start-up: 0.7 s",
    ("hf/finetune.py", "peft"): "optional: the [dev] extra",
    ("hf/loading.py", "peft"): "optional: the [dev] extra",
    ("hf/loading.py", "gguf"): "optional: only for a GGUF file",
    ("hf/loading.py", "transformers"): "slow start-up: 0.5 s",
    ("hf/loading.py", "transformers.utils"): "slow start-up: 0.5 s",
    ("text/testsets.py", "datasets"): "slow start-up: 0.6 s",
    ("training/train.py", "torch._dynamo"): "slow start-up: 1.0 s",
}
SAYS_WHY = ("optional", "slow start-up", "verbatim")


def local_import_problems(sources: dict[str, str]) -> list[str]:
    """Imports inside functions that LOCAL_IMPORTS does not list, listed ones that are gone, and listed ones without
    a comment (on the line or just above) that says why. ``sources``: path under helpers/ -> text."""
    import ast

    found, problems = set(), []
    for path, text in sorted(sources.items()):
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else ["." * node.level + (node.module or "")]
                )
                for module in modules:
                    found.add((path, module))
                    if (path, module) not in LOCAL_IMPORTS:
                        problems.append(f"helpers/{path}:{node.lineno} imports {module} inside {fn.name}: move it up")
                    elif path != "course/bootstrap.py":
                        said = lines[node.lineno - 1] + " " + (lines[node.lineno - 2] if node.lineno > 1 else "")
                        if not any(word in said for word in SAYS_WHY):
                            problems.append(f"helpers/{path}:{node.lineno}: no comment says why {module} is here")
    problems += [
        f"LOCAL_IMPORTS lists {k}, which is no longer imported inside a function" for k in LOCAL_IMPORTS.keys() - found
    ]
    return problems


def _helpers_texts() -> dict[str, str]:
    return {p.relative_to(ROOT / "helpers").as_posix(): p.read_text() for p in (ROOT / "helpers").rglob("*.py")}


def test_imports_sit_at_the_top_of_each_module_but_for_the_listed_exceptions():
    assert local_import_problems(_helpers_texts()) == []


def test_the_local_import_check_finds_a_new_one_a_missing_reason_and_a_stale_entry():
    texts = _helpers_texts()
    hidden = {**texts, "pipeline.py": texts["pipeline.py"] + "\n\ndef f():\n    from .training import train\n"}
    assert any("pipeline.py" in p and "move it up" in p for p in local_import_problems(hidden))
    stdlib = {**texts, "cli.py": texts["cli.py"] + "\n\ndef f():\n    import json\n"}
    assert any("cli.py" in p for p in local_import_problems(stdlib))
    bare = texts["embeddings.py"].replace("  # slow start-up (0.7 s)", "")
    assert any("no comment says why" in p for p in local_import_problems({**texts, "embeddings.py": bare}))
    moved_up = texts["training/train.py"].replace("import torch._dynamo", "pass")
    assert any("no longer imported" in p for p in local_import_problems({**texts, "training/train.py": moved_up}))
