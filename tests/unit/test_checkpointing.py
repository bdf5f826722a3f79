import logging
import os
import random
import time

import numpy as np
import pytest
import torch

from syne_dyhpo.checkpointing import (
    CHECKPOINT_FILENAME,
    Checkpoint,
    CheckpointError,
    capture_training_state,
    get_rng_state,
    load_checkpoint,
    restore_training_state,
    save_checkpoint,
    set_rng_state,
)


def _files(directory):
    return sorted(os.listdir(directory))


def test_round_trip(tmp_path):
    state = {"w": torch.arange(6.0).reshape(2, 3), "step": 7, "names": ["a", "b"]}
    path = save_checkpoint(tmp_path / "ckpt", state, epoch=3)
    assert path == tmp_path / "ckpt" / CHECKPOINT_FILENAME
    ckpt = load_checkpoint(tmp_path / "ckpt")
    assert isinstance(ckpt, Checkpoint)
    assert ckpt.epoch == 3
    assert ckpt.path == str(path)
    assert torch.equal(ckpt.state["w"], state["w"])
    assert ckpt.state["step"] == 7 and ckpt.state["names"] == ["a", "b"]
    # overwriting keeps a single file and the newest content
    save_checkpoint(tmp_path / "ckpt", {"step": 8}, epoch=np.int64(4))
    ckpt = load_checkpoint(tmp_path / "ckpt")
    assert (ckpt.epoch, ckpt.state) == (4, {"step": 8})
    assert type(ckpt.epoch) is int
    assert _files(tmp_path / "ckpt") == [CHECKPOINT_FILENAME]
    # permissions follow the umask (not mkstemp's 0600)
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_no_checkpoint_returns_none(tmp_path):
    assert load_checkpoint(None) is None
    assert load_checkpoint(tmp_path / "does-not-exist") is None
    assert load_checkpoint(tmp_path) is None  # directory exists, no file


@pytest.mark.parametrize("kind", ["garbage", "truncated", "empty", "foreign"])
def test_corrupt_checkpoint_raises_naming_path(tmp_path, kind):
    path = save_checkpoint(tmp_path, {"w": torch.randn(100, 100)}, epoch=2)
    data = path.read_bytes()
    if kind == "garbage":
        path.write_bytes(b"this is not a torch file" * 10)
    elif kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    else:  # a valid torch file not written by save_checkpoint
        torch.save({"model": {}}, path)
    with pytest.raises(CheckpointError) as exc_info:
        load_checkpoint(tmp_path)
    assert str(path) in str(exc_info.value)
    assert exc_info.value.path == str(path)
    assert exc_info.value.cause  # non-empty description of the cause


def test_on_error_restart_warns_and_returns_none(tmp_path, caplog):
    path = save_checkpoint(tmp_path, {"x": 1}, epoch=1)
    path.write_bytes(path.read_bytes()[:10])
    with caplog.at_level(logging.WARNING, logger="syne_dyhpo.checkpointing"):
        assert load_checkpoint(tmp_path, on_error="restart") is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(path) in warnings[0].getMessage()
    assert "from scratch" in warnings[0].getMessage()
    # the file is left alone and the next save replaces it
    save_checkpoint(tmp_path, {"x": 2}, epoch=1)
    assert load_checkpoint(tmp_path).state == {"x": 2}


def test_invalid_on_error(tmp_path):
    with pytest.raises(ValueError):
        load_checkpoint(tmp_path, on_error="ignore")


def test_atomic_write_keeps_old_checkpoint_on_failure(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, {"x": torch.ones(3)}, epoch=1)
    real_save = torch.save

    def failing_save(obj, f, *args, **kwargs):
        f.write(b"partial data")  # as if the process died mid-write
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, {"x": torch.zeros(3)}, epoch=2)
    monkeypatch.setattr(torch, "save", real_save)
    # no temporary file left behind, old checkpoint intact
    assert _files(tmp_path) == [CHECKPOINT_FILENAME]
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.epoch == 1 and torch.equal(ckpt.state["x"], torch.ones(3))


def test_orphan_temp_file_is_ignored(tmp_path):
    # a process killed (SIGKILL) during save leaves its temp file: loading ignores it
    save_checkpoint(tmp_path, {"x": 1}, epoch=5)
    (tmp_path / f".{CHECKPOINT_FILENAME}.abc123.tmp").write_bytes(b"half a file")
    assert load_checkpoint(tmp_path).epoch == 5


def test_rng_state_round_trip(tmp_path):
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    np.random.normal()  # make numpy hold a cached gaussian
    random.gauss(0, 1)
    save_checkpoint(tmp_path, {"rng": get_rng_state()}, epoch=1)
    expected = (
        torch.rand(5),
        np.random.normal(size=5),
        random.random(),
        random.gauss(0, 1),
    )
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    set_rng_state(load_checkpoint(tmp_path).state["rng"])  # weights_only load
    got = (torch.rand(5), np.random.normal(size=5), random.random(), random.gauss(0, 1))
    assert torch.equal(expected[0], got[0])
    assert np.array_equal(expected[1], got[1])
    assert expected[2:] == got[2:]


