"""
Strict checkpointing helpers for training scripts run under pause-and-resume
(freeze-thaw) schedulers.

A scheduler such as DyHPO pauses a trial by killing its process and resumes it by
starting a new process with the same ``st_checkpoint_dir``. The new process must
continue exactly where the old one stopped. The helpers in
:mod:`syne_tune.utils.checkpoint` swallow every load error and silently restart
training from scratch, which hides broken checkpoints and corrupts the learning
curves the scheduler models. The functions here never do that silently:

* :func:`save_checkpoint` writes atomically (temporary file in the same directory,
  then :func:`os.replace`), so a process killed while saving leaves the previous
  checkpoint intact.
* :func:`load_checkpoint` returns ``None`` only when there is no checkpoint. A
  checkpoint that exists but cannot be read raises :class:`CheckpointError`, naming
  the file and the cause, unless the caller explicitly asks for
  ``on_error="restart"``, in which case a warning is logged and ``None`` is
  returned.
* :func:`capture_training_state` / :func:`restore_training_state` bundle model,
  optimizer, learning rate scheduler and random number generator states (torch,
  numpy, Python :mod:`random`), so that a resumed run continues bit-for-bit like an
  uninterrupted one.

Typical use in a training script:

.. code-block:: python

   from syne_dyhpo.checkpointing import (
       load_checkpoint, save_checkpoint, capture_training_state, restore_training_state
   )

   ckpt = load_checkpoint(args.st_checkpoint_dir)
   start_epoch = 1
   if ckpt is not None:
       restore_training_state(ckpt.state, model=model, optimizer=optimizer,
                              lr_scheduler=lr_scheduler)
       start_epoch = ckpt.epoch + 1
   for epoch in range(start_epoch, args.epochs + 1):
       ...  # train and evaluate one epoch
       save_checkpoint(args.st_checkpoint_dir, capture_training_state(
           model=model, optimizer=optimizer, lr_scheduler=lr_scheduler), epoch)
       report(epoch=epoch, val_accuracy=acc)   # report *after* saving
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import glob
import hashlib
import logging
import os
import pathlib
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from syne_dyhpo.checks import checked_integer

logger = logging.getLogger(__name__)

CHECKPOINT_FILENAME = "checkpoint.pt"
"""Default file name of the checkpoint inside ``checkpoint_dir``."""

FORMAT_VERSION = 1

_TMP_SUFFIX = ".tmp"

OnError = Literal["raise", "restart"]


class CheckpointError(RuntimeError):
    """
    Raised when a checkpoint exists but cannot be used (unreadable, truncated,
    corrupt, written in an unknown format, or not matching the objects it is
    restored into).

    :param path: Path of the offending checkpoint file
    :param cause: Human readable description of the problem
    """

    def __init__(self, path: str | os.PathLike, cause: str):
        self.path = str(path)
        self.cause = cause
        super().__init__(f"Cannot use checkpoint {self.path}: {cause}")


@dataclass(frozen=True)
class Checkpoint:
    """
    Content of a checkpoint file as returned by :func:`load_checkpoint`.

    :param epoch: Last epoch completed when the checkpoint was written
    :param state: The ``state`` dictionary passed to :func:`save_checkpoint`
    :param path: File the checkpoint was read from
    """

    epoch: int
    state: dict[str, Any]
    path: str


def checkpoint_path(
    checkpoint_dir: str | os.PathLike, filename: str = CHECKPOINT_FILENAME
) -> Path:
    """
    :param checkpoint_dir: Checkpoint directory (``st_checkpoint_dir``)
    :param filename: Name of the checkpoint file
    :return: Full path of the checkpoint file
    """
    return Path(checkpoint_dir) / filename


def save_checkpoint(
    checkpoint_dir: str | os.PathLike,
    state: dict[str, Any],
    epoch: int,
    filename: str = CHECKPOINT_FILENAME,
    fsync: bool = True,
) -> Path:
    """
    Writes ``state`` and ``epoch`` to ``checkpoint_dir/filename`` atomically: the
    data is written with :func:`torch.save` to a temporary file in the same
    directory, flushed to disk, and then moved over the old checkpoint with
    :func:`os.replace`. Readers therefore see either the old or the new checkpoint,
    never a partial file, even if the process is killed while saving (the
    scheduler pauses trials by killing them).

    Call this *before* reporting the epoch to Syne Tune, so that every reported
    epoch is covered by a checkpoint.

    :param checkpoint_dir: Directory to write to, created if missing
    :param state: Dictionary to store: dicts, lists, tuples and sets of tensors,
        ``None``, Python scalars (bool, int, float, complex), strings, bytes, torch
        sizes, dtypes and devices, numpy scalars and arrays (an object array only of
        the values listed here) and :mod:`pathlib` paths. :func:`load_checkpoint`
        returns these equal and of the same type, with ``weights_only=True`` (nothing
        else is unpickled); anything else is refused here (:func:`check_loadable`).
        :func:`capture_training_state` produces such a dictionary from its arguments
    :param epoch: Last completed epoch (1-based; an integer >= 0), stored next to
        ``state``
    :param filename: Name of the checkpoint file
    :param fsync: Flush the file to disk before renaming it (safe against power
        loss; costs some milliseconds per call on slow file systems)
    :return: Path of the written checkpoint
    :raises ValueError: if ``epoch`` is not an integer >= 0 (naming it and the value)
    :raises TypeError: if ``state`` holds a value :func:`load_checkpoint` could not
        return (naming its key and type)

    A process killed with SIGKILL in the middle of this call leaves its temporary
    file (``.<filename>.<host>.<pid>.*.tmp``) behind; it is never read. The next
    successful save of the same checkpoint deletes those of its temporaries that were
    written on this machine by processes that no longer run
    (:func:`remove_stale_temporaries`); a concurrent writer's file is left alone.
    """
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    epoch = checked_integer("epoch", epoch, 0, integral_floats=True)
    check_loadable(state)
    directory = Path(checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / filename
    payload = {"format_version": FORMAT_VERSION, "epoch": epoch, "state": state}
    started = time.time()
    fd, tmp_name = tempfile.mkstemp(
        prefix=_temporary_prefix(filename, os.getpid()), suffix=_TMP_SUFFIX, dir=str(directory)
    )
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.chmod(tmp_name, 0o666 & ~_current_umask())  # mkstemp creates 0600
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    remove_stale_temporaries(directory, filename, older_than=started)
    return target


def _host_tag() -> str:
    """A short tag of this machine's host name, safe in a file name."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def _temporary_prefix(filename: str, pid: int) -> str:
    """Start of the name of a temporary file of :func:`save_checkpoint`: the checkpoint's
    file name, this machine's host tag and the writing process' id."""
    return f".{filename}.{_host_tag()}.{pid}."


