"""The decision log of the freeze-thaw scheduler, driven call by call as Syne Tune's Tuner
does (no Tuner, no processes): what its rows say, that it leaves every decision as it was,
and that it survives pickling with decisions still pending."""

from __future__ import annotations

import pickle
from datetime import datetime

import pandas as pd
import pytest
from syne_tune.backend.trial_status import Trial
from syne_tune.config_space import uniform
from syne_tune.optimizer.scheduler import SchedulerDecision

from syne_dyhpo.core.candidates import CandidateOptions
from syne_dyhpo import DeepPowerLaw, DyHPO, FreezeThawOptions
from syne_dyhpo.core.decision_log import COLUMNS, LOG_FILENAME, REASONS, RUN_INFO_FILENAME, DecisionLog

MAX_T = 4


def quick_completion(after: int, dyhpo: bool = True):
    """The method's incumbent completion, starting after ``after`` first epochs, without delay
    (runs of a few epochs)."""
    from dataclasses import replace

    from syne_dyhpo.methods import deep_power_law, dyhpo as dyhpo_module

    base = dyhpo_module.DEFAULT_COMPLETION if dyhpo else deep_power_law.DEFAULT_COMPLETION
    return replace(base, after=after, delay=0.0)


def make(cls=DyHPO, log_decisions=True, **kwargs):
    kwargs.setdefault("points_to_evaluate", [{"x": 0.5, "y": 0.5}])
    options = FreezeThawOptions(candidates=CandidateOptions(num_candidates=16), log_decisions=log_decisions)
    return cls({"x": uniform(0.0, 1.0), "y": uniform(0.0, 1.0)}, metric="loss", do_minimize=True, time_attr="epoch",
               max_t=MAX_T, options=options, random_seed=0,
               completion=quick_completion(3, dyhpo=cls is DyHPO), **kwargs)


def loss(config: dict, epoch: int) -> float:
    if config["x"] > 0.97:  # diverges
        return float("nan")
    return (config["x"] - 0.3) ** 2 + config["y"] / 4 + 1.0 / epoch


class Driver:
    """Syne Tune's Tuner, call by call, with ``n_workers`` workers; the earliest report first."""

    def __init__(self, scheduler, n_workers: int = 2):
        self.scheduler = scheduler
        self.n_workers = n_workers
        self.trials: dict[int, Trial] = {}
        self.epochs: dict[int, int] = {}
        self.running: dict[int, float] = {}
        self.clock = 0.0
        self.calls: list[tuple] = []  # what the scheduler answered, in order

    def step(self) -> bool:
        while len(self.running) < self.n_workers:
            suggestion = self.scheduler.suggest()
            if suggestion is None:
                break
            if suggestion.spawn_new_trial_id:
                tid = len(self.trials)
                self.trials[tid] = Trial(trial_id=tid, config=suggestion.config, creation_time=datetime.now())
                self.epochs[tid] = 0
                self.scheduler.on_trial_add(self.trials[tid])
                self.calls.append(("start", tid, dict(suggestion.config)))
            else:
                tid = suggestion.checkpoint_trial_id
                self.calls.append(("resume", tid))
            self.running[tid] = self.clock + 1.0 + self.trials[tid].config["y"]
        if not self.running:
            return False
        tid = min(self.running, key=self.running.get)
        self.clock = self.running[tid]
        self.epochs[tid] += 1
        result = {"epoch": self.epochs[tid], "loss": loss(self.trials[tid].config, self.epochs[tid]),
                  "st_tuner_time": self.clock}
        answer = self.scheduler.on_trial_result(self.trials[tid], result)
        self.calls.append(("result", tid, self.epochs[tid], answer))
        if answer in (SchedulerDecision.STOP, SchedulerDecision.PAUSE):
            del self.running[tid]
            self.scheduler.on_trial_remove(self.trials[tid])
        elif self.epochs[tid] >= MAX_T:
            del self.running[tid]
            self.scheduler.on_trial_complete(self.trials[tid], result)
        else:
            self.running[tid] = self.clock + 1.0 + self.trials[tid].config["y"]
        return True

    def run(self, num_results: int) -> "Driver":
        while sum(1 for c in self.calls if c[0] == "result") < num_results and self.step():
            pass
        return self


