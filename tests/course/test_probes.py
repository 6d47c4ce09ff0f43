"""helpers.course.probes: plain values in and out, anything else refused by name; the probe calls found in a check
cell; the verifier judging saved values with the check cells' definitions alone."""

from __future__ import annotations

import json
import re

import pytest
import torch

from helpers.course import probes


class LyingTensor(torch.Tensor):
    """The trick of issue 50: a tensor whose allclose always agrees."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.allclose:
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def test_plain_values_go_out_and_come_back_as_they_were(tmp_path):
    values = {
        "out": torch.arange(6.0).reshape(2, 3),
        "mask": torch.tril(torch.ones(3, 3, dtype=torch.bool)),
        "list": [1, 2.5, "x", None, True, float("inf")],
        "pair": (torch.zeros(1), 3),
        "nested": {"a": [torch.ones(2, dtype=torch.int64)]},
    }
    probes.save(tmp_path / "v.json", values)
    back = probes.load(tmp_path / "v.json")
    assert type(back["out"]) is torch.Tensor and torch.equal(back["out"], values["out"])
    assert back["mask"].dtype == torch.bool and torch.equal(back["mask"], values["mask"])
    assert back["list"] == values["list"] and type(back["pair"]) is tuple and back["pair"][1] == 3
    assert torch.equal(back["nested"]["a"][0], values["nested"]["a"][0])


def test_a_tensor_subclass_a_module_and_a_function_are_refused_by_name(tmp_path):
    lying = torch.zeros(2).as_subclass(LyingTensor)
    assert torch.allclose(lying, torch.ones(2)), "the trick works where it runs"
    with pytest.raises(probes.RefusedValue, match="LyingTensor, a subclass of torch.Tensor"):
        probes.save(tmp_path / "v.json", {"out": lying})
    with pytest.raises(probes.RefusedValue, match=r"\['layer'\]: a torch.nn.modules.linear.Linear"):
        probes.save(tmp_path / "v.json", {"layer": torch.nn.Linear(2, 2)})
    with pytest.raises(probes.RefusedValue, match="function"):
        probes.save(tmp_path / "v.json", [print])
    with pytest.raises(probes.RefusedValue, match="keys must be strings"):
        probes.save(tmp_path / "v.json", {1: 2})


def test_a_file_that_is_not_what_save_writes_is_refused(tmp_path):
    probes.save(tmp_path / "v.json", {"x": torch.ones(1)})
    (tmp_path / "v.json").write_text(json.dumps({"__pickle__": "..."}))
    with pytest.raises(probes.RefusedValue, match="not what save writes"):
        probes.load(tmp_path / "v.json")


CHECK = """
import math


def helper(seed):
    return seed + 1


def probe_double(fn, seed=0):
    return fn(helper(seed))


def verify_double(value, seed=0):
    assert value == 2 * helper(seed), f"expected {2 * helper(seed)}, got {value}"


