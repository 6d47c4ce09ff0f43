"""What keeps a grade honest while a student's solution runs: the package's own answer out of reach, no patching.

The student copy ships with ``helpers``, which holds a reference implementation of most exercises, and the
student's cells run in the same interpreter as the checks. Two tricks would otherwise earn full marks without
solving anything (both were tried on Exercise 2.1): calling the package's implementation
(``from helpers.nn.model import sinusoidal_table``), or patching what the checks use
(``builtins.abs = lambda x: 0.0``). While the grader runs an exercise (its solution cells, then its checks):

- each function that implements the exercise (:data:`REFERENCES`: the package's, and a few of sacreBLEU's and
  torch's) is replaced by a stand-in that raises
  :class:`ReferenceOutOfReach` when it is called *from the student's code* (a frame compiled from one of the
  student's cells, whose file name starts with :data:`STUDENT_FILE`), directly or through a library or a function
  of the notebook's own cells (a check's); the checks, the notebook's own cells and the package's other functions
  still reach it, except under a probe (a cell of the grader's, :data:`PROBE_FILE`, whose values the verdict rests
  on), where a reference met with no frame of the student's or the package's on the way is refused whatever the
  student handed the probe, and the check's own :data:`CHECK_CALLERS` alone answer; what an exercise's function may
  not call (:data:`INSIDE`: torch's softmax in 1.2's, a module built in 2.9's) raises only while that function of
  the student's runs;
- the functions and classes of Python's builtins, ``math``, ``decimal``, ``operator``, ``random``, ``torch`` (with
  ``torch.Tensor``, ``torch.nn.functional``, ``torch.testing``), ``numpy`` and every loaded ``helpers`` module
  are noted before the exercise starts and compared after each of its cells: one replaced, added or deleted is
  put back and the exercise fails with :class:`TamperError`, naming it.

The grader sends :func:`begin`, :func:`verify` and :func:`end` to the kernel as cells of their own, so the
same code guards a Jupyter kernel and the in-process executor of the tests.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import linecache
import sys
import sysconfig
import threading
import types
from pathlib import Path

STUDENT_FILE = "<student"  # the file name the grader compiles a student's solution cell under
PROBE_FILE = "<probe"  # and each probe's statement, whose values the verifier judges (helpers.course.probes)
CHECK_FILE = "<check"  # and the course's own cells of an exercise (its checks), each code object of theirs kept

# exercise -> the functions of its check cells that call the exercise's reference themselves under a probe: to make
# the probe's inputs (3.4 draws a case where greedy decoding stops early; 6.1 draws the ways a place is written; 6.3
# measures one example's length), or to compare in the notebook's own feedback (01's checks run through
# probes.record; the verdict replays them outside the kernel). Called directly by one of these (or by a comprehension
# or lambda inside it), a reference answers under a probe.
CHECK_CALLERS: dict[str, tuple[str, ...]] = {
    "1.1": ("check_matches_package",),
    "1.2": ("check_stable_softmax",),
    "1.4": ("check_copying_bound",),
    "1.6": ("check_beta_needed",),
    "3.4": ("batch_decoding",),
    "6.1": ("drawn_answer_sets",),
    "6.3": ("finetune_cases",),
}

# exercise -> what implements it where a student could call it instead of solving (module path, attribute)
REFERENCES: dict[str, list[str]] = {
    "1.1": ["helpers.nn.attention.attention", "helpers.nn.attention.self_attention"],
    "1.2": ["helpers.course.check_inputs.exact_softmax"],  # the check's exact weights: a softmax of any scores
    # the check's worst cases: measuring the error there answers the exercise without the bound or the beta
    "1.4": ["helpers.course.check_inputs.worst_copy_case"],
    "1.6": ["helpers.course.check_inputs.worst_average_case"],
    "2.1": [
        "helpers.nn.model.sinusoidal_table",
        "helpers.nn.model.rotary",
        "helpers.nn.model.turn_qk",  # calls rotary from the package, where the stand-in cannot tell who asked
        "helpers.nn.model.SelfAttention.forward",  # turns q and k with rotary: reachable through a subclass
        "helpers.nn.variants.Rotary.forward",
    ],
    "2.2": [
        "helpers.nn.attention.attention",
        "helpers.nn.attention.self_attention",
        "helpers.nn.model.SelfAttention.forward",
        "helpers.nn.model.explicit_attention",
        "helpers.nn.model.fused_attention",
        "helpers.nn.model.scaled_scores",
        "helpers.nn.model.SelfAttention.attend",
        "helpers.nn.variants.VariantAttention.forward",
        "torch.nn.functional.scaled_dot_product_attention",  # the identity as values gives the weights
        "helpers.course.check_inputs.attention_by_loops",  # the check's reference, in plain Python
    ],
    "2.3": [
        "helpers.nn.model.SelfAttention.forward",
        "helpers.nn.model.turn_qk",
        "helpers.nn.model.SelfAttention.attend",
        "helpers.nn.variants.VariantAttention.forward",
        "helpers.nn.model.explicit_attention",
    ],
    # notebook 05's read_mask with horizons = positions is the prefix-LM (or, without lengths, the causal) mask
    "2.4": [
        "helpers.nn.model.build_attention_mask",
        "helpers.course.check_inputs.check_mask_entries",
        "helpers.nn.variants.read_mask",
        "helpers.nn.variants.latent_masks",
    ],
    "2.5": [
        "helpers.nn.model.build_attention_mask",
        "helpers.course.check_inputs.check_mask_entries",
        "helpers.nn.variants.read_mask",
        "helpers.nn.variants.latent_masks",
    ],
    "2.6": ["helpers.nn.model.FeedForward.forward"],
    "2.7": ["helpers.nn.model.Block.forward", "helpers.course.check_inputs.check_block_stream"],
    "2.8": [
        "helpers.nn.model.DecoderOnlyTransformer.forward",
        "helpers.nn.model.DecoderOnlyTransformer.embed",
        "helpers.nn.model.DecoderOnlyTransformer.run_blocks",
    ],
    "2.9": [
        "helpers.nn.model.num_parameters",
        "helpers.nn.model.parameter_counts",
        "helpers.training.sizing.non_embedding_parameters",
        "helpers.nn.variants.num_variant_parameters",
        "helpers.nn.variants.num_parameters",
    ],
    "2.10": ["helpers.text.batches.collate"],
    "2.11": [
        "helpers.nn.model.DecoderOnlyTransformer.generate",
        "helpers.nn.generate.generate",
        "helpers.nn.generate.greedy_decode",
        "helpers.nn.generate.CachedDecoder.start",
        "helpers.nn.generate.CachedDecoder.step",
        "helpers.nn.model.SelfAttention.forward",
    ],
    "3.2": [
        "helpers.text.batches.collate",
        "helpers.nn.model.build_attention_mask",
        "helpers.course.check_inputs.check_mask_entries",
        "helpers.nn.variants.read_mask",
        "helpers.nn.variants.latent_masks",
    ],
    "3.3": ["helpers.training.train.train"],
    "3.4": [
        "helpers.nn.model.DecoderOnlyTransformer.generate",
        "helpers.nn.generate.generate",
        "helpers.nn.generate.greedy_decode",
        "helpers.nn.generate.CachedDecoder.start",
        "helpers.nn.generate.CachedDecoder.step",
    ],
    "3.5": [
        "sacrebleu.metrics.bleu.BLEU.corpus_score",
        "sacrebleu.metrics.bleu.BLEU.compute_bleu",
        "sacrebleu.metrics.bleu.BLEU._extract_corpus_statistics",
        # the clipped n-gram counts of one sentence, and a reference's n-grams (a helper's 3.5, 2026-12-07)
        "sacrebleu.metrics.bleu.BLEU._compute_segment_statistics",
        "sacrebleu.metrics.bleu.BLEU._extract_reference_info",
        "helpers.evaluation.evaluate.score",
        "helpers.evaluation.evaluate.sentence_bleu_counts",
        "helpers.evaluation.evaluate.corpus_bleu_from_counts",
    ],
    "4.1": [
        "helpers.hf.translator.HFTranslator.encode_pair",
        "helpers.hf.translator.HFTranslator.prompt_ids",
        "helpers.hf.translator.PromptFormat.prompt",
        "helpers.hf.translator.PromptFormat.target",
    ],
    "4.2": ["helpers.hf.translator.HFTranslator.collate"],
    "4.3": ["helpers.evaluation.evaluate.bootstrap_bleu_difference"],
    "5.1": ["helpers.nn.variants.SynthesizerAttention.forward"],
    "5.2": ["helpers.nn.variants.read_mask", "helpers.nn.variants.latent_horizons", "helpers.nn.variants.latent_masks"],
    "5.3": ["helpers.nn.variants.alibi_slopes", "helpers.nn.variants.alibi_bias"],
    "5.4": ["helpers.training.pretrain.corrupt_span"],
    "6.1": [
        "helpers.knowledge.accuracy",
        "helpers.knowledge.normalise_answer",
        "helpers.knowledge.answer_profile",  # the accuracy among other figures (a helper's 6.1, 2026-12-07)
        "helpers.course.check_inputs.drawn_answer_sets",
    ],
    "6.2": ["helpers.knowledge.majority_answer"],
    "6.3": ["helpers.knowledge.finetune_example", "helpers.knowledge.labels_for"],
    "6.4": [
        "helpers.knowledge.corrupt_biography",
        "helpers.knowledge.pretraining_examples",
        "helpers.training.pretrain.corrupt_span",
    ],
    "6.5": ["helpers.knowledge.knowledge_table", "helpers.knowledge.run_knowledge"],
    "6.7": [
        "helpers.embeddings.put_word_vectors",
        "helpers.embeddings.word2vec_embeddings",
        "helpers.embeddings.start_embeddings",
        "helpers.embeddings._word2vec_rows",  # the rows, centred and scaled: the exercise (a helper's 6.7, 2026-12-07)
    ],
}

# exercise -> (the student's function, what it may not call, why): out of reach only while that function runs, so
# that the rest of the student's cells may use them (a comparison with torch.softmax under 1.2, a model built to
# print its size under 2.9). The check's own word on these ("library", "built") is the kernel's, which a student
# controls (getattr(torch, "soft" + "max"); sys.setprofile(None) removed 2.9's watch): two helpers, 2026-12-07
INSIDE: dict[str, tuple[str, list[str], str]] = {
    "1.2": (
        "stable_softmax",
        [
            *(f"{owner}.{name}" for owner in ("torch", "torch.Tensor", "torch.special") for name in ("softmax", "log_softmax")),
            "torch._softmax",
            "torch._log_softmax",
            "torch.nn.functional.softmax",
            "torch.nn.functional.log_softmax",
            "torch.nn.functional.softmin",
            "torch.logsumexp",
            "torch.Tensor.logsumexp",
            "torch.special.logsumexp",
        ],
        "the exercise is to write the softmax yourself",
    ),
    "2.9": ("count_parameters", ["torch.nn.Module.__init__"], "the count must come from the sizes in cfg, building nothing"),
}  # fmt: skip

# json: the probes write their values with json.dumps
_WATCHED_MODULES = (
    "builtins", "math", "decimal", "operator", "random", "json", "torch", "torch.nn.functional", "torch.testing", "numpy"
)  # fmt: skip
_IGNORED_NAMES = {"_", "__", "___", "input", "raw_input"}  # what an interactive prompt (ipykernel) rebinds per cell
_MISSING = object()
_HELPERS_DIR = str(Path(__file__).resolve().parents[1])


class ReferenceOutOfReach(RuntimeError):
    """A solution called the package's own implementation of the exercise being graded."""