@pytest.mark.parametrize("cls", [DyHPO, DeepPowerLaw])
def test_rows_say_what_was_decided_and_why(cls, tmp_path):
    scheduler = make(cls)
    scheduler.attach_decision_log(tmp_path)
    driver = Driver(scheduler).run(24)
    log = scheduler.decision_log()
    assert list(log.columns) == list(COLUMNS)
    assert log["decision"].tolist() == list(range(len(log)))
    assert set(log["reason"]) <= set(REASONS)
    assert log["reason"].iloc[0] == "points_to_evaluate" and log["next"].iloc[0] == "start"
    # every start and resume the Tuner carried out is a row naming that trial
    carried = log[~log["decision"].isin(open_decisions(scheduler))]  # not those still pending
    starts = [c[1] for c in driver.calls if c[0] == "start"]
    assert carried.loc[carried["next"] == "start", "next_trial_id"].astype(int).tolist() == starts
    resumed = [c[1] for c in driver.calls if c[0] == "resume"]
    assert sorted(carried.loc[carried["next"] == "resume", "next_trial_id"].astype(int)) == sorted(resumed)
    # the answer on each reporting trial is the one the Tuner got
    answers = {(c[1], c[2]): c[3] for c in driver.calls if c[0] == "result"}
    for _, row in log[log["action"].isin(["CONTINUE", "PAUSE", "STOP"])].iterrows():
        assert answers[(int(row["trial_id"]), int(row["epoch"]))] == row["action"]
    # acquisition rows: the winner's value is the best, the prediction is the acquisition's
    acquired = log[log["reason"] == "acquisition"]
    assert len(acquired) >= 5
    assert (acquired["acquisition"] >= acquired["runner_up"]).all()
    predicted = "pred_mean" if cls is DyHPO else "pred_mean_max_t"
    assert acquired[predicted].notna().all() and (acquired[predicted.replace("mean", "std")] > 0).all()
    assert set(acquired["fit"]) <= {"scratch", "refine", "rescale", "condition", "cached"}
    assert "scratch" in set(acquired["fit"])
    assert (log["time"].diff().dropna() >= 0).all()  # the results' clock (st_tuner_time)
    # the file holds the same rows (a start's row once its trial has an id)
    on_disk = pd.read_csv(tmp_path / LOG_FILENAME).sort_values("decision")
    assert on_disk["decision"].tolist() == carried["decision"].tolist()
    assert on_disk["reason"].tolist() == carried["reason"].tolist()
    assert (tmp_path / RUN_INFO_FILENAME).exists()


def open_decisions(scheduler) -> set[int]:
    """Decisions made but not carried out yet (still pending): not in the file yet."""
    return {row[1] for _, row in scheduler._log._open.values()}


def test_ends_of_trials_have_rows():
    scheduler = make(points_to_evaluate=[{"x": 0.3, "y": 0.0}, {"x": 0.99, "y": 0.5}])
    driver = Driver(scheduler).run(30)
    log = scheduler.decision_log()
    diverged = log[log["reason"] == "diverged"]
    diverging = [t for t, trial in driver.trials.items() if trial.config["x"] > 0.97 and driver.epochs[t] >= 1]
    assert 1 in diverging
    assert diverged["trial_id"].astype(int).tolist() == diverging and set(diverged["action"]) == {"STOP"}
    finished = [c[1] for c in driver.calls if c[0] == "result" and c[2] == MAX_T]
    assert sorted(log.loc[log["reason"] == "max_t", "trial_id"].astype(int)) == sorted(finished)
    assert finished, "precondition: a trial reached max_t"
    scheduler.on_trial_error(driver.trials[0])
    assert log.shape[0] + 1 == len(scheduler.decision_log())
    assert scheduler.decision_log().iloc[-1][["trial_id", "reason"]].tolist() == [0, "failed"]


def test_the_log_changes_no_decision():
    with_log = Driver(make(DyHPO)).run(30).calls
    without = Driver(make(DyHPO, log_decisions=False)).run(30).calls
    assert with_log == without
    quiet = make(DyHPO, log_decisions=False)
    Driver(quiet).run(10)
    assert quiet.decision_log().empty