def _make(seed=0, width=8):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, width),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.3),
        torch.nn.Linear(width, 3),
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    return model, opt, sched


def _epoch(model, opt, sched, x, y):
    model.train()
    perm = torch.randperm(len(x))  # uses the global torch RNG, like dropout
    for i in range(0, len(x), 8):
        idx = perm[i : i + 8]
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    sched.step()


def test_training_state_resume_is_bit_exact(tmp_path):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
    # uninterrupted: 4 epochs
    model, opt, sched = _make()
    for _ in range(4):
        _epoch(model, opt, sched, x, y)
    reference = [p.detach().clone() for p in model.parameters()]
    # 2 epochs, checkpoint, fresh objects (other seed), restore, 2 more epochs
    model, opt, sched = _make()
    for _ in range(2):
        _epoch(model, opt, sched, x, y)
    save_checkpoint(
        tmp_path, capture_training_state(model, opt, sched, extra={"best": 0.5}), 2
    )
    torch.manual_seed(12345)
    model, opt, sched = _make(seed=7)
    ckpt = load_checkpoint(tmp_path)
    extra = restore_training_state(ckpt.state, model, opt, sched, path=ckpt.path)
    assert extra == {"best": 0.5}
    assert sched.last_epoch == 2
    for _ in range(2):
        _epoch(model, opt, sched, x, y)
    assert all(torch.equal(a, b) for a, b in zip(reference, model.parameters()))


def test_restore_is_strict(tmp_path):
    model, opt, sched = _make(width=8)
    state = capture_training_state(model, opt)
    other, _, _ = _make(width=16)
    with pytest.raises(CheckpointError, match="restoring 'model' failed"):
        restore_training_state(state, model=other, path="/x/checkpoint.pt")
    with pytest.raises(CheckpointError, match="no 'lr_scheduler' entry"):
        restore_training_state(state, model, opt, lr_scheduler=sched)


# ----- torch's weights_only allowlist, across torch versions -------------------------------------


class _Marker:
    """A class a caller marked safe for weights_only loading before loading a checkpoint."""


def _allowed_since(before: list) -> list:
    """The globals allowed now that were not in ``before``, less torch's own: torch registers
    classes of its modules when one is first imported (``torch._dynamo``, ``torch.distributed``),
    which a load may do in a fresh test process."""
    return [
        g for g in torch.serialization.get_safe_globals()
        if g not in before and not getattr(g, "__module__", "").startswith("torch")
    ]


def test_loading_leaves_the_callers_safe_globals_as_they_were(tmp_path):
    # np.ndarray is one of the globals load_checkpoint allows for its own load: the caller's
    # earlier allowance must survive it, and nothing of load_checkpoint's may stay allowed
    save_checkpoint(tmp_path, {"a": np.arange(3), "s": {1, 2}}, epoch=1)
    torch.serialization.add_safe_globals([np.ndarray, _Marker])
    try:
        before = list(torch.serialization.get_safe_globals())
        assert load_checkpoint(tmp_path).state["s"] == {1, 2}
        left = _allowed_since(before)
        kept = [g for g in before if g in torch.serialization.get_safe_globals()]
    finally:
        torch.serialization.clear_safe_globals()
    assert left == [] and kept == before


@pytest.fixture(params=["safe_globals", "add_safe_globals only"])
def torch_allowlist_api(request, monkeypatch):
    """torch 2.5 on has the context manager ``torch.serialization.safe_globals``; 2.4 only
    ``add_safe_globals``, ``get_safe_globals`` and ``clear_safe_globals``."""
    if request.param == "safe_globals":
        if not hasattr(torch.serialization, "safe_globals"):
            pytest.skip(f"torch {torch.__version__} has no torch.serialization.safe_globals (torch 2.5 on)")
    else:
        monkeypatch.delattr(torch.serialization, "safe_globals", raising=False)
    return request.param


@pytest.fixture
def old_torch_default_allowlist(monkeypatch):
    """torch's weights_only unpickler without the defaults that torch 2.4 (set, complex,
    bytearray, _codecs.encode) and 2.5 (set, complex) lack."""
    from torch import _weights_only_unpickler as unpickler

    newer = {"builtins.set", "builtins.complex", "builtins.bytearray", "_codecs.encode"}
    defaults = {k: v for k, v in unpickler._get_allowed_globals().items() if k not in newer}
    monkeypatch.setattr(unpickler, "_get_allowed_globals", lambda: defaults)


OLD_TORCH_VALUES = {
    "set": {1, 2},
    "complex": 1 - 2j,
    "bytes": b"\x00\xff",
    "bytearray": bytearray(b"ab"),
    "ndarray": np.arange(4.0),
    "np.float32": np.float32(0.5),
}