class TamperError(RuntimeError):
    """A solution replaced, added or deleted a function of Python, torch, numpy or the course package."""


class _State:
    exercise: str | None = None
    saved: dict[str, dict[str, object]] = {}
    poisoned: list[tuple[object, str, object]] = []  # (owner, attribute, what to put back or _MISSING)


# ----------------------------------------------------------------------------------------------
# the reference out of reach


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Where installed libraries and the standard library live (the course package is told apart below)."""
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(str(p) for p in paths if p)


def _package_modules() -> dict[str, types.ModuleType]:
    """The loaded modules of the package, by name."""
    return {
        name: module
        for name, module in list(sys.modules.items())
        if module is not None and (name == "helpers" or name.startswith("helpers."))
    }


def _in_a_thread_of_its_own() -> bool:
    """Whether this is a thread other than the main one, where the grader runs every cell: a stack that ends there
    without a student's frame was started by someone's code (a student's ``ThreadPoolExecutor(1).submit(reference)``
    took 2.1, 2.9 and 5.2, a helper, 2026-12-07), and the guard counts it as the student's."""
    return threading.current_thread() is not threading.main_thread()


@functools.cache
def _package_codes(module_name: str) -> frozenset[int]:
    """The ids of every code object of a loaded module of the package: its functions' and classes' (methods,
    properties, static and class methods, and what a decorator such as ``torch.no_grad()`` or ``functools.cache``
    wraps), and those nested in them (inner functions, comprehensions). :func:`begin` reads them afresh before it
    puts anything out of reach, so that the originals are read, not their stand-ins."""
    module, codes, seen = sys.modules[module_name], [], set()

    def add(value):
        if value is None or id(value) in seen:
            return
        seen.add(id(value))
        if callable(value) or isinstance(value, property | staticmethod | classmethod | functools.cached_property):
            for inner in ("__wrapped__", "__func__", "func", "fget", "fset", "fdel"):  # decorators, descriptors
                if not isinstance(value, type):
                    try:
                        add(getattr(value, inner, None))
                    except Exception:  # noqa: BLE001, S112  (an object's own __getattr__ may raise anything)
                        continue
        if isinstance(value, type) and value.__module__ == module_name:
            for member in vars(value).values():
                add(member)
        elif isinstance(value, types.FunctionType | types.CodeType):
            code = value if isinstance(value, types.CodeType) else value.__code__
            codes.append(code)
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    add(const)

    for value in list(vars(module).values()):
        add(value)
    _KEPT_CODES[module_name] = codes  # alive, so that no other object takes one of their ids
    return frozenset(id(c) for c in codes)


