"""The tuning jobs ``tests/e2e/test_continuation.py`` kills with SIGKILL.

DyHPO tunes a checkpointed training script on Syne Tune's ``LocalBackend`` (real processes, one
per segment: ``max_resource_attr="epochs"``) with 2 workers, and Syne Tune saves the tuner after
new results (at most once a second). Scenarios (:func:`main`):

* ``"mlp"``: ``launch/train_mlp.py`` (PyTorch), 3 trials (then only resumes). Both workers'
  jobs take about as long (mostly the process start), so they tend to report in the same loop
  and Syne Tune's own saves rarely catch one of them in flight: once a loop of the Tuner ends
  with a trial in flight after its first epoch and a paused trial, the job saves the tuner with
  ``Tuner.save`` (what Syne Tune calls), and the next result is the kill point;
* ``"fast"``: ``tests/e2e/fake_train.py`` (no torch, epochs of 0.1 to 0.6 s, processes that linger
  after their segment), new trials all along. Syne Tune's own saves run until a loop of the
  Tuner ends with a paused trial and a trial in flight after its first epoch; the job then
  saves the tuner itself (``Tuner.save``, what Syne Tune calls) and turns Syne Tune's further
  saves off, so that the save the test continues from surely holds such a pair (Syne Tune's
  saves, at most one a second, catch one only by chance: on a slow machine, not for minutes);
  the kill point is the first result once a trial started after that save reports or runs.

Run as ``python -c "import continuation_job; continuation_job.main('mlp')"`` with the folder of
this file on ``PYTHONPATH`` (so that the classes below are pickled by reference and the test can
load the saved tuner). Files written into ``$SYNETUNE_FOLDER``:

* ``observed.jsonl``: every result the scheduler saw, written (fsync) when the Tuner hands it to
  the callbacks, i.e. after the scheduler's decision: what was observed before the kill;
* ``saved.json``: after every ``Tuner.save``, the trial statuses the saved tuner holds;
* ``ready.json``: written at the kill point: the saved tuner holds a paused trial and a trial in
  flight after at least one epoch (``"mlp"``: that needs another segment even if its job ends
  the current one; ``"fast"``: and a trial started after the save reported or runs). The tuner
  then blocks right there, inside the Tuner's result processing (the scheduler saw the result,
  the tuner did not save it), and waits for the SIGKILL; its training jobs run on.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _path in (str(REPO), str(REPO / "launch")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import mlp_config_space  # noqa: E402
from syne_tune.backend import LocalBackend  # noqa: E402
from syne_tune.config_space import uniform  # noqa: E402
from syne_tune.results_callback import StoreResultsCallback  # noqa: E402
from syne_tune.tuner_callback import TunerCallback  # noqa: E402

from syne_dyhpo.core.observations import TrialStatus  # noqa: E402

TUNER_NAME = "crash-continue"
N_WORKERS = 2
RESULTS_UPDATE_INTERVAL = 0.0  # Syne Tune saves after new results once a second passed


class Scenario:
    """What :func:`main` tunes.

    :param name: "mlp" or "fast"
    """

    def __init__(self, name: str):
        self.name = name
        self.max_t = 4
        self.max_trials = 3 if name == "mlp" else None
        if name == "mlp":
            self.entry_point = REPO / "launch" / "train_mlp.py"
            self.metric, self.do_minimize = mlp_config_space.METRIC, False
            self.config_space = mlp_config_space.make_config_space(max_epochs=self.max_t, seed=1)
        else:
            self.entry_point = Path(__file__).resolve().parent / "fake_train.py"
            self.metric, self.do_minimize = "loss", True
            self.config_space = {"x": uniform(0.0, 1.0), "epochs": self.max_t, "linger": 60}


def write_json(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class SnapshotBackend(LocalBackend):
    """``LocalBackend`` that records what each ``Tuner.save`` wrote: Syne Tune calls
    ``on_tuner_save`` right after the tuner was pickled."""

    scheduler = None
    snapshot_file: str | None = None
    last_snapshot: dict | None = None

    def on_tuner_save(self):
        if self.scheduler is None:
            return
        trials = self.scheduler.observations.trials
        self.last_snapshot = {
            "trials": {str(t): [r.status.value, r.last_epoch] for t, r in trials.items()},
            "num_trial_ids": len(self.trial_ids),
        }
        if self.snapshot_file is not None:
            write_json(Path(self.snapshot_file), self.last_snapshot)


class KillPoint(TunerCallback):
    """Logs every result the scheduler saw and blocks at the kill point (see the module
    docstring). ``armed = False`` turns the blocking off (the continuation does).

    :param folder: where the files are written
    :param scenario: the scenario run
    """

    def __init__(self, folder: str, scenario: Scenario):
        self.folder = folder
        self.scenario = scenario
        self.armed = True
        self.saved_at_kill_point = False
        self.tuner = None

    def on_tuning_start(self, tuner):
        self.tuner = tuner

    def on_start_trial(self, trial):
        limit = self.scenario.max_trials
        if limit is not None and len(self.tuner.trial_backend.trial_ids) >= limit:
            self.tuner.scheduler.allow_new_trials(False)

    def on_loop_end(self):
        if not self.armed or self.saved_at_kill_point:
            return
        trials = self.tuner.scheduler.observations.trials.values()
        if any(r.status is TrialStatus.PAUSED for r in trials) and any(
            r.status is TrialStatus.RUNNING and 1 <= r.last_epoch <= self.scenario.max_t - 2 for r in trials
        ):
            self.tuner.save()
            self.saved_at_kill_point = True
            if self.tuner.tuner_saver is not None:
                self.tuner.tuner_saver.frequency = float("inf")  # this save is the one continued from

    def on_trial_result(self, trial, status, result, decision):
        metric = self.scenario.metric
        line = {"trial_id": trial.trial_id, "epoch": int(result["epoch"]), metric: result[metric],
                "decision": decision, "config": trial.config}
        with open(Path(self.folder) / "observed.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        snap = self.tuner.trial_backend.last_snapshot
        if not self.armed or snap is None:
            return
        if self.scenario.name == "mlp" or not self.saved_at_kill_point:
            ready = self.saved_at_kill_point
        else:
            # a trial started after the save: the one reporting, or one running
            running = self.tuner.scheduler.observations.with_status(TrialStatus.RUNNING)
            ready = any(t >= snap["num_trial_ids"] for t in [trial.trial_id, *(r.trial_id for r in running)])
        if ready:
            write_json(Path(self.folder) / "ready.json", {"trial_id": trial.trial_id})
            while True:  # the test SIGKILLs this process
                time.sleep(0.5)


class NeverStop:
    """Stop criterion of the job: it only ends by being killed."""

    def __call__(self, status) -> bool:
        return False


def main(scenario: str) -> None:
    from syne_tune import Tuner

    from syne_dyhpo import CandidateOptions, DyHPO, FreezeThawOptions

    folder = os.environ["SYNETUNE_FOLDER"]
    sc = Scenario(scenario)
    scheduler = DyHPO(sc.config_space, metric=sc.metric, do_minimize=sc.do_minimize, time_attr="epoch",
                      max_t=sc.max_t, max_resource_attr="epochs",
                      options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)), random_seed=1)
    backend = SnapshotBackend(entry_point=str(sc.entry_point))
    backend.scheduler = scheduler
    backend.snapshot_file = str(Path(folder) / "saved.json")
    tuner = Tuner(trial_backend=backend, scheduler=scheduler, stop_criterion=NeverStop(), n_workers=N_WORKERS,
                  sleep_time=0.2, results_update_interval=RESULTS_UPDATE_INTERVAL, save_tuner=True,
                  callbacks=[StoreResultsCallback(), KillPoint(folder, sc)], tuner_name=TUNER_NAME,
                  suffix_tuner_name=False, print_update_interval=1e9)
    tuner.run()
