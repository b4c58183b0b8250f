"""Where encoders and generators run, decided here once: the device and the CPU threads.

Device: ``auto`` (the default) runs on CUDA when torch sees a GPU, else on the CPU path (ONNX
Runtime where its export passed the parity check, else torch); ``cpu`` and ``cuda`` force one, and
``cuda`` without a GPU is refused with a message that names ``--device cpu``. The device is a
run-time choice: it is never part of an encoder's ``spec()``, so an index built on a GPU opens on a
CPU and the other way round.

Precedence: the ``device`` argument, then the process default (the CLI's ``--device``, set with
:func:`device_scope` around a command), then ``$FAQSEARCH_DEVICE``, then a command's own default
(``ask`` answers one query faster on the CPU than CUDA starts), then :data:`~faqsearch.defaults.DEVICE`.

Threads: every core this process may use (``os.sched_getaffinity``, so a container or ``taskset``
limit is respected, not ``os.cpu_count()``), or ``--threads N`` / ``$FAQSEARCH_THREADS`` to share a
machine between processes. ONNX Runtime runs one inter-op thread; torch's inter-op pool is kept at
most the intra-op count, so no process runs more busy threads than it was given.
"""
from __future__ import annotations

import contextlib
import glob
import logging
import os
import sys
from typing import Iterator

from ..defaults import DEVICE, DEVICES
from ..errors import InvalidOptionError

log = logging.getLogger(__name__)

DEVICE_ENV = "FAQSEARCH_DEVICE"
THREADS_ENV = "FAQSEARCH_THREADS"

_process: str | None = None  # the CLI's --device for the command that runs (device_scope)


class DeviceError(InvalidOptionError):
    """A device that is not one of :data:`DEVICES`, or ``cuda`` where no GPU can be used."""


def _check(value: str, where: str) -> str:
    low = str(value).strip().lower()
    if low not in DEVICES:
        raise DeviceError(f"{where} must be one of {', '.join(DEVICES)}, not {value!r}")
    return low


def requested_device(device: str | None = None) -> str:
    """What was asked for: 'auto', 'cpu' or 'cuda' (validated; not yet resolved)."""
    if device:
        return _check(device, "device")
    if _process:
        return _process
    env = os.environ.get(DEVICE_ENV, "").strip()
    if env:
        return _check(env, DEVICE_ENV)
    return DEVICE


