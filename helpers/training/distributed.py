"""Several processes, one model: what ``torchrun`` sets up, each rank's share of a batch, and the decisions that
rank 0 makes for everyone.

``torchrun --nproc_per_node N -m helpers train ...`` starts N copies of the same command, one per GPU (or per
CPU process, with the gloo backend); each reads RANK, WORLD_SIZE and LOCAL_RANK from its environment
(:func:`setup`). Every rank builds the same batches in the same order (same data, seed and batcher) and keeps its
own rows of each (:class:`ShardedBatcher`), so together the ranks train on exactly the batch a single process
would. DistributedDataParallel adds up the ranks' gradients, each weighted by its share of the batch's target
tokens (:func:`wrap`), which makes the update the single process's: the same mean over the same tokens, up to
the order in which floats are added. What depends on the clock (stop now? how long is the run? save now?) is
decided on rank 0 and sent to the others (:func:`from_main`), so every rank stops at the same step; only rank 0
writes checkpoints, metrics and figures. With one process none of this runs: the single-process run is unchanged.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..runtime import pick_device
from ..text.batches import Batch


@dataclass(frozen=True)
class Ranks:
    """This process's place among the ranks of a run (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world: int = 1
    local: int = 0  # the rank on this machine: which GPU is ours

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def several(self) -> bool:
        return self.world > 1

    def describe(self, device) -> str:
        return f"rank {self.rank} of {self.world} (torchrun), device {device}"


def ranks() -> Ranks:
    """The ranks of the process group this process belongs to (one rank when there is none)."""
    if not (dist.is_available() and dist.is_initialized()):
        return Ranks()
    rank = dist.get_rank()
    return Ranks(rank, dist.get_world_size(), int(os.environ.get("LOCAL_RANK", rank)))


def setup(prefer: str | None = None) -> tuple[Ranks, torch.device, bool]:
    """Join the process group that ``torchrun`` described in the environment, if any.

    Returns this process's :class:`Ranks`, its device (``cuda:LOCAL_RANK`` when GPUs are present and ``prefer`` does
    not say cpu) and whether this call started the group (then :func:`teardown` ends it). NCCL on GPUs, gloo on CPUs.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Ranks(), pick_device(prefer), False
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    device = pick_device(prefer)
    if device.type == "cuda":
        if local >= torch.cuda.device_count():
            raise RuntimeError(
                f"torchrun started {world} processes but this machine has {torch.cuda.device_count()} GPU(s): "
                "use --nproc_per_node at most the number of GPUs."
            )
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    started = not dist.is_initialized()
    if started:
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return Ranks(rank, world, local), device, started


def teardown(started: bool) -> None:
    if started and dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def process_group(prefer: str | None, command: str, err, progress: bool):
    """A command's run among its ranks: yields ``(ranks, device, err, progress)``; the group is left at the end.

    Every rank says first which it is and on which device; after that only rank 0 speaks (the others get a
    silent ``err`` and no progress bar). One process: ``err`` and ``progress`` come back as they were given.
    """
    r, device, started = setup(prefer)
    try:
        if r.several:
            print(f"{command}: {r.describe(device)}.", file=err, flush=True)
            err, progress = (err, progress) if r.main else (io.StringIO(), False)
        yield r, device, err, progress
    finally:
        teardown(started)


@contextlib.contextmanager
def main_first(r: Ranks):
    """Rank 0 runs the block first (it writes the tokenizer), the others after it, reading what it wrote."""
    if r.several and not r.main:
        dist.barrier()
    yield
    if r.several and r.main:
        dist.barrier()


# ---------------------------------------------------------------------------------------------- each rank's share


@dataclass
class ShardBatch(Batch):
    """One rank's rows of a batch; ``global_target_tokens`` counts the target tokens of all ranks' rows."""

    global_target_tokens: int = 0


def shard(batch: Batch, r: Ranks) -> ShardBatch:
    """Rank ``r``'s contiguous share of ``batch``'s rows (sizes differ by at most one).

    A rank left without rows (a batch of fewer sentences than ranks) gets a copy of the first row with no target
    tokens: it runs the same forward and backward as the others, as DistributedDataParallel needs, and adds nothing.
    """
    rows = torch.tensor_split(torch.arange(batch.input_ids.size(0)), r.world)[r.rank]
    labels = batch.labels[rows]
    if rows.numel() == 0:
        rows = torch.zeros(1, dtype=torch.long)
        labels = torch.full_like(batch.labels[rows], -100)
    n = int((labels != -100).sum())
    return ShardBatch(batch.input_ids[rows], labels, batch.prefix_len[rows], n, batch.n_target_tokens)


class ShardedBatcher:
    """The run's batcher, each batch cut down to this rank's rows; epochs, state and resume are the batcher's own."""

    def __init__(self, batcher, r: Ranks):
        self.batcher, self.ranks = batcher, r

    def __iter__(self):
        for batch in self.batcher:
            yield shard(batch, self.ranks)

    def __len__(self) -> int:
        return len(self.batcher)

    def __getattr__(self, name):  # set_epoch, state_dict, load_state_dict, examples: the wrapped batcher's
        if name == "batcher":
            raise AttributeError(name)
        return getattr(self.batcher, name)


