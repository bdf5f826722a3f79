"""Shared fixtures: a fake Trial factory and paths to the benchmark data the repo ships."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path


# Syne Tune writes its experiment folders under SYNETUNE_FOLDER: keep them out of $HOME
os.environ.setdefault("SYNETUNE_FOLDER", tempfile.mkdtemp(prefix="syne-dyhpo-tests-"))

REPO = Path(__file__).resolve().parent.parent
REPO_DATA = REPO / "benchmarks" / "data"


def data_folder(name: str) -> Path:
    """The repo's small copy of a benchmark folder (``benchmarks/data``, shipped with the repo)."""
    folder = REPO_DATA / name
    assert (folder / "metadata.json").exists(), f"shipped benchmark data missing: {folder}"
    return folder


def make_trial(trial_id: int, config: dict):
    from syne_tune.backend.trial_status import Trial

    return Trial(trial_id=trial_id, config=config, creation_time=datetime.now())