def _may_have_gpu() -> bool:
    """A cheap look for an NVIDIA driver before importing torch (which costs a second or more on the
    query path that ONNX Runtime keeps free of torch)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return bool(os.path.exists("/proc/driver/nvidia/version") or glob.glob("/dev/nvidia[0-9]*")
                or os.path.exists("/dev/dxg"))  # /dev/dxg: WSL2


def cuda_available(*, look_first: bool = True) -> bool:
    """Whether torch can run on a CUDA GPU here. With ``look_first`` torch is imported only where an
    NVIDIA driver is present (or torch is imported already)."""
    if look_first and "torch" not in sys.modules and not _may_have_gpu():
        return False
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # a broken driver install: no GPU for us
        return False


def resolve_device(device: str | None = None) -> str:
    """The device to run on: 'cpu' or 'cuda'. ``auto`` falls back to the CPU; ``cuda`` without a GPU
    raises :class:`DeviceError` saying how to run on the CPU instead."""
    want = requested_device(device)
    if want == "cpu":
        return "cpu"
    if want == "auto":
        return "cuda" if cuda_available() else "cpu"
    if cuda_available(look_first=False):
        return "cuda"
    raise DeviceError(
        "device 'cuda' was asked for (--device cuda or FAQSEARCH_DEVICE=cuda), but torch sees no CUDA GPU here "
        f"(torch.cuda.is_available() is False{_why_no_cuda()}). Run with --device cpu (or --device auto, which "
        "uses a GPU only where there is one)")


def _why_no_cuda() -> str:
    try:
        import torch
    except ImportError:
        return "; torch is not installed"
    if torch.version.cuda is None:
        return f"; this torch ({torch.__version__}) is a CPU-only build"
    return ""


@contextlib.contextmanager
def device_scope(device: str | None, default: str | None = None) -> Iterator[str]:
    """Within the block, encoders and generators loaded without a device use ``device`` (the CLI's
    ``--device``), else ``$FAQSEARCH_DEVICE``, else ``default`` (a command's own). An explicit
    ``cuda`` is checked at once, so a command without a GPU fails before it reads or writes anything.
    Yields what was asked for."""
    global _process
    value = _check(device, "--device") if device else None
    if value is None and default and not os.environ.get(DEVICE_ENV, "").strip():
        value = _check(default, "default device")
    previous, _process = _process, value
    try:
        want = requested_device()
        if want == "cuda":
            resolve_device()
        yield want
    finally:
        _process = previous


def use_device(device: str | None) -> str | None:
    """Set the process default device (None: back to ``$FAQSEARCH_DEVICE`` / auto); returns the
    previous one. For a library user who wants every encoder of a program on one device."""
    global _process
    previous, _process = _process, (_check(device, "device") if device else None)
    return previous


def cpu_only(reason: str, device: str | None = None) -> str:
    """'cpu' for an encoder that runs on the CPU only (numpy, int8 weights, ONNX Runtime's CPU
    provider): said once in the log when a GPU was asked for by name."""
    if requested_device(device) == "cuda":
        log.warning("%s runs on the CPU only; using the CPU although --device cuda was given", reason)
    return "cpu"


# ---------------------------------------------------------------------------------------- threads
def available_cores() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or taskset's limit)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


MAX_THREADS = 1024  # ONNX Runtime refused 2**31 with a traceback; far fewer already only wait for the cores
_WARNED: set[int] = set()  # thread counts past the cores already warned of (once a process)


def resolve_threads(threads: int | None = None) -> int:
    """Threads for one encoder or generator: ``threads``, else ``$FAQSEARCH_THREADS``, else every
    core this process may use. More than MAX_THREADS is refused; more than the cores, warned of (on
    2 cores, 64 threads made a question take 8.5 s instead of 1.6 s)."""
    if threads is None and not os.environ.get(THREADS_ENV, "").strip():
        return available_cores()
    what, given = ("threads", threads) if threads is not None else (THREADS_ENV, os.environ[THREADS_ENV].strip())
    try:
        n = int(given)
    except (TypeError, ValueError):
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise InvalidOptionError(f"{what} must be a whole number of threads from 1 to {MAX_THREADS}, not {given!r}")
    if n > available_cores() and n not in _WARNED:
        _WARNED.add(n)
        log.warning("%d threads on %d cores: they take turns and each call is slower; give at most %d", n,
                    available_cores(), available_cores())
    return n


def explicit_threads(threads: int | None = None) -> bool:
    """Whether a thread count was given (argument or environment) rather than taken from the cores."""
    return threads is not None or bool(os.environ.get(THREADS_ENV, "").strip())


def configure_torch(threads: int | None = None) -> int:
    """Set torch's intra-op threads (and its inter-op pool at most as many); returns the count."""
    import torch

    n = resolve_threads(threads)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    try:
        if torch.get_num_interop_threads() > n:
            torch.set_num_interop_threads(n)
    except RuntimeError:  # the inter-op pool can be sized only before its first use
        pass
    configure_tokenizers(threads)
    return n


def configure_tokenizers(threads: int | None = None) -> None:
    """A thread count that was given also bounds the Rust tokenizers' pool (sized when it starts;
    a RAYON_NUM_THREADS of the user's own is kept). Without one they use every core, as we do."""
    if explicit_threads(threads):
        os.environ.setdefault("RAYON_NUM_THREADS", str(resolve_threads(threads)))