_KEPT_CODES: dict[str, list[types.CodeType]] = {}


def _package_frame(frame) -> bool:
    """Whether ``frame`` runs a function of a loaded module of the package, in that module: not code a student
    compiled under a file name beneath ``helpers/`` (a helper took 2.1 that way, 2026-12-07). Not the probes' record
    and replay either, which call what the student handed them (``attend = probes._Recorder(reference)`` took 1.1,
    a reviewer, 2026-12-08): looked through like a library."""
    name = frame.f_globals.get("__name__", "")
    module = _package_modules().get(name)
    if (
        name == "helpers.course.probes"
        or module is None
        or vars(module) is not frame.f_globals
        or getattr(module, "__file__", None) != frame.f_code.co_filename
    ):
        return False
    return frame.f_code.co_name == "<module>" or id(frame.f_code) in _package_codes(name)


# id -> (every code object compile_check made, the name of the cell's function it belongs to); kept: ids stay unique
_CHECK_CODES: dict[int, tuple[types.CodeType, str]] = {}


def compile_check(source: str, label: str) -> types.CodeType:
    """A course cell of an exercise (a check), compiled under :data:`CHECK_FILE`, its code objects noted, each with
    the cell's function it lies in: a function of the student's compiled under the same name is not one of them, and
    the student's code may not note any (:class:`ReferenceOutOfReach`)."""
    if _called_from_student(sys._getframe(1)):
        raise ReferenceOutOfReach("compile_check compiles the course's own cells; a solution may not call it")
    filename = f"{CHECK_FILE} {label}>"
    code = compile(source, filename, "exec", dont_inherit=True)  # not this module's __future__ imports
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show the lines
    stack = [(code, "<module>")]
    while stack:
        inner, owner = stack.pop()
        _CHECK_CODES[id(inner)] = (inner, owner)
        for const in inner.co_consts:
            if isinstance(const, types.CodeType):  # a cell's function owns what is nested in it
                stack.append((const, const.co_name if owner == "<module>" else owner))
    return code