def _process_runs(pid: int) -> bool:
    """Whether process ``pid`` of this machine exists (a zombie counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # runs under another user
        return True
    return True


def remove_stale_temporaries(
    checkpoint_dir: str | os.PathLike, filename: str = CHECKPOINT_FILENAME, older_than: float | None = None
) -> list[Path]:
    """
    Deletes the temporary files that saves of ``checkpoint_dir/filename`` killed while
    writing (:func:`save_checkpoint`) left behind: those written on this machine by a
    process that no longer runs and last modified before ``older_than``. The temporary
    files of running processes (a concurrent writer), of other machines sharing the
    directory and of other checkpoint files are kept. :func:`save_checkpoint` calls this
    after each successful save. Does nothing where processes cannot be probed (not POSIX).

    :param checkpoint_dir: Checkpoint directory
    :param filename: Name of the checkpoint file
    :param older_than: Only files last modified before this time (seconds since the
        epoch) are deleted; None: any time
    :return: The deleted files
    """
    if os.name != "posix":
        return []
    host_prefix = f".{filename}.{_host_tag()}."
    removed = []
    for path in Path(checkpoint_dir).glob(f"{glob.escape(host_prefix)}*{_TMP_SUFFIX}"):
        pid_text = path.name[len(host_prefix):].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _process_runs(int(pid_text)):
            continue
        try:
            if older_than is not None and path.stat().st_mtime >= older_than:
                continue
            path.unlink()
        except FileNotFoundError:  # removed by another save meanwhile
            continue
        except OSError as ex:
            logger.debug(f"cannot remove stale temporary checkpoint file {path}: {ex}")
            continue
        removed.append(path)
    return removed


def _current_umask() -> int:
    try:  # Linux: read it without changing it (os.umask is process-wide, racy)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def load_checkpoint(
    checkpoint_dir: str | os.PathLike | None,
    filename: str = CHECKPOINT_FILENAME,
    on_error: OnError = "raise",
    map_location: str | torch.device | None = "cpu",
    weights_only: bool = True,
) -> Checkpoint | None:
    """
    Loads the checkpoint written by :func:`save_checkpoint`.

    :param checkpoint_dir: Checkpoint directory (``st_checkpoint_dir``). If
        ``None`` (script not run by Syne Tune), ``None`` is returned
    :param filename: Name of the checkpoint file
    :param on_error: What to do if the checkpoint file exists but cannot be read.
        "raise" (default): raise :class:`CheckpointError`. "restart": log a
        warning naming the file and the cause, and return ``None`` so that
        training restarts from scratch (the broken file is overwritten by the
        next :func:`save_checkpoint`)
    :param map_location: Passed to :func:`torch.load`
    :param weights_only: Passed to :func:`torch.load`. Keep ``True`` unless your
        state contains arbitrary Python objects (unpickling them can run code)
    :return: :class:`Checkpoint` with ``epoch`` and ``state``, or ``None`` if no
        checkpoint exists (or it is broken and ``on_error="restart"``)
    :raises CheckpointError: if the checkpoint exists but cannot be read and
        ``on_error="raise"``
    """
    if on_error not in ("raise", "restart"):
        raise ValueError(f"on_error must be 'raise' or 'restart', got {on_error!r}")
    if checkpoint_dir is None:
        return None
    path = checkpoint_path(checkpoint_dir, filename)
    if not path.exists():
        return None
    try:
        try:
            with _allowing(_numpy_and_path_globals()):
                payload = torch.load(
                    path, map_location=map_location, weights_only=weights_only
                )
        except Exception as ex:
            raise CheckpointError(
                path, f"reading failed ({type(ex).__name__}: {ex})"
            ) from ex
        if not isinstance(payload, dict) or not {"epoch", "state"} <= set(payload):
            raise CheckpointError(
                path,
                "not written by syne_dyhpo.checkpointing.save_checkpoint "
                "(expected a dict with keys 'epoch' and 'state')",
            )
        version = payload.get("format_version")
        if version != FORMAT_VERSION:
            raise CheckpointError(path, f"unknown format_version {version!r}")
        epoch, state = payload["epoch"], payload["state"]
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise CheckpointError(path, f"invalid epoch {epoch!r}")
        if not isinstance(state, dict):
            raise CheckpointError(
                path, f"state is a {type(state).__name__}, not a dict"
            )
    except CheckpointError as ex:
        if on_error == "restart":
            logger.warning(
                f"{ex}. on_error='restart': ignoring it and training from scratch; "
                "the file will be overwritten by the next checkpoint."
            )
            return None
        raise
    return Checkpoint(epoch=epoch, state=state, path=str(path))


# --------------------------------------------------------------------------- #
# What a checkpoint may hold                                                   #
# --------------------------------------------------------------------------- #

# exact types: a subclass (an IntEnum, a namedtuple, a numpy matrix) is pickled as
# its own class, which loading with weights_only=True refuses
_PLAIN_TYPES = (
    type(None), bool, int, float, complex, str, bytes, bytearray,
    torch.Size, torch.dtype, torch.device,
)
_CONTAINERS = (dict, collections.OrderedDict, list, tuple, set)
_TENSORS = (torch.Tensor, torch.nn.Parameter)
_PATHS = (pathlib.PosixPath, pathlib.WindowsPath, pathlib.PurePosixPath, pathlib.PureWindowsPath)


def _numpy_and_path_globals() -> list[Any]:
    """What unpickling numpy scalars and arrays, pathlib paths, sets, complex numbers, bytes
    and bytearrays needs, allowed (for one :func:`torch.load`) on top of torch's
    ``weights_only`` set: numpy's scalar and array reconstructors and dtype classes (they
    build values from bytes; an object array's items still need their own classes, which stay
    refused), the path classes, and ``set``, ``complex``, ``bytearray`` and
    ``_codecs.encode`` (which rebuilds bytes), which older torch versions do not allow by
    default."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray  # type: ignore[no-redef]  # the same module, numpy 1's path
    dtype_classes = [
        getattr(np.dtypes, n) for n in dir(getattr(np, "dtypes", ())) if n.endswith("DType")
    ]
    return [
        multiarray.scalar,
        multiarray._reconstruct,
        np.ndarray,
        np.dtype,
        *dtype_classes,
        *_PATHS,
        set,
        complex,
        bytearray,
        codecs.encode,
    ]


