"""The decision log of the freeze-thaw scheduler, driven call by call as Syne Tune's Tuner
does (no Tuner, no processes): what its rows say, that it leaves every decision as it was,
and that it survives pickling with decisions still pending."""

from __future__ import annotations

import pickle
import re
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from syne_tune.backend.trial_status import Trial
from syne_tune.config_space import uniform
from syne_tune.optimizer.scheduler import SchedulerDecision

from syne_dyhpo import DeepPowerLaw, DyHPO, FreezeThawOptions
from syne_dyhpo.core.candidates import CandidateOptions
from syne_dyhpo.core.decision_log import COLUMNS, LOG_FILENAME, RUN_INFO_FILENAME, DecisionLog
from syne_dyhpo.core.reasons import REASONS

MAX_T = 4


def quick_completion(after: int, dyhpo: bool = True):
    """The method's incumbent completion, starting after ``after`` first epochs, without delay
    (runs of a few epochs)."""
    from dataclasses import replace

    from syne_dyhpo.methods import deep_power_law
    from syne_dyhpo.methods import dyhpo as dyhpo_module

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

    def run(self, num_results: int) -> Driver:
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
    with pytest.raises(ValueError, match=re.escape("FreezeThawOptions.log_decisions must be True or False, got 'yes'")):
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


@pytest.mark.parametrize("cls", [DyHPO, DeepPowerLaw])
def test_each_decision_says_why_and_its_row_says_the_same(cls):
    """The decision maker's Decision carries the rule, the fit, the winner's and runner-up's
    acquisition values and the prediction behind the winner's; the log's rows are those
    values, nothing read elsewhere."""
    scheduler = make(cls)
    decisions, scored = [], []
    decide, score = scheduler._decider.decide, scheduler.policy.score

    def recording_decide(*args, **kwargs):
        scored.append(None)
        decisions.append(decide(*args, **kwargs))
        return decisions[-1]

    def recording_score(model, *args, **kwargs):
        answer = score(model, *args, **kwargs)
        scored[-1] = (answer, model.transform.loc, model.transform.scale)
        return answer

    scheduler._decider.decide, scheduler.policy.score = recording_decide, recording_score
    Driver(scheduler).run(24)
    by_acquisition = [(d, s) for d, s in zip(decisions, scored) if d is not None and d.reason == "acquisition"]
    assert len(by_acquisition) >= 5
    for decision, (answer, loc, scale) in by_acquisition:
        values = answer.values
        i = int(np.flatnonzero(values == decision.acquisition)[0])
        assert decision.acquisition == values.max() and decision.runner_up == np.max(np.delete(values, i))
        assert decision.fit in ("scratch", "refine", "rescale", "condition", "cached")
        p = decision.prediction
        assert p.epoch == answer.budgets[i] == (decision.epoch if cls is DyHPO else MAX_T)
        assert (p.mean, p.std) == (-(loc + scale * answer.mean[i]), scale * answer.std[i])  # a loss
    log = scheduler.decision_log()
    made = log[log["reason"].isin(["initial_random", "random", "completion", "sh_promotion", "acquisition"])]
    logged = [d for d in decisions if d is not None]
    assert made["reason"].tolist() == [d.reason for d in logged]
    assert made["next_epoch"].tolist() == [d.epoch for d in logged]
    assert made["fit"].tolist() == [d.fit or "" for d in logged]
    acquired = made[made["reason"] == "acquisition"]
    assert acquired["acquisition"].tolist() == [d.acquisition for d, _ in by_acquisition]
    assert acquired["runner_up"].tolist() == [d.runner_up for d, _ in by_acquisition]
    predicted = "pred_mean" if cls is DyHPO else "pred_mean_max_t"
    assert acquired[predicted].tolist() == [d.prediction.mean for d, _ in by_acquisition]


def test_the_log_reads_a_decision_and_the_arguments_it_is_given():
    from types import SimpleNamespace

    from syne_dyhpo.core.acquisition_protocol import Prediction
    from syne_dyhpo.core.decision import Decision

    log = DecisionLog()
    reporting = SimpleNamespace(trial_id=3, last_epoch=4)
    trials = {7: SimpleNamespace(last_epoch=2)}
    ahead = Decision.resume(3, retire=(7,), epoch=5, reason="acquisition", fit="refine", acquisition=-1.0,
                            runner_up=-2.5, prediction=Prediction(5, 0.3, 0.1))
    log.result_arrived({"st_tuner_time": 9.0})
    log.decided(ahead, reporting, trials, max_t=10, started=0.0)
    log.answered("PAUSE", started=0.0)  # the job stops at its segment end: resumed at once
    at_max_t = Decision.start({"x": 1}, epoch=1, reason="acquisition", fit="cached", acquisition=0.5,
                              prediction=Prediction(10, 0.2, 0.05))
    log.decided(at_max_t, None, trials, max_t=10, started=0.0)
    rows = log.records()
    assert [{k: r[k] for k in ("time", "trial_id", "epoch", "action", "next", "next_trial_id", "next_epoch",
                               "reason", "acquisition", "runner_up", "pred_mean", "pred_std", "pred_mean_max_t",
                               "fit")} for r in rows] == [
        {"time": 9.0, "trial_id": 3, "epoch": 4, "action": "PAUSE", "next": "resume", "next_trial_id": 3,
         "next_epoch": 5, "reason": "acquisition", "acquisition": -1.0, "runner_up": -2.5, "pred_mean": 0.3,
         "pred_std": 0.1, "pred_mean_max_t": None, "fit": "refine"},
        {"time": 9.0, "trial_id": 7, "epoch": 2, "action": "", "next": "nothing", "next_trial_id": None,
         "next_epoch": None, "reason": "retired", "acquisition": None, "runner_up": None, "pred_mean": None,
         "pred_std": None, "pred_mean_max_t": None, "fit": ""},
        {"time": 9.0, "trial_id": None, "epoch": None, "action": "", "next": "start", "next_trial_id": None,
         "next_epoch": 1, "reason": "acquisition", "acquisition": 0.5, "runner_up": None, "pred_mean": None,
         "pred_std": None, "pred_mean_max_t": 0.2, "fit": "cached"},
    ]
    quiet = DecisionLog(enabled=False)
    quiet.result_arrived({"st_tuner_time": 9.0})
    quiet.decided(ahead, reporting, trials, max_t=10, started=0.0)
    quiet.answered("PAUSE", started=0.0)
    quiet.trial_ended(3, 4, "finished", started=0.0)
    assert quiet.rows == [] and quiet.now() != 9.0


