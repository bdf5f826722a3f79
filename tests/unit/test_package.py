"""The installed package holds the schedulers and nothing else: importing it changes no
process state, and a training script importing only the checkpoint helper does not load the
schedulers."""

import json
import subprocess
import sys


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_changes_no_process_state():
    # Syne Tune itself sets OMP_NUM_THREADS on import; what we import on top must change nothing
    state = _run(
        "import json, os, sys\n"
        "import syne_tune\n"
        "env = dict(os.environ)\n"
        "import syne_dyhpo\n"
        "from syne_dyhpo import DeepPowerLaw, DyHPO, FitSchedule\n"
        "import syne_dyhpo.checkpointing, syne_dyhpo.core.scheduler\n"
        "print(json.dumps({'env_changed': sorted(set(os.environ.items()) ^ set(env.items())),\n"
        "                  'matplotlib': 'matplotlib' in sys.modules, 'pandas_backend': 'benchmarks' in sys.modules}))"
    )
    assert state == {"env_changed": [], "matplotlib": False, "pandas_backend": False}


def test_checkpoint_helper_does_not_load_the_schedulers():
    state = _run(
        "import json, sys\n"
        "import syne_dyhpo.checkpointing\n"
        "print(json.dumps({m: m in sys.modules for m in ('gpytorch', 'syne_dyhpo.core.scheduler')}))"
    )
    assert state == {"gpytorch": False, "syne_dyhpo.core.scheduler": False}
