"""The graded kernel's sandbox: Linux's Landlock, which any process may apply to itself without privileges.

The grader starts the student's kernel through this file (:func:`command`): it confines itself, then becomes the
kernel (``execve`` keeps the confinement, and every process the kernel starts inherits it). Confined, the student's
code

* reads every file but those beneath the ``denied`` paths (the course's solved notebooks, the hidden checks): a
  notebook cannot run the course's solutions from disk;
* creates, writes, renames and removes only beneath the ``writable`` paths (the kernel's working folder and the
  temporary folder, the reports folder, the caches): it cannot change the package or a file the grader reads after
  the kernel is gone (a verify that imports a module late would otherwise run the student's edit);
* cannot attach a debugger to the grader, or read its memory: a Landlock domain may not ptrace a process outside it.

Listing folders and running programs stay free. Where Landlock is missing (not Linux, a kernel before 5.19 or built
without it) :func:`abi` is 0, nothing is confined and the grader says so (``executors.Kernel``).

Standard library only: the kernel runs this file as a script before anything of the package is imported.

    python sandbox.py [--deny PATH]... [--write PATH]... -- KERNEL COMMAND...
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

# Landlock's syscalls (the same numbers on x86-64 and arm64) and access rights (linux/landlock.h)
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4: TCP ports
DOWNLOAD_PORTS = (443, 80)  # full mode downloads models; nothing else: not another kernel's ports on this machine
PR_SET_NO_NEW_PRIVS = 38
READ_FILE = 1 << 2
WRITE_FILE = 1 << 1
MAKE = sum(1 << bit for bit in (4, 5, 6, 7, 8, 9, 10, 11, 12))  # remove dir/file; make char/dir/reg/sock/fifo/block/sym
REFER = 1 << 13  # ABI 2: rename or link across folders (always handled from ABI 2 on)
TRUNCATE = 1 << 14  # ABI 3


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # struct landlock_path_beneath_attr is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


MIN_ABI = 2  # ABI 1 (Linux 5.13-5.18) denies every rename or link across folders once confined: treated as none


def abi() -> int:
    """This system's Landlock ABI version; 0 where there is none, or only ABI 1 (:data:`MIN_ABI`)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return int(version) if version >= MIN_ABI else 0


def write_rights(version: int) -> int:
    return WRITE_FILE | MAKE | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0)


def read_roots(denied: list[Path], readable: list[Path] | None = None) -> list[Path]:
    """The paths beneath which reading stays allowed: all of ``readable`` (default: everything) but the ``denied``
    paths. Landlock only grants, so a grant that holds a denied path is cut around it: each child of a folder on the
    way to the denied path that is neither denied nor on the way to one (files among them too; links left out)."""
    denied = [Path(p).resolve() for p in denied]
    tops = [Path("/")] if readable is None else [Path(r).resolve() for r in readable]
    tops = [t for t in tops if t.exists() and not any(t == d or d in t.parents for d in denied)]
    whole = [t for t in tops if not any(t in d.parents for d in denied)]
    cut = [t for t in tops if t not in whole]  # a denied path lies beneath: granted around it
    denied = [d for d in denied if any(t in d.parents for t in cut)]
    on_the_way = {a for d in denied for a in d.parents} | set(denied)
    roots = list(whole)
    for folder in sorted({a for d in denied for a in d.parents if any(a == t or t in a.parents for t in cut)}):
        try:
            children = sorted(folder.iterdir())
        except OSError:
            continue
        # a link is left out: its target is reached by its own path (granting it here could reach a denied path)
        roots += [c for c in children if c not in on_the_way and not c.is_symlink()]
    return roots


def confine(
    denied: list[Path], writable: list[Path], ports: list[int] | None = None, readable: list[Path] | None = None
) -> int:
    """Confine this process (and what it starts) as the module says; returns the ABI used, 0 when there is none
    (then nothing is confined). ``readable``: where it may read (default everywhere), but the ``denied`` paths;
    ``writable`` paths are readable too (a kernel's connection file may lie in a denied
    folder). ``ports``: from ABI 4 on, the only TCP ports it may listen on (a kernel's five), and it may connect to
    :data:`DOWNLOAD_PORTS` only (not to another kernel of this user); None leaves the network alone. Raises OSError
    if Landlock is there but refuses the rules."""
    version = abi()
    if version == 0:
        return 0
    libc, write = _libc(), write_rights(version)
    net = ports is not None and version >= 4
    handled = (ctypes.c_uint64 * 2)(READ_FILE | write, (BIND_TCP | CONNECT_TCP) if net else 0)  # landlock_ruleset_attr
    ruleset = libc.syscall(CREATE_RULESET, handled, ctypes.c_size_t(16 if net else 8), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        rules = [(p, READ_FILE) for p in read_roots(denied, readable)] + [
            (Path(p), write | READ_FILE) for p in writable
        ]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # gone since it was listed, or never there (an optional cache folder)
            try:
                if not os.path.isdir(path):
                    rights &= (
                        READ_FILE | WRITE_FILE | (TRUNCATE if version >= 3 else 0)
                    )  # a file takes file rights only
                attr = _PathBeneath(rights, fd)
                if libc.syscall(ADD_RULE, ruleset, ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(attr), 0) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        grants = [(port, BIND_TCP) for port in ports] + [(port, CONNECT_TCP) for port in DOWNLOAD_PORTS] if net else []
        for port, access in grants:
            rule = _NetPort(access, port)
            if libc.syscall(ADD_RULE, ruleset, ctypes.c_int(RULE_NET_PORT), ctypes.byref(rule), 0) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule port {port}: {os.strerror(ctypes.get_errno())}")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return version


def command(
    cmd: list[str],
    denied: list[Path],
    writable: list[Path],
    ports: list[int] | None = None,
    readable: list[Path] | None = None,
    output: Path | None = None,
) -> list[str]:
    """``cmd`` run confined: this file first, with the rules, then ``cmd`` in its place; ``output``: a file that
    takes its standard output and error instead of the grader's (whose log it could otherwise write into)."""
    rules = [a for p in denied for a in ("--deny", str(p))] + [a for p in writable for a in ("--write", str(p))]
    rules += [a for p in readable for a in ("--read", str(p))] if readable is not None else []
    rules += ["--output", str(output)] if output is not None else []
    rules += [a for port in ports for a in ("--port", str(port))] if ports is not None else ["--no-net"]
    return [sys.executable, str(Path(__file__).resolve()), *rules, "--", *cmd]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deny", action="append", default=[], type=Path)
    parser.add_argument("--write", action="append", default=[], type=Path)
    parser.add_argument("--port", action="append", default=[], type=int, help="a TCP port it may listen on")
    parser.add_argument("--read", action="append", default=None, type=Path, help="where it may read (default: all)")
    parser.add_argument("--no-net", action="store_true", help="leave the network alone")
    parser.add_argument("--output", type=Path, default=None, help="a file for its standard output and error")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("give the command to run after --")
    if args.output is not None:  # before anything is confined: the file is the grader's choice
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    confine(args.deny, args.write, None if args.no_net else args.port, args.read)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