@contextlib.contextmanager
def _allowing(safe_globals: list[Any]) -> Iterator[None]:
    """Adds those of ``safe_globals`` that torch's ``weights_only`` unpickler does not allow
    yet to its allowed globals while the block runs, and removes just these afterwards: what
    the caller had allowed before stays allowed. Uses ``torch.serialization.safe_globals``
    where torch has it (2.5 on); torch 2.4 has only ``add_safe_globals``, so the block's
    additions are taken out of the list it keeps afterwards."""
    serialization = torch.serialization
    before = list(serialization.get_safe_globals())
    missing = [g for g in safe_globals if g not in before]
    if hasattr(serialization, "safe_globals"):
        with serialization.safe_globals(missing):
            yield
        return
    serialization.add_safe_globals(missing)
    try:
        yield
    finally:
        kept = [g for g in serialization.get_safe_globals() if not any(g is m for m in missing)]
        serialization.clear_safe_globals()
        serialization.add_safe_globals(kept)


def check_loadable(state: Any, key: str = "state") -> None:
    """Raises a TypeError naming the key and the type of the first value in ``state``
    that :func:`load_checkpoint` could not return as it was saved (see
    :func:`save_checkpoint` for what may be stored).

    :param state: What is to be saved
    :param key: Name of ``state`` in the message (nested keys are appended)
    """
    _check_loadable(state, key, set())


