"""The core's seams: the acquisition protocol (the core imports no method), what a fit says it
did, and how a scheduler finds the Syne Tune Tuner that runs it."""

import ast
import json
from pathlib import Path

import numpy as np
from syne_tune.config_space import uniform
from syne_tune.constants import ST_TUNER_START_TIMESTAMP

import syne_dyhpo.core
from syne_dyhpo import DyHPO
from syne_dyhpo.core.decision_log import LOG_FILENAME, RUN_INFO_FILENAME
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.policy import FitSchedule, Surrogate, SurrogateCapabilities, SurrogatePolicy
from syne_dyhpo.core.tuner_link import calling_tuner


def test_the_core_imports_no_acquisition_and_no_method():
    """The core depends on the acquisition protocol only (core/acquisition_protocol.py): no
    module of it imports ``syne_dyhpo.acquisition`` or a method, at its top or in a function."""
    core = Path(syne_dyhpo.core.__file__).parent
    imported = {}
    for path in sorted(core.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            imported.setdefault(path.name, set()).update(names)
    assert len(imported) >= 10 and "syne_dyhpo.core.acquisition_protocol" in imported["policy.py"]
    upward = {name: sorted(n for n in names if n == "syne_dyhpo.acquisition" or n.startswith("syne_dyhpo.methods"))
              for name, names in imported.items()}
    assert {name: found for name, found in upward.items() if found} == {}


class Surrogate_(Surrogate):
    capabilities = SurrogateCapabilities(rescale=True)

    def fit(self, data, from_scratch, seed):
        pass

    def condition(self, data):
        pass

    def rescale(self, old, new):
        pass


def test_a_fit_says_what_it_did():
    obs = Observations(max_t=10, do_minimize=True)
    schedule = FitSchedule(refine_every=2, refit_growth=100.0, rescale_when_outdated=True)
    policy = SurrogatePolicy(Surrogate_(), acquisition=None, schedule=schedule)
    kinds = []
    steps = [(0, 1, 0.90), (1, 1, 0.901), (None, None, None), (0, 2, 0.9005), (1, 2, 0.9004), (0, 3, 0.4)]
    for trial_id, epoch, value in steps:
        if value is not None:
            if epoch == 1:
                obs.add_trial(trial_id, {}, np.zeros(1))
            obs.add_result(trial_id, epoch, value)
        if obs.num_observations >= 2:
            kinds.append(policy.fit(obs, seed=0).fit_kind)
    # nothing new, one new row, the second since the last training, a score outgrowing the scale
    assert kinds == ["scratch", "cached", "condition", "refine", "rescale"]
    assert (policy.num_full_fits, policy.num_refines, policy.num_rescales) == (1, 1, 1)


def make():
    return DyHPO({"x": uniform(0.0, 1.0)}, metric="loss", max_t=4, random_seed=0)


def test_the_scheduler_finds_the_tuner_calling_suggest_through_a_wrapper(tmp_path):
    from syne_tune import Tuner

    tuner = Tuner.__new__(Tuner)  # what the scheduler reads of a Tuner, without a backend
    tuner.tuner_path, tuner.metadata, tuner.trial_backend = tmp_path, {ST_TUNER_START_TIMESTAMP: 100.0}, None
    scheduler = make()

    class Wrapper:  # e.g. the lab's timing wrapper
        def suggest(self):
            return scheduler.suggest()

    def schedule_new_task(self):  # Tuner._schedule_new_task
        return Wrapper().suggest()

    assert schedule_new_task(tuner).spawn_new_trial_id
    assert (tmp_path / LOG_FILENAME).read_text().startswith("session,decision,time")
    info = json.loads((tmp_path / RUN_INFO_FILENAME).read_text())
    assert (info["scheduler"], info["metric"], info["hyperparameters"]) == ("DyHPO", "loss", ["x"])
    assert scheduler.decision_log()["time"].iloc[0] > 1e9  # seconds since the Tuner's start stamp


def test_without_a_tuner_the_log_stays_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert calling_tuner() is None
    scheduler = make()
    assert scheduler.suggest().spawn_new_trial_id
    assert len(scheduler.decision_log()) == 1 and list(tmp_path.iterdir()) == []