def _token_weighted_allreduce(state: dict, bucket):
    # each rank's loss is a mean over its own target tokens: weighted by its share of the batch's tokens and summed,
    # the gradients are those of the mean over all of them (DDP's default would average the ranks' means instead)
    buffer = bucket.buffer().mul_(state["weight"])
    return dist.all_reduce(buffer, async_op=True).get_future().then(lambda fut: fut.value()[0])


def wrap(model: torch.nn.Module, device: torch.device):
    """``model`` in DistributedDataParallel, and the dictionary whose ``"weight"`` is this rank's token share."""
    net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    share = {"weight": 1.0}
    net.register_comm_hook(share, _token_weighted_allreduce)
    return net, share


# ---------------------------------------------------------------------------------------------- agreeing


def _comm_device(device: torch.device) -> torch.device:
    return device if dist.get_backend() == "nccl" else torch.device("cpu")


def from_main(values: list[float], device: torch.device) -> list[float]:
    """Rank 0's ``values`` on every rank (one small broadcast): decisions that read the clock are rank 0's."""
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_comm_device(device))
    dist.broadcast(t, 0)
    return t.tolist()


def object_from_main(obj):
    """Rank 0's ``obj`` (any picklable value) on every rank."""
    box = [obj]
    dist.broadcast_object_list(box, 0)
    return box[0]


def gather(obj) -> list:
    """Every rank's ``obj``, in rank order, on every rank (each rank's random-number state, for a checkpoint)."""
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


# ---------------------------------------------------------------------------------------------- launching


def torchrun_command(nproc: int, args: list[str]) -> list[str]:
    """``torchrun --nproc_per_node nproc -m helpers ARGS`` as an argument list, run with this Python."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "-m", "helpers"]
    return cmd + list(args)


def command_line(nproc: int, args: list[str]) -> str:
    """What to type in a terminal for the same run: ``torchrun --nproc_per_node N -m helpers ARGS``."""
    return shlex.join(["torchrun", f"--nproc_per_node={nproc}", "-m", "helpers", *map(str, args)])


def several_gpus(quick: bool) -> tuple[int, str | None]:
    """(GPUs on this machine, why a several-GPU run is skipped here, or None when it runs): notebooks 03 and 04."""
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    why = []
    if quick:
        why.append("quick mode (the run would train a second model for the whole budget)")
    if n < 2:
        why.append(f"this runtime has {'one GPU' if n == 1 else 'no GPU'}; a Kaggle notebook with two T4s, or a lab "
                   "machine, runs it")  # fmt: skip
    return n, "; ".join(why) or None


def launch(nproc: int, args: list[str], out=None) -> int:
    """Run ``python -m helpers ARGS`` in ``nproc`` processes under torchrun; its output goes to ``out`` (this cell).

    Notebooks 03 and 04 use it: new processes, one per GPU, started fresh, so a notebook that has already used its
    GPU can still launch (a fork of it could not). The budget, checkpoints and resume are the command's own: after a
    disconnect, running the cell again resumes. Returns torchrun's exit status.
    """
    out = out if out is not None else sys.stdout
    proc = subprocess.Popen(torchrun_command(nproc, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    while chunk := proc.stdout.read1(4096):  # what arrives, as it arrives (progress bars included)
        out.write(chunk.decode(errors="replace"))
        out.flush()
    return proc.wait()


def launch_or_say_why(n: int, why: str | None, args: list[str], out=None) -> bool:
    """The several-GPU cell of notebooks 03 and 04: print the torchrun command for ``args``, then run it on the ``n``
    GPUs, or say ``why`` it is skipped here. True when it ran; a failed run raises, pointing at its output."""
    print("the same run on every GPU of a machine:", command_line(max(n, 2), args), file=out)
    if why:
        print("skipped here:", why, file=out)
        return False
    status = launch(n, args, out)
    if status != 0:
        raise RuntimeError(f"torchrun stopped with status {status}: its last lines above say why.")
    return True