@pytest.mark.parametrize("key", list(OLD_TORCH_VALUES))
def test_values_load_back_equal_with_torch_2_4_and_2_5_allowlists(tmp_path, torch_allowlist_api,
                                                                  old_torch_default_allowlist, key):
    value = OLD_TORCH_VALUES[key]
    save_checkpoint(tmp_path, {"extra": {key: value}}, epoch=3)
    before = list(torch.serialization.get_safe_globals())
    ckpt = load_checkpoint(tmp_path)
    loaded = ckpt.state["extra"][key]
    assert ckpt.epoch == 3 and type(loaded) is type(value)
    assert np.array_equal(loaded, value) if isinstance(value, np.ndarray) else loaded == value
    assert _allowed_since(before) == []  # nothing of load_checkpoint's left allowed


def test_a_failed_load_with_the_torch_2_4_api_leaves_the_allowed_globals_as_they_were(tmp_path, torch_allowlist_api):
    path = save_checkpoint(tmp_path, {"x": np.arange(3)}, epoch=1)
    path.write_bytes(path.read_bytes()[:40])
    # what torch itself allowed before (importing torch.distributed adds its own classes)
    before = list(torch.serialization.get_safe_globals())
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path)
    assert _allowed_since(before) == [] and all(g in torch.serialization.get_safe_globals() for g in before)


# ----- temporary files of killed saves -----------------------------------------------------------


def _temporaries(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def _fork_saving(directory, epoch, pipe=None):
    """A child process that saves a checkpoint: it writes part of the file and kills itself
    (SIGKILL, as a scheduler pausing a trial does), or, given a ``pipe`` (read and write
    end), waits until the parent closes the write end, then saves. Returns the child's pid."""
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: never returns into pytest
        import signal

        block_on = None
        if pipe is not None:
            block_on = pipe[0]
            os.close(pipe[1])

        real_save = torch.save

        def interrupted_save(obj, f, *args, **kwargs):
            if block_on is not None:
                os.read(block_on, 1)  # until the parent closes its end
                return real_save(obj, f, *args, **kwargs)
            f.write(b"partial" * 1000)
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        torch.save = interrupted_save
        save_checkpoint(directory, {"epoch": epoch}, epoch=epoch, fsync=False)
        os._exit(0)
    finally:
        os._exit(1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a saving child process (POSIX only)")
def test_a_save_removes_the_temporaries_of_killed_saves_but_not_a_live_writers(tmp_path):
    save_checkpoint(tmp_path, {"x": 1}, epoch=1)
    killed = []
    for epoch in (2, 3):
        pid = _fork_saving(tmp_path, epoch)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
        killed.append(pid)
    read_end, write_end = os.pipe()
    live = _fork_saving(tmp_path, 4, pipe=(read_end, write_end))
    os.close(read_end)
    try:
        for _ in range(500):  # until the live writer has created its temporary file
            if len(_temporaries(tmp_path)) == 3:
                break
            time.sleep(0.01)
        names = _temporaries(tmp_path)
        assert len(names) == 3 and all(any(f".{pid}." in n for n in names) for pid in killed + [live])
        (tmp_path / ".other.pt.abc.tmp").write_bytes(b"another checkpoint's")  # not this checkpoint's
        assert load_checkpoint(tmp_path).epoch == 1  # the killed saves left the checkpoint intact
        save_checkpoint(tmp_path, {"x": 5}, epoch=5)
        assert _temporaries(tmp_path) == sorted([".other.pt.abc.tmp"] + [n for n in names if f".{live}." in n])
        assert load_checkpoint(tmp_path).epoch == 5
    finally:
        os.close(write_end)  # the live writer finishes its save
        _, status = os.waitpid(live, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert _temporaries(tmp_path) == [".other.pt.abc.tmp"]
    assert load_checkpoint(tmp_path).epoch == 4  # its file was left whole


def test_temporaries_of_other_machines_and_files_are_kept(tmp_path):
    from syne_dyhpo.checkpointing import _temporary_prefix, remove_stale_temporaries

    save_checkpoint(tmp_path, {"x": 1}, epoch=1)
    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    ours = tmp_path / f"{_temporary_prefix(CHECKPOINT_FILENAME, dead)}abcd1234.tmp"
    other_host = tmp_path / f".{CHECKPOINT_FILENAME}.00000000.{dead}.abcd1234.tmp"
    other_file = tmp_path / f"{_temporary_prefix('other.pt', dead)}abcd1234.tmp"
    for path in (ours, other_host, other_file):
        path.write_bytes(b"half")
    assert remove_stale_temporaries(tmp_path, older_than=os.path.getmtime(ours)) == []  # not older
    assert remove_stale_temporaries(tmp_path) == [ours]
    assert _temporaries(tmp_path) == sorted(p.name for p in (other_host, other_file))
