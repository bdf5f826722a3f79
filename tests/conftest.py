"""Shared fixtures: a fake Trial factory and paths to benchmark data."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path

import pytest

# Syne Tune writes its experiment folders under SYNETUNE_FOLDER: keep them out of $HOME
os.environ.setdefault("SYNETUNE_FOLDER", tempfile.mkdtemp(prefix="syne-dyhpo-tests-"))

REPO = Path(__file__).resolve().parent.parent
REPO_DATA = REPO / "benchmarks" / "data"
SHARED_DATA = REPO.parent / "shared" / "data"


def data_folder(name: str) -> Path:
    """The repo's small copy of a benchmark folder, else the shared development data."""
    for root in (REPO_DATA, SHARED_DATA):
        if (root / name / "metadata.json").exists():
            return root / name
    pytest.skip(f"benchmark data '{name}' not found under {REPO_DATA} or {SHARED_DATA}")


def make_trial(trial_id: int, config: dict):
    from syne_tune.backend.trial_status import Trial

    return Trial(trial_id=trial_id, config=config, creation_time=datetime.now())