verify_double(probe_double(double))
print("this line never runs in the verifier")
verify_double(probe_double(lambda x: 2 * x), seed=0)
"""


def test_the_probe_calls_of_a_check_cell_and_the_statement_the_grader_runs(tmp_path):
    calls = probes.probe_calls(CHECK)
    assert [(c.probe, c.verify) for c in calls] == [
        ("probe_double(double)", "verify_double"),
        ("probe_double(lambda x: 2 * x)", "verify_double"),
    ]
    namespace = {"double": lambda x: 2 * x}
    exec("\n".join(probes.definitions([CHECK])), namespace)
    exec(probes.probe_statement(calls[0], tmp_path / "v.json", seed=41), namespace)
    assert probes.load(tmp_path / "v.json") == 84
    assert probes.probe_calls("verify_x(other(y))\nverify_x(probe_y(z))\nprobe_x(y)") == [], (
        "only verify_X(probe_X(..))"
    )


def test_the_verifier_runs_the_definitions_alone_and_judges_each_value(tmp_path):
    kept = "\n".join(probes.definitions([CHECK, "SCALE = 2.0\nDATA = load_everything()\nprint(SCALE)"]))
    assert "print(" not in kept and "def verify_double" in kept and "SCALE = 2.0" in kept
    assert "load_everything" not in kept, "an assignment that calls something is not executed by the verifier"
    jobs = []
    for i, value in enumerate([84, 83]):
        probes.save(tmp_path / f"{i}.json", value)
        jobs.append({"verify": "verify_double", "path": str(tmp_path / f"{i}.json"), "seed": 41})
    jobs.append({"verify": "verify_double", "path": str(tmp_path / "missing.json"), "seed": 41})
    (tmp_path / "bad.json").write_text("[1, 2")
    (tmp_path / "bad.json.safetensors").write_bytes(b"not safetensors")
    jobs.append({"verify": "verify_double", "path": str(tmp_path / "bad.json"), "seed": 41})
    verdicts = probes.verify_saved([CHECK], jobs)
    assert [v["ok"] for v in verdicts] == [True, False, False, False]
    assert verdicts[1]["message"] == "AssertionError: expected 84, got 83"
    assert "saved no values" in verdicts[2]["message"] and "refused" in verdicts[3]["message"]


def test_take_reads_the_values_into_the_grader_and_removes_them_so_a_later_rewrite_counts_for_nothing(tmp_path):
    """The grader takes a probe's values the moment its cell ends (a helper attacking the grader rewrote them from
    the kernel once the guard was down, and earned Exercise 2.1): what is written after the take is never read."""
    path = tmp_path / "2.1-0.json"
    probes.save(path, {"x": torch.ones(2)})
    taken = probes.take(path)
    assert not path.exists() and not (tmp_path / "2.1-0.json.safetensors").exists()
    probes.save(path, {"x": torch.zeros(2)})  # the kernel's rewrite, after the take
    job = {"verify": "verify_ones", "path": str(path), "seed": 0}
    check = "def verify_ones(values, seed=0):\n    assert torch.equal(values['x'], torch.ones(2)), 'not ones'\n"
    assert probes.verify_saved([check], [{**job, "taken": taken}])[0]["ok"]
    assert probes.verify_saved([check], [job])[0]["message"] == "AssertionError: not ones", (
        "the control: read from the folder afterwards, the rewrite is what is judged"
    )
    assert probes.take(tmp_path / "never.json") is None
    verdict = probes.verify_saved([check], [{**job, "taken": None}])[0]
    assert "saved no values" in verdict["message"] and "taken" not in verdict


def test_take_refuses_a_link_the_kernel_put_in_place_of_the_values(tmp_path):
    """The kernel may point the probe's file at one only the grader can read; the grader reads no link."""
    secret = tmp_path / "secret.txt"
    secret.write_text('{"__tensor__": "the hidden checks"}')
    path = tmp_path / "1.1-0.json"
    probes.save(path, 1)
    path.unlink()
    path.symlink_to(secret)
    taken = probes.take(path)
    assert "refused" in taken and "hidden checks" not in taken["refused"]
    verdict = probes.verify_saved(["def verify_x(v, seed=0):\n    pass\n"], [{"verify": "verify_x", "path": str(path),
                                                                              "seed": 0, "taken": taken}])[0]  # fmt: skip
    assert not verdict["ok"] and "refused" in verdict["message"] and secret.exists()


def test_the_verifier_compares_only_tensors_of_the_same_shape():
    """torch.allclose broadcasts: a tensor with a dimension of size 0 agrees with anything, and a smaller tensor with
    any it broadcasts to. A helper earned Exercise 1.1 with empty tensors; under strict_comparisons they fail."""
    empty, want = torch.empty(0, 1, 3), torch.tensor([[0.2, 0.3, 0.5]])
    assert torch.allclose(empty, want) and torch.allclose(torch.tensor([0.5]), torch.full((4,), 0.5)), "the hole"
    with probes.strict_comparisons():
        for compare in (torch.allclose, torch.Tensor.allclose, torch.isclose, torch.Tensor.isclose):
            with pytest.raises(AssertionError, match=r"shape \(0, 1, 3\) with one of shape \(1, 3\)"):
                compare(empty, want)
        assert torch.allclose(want, want.clone()) and not torch.allclose(want, want + 1)
        assert want.allclose(want) and bool(torch.isclose(want, want).all())
    assert torch.allclose(empty, want) and "allclose" not in vars(torch.Tensor), "put back as it was"


