"""The project's independent end-to-end check (benchmarks/check_e2e.py) on both schedulers.

It builds each scheduler with Syne Tune's baseline arguments only, on a synthetic grid whose
curves all start at the same value: a regression test for a normalisation that collapsed on
such data (DyHPO then started every configuration and finished none).
"""

import os
import subprocess
import sys

import pytest
from conftest import REPO

CHECK = REPO / "benchmarks" / "check_e2e.py"

pytestmark = pytest.mark.slow


# 1 worker only: the tool charges the scheduler's real compute to simulated time, so outcomes
# depend on machine load, and with 4 workers whether one of the concurrent trials gets all 30
# epochs within 200 is a coin flip (deterministic simulation, seeds 0-5: DyHPO 3 of 6,
# DeepPowerLaw 4 of 6; with 1 worker 6 of 6 each). The 4-worker runs of test_e2e_simulator
# are deterministic. A seed other than 0 seeds the scheduler (it once failed in the backend):
# DeepPowerLaw runs with one.
@pytest.mark.parametrize("scheduler, n_workers, seed", [("DyHPO", 1, 0), ("DeepPowerLaw", 1, 3)])
def test_check_e2e(tmp_path, scheduler, n_workers, seed):
    env = {**os.environ, "PYTHONPATH": str(REPO), "SYNETUNE_FOLDER": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, str(CHECK), f"syne_dyhpo:{scheduler}", "--workers", str(n_workers), "--seed", str(seed)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-2000:]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert last.endswith(" ok") and "finished=0" not in last, last