def test_pickled_with_pending_decisions_and_continued(tmp_path):
    scheduler = make(DyHPO)
    scheduler.attach_decision_log(tmp_path / "a")
    driver = Driver(scheduler).run(12)
    while not scheduler._pending:  # a decision made at a result, waiting for a free worker
        driver.step()
    pending = len(scheduler._pending)
    clone = pickle.loads(pickle.dumps(scheduler))
    assert clone._log._file is None and not clone._log.bound
    assert clone.decision_log().equals(scheduler.decision_log())
    assert len(clone._log._open) == pending
    # the clone's pending decisions are the same objects as its open rows: carried out, written
    clone.attach_decision_log(tmp_path / "b")
    driver.scheduler = clone
    driver.run(20)
    log = clone.decision_log()
    assert log["decision"].tolist() == list(range(len(log)))
    on_disk = pd.read_csv(tmp_path / "b" / LOG_FILENAME)
    assert len(on_disk) == len(log) - len(clone._log._open)


def test_clock_without_tuner_and_with_tuner_start():
    log = DecisionLog()
    first = log.now()
    assert first >= 0 and log.now() >= first
    log.bind(None, start_timestamp=0.0)
    assert log.now() > 1e9  # seconds since the epoch: the stamp is the Tuner's start
    assert log.now({"st_tuner_time": 12.5}) == 12.5
    assert log.now() == 12.5  # the results' clock, once seen, holds until the next result
    disabled = DecisionLog(enabled=False)
    assert disabled.add(1.0) is None and disabled.rows == []


def test_bad_flag_is_refused_by_name():
    with pytest.raises(ValueError, match="FreezeThawOptions.log_decisions must be True or False, got 'yes'"):
        make(DyHPO, log_decisions="yes")


def test_decisions_pending_when_a_front_end_stops_are_written_as_dropped(tmp_path):
    scheduler = make(DyHPO, max_resource_attr="epochs")
    scheduler.attach_decision_log(tmp_path)
    driver = Driver(scheduler)
    while not open_decisions(scheduler):  # a result's decision waits for the next free worker
        assert driver.step()
    pending = sorted(open_decisions(scheduler))
    assert set(pending).isdisjoint(pd.read_csv(tmp_path / LOG_FILENAME)["decision"])  # not on disk yet
    scheduler.drop_pending()  # the front end asks for no more trials
    log = scheduler.decision_log()
    on_disk = pd.read_csv(tmp_path / LOG_FILENAME)
    assert open_decisions(scheduler) == set() and scheduler._pending == []
    assert sorted(on_disk["decision"]) == sorted(log["decision"][log["decision"] <= max(on_disk["decision"])])
    assert (on_disk.set_index("decision").loc[pending, "next"] == "dropped").all()


def test_a_start_given_up_by_a_front_end_is_written_as_dropped(tmp_path):
    scheduler = make(DyHPO, max_resource_attr="epochs")
    scheduler.attach_decision_log(tmp_path)
    kept = scheduler.suggest()  # a start handed to a front end that never starts it
    assert kept.spawn_new_trial_id and pd.read_csv(tmp_path / LOG_FILENAME).empty  # it waits for its trial id
    scheduler.start_given_up({**kept.config, "epochs": 99})  # max_resource_attr is not compared
    Driver(scheduler).run(6)  # the run goes on
    log = scheduler.decision_log()
    on_disk = pd.read_csv(tmp_path / LOG_FILENAME)
    assert log.iloc[0]["next"] == on_disk.iloc[0]["next"] == "dropped"
    assert pd.isna(log.iloc[0]["next_trial_id"]) and log.iloc[0]["reason"] == "points_to_evaluate"
    assert on_disk["decision"].tolist()[:len(on_disk)] == log["decision"].tolist()[:len(on_disk)]
    scheduler.start_given_up(kept.config)  # nothing left to give up: no change
    assert len(pd.read_csv(tmp_path / LOG_FILENAME)) == len(on_disk)