def _check_weights(fn, seed=0, compare=probes.close):
    """A recorded check, written as the notebooks' are: fn's weights for three scores must be softmax's."""
    scores = torch.tensor([1.0, 2.0, 3.0]) + seed
    assert compare(fn(scores), torch.softmax(scores, -1)), "weights differ"


def test_the_checks_comparison_refuses_a_wrong_shape_that_broadcasts_in_the_notebook_as_in_the_grader():
    """A wrong shape that broadcasts (weights of shape (1, 3) for (3,)) passed the notebook's check, whose
    torch.allclose broadcasts, and then failed at grading, where comparisons are strict: the checks compare with
    probes.close, which fails it in the notebook too, through record as through a verify. The student's own code,
    called by the check, keeps torch's broadcasting comparisons. The control: the same check written with
    torch.allclose lets the wrong shape by."""
    right = torch.softmax(torch.tensor([1.0, 2.0, 3.0]), -1)
    assert probes.close(right, right.clone()) and not probes.close(right, right + 1)
    for wrong in (right[None], torch.empty(0, 3)):
        with pytest.raises(AssertionError, match=re.escape(f"shape {tuple(wrong.shape)} with one of shape (3,)")):
            probes.close(wrong, right)
    one_too_many = lambda s: torch.softmax(s, -1)[None]  # noqa: E731
    _check_weights(one_too_many, compare=torch.allclose)  # the control: broadcasting lets it by
    with pytest.raises(AssertionError, match=re.escape("shape (1, 3) with one of shape (3,)")):
        probes.record(_check_weights, one_too_many)

    def broadcasting_student(s):  # compares with broadcasting itself, and returns the right shape
        assert torch.allclose(torch.softmax(s, -1).sum(-1, keepdim=True), torch.tensor(1.0))
        return torch.softmax(s, -1)

    values = probes.record(_check_weights, broadcasting_student)
    probes.replay(_check_weights, values)


def test_the_courses_checks_compare_tensors_with_probes_close_not_torch_allclose():
    """A check cell that compared with torch.allclose would let a broadcast wrong shape pass in the notebook alone
    (the grader's are strict): every check cell compares through probes.close. At 65ffe58 this found 45 lines."""
    from helpers.course import exercises, notebooks

    found, closes = [], 0
    for path in notebooks.notebook_sources():
        for cell in notebooks.read_py(path).cells:
            if cell.cell_type != "code" or exercises.CHECK not in cell.metadata.get("tags", []):
                continue
            closes += cell.source.count("probes.close(")
            found += [f"{path.name}: {line.strip()[:60]}" for line in cell.source.splitlines()
                      if "allclose(" in line or ".isclose(" in line.replace("math.isclose(", "")]  # fmt: skip
    assert not found, found
    assert closes >= 45, f"only {closes} comparisons through probes.close: were the check cells found?"


def test_take_refuses_a_fifo_at_once_instead_of_waiting_for_a_writer(tmp_path):
    """A FIFO left at the probe's path made the grader's read block for ever (a newcomer's review, 2026-12-07)."""
    import os

    path = tmp_path / "2.1-0.json"
    os.mkfifo(path)
    os.mkfifo(f"{path}.safetensors")
    taken = probes.take(path)  # returns: the test would hang here otherwise
    assert "refused" in taken and "not a regular file" in taken["refused"] and not path.exists()


SLOW_CHECK = """
def verify_count(values, seed=0):
    total = 0
    for v in values:  # the student's list: as long as they made it
        try:
            for _ in range(v):
                total += 1
        except Exception:  # a check's own handler must not swallow the time limit
            pass
    assert total >= 0
"""


