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


def bars_wanted() -> bool:
    """Whether a library's own bar may draw: not under ``--json``/``--quiet`` (the CLI sets
    TQDM_DISABLE then) and only on a terminal."""
    import os

    on_terminal = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return on_terminal and os.environ.get("TQDM_DISABLE", "") not in ("1", "true", "True")


class library_bars:
    """Within the block, ``module.tqdm`` (a library's module-level bar, e.g. transformers' GGUF
    de-quantization) draws on stderr only when :func:`bars_wanted`. tqdm reads TQDM_DISABLE once, at
    import, so setting it later (as ``-q`` does) would not silence a bar that is already imported."""

    def __init__(self, module) -> None:
        self.module = module

    def __enter__(self):
        import functools

        self.original = getattr(self.module, "tqdm", None)
        if self.original is not None:
            self.module.tqdm = functools.partial(self.original, disable=not bars_wanted(), file=sys.stderr)
        return self

    def __exit__(self, *exc) -> None:
        if self.original is not None:
            self.module.tqdm = self.original