def _check_loadable(value: Any, key: str, active: set[int]) -> None:
    kind = type(value)
    if kind in _PLAIN_TYPES or kind in _TENSORS or kind in _PATHS:
        return
    if isinstance(value, np.generic):
        if value.dtype.hasobject:
            raise TypeError(f"{key}: numpy object scalar {value!r} cannot be saved; store the object itself")
        return
    if kind is np.ndarray:
        if value.dtype.hasobject:
            for i, item in enumerate(value.flat):
                _check_loadable(item, f"{key}.flat[{i}]", active)
        return
    if kind not in _CONTAINERS:
        raise TypeError(
            f"{key} is a {kind.__module__}.{kind.__qualname__}, which a checkpoint cannot hold "
            "(it would not load with weights_only=True): convert it to tensors, numbers, "
            "strings, numpy arrays, lists, tuples or dicts of these"
        )
    if id(value) in active:
        raise TypeError(f"{key} contains itself")
    active.add(id(value))
    if isinstance(value, dict):
        for k, v in value.items():
            _check_loadable(k, f"{key} key {k!r}", active)
            _check_loadable(v, f"{key}[{k!r}]", active)
    else:
        for i, v in enumerate(value):
            _check_loadable(v, f"{key}[{i}]", active)
    active.discard(id(value))


