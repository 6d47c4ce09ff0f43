"""Progress of long work (training, fine-tuning, translating a test set): a bar where a person watches it, lines
where a file keeps it.

A terminal and a notebook get tqdm's live bar, redrawn in place. Anything else (``train ... 2> train.log``, a
job's captured output) gets :class:`LogLines`: the same figures as one plain line at most every
:data:`LOG_INTERVAL_S` seconds, and a last one at the end. A bar redrawn with carriage returns would leave a
15-minute run's log as one line of about a megabyte that neither a person nor ``grep`` can read.

    bar = progress_bar(total=900, desc="train", unit="s")    # the same calls for either kind
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from tqdm import tqdm
from tqdm.auto import tqdm as live_tqdm

LOG_INTERVAL_S = 30.0  # one line per half minute: 30 lines for a 15-minute run


def is_live(file: TextIO) -> bool:
    """Whether ``file`` is read as it is drawn: a terminal, or a notebook's output stream (ipykernel's)."""
    try:
        if file.isatty():
            return True
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False
    return type(file).__module__.startswith("ipykernel")


class LogLines(tqdm):
    """tqdm that writes whole lines, never a carriage return: one at most every ``interval`` seconds, one at the end.

    The bar itself is left out of the format (``|{bar}|``); the figures (percentage, counts, elapsed and remaining
    time, the postfix the caller sets) are tqdm's own.
    """

    PLAIN = "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]{postfix}"
    UNSIZED = "{desc}: {n_fmt} [{elapsed}, {rate_fmt}]{postfix}"  # no total: no percentage, no time left

    def __init__(self, *args, interval: float = LOG_INTERVAL_S, bar_format: str | None = None, **kwargs):
        self._interval, self._last_line, self._closing = interval, None, False
        if bar_format is None:
            iterable = kwargs.get("iterable", args[0] if args else None)
            known = kwargs.get("total") is not None or hasattr(iterable, "__len__")
            plain = self.PLAIN if known else self.UNSIZED
        else:  # the bar's place goes; a postfix (", step ...") then follows the figure before it directly
            plain = re.sub(r"\|?\{bar\}\|? ?", " ", bar_format).replace(" {postfix}", "{postfix}")
        kwargs.pop("dynamic_ncols", None)  # a line has no width to fit
        super().__init__(*args, bar_format=plain, mininterval=interval, **kwargs)

    def display(self, msg=None, pos=None) -> bool:
        if msg == "":  # tqdm clearing its line: a log keeps what it has
            return False
        now = self._time()
        if not self._closing and self._last_line is not None and now - self._last_line < self._interval:
            return False
        self._last_line = now
        self.fp.write((self.__str__() if msg is None else msg).rstrip() + "\n")
        self.fp.flush()
        return True

    def clear(self, nolock=False) -> None:
        """A log keeps its lines: nothing to wipe (tqdm's own would write a carriage return)."""

    def close(self) -> None:
        if self.disable or self._closing:
            return super().close()
        self._closing = True
        self.display()  # the last figures, whatever the interval
        self.leave = False  # tqdm's own closing would add a blank line
        super().close()


def progress_bar(*, file: TextIO | None = None, interval: float | None = None, **kwargs) -> tqdm:
    """tqdm's live bar where ``file`` (default: stderr) is a terminal or a notebook, else :class:`LogLines`, a line
    every ``interval`` seconds (default :data:`LOG_INTERVAL_S`)."""
    file = sys.stderr if file is None else file
    if is_live(file):
        return live_tqdm(file=file, **kwargs)
    return LogLines(file=file, interval=LOG_INTERVAL_S if interval is None else interval, **kwargs)