def test_the_scheduler_calls_its_log_the_same_way_on_or_off(monkeypatch):
    """One path through the scheduler: with ``log_decisions=False`` the log is called as
    when it is on, and does nothing."""
    calls = {True: [], False: []}
    for name in ("result_arrived", "decided", "answered", "trial_ended"):
        original = getattr(DecisionLog, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls[self.enabled].append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(DecisionLog, name, spy)
    on, off = make(DyHPO), make(DyHPO, log_decisions=False)
    assert Driver(on).run(20).calls == Driver(off).run(20).calls
    assert calls[True] == calls[False] and {"decided", "answered", "trial_ended"} <= set(calls[True])
    assert off.decision_log().empty and not on.decision_log().empty


def test_a_failing_log_is_a_warning_and_changes_no_decision(monkeypatch, caplog):
    without = Driver(make(DyHPO, log_decisions=False)).run(20).calls

    def broken(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(DecisionLog, "add", broken)
    assert Driver(make(DyHPO)).run(20).calls == without
    assert "Decision log: the row of a decision failed (RuntimeError: disk full)" in caplog.text

def read_log(folder) -> pd.DataFrame:
    return pd.read_csv(folder / LOG_FILENAME)


def test_a_new_log_bound_to_a_folder_with_a_log_continues_its_sessions(tmp_path):
    """A new scheduler writing into a folder that has a log (e.g. set on a tuner loaded with
    ``Tuner.load``): its session is numbered after the highest in the file, nothing in the file
    is rewritten, no (session, decision) key is written twice."""
    before = DecisionLog()
    before.bind(tmp_path)
    for t in range(3):
        before.add(float(t), trial_id=t, reason="random")
    before.new_session()  # a continuation of it (Tuner.load) wrote session 1
    before.bind(tmp_path)
    before.add(5.0, trial_id=0, reason="restored")
    written = read_log(tmp_path)
    assert written[["session", "decision"]].values.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0]]

    log = DecisionLog()
    early = log.add(0.5, trial_id=7, reason="initial_random")  # made before the log was bound
    assert log.session == 0 and early[0] == 0
    log.bind(tmp_path)
    log.add(1.0, trial_id=8, reason="acquisition")
    log.add(2.0, trial_id=9, reason="acquisition")
    assert log.session == 2 and [r["session"] for r in log.records()] == [2, 2, 2]
    on_disk = read_log(tmp_path)
    pd.testing.assert_frame_equal(on_disk.iloc[: len(written)], written)
    assert on_disk[["session", "decision", "trial_id"]].iloc[len(written):].values.tolist() == [
        [2, 0, 7], [2, 1, 8], [2, 2, 9]]
    assert not on_disk.duplicated(["session", "decision"]).any()
    # bound again to the same file in the same session: the session and its rows stay as they are
    log.bind(tmp_path)
    log.add(3.0, trial_id=10, reason="acquisition")
    assert log.session == 2
    assert read_log(tmp_path)[["session", "decision"]].iloc[len(written):].values.tolist() == [
        [2, 0], [2, 1], [2, 2], [2, 3]]


def test_a_loaded_log_continues_after_a_session_its_save_never_saw(tmp_path):
    """Loaded twice from the same save (the first continuation crashed before it saved): the
    second continuation does not write the first one's session number again; unpickled and
    bound without ``new_session`` (a front end of its own), the log still starts a session."""
    log = DecisionLog()
    log.bind(tmp_path)
    log.add(0.0, trial_id=0, reason="initial_random")
    saved = pickle.dumps(log)
    for _ in range(2):
        loaded = pickle.loads(saved)
        loaded.new_session()
        loaded.bind(tmp_path)
        loaded.add(1.0, trial_id=0, reason="restored")
    assert loaded.session == 2
    plain = pickle.loads(saved)
    plain.add(2.0, trial_id=1, reason="random")  # made before binding: (0, 1) in its own count
    plain.bind(tmp_path)
    plain.add(3.0, trial_id=2, reason="random")
    assert plain.session == 3
    assert [(r["session"], r["decision"]) for r in plain.records()] == [(0, 0), (3, 0), (3, 1)]
    on_disk = read_log(tmp_path)
    assert on_disk[["session", "decision", "trial_id"]].values.tolist() == [
        [0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 1], [3, 1, 2]]


def test_highest_session_skips_bad_values_and_reads_a_file_without_header(tmp_path):
    from syne_dyhpo.core.decision_log import highest_session

    path = tmp_path / LOG_FILENAME
    path.write_text("session,decision,time\n0,0,0.1\nx,1,0.2\n\n4,2,0.3\n1,3\n")
    assert highest_session(path) == 4
    path.write_text("3,0,0.1\n2,1,0.2\n")  # the header line lost
    assert highest_session(path) == 3
    path.write_text(",".join(COLUMNS) + "\n")
    assert highest_session(path) is None