# --------------------------------------------------------------------------- #
# Bundling training state                                                      #
# --------------------------------------------------------------------------- #


def get_rng_state() -> dict[str, Any]:
    """
    Captures the global random number generator states of torch (CPU and, if
    available, CUDA), numpy (legacy global ``np.random``) and Python
    :mod:`random`, in a form that :func:`torch.load` can read with
    ``weights_only=True`` (tensors, lists and scalars only).

    :return: Dictionary to be passed to :func:`set_rng_state`
    """
    np_state = np.random.get_state(legacy=False)
    py_version, py_internal, py_gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "python": [py_version, list(py_internal), py_gauss],
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """
    Restores random number generator states captured by :func:`get_rng_state`.

    :param state: Dictionary returned by :func:`get_rng_state`
    """
    torch.set_rng_state(state["torch"])
    np_state = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": np_state["bit_generator"],
            "state": {
                "key": np_state["key"].numpy().astype(np.uint32),
                "pos": int(np_state["pos"]),
            },
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        }
    )
    py_version, py_internal, py_gauss = state["python"]
    random.setstate((py_version, tuple(py_internal), py_gauss))
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


def capture_training_state(
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    lr_scheduler: Any | None = None,
    extra: dict[str, Any] | None = None,
    include_rng: bool = True,
) -> dict[str, Any]:
    """
    Bundles everything needed to continue training bit-for-bit into one
    dictionary, to be passed to :func:`save_checkpoint`. Call it at the end of an
    epoch, after evaluation (evaluation must not consume random numbers that
    training would otherwise use, or capture the state before it).

    :param model: Model whose ``state_dict`` is stored
    :param optimizer: Optimizer whose ``state_dict`` is stored
    :param lr_scheduler: Learning rate scheduler whose ``state_dict`` is stored
    :param extra: Additional entries (e.g. the state of your own
        :class:`torch.Generator`, running statistics, best score so far, a sampler's
        position); what :func:`save_checkpoint` accepts, returned as saved
    :param include_rng: Store global RNG states (:func:`get_rng_state`)
    :return: State dictionary
    """
    state: dict[str, Any] = {}
    if model is not None:
        state["model"] = model.state_dict()
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    if lr_scheduler is not None:
        state["lr_scheduler"] = lr_scheduler.state_dict()
    if include_rng:
        state["rng"] = get_rng_state()
    state["extra"] = dict(extra) if extra is not None else {}
    return state


def restore_training_state(
    state: dict[str, Any],
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    lr_scheduler: Any | None = None,
    restore_rng: bool = True,
    path: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """
    Restores a state produced by :func:`capture_training_state` into freshly
    constructed objects (built with the same hyperparameters). Loading is strict:
    an object passed here whose entry is missing from ``state``, or whose
    ``load_state_dict`` fails (e.g. different architecture), raises
    :class:`CheckpointError`.

    :param state: State dictionary (``Checkpoint.state``)
    :param model: Model to load into
    :param optimizer: Optimizer to load into
    :param lr_scheduler: Learning rate scheduler to load into
    :param restore_rng: Restore global RNG states, if stored
    :param path: Checkpoint path, only used in error messages
    :return: The ``extra`` dictionary passed to :func:`capture_training_state`
    """
    where = path if path is not None else "<state>"
    for key, obj in (
        ("model", model),
        ("optimizer", optimizer),
        ("lr_scheduler", lr_scheduler),
    ):
        if obj is None:
            continue
        if key not in state:
            raise CheckpointError(where, f"no '{key}' entry in the checkpoint")
        try:
            obj.load_state_dict(state[key])
        except Exception as ex:
            raise CheckpointError(where, f"restoring '{key}' failed ({type(ex).__name__}: {ex})") from ex
    if restore_rng and "rng" in state:
        try:
            set_rng_state(state["rng"])
        except Exception as ex:
            raise CheckpointError(where, f"restoring RNG states failed ({type(ex).__name__}: {ex})") from ex
    return dict(state.get("extra", {}))