def check_source(source: str, label: str) -> str:
    """A course cell of an exercise as the kernel runs it: through :func:`compile_check` (IPython's own transformation
    first, so a magic works as in Jupyter)."""
    return (
        "import helpers.course.guard as _tbb_guard\n"
        f"exec(_tbb_guard.compile_check(get_ipython().transform_cell({source!r}), {label!r}), globals())"
    )


def _a_check_caller(frame) -> bool:
    """Whether ``frame`` runs one of the exercise's :data:`CHECK_CALLERS` (or code nested in it), as its check cell
    defined it."""
    code, (kept, owner) = frame.f_code, _CHECK_CODES.get(id(frame.f_code), (None, ""))
    return kept is code and owner in CHECK_CALLERS.get(_State.exercise or "", ())


def _called_from_student(frame) -> bool:
    """Whether the code that called is the student's. Library frames (torch's ``Module.__call__``, sacreBLEU's
    wrappers) and the notebook's own cells (a check's functions) are looked through: a student's function that calls a
    check's function that calls the reference is the student calling it. The first frame of the student's cell or of
    the package decides (the package's model calls its own attention while a check runs it for the student); a stack
    that ends in a thread of its own is the student's (:func:`_in_a_thread_of_its_own`), and so is a probe's stack with
    neither (:data:`PROBE_FILE`), unless the caller is one of the exercise's :data:`CHECK_CALLERS`."""
    caller = frame
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(STUDENT_FILE):
            return True
        if name.startswith(_HELPERS_DIR) and _package_frame(frame):
            return False
        if name.startswith(PROBE_FILE):
            # a probe reached the reference with neither frame on the way: through what the student handed it (the
            # reference bound to the exercise's name, a partial, a lazy map, a package layer built in __new__, a name
            # rebound by a hook after the cell; a helper's tricks, 2026-12-08), unless one of the check's own
            # CHECK_CALLERS called it. The values a probe saves are the verdict's.
            return not _a_check_caller(caller)
        # a library's frame, or a notebook cell's, or code compiled under another name: look through
        frame = frame.f_back
    return _in_a_thread_of_its_own()