def test_a_verify_that_runs_too_long_on_the_values_costs_its_exercise_not_the_grading(tmp_path):
    """Values far larger than asked (a billion steps of the check's loop, about a minute) stop the verify at its time
    limit: that exercise fails with a message, and the next job is judged. The control: the same jobs with no limit,
    the first job's loop cut to a million so that the test ends, both pass (a limit that did nothing would let the
    billion pass too, a minute late)."""
    assert probes.can_limit_time(), "pytest runs tests in the main thread, with no timer of its own"
    probes.save(tmp_path / "huge.json", [10**9])
    probes.save(tmp_path / "small.json", [1000])
    jobs = [{"verify": "verify_count", "path": str(tmp_path / name), "seed": 0} for name in ("huge.json", "small.json")]
    verdicts = probes.verify_saved([SLOW_CHECK], jobs, seconds=0.3)
    assert not verdicts[0]["ok"] and "longer than 0.3 s" in verdicts[0]["message"], verdicts[0]
    assert verdicts[1]["ok"], verdicts[1]
    probes.save(tmp_path / "huge.json", [10**6])
    assert all(v["ok"] for v in probes.verify_saved([SLOW_CHECK], jobs, seconds=None))


def test_the_time_limit_stops_a_block_once_and_leaves_nothing_behind():
    """time_limit on its own: a block that ends in time runs whole, and nothing fires after it (the handler and the
    timer are as before); a loop that would not end is stopped; a handler inside the block that swallows the stop
    is stopped again, and the block counts as too long; after all that, SIGALRM's handler is the one from before and
    no timer runs (the thread-based limit tried before left a stray one that hung later tests)."""
    import signal
    import time

    before = signal.getsignal(signal.SIGALRM)
    with probes.time_limit(5):
        done = sum(range(1000))
    time.sleep(0.05)
    assert done == 499500 and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with pytest.raises(probes.VerifyTooLong):
        with probes.time_limit(0.2):
            while True:
                time.sleep(0.01)
    swallowed = []
    with pytest.raises(probes.VerifyTooLong):
        with probes.time_limit(0.2):
            for _ in range(2):  # swallows the first stop; the second, a second later, ends the loop
                try:
                    deadline = time.monotonic() + 3  # bounded, so that a limit that stops once fails, not hangs
                    while time.monotonic() < deadline:
                        time.sleep(0.01)
                except BaseException as err:  # noqa: BLE001  (the swallowing a check could do by mistake)
                    swallowed.append(type(err))
    assert swallowed == [probes.VerifyTooLong] * 2
    with pytest.raises(probes.VerifyTooLong):  # swallowed once, and the block then ended: still too long
        with probes.time_limit(0.2):
            try:
                time.sleep(0.5)
                time.sleep(0)  # the handler runs between two operations
            except probes.VerifyTooLong:
                pass
    time.sleep(1.2)  # longer than the re-arm: a stray timer would raise here
    assert signal.getsignal(signal.SIGALRM) == before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_where_the_time_cannot_be_limited_the_block_runs_unlimited():
    """Outside the main thread (no signal handler can run there) and under a timer of the caller's own, time_limit
    is no limit, and says so through can_limit_time, rather than stealing the caller's timer."""
    import signal
    import threading

    seen = []

    def in_thread():
        seen.append(probes.can_limit_time())
        with probes.time_limit(0.01):
            seen.append(sum(range(10**5)))

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert seen == [False, sum(range(10**5))]
    previous = signal.signal(signal.SIGALRM, lambda *a: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        assert not probes.can_limit_time()
        with probes.time_limit(0.01):
            pass
        assert 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30, "the caller's timer is left running"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_probe_file_larger_than_the_cap_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    """The kernel may write a file of most of the machine's memory where a probe's values go; the grader reads at
    most MAX_VALUE_BYTES of it and refuses it by size. The control: the same values under a cap that fits them."""
    path = tmp_path / "v.json"
    probes.save(path, {"out": torch.zeros(4096)})  # 16 kB of tensor
    assert probes.load(path)["out"].shape == (4096,)
    monkeypatch.setattr(probes, "MAX_VALUE_BYTES", 8 << 10)
    with pytest.raises(probes.RefusedValue, match="more than 8,192 bytes"):
        probes.load(path)
    taken = probes.take(path)
    assert "refused" in taken and "far more than the check asks for" in taken["refused"], taken
