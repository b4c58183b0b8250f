"""Progress bars for long work (encoding, tuning, paraphrasing): on stderr, and only on a terminal."""
from __future__ import annotations

import sys


def progress_bar(total: int, enabled: bool, desc: str, unit: str = "text"):
    """A tqdm bar on stderr when it is a terminal, or a no-op when disabled or when stderr is not a
    terminal (a log file or a pipe would fill with carriage-return redraws)."""
    from tqdm.auto import tqdm

    on_terminal = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(total=total, disable=not (enabled and on_terminal), desc=desc, unit=unit, leave=False,
                file=sys.stderr)