def _innermost_code(value):
    """The code of the function ``value`` holds, under any decorators of its own (not a decorator's wrapper, which
    every function it decorates shares: a student's ``@timed`` on two functions, a helper's review, 2026-12-07)."""
    try:
        return getattr(inspect.unwrap(value), "__code__", None) if value is not None else None
    except ValueError:  # a cycle of __wrapped__
        return None


def _inside(frame, function: str) -> bool:
    """Whether the student's function ``function`` runs on the stack below ``frame``: a student's frame of that name,
    or of the function that name holds in the student's namespace (``stable_softmax = _f`` took 1.2 by name alone, a
    helper, 2026-12-07); in a thread of its own, always."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(STUDENT_FILE) and (
            code.co_name == function or _innermost_code(frame.f_globals.get(function)) is code
        ):
            return True
        frame = frame.f_back
    return _in_a_thread_of_its_own()


def _out_of_reach(original, exercise: str, dotted: str, inside: tuple[str, str] | None = None):
    """``original``'s stand-in: it raises when the student's code calls it (with ``inside`` = (function, why): only
    while that function of the student's runs)."""

    @functools.wraps(original)
    def stand_in(*args, **kwargs):
        caller = sys._getframe(1)
        if _called_from_student(caller) and (inside is None or _inside(caller, inside[0])):
            raise ReferenceOutOfReach(
                f"Exercise {exercise}: {dotted} computes what the exercise asks and is out of reach while your "
                "solution is graded. Write the code yourself."
                if inside is None
                else f"Exercise {exercise}: {inside[0]} may not call {dotted}: {inside[1]}."
            )
        return original(*args, **kwargs)

    del stand_in.__wrapped__  # not a way back to the original
    return stand_in


def _resolve(dotted: str) -> tuple[object, str]:
    """``"helpers.nn.model.sinusoidal_table"`` or ``"sacrebleu.metrics.bleu.BLEU.corpus_score"``: (owner, name)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:-1]:
            owner = getattr(owner, name)
        return owner, parts[-1]
    raise ImportError(f"{dotted}: no such module")


def _other_bindings(original, owner) -> list[tuple[object, str]]:
    """Where else a loaded module of the package holds ``original`` by a name of its own: ``from .train import
    train`` in ``helpers.training.sizing`` kept the package's training loop in reach for 3.3 (a helper, 2026-12-07)."""
    if not isinstance(original, types.FunctionType):
        return []
    return [
        (module, name)
        for module in _package_modules().values()
        if module is not owner
        for name, value in list(vars(module).items())
        if value is original
    ]


def _put_out_of_reach(owner, attribute: str, exercise: str, dotted: str, inside=None) -> None:
    raw = inspect.getattr_static(owner, attribute)
    _State.poisoned.append((owner, attribute, raw if attribute in vars(owner) else _MISSING))
    if isinstance(raw, staticmethod | classmethod):  # keep the descriptor: bound as before
        setattr(owner, attribute, type(raw)(_out_of_reach(raw.__func__, exercise, dotted, inside)))
    else:
        setattr(owner, attribute, _out_of_reach(getattr(owner, attribute), exercise, dotted, inside))


# ----------------------------------------------------------------------------------------------
# nothing patched


def _is_code(value) -> bool:
    return callable(value) and not isinstance(value, types.ModuleType)


def _namespaces() -> dict[str, object]:
    """What is watched, by name: the modules above, ``torch.Tensor``, every loaded module of the package and the
    classes each defines."""
    owners = {name: sys.modules[name] for name in _WATCHED_MODULES if sys.modules.get(name) is not None}
    if "torch" in owners:
        owners["torch.Tensor"] = owners["torch"].Tensor
    for name, module in _package_modules().items():
        owners[name] = module
        for attribute, value in list(vars(module).items()):  # its classes' methods too (a check's recorder's)
            if isinstance(value, type) and value.__module__ == name:
                owners[f"{name}.{attribute}"] = value
    return owners


def _snapshot() -> dict[str, dict[str, object]]:
    return {
        where: {k: v for k, v in vars(owner).items() if _is_code(v) and k not in _IGNORED_NAMES}
        for where, owner in _namespaces().items()
    }


def _library_wrapper(new, old) -> bool:
    """A library's own decorator around the same function (importing ``torch._dynamo`` wraps
    ``torch.manual_seed`` this way): the original, unchanged, inside library code; a student's wrapper is not."""
    code = getattr(new, "__code__", None)
    return (
        getattr(new, "__wrapped__", None) is old
        and code is not None
        and code.co_filename.startswith(_library_dirs())
        and not code.co_filename.startswith(_HELPERS_DIR)
    )


def begin(exercise: str) -> None:
    """Before an exercise's first cell: put its references out of the student's reach and note what is watched."""
    end()
    references = [(dotted, *_resolve(dotted)) for dotted in REFERENCES.get(exercise, [])]  # imports what they need
    inside = [(dotted, *_resolve(dotted)) for dotted in INSIDE.get(exercise, (None, []))[1]]
    _package_codes.cache_clear()  # the package's own code, read before any stand-in takes a name
    for name in _package_modules():
        _package_codes(name)
    for dotted, owner, attribute in references:
        original = inspect.getattr_static(owner, attribute)
        _put_out_of_reach(owner, attribute, exercise, dotted)
        for module, name in _other_bindings(original, owner):
            _put_out_of_reach(module, name, exercise, dotted)
    for dotted, owner, attribute in inside:
        function, _, why = INSIDE[exercise]
        _put_out_of_reach(owner, attribute, exercise, dotted, (function, why))
    _State.exercise = exercise
    _State.saved = _snapshot()


def verify() -> None:
    """After each cell of the exercise: anything watched that changed is put back, and the exercise fails."""
    if _State.exercise is None:
        return
    owners, now = _namespaces(), _snapshot()
    changed = []
    for where, before in _State.saved.items():
        after = now.get(where, {})
        for name, value in before.items():
            if after.get(name, _MISSING) is not value and not _library_wrapper(after.get(name), value):
                setattr(owners[where], name, value)
                changed.append(f"{where}.{name}")
        for name in after.keys() - before.keys():
            delattr(owners[where], name)
            changed.append(f"{where}.{name}")
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise TamperError(
            f"Exercise {_State.exercise}: the solution changed {shown}. A solution may not replace functions of "
            "Python, torch, numpy or the course package (they are put back); compute the answer instead."
        )


def end() -> None:
    """After an exercise: its references are the package's own again."""
    for owner, attribute, original in reversed(_State.poisoned):
        if original is _MISSING:
            delattr(owner, attribute)  # it was inherited: the base class's own shows again
        else:
            setattr(owner, attribute, original)
    _State.poisoned, _State.exercise, _State.saved = [], None, {}


def student_source(source: str, label: str) -> str:
    """A student's cell wrapped to run under a file name the guard recognises (in a kernel: a cell of its own).

    IPython's own transformation runs first, so a magic (``%time``) or shell line works as it does in Jupyter."""
    return (
        f"exec(compile(get_ipython().transform_cell({source!r}), {(STUDENT_FILE + ' ' + label + '>')!r}, 'exec'), "
        "globals())"
    )
