"""Progress bars for long work (encoding, tuning, paraphrasing): on stderr, and only on a terminal."""
from __future__ import annotations

import sys
from contextlib import contextmanager


def progress_bar(total: int, enabled: bool, desc: str, unit: str = "text"):
    """A tqdm bar on stderr when it is a terminal, or a no-op when disabled or when stderr is not a
    terminal (a log file or a pipe would fill with carriage-return redraws). The no-op is no tqdm: even
    disabled, a tqdm makes a multiprocessing lock (fixing the host process's start method) and a monitor
    thread, in an application whose every ask drew no bar."""
    if not (enabled and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False, file=sys.stderr)


class _NoBar:
    """What a bar that draws nothing answers: its methods do nothing."""

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None

    def set_postfix(self, *args, **kwargs) -> None:
        return None

    def close(self) -> None:
        return None


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


@contextmanager
def transformers_bars_off():
    """Within the block, transformers' and the Hugging Face hub's progress bars off (a model loaded from
    the cache draws one per file); after it, on again where they were on: turned off for good, an
    application embedding faqsearch lost the bars of its own downloads."""
    import transformers

    logging = transformers.utils.logging
    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            logging.enable_progress_bar()
