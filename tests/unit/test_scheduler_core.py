"""Decision logic of the freeze-thaw core, driven call by call like Syne Tune's Tuner does."""

import json
import pickle
import re
from dataclasses import asdict

import numpy as np
import pytest
from conftest import drive_one_worker, make_trial, one_epoch_per_decision
from syne_tune.config_space import choice, uniform
from syne_tune.optimizer.scheduler import SchedulerDecision as D

from syne_dyhpo import (
    CandidateOptions,
    DeepPowerLaw,
    DeepPowerLawCompletion,
    DyHPO,
    FreezeThawOptions,
    IncumbentCompletion,
    PausedCheckpoints,
    SuccessiveHalvingPromotion,
)
from syne_dyhpo.core.observations import TrialStatus
from syne_dyhpo.core.policy import SurrogatePolicy
from syne_dyhpo.core.scheduler import FreezeThawScheduler

# 41 configurations: plenty for the segment logic (a nearly used-up pool runs jobs to max_t)
X_VALUES = [i / 40 for i in range(41)]
SPACE = {"x": choice(X_VALUES), "c": 7}
TABLE = [{"x": v} for v in X_VALUES]
OPTION_FIELDS = set(FreezeThawOptions.__dataclass_fields__)


class PreferencePolicy(SurrogatePolicy):
    """Test double: scores candidates by a fixed preference over trial ids / new configs."""

    def __init__(self, prefer):
        self.prefer = prefer  # callable(trial_id or None, config) -> score
        self.min_observations = 1
        self.updates = 0
        self.condition_on_pending = False

    def ready(self, observations):
        return observations.num_observations >= self.min_observations

    def fit(self, observations, seed):
        self.updates += 1

    def score(self, model, candidates, observations, pending=None):
        return np.array([self.prefer(t, c) for t, c in zip(candidates.trial_ids, candidates.configs)], dtype=float)

    def reset(self):
        pass

    def metadata(self):
        return {"policy": "preference"}


def completion(**fields):
    """The completion of the tests below: they count first epochs (the wait in observed epochs
    has its own test), and the commitments have their own tests too."""
    return IncumbentCompletion(**{"delay": 0.0, "commit_after": None, "committed": 0, **fields})


def make(prefer, num_initial_random=1, configs=TABLE, **kw):
    """The core with a preference policy; the keys of ``kw`` that are FreezeThawOptions fields
    (``budget_step``, ``checkpoints``, ...) make its ``options``."""
    kw.setdefault("max_t", 5)
    options = {name: kw.pop(name) for name in list(kw) if name in OPTION_FIELDS}
    options.setdefault("candidates", CandidateOptions(num_initial_random=num_initial_random, configs=configs))
    # decisions of the policy alone; the completion rule is tested on its own below
    kw.setdefault("completion", None)
    return FreezeThawScheduler(SPACE, "loss", PreferencePolicy(prefer), do_minimize=True, time_attr="epoch",
                               random_seed=0, options=FreezeThawOptions(**options), **kw)


def start(s, expected_id):
    sug = s.suggest()
    assert sug.spawn_new_trial_id
    trial = make_trial(expected_id, sug.config)
    s.on_trial_add(trial)
    return trial


def report(s, trial, epoch, value):
    return s.on_trial_result(trial, {"epoch": epoch, "loss": value})


def test_continue_pause_resume_and_stop_at_max_t():
    # prefer trial 0 strongly once it exists, otherwise new configs
    s = make(lambda tid, c: 10.0 if tid == 0 else (1.0 if tid is None else 0.0), max_t=3)
    t0 = start(s, 0)
    assert t0.config["c"] == 7  # constants are passed to the trial
    assert report(s, t0, 1, 0.5) == D.CONTINUE
    assert report(s, t0, 2, 0.4) == D.CONTINUE
    assert report(s, t0, 3, 0.3) == D.STOP  # max_t reached: stopped, never paused at the end
    assert s.trial_status(0) is TrialStatus.FINISHED
    s.on_trial_remove(t0)
    assert s.trial_status(0) is TrialStatus.FINISHED
    t1 = start(s, 1)  # a finished trial is never resumed
    assert t1.config["x"] != t0.config["x"]


def test_pause_hands_winner_to_suggest():
    # paused trials score 0, new configs 1, trial 0 is loved while it runs
    s = make(lambda tid, c: {0: 5.0}.get(tid, 0.0 if tid is not None else 1.0), num_initial_random=2)
    t0 = start(s, 0)
    t1 = start(s, 1)  # second worker: initial random config
    assert report(s, t0, 1, 0.5) == D.CONTINUE  # trial 0 is the best candidate
    assert report(s, t1, 1, 0.9) == D.PAUSE  # running trial 0 is no candidate: a new config wins
    s.on_trial_remove(t1)
    assert s.trial_status(1) is TrialStatus.PAUSED
    t2 = start(s, 2)
    assert t2.config["x"] not in (t0.config["x"], t1.config["x"])


def test_resume_is_marked_running_inside_suggest():
    prefer = {"winner": None}
    s = make(lambda tid, c: 3.0 if tid == prefer["winner"] else (1.0 if tid is None else 0.0), num_initial_random=2)
    t0, t1 = start(s, 0), start(s, 1)
    assert report(s, t0, 1, 0.5) == D.PAUSE  # a new config beats trial 0
    s.on_trial_remove(t0)
    start(s, 2)
    prefer["winner"] = 0
    assert report(s, t1, 1, 0.4) == D.PAUSE  # paused trial 0 wins
    s.on_trial_remove(t1)
    sug = s.suggest()
    assert not sug.spawn_new_trial_id and sug.checkpoint_trial_id == 0
    assert s.trial_status(0) is TrialStatus.RUNNING
    # back-to-back suggest (several free workers) must not resume trial 0 again
    sug2 = s.suggest()
    assert sug2.spawn_new_trial_id and sug2.config["x"] not in [s.observations.trials[i].config["x"] for i in range(3)]
    # the resumed trial continues after the epoch it was paused on and still wins
    assert report(s, t0, 2, 0.3) == D.CONTINUE
    assert s.observations.trials[0].scores == [-0.5, -0.3]


def test_report_order_robustness():
    s = make(lambda tid, c: 5.0 if tid == 0 else 0.0, max_t=10)
    t0 = start(s, 0)
    report(s, t0, 1, 0.9)
    report(s, t0, 2, 0.8)
    assert report(s, t0, 2, 0.1) == D.CONTINUE  # repeated epoch ignored
    assert report(s, t0, 1, 0.0) == D.CONTINUE  # stale epoch ignored
    report(s, t0, 5, 0.6)  # epochs 3, 4 skipped
    curve = s.observations.trials[0].scores
    assert curve[:2] == [-0.9, -0.8] and np.isnan(curve[2]) and np.isnan(curve[3]) and curve[4] == -0.6
    data = s.observations.training_data()
    assert sorted(data.budget.tolist()) == [1, 2, 5]  # gaps give no training rows
    assert report(s, t0, 11, 0.5) == D.STOP  # beyond max_t: stopped, value not recorded
    assert s.observations.trials[0].last_epoch == 5


def test_nan_result_stops_trial_counts_worst_and_tuner_keeps_going():
    s = make(lambda tid, c: 5.0 if tid == 0 else 1.0, num_initial_random=2)
    t0, t1 = start(s, 0), start(s, 1)
    report(s, t1, 1, 0.5)
    assert report(s, t0, 1, float("nan")) == D.STOP
    assert s.trial_status(0) is TrialStatus.DIVERGED
    s.on_trial_remove(t0)
    assert report(s, t0, 2, 0.1) == D.STOP  # never resumed, late reports ignored for decisions
    for _ in range(3):  # trial 0 scores highest but is never resumed
        sug = s.suggest()
        assert sug.spawn_new_trial_id or sug.checkpoint_trial_id != 0
    data = s.observations.training_data()
    assert data.y.min() == -np.inf  # kept as the worst value: what the surrogate sees is floored
    from syne_dyhpo.surrogates.outcome_transform import ScoreTransform

    transform = ScoreTransform()
    assert np.isfinite(transform(data.y)).all() and transform(data.y).min() == transform.floor
    assert report(s, t1, 2, float("inf")) == D.STOP


def test_failed_trial_is_never_resumed_and_keeps_its_data():
    s = make(lambda tid, c: 5.0 if tid == 0 else 1.0, num_initial_random=2)
    t0, t1 = start(s, 0), start(s, 1)
    report(s, t0, 1, 0.2)
    s.on_trial_error(t0)
    assert s.trial_status(0) is TrialStatus.FAILED
    assert s.observations.trials[0].scores == [-0.2]
    assert report(s, t1, 1, 0.5) in (D.PAUSE, D.CONTINUE)
    sug = s.suggest()
    assert sug.spawn_new_trial_id or sug.checkpoint_trial_id != 0


def test_budget_step_segments_end_at_max_t():
    s = make(lambda tid, c: 5.0 if tid == 0 else 0.0, max_t=7, budget_step=3)
    t0 = start(s, 0)
    policy = s.policy
    decisions = [report(s, t0, e, 1.0 / e) for e in range(1, 8)]
    assert decisions == [D.CONTINUE] * 6 + [D.STOP]
    assert policy.updates == 2  # decisions only at segment ends 3 and 6, epoch 7 = max_t


def test_max_resource_attr_segments():
    prefer = {"winner": 0}
    s = make(
        lambda tid, c: 5.0 if tid == prefer["winner"] else 0.0, max_t=7, budget_step=2, max_resource_attr="max_epoch"
    )
    sug = s.suggest()
    assert sug.config["max_epoch"] == 2
    t0 = make_trial(0, sug.config)
    s.on_trial_add(t0)
    assert report(s, t0, 1, 0.5) == D.CONTINUE
    # segment end: the job stops itself, so even the winner is paused and resumed at once
    assert report(s, t0, 2, 0.4) == D.PAUSE
    s.on_trial_remove(t0)
    sug = s.suggest()
    assert not sug.spawn_new_trial_id and sug.checkpoint_trial_id == 0 and sug.config["max_epoch"] == 4


def test_bad_input_errors():
    with pytest.raises(ValueError, match="max_t"):
        make(lambda t, c: 0.0, max_t=0)
    with pytest.raises(ValueError, match=re.escape("FreezeThawOptions.budget_step must be an integer >= 1, got 0")):
        make(lambda t, c: 0.0, budget_step=0)
    s = make(lambda t, c: 0.0)
    t0 = start(s, 0)
    with pytest.raises(ValueError, match="no 'loss'"):
        s.on_trial_result(t0, {"epoch": 1, "accuracy": 0.3})
    with pytest.raises(ValueError, match="no 'epoch'"):
        s.on_trial_result(t0, {"loss": 0.3})
    with pytest.raises(ValueError, match="no hyperparameter"):
        DyHPO({"lr": 0.1}, metric="loss", max_t=5)


def test_surrogate_failure_falls_back_without_losing_data():
    class Exploding(PreferencePolicy):
        def score(self, model, candidates, observations, pending=None):
            raise RuntimeError("cholesky exploded")

    s = FreezeThawScheduler(
        SPACE,
        "loss",
        Exploding(None),
        max_t=5,
        options=FreezeThawOptions(candidates=CandidateOptions(configs=TABLE)),
        random_seed=0,
        completion=IncumbentCompletion(),
    )
    t0 = start(s, 0)
    decision = report(s, t0, 1, 0.5)
    assert decision in (D.CONTINUE, D.PAUSE)
    assert s.metadata()["num_fallbacks"] == 1 and s.observations.trials[0].scores == [-0.5]
    s.on_trial_remove(t0)
    assert s.suggest() is not None


def test_metadata_json_and_pickle_after_real_fits():
    s = DyHPO(
        {"x": uniform(0, 1)},
        metric="loss",
        do_minimize=False,
        max_t=4,
        random_seed=1,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=8)),
    )
    drive_one_worker(s, steps=12, value=lambda trial, epoch: trial.config["x"] * (1 - 0.5 / epoch))
    meta = json.loads(json.dumps(s.metadata()))
    assert meta["metric_mode"] == "max" and meta["num_fallbacks"] == 0
    assert meta["policy"]["num_full_fits"] >= 1
    # the surrogate's settings are reported, so a run's record says what model decided
    assert meta["policy"]["surrogate_config"]["max_condition_points"] == s.policy.surrogate.config.max_condition_points
    clone = pickle.loads(pickle.dumps(s))
    assert clone.observations.num_observations == s.observations.num_observations


def test_paused_checkpoints_max_kept_retires_lowest_ranked_and_never_resumes_them():
    # each trial's score is its id; new configs score 100 so every decision pauses the reporter
    s = make(
        lambda tid, c: 100.0 if tid is None else float(tid),
        checkpoints=PausedCheckpoints(max_kept=2),
        configs=TABLE[:5],
    )
    trials = []
    for tid in range(4):
        trial = start(s, tid)
        trials.append(trial)
        assert report(s, trial, 1, 0.5) == D.PAUSE
        s.on_trial_remove(trial)
    # 4 paused trials, cap 2: the two lowest-scored (0, 1) are retired, highest kept
    status = [s.trial_status(t) for t in range(4)]
    assert status[:2] == [TrialStatus.RETIRED] * 2 and status[2:] == [TrialStatus.PAUSED] * 2
    assert sorted(s.pop_checkpoints_to_delete()) == [0, 1]
    assert s.pop_checkpoints_to_delete() == []
    assert s.callback_for_checkpoint_removal(None) is not None
    # the finite table has one config left; after it, only paused 2 and 3 can be resumed
    start(s, 4)
    for _ in range(2):
        sug = s.suggest()
        assert not sug.spawn_new_trial_id and sug.checkpoint_trial_id in (2, 3)


def test_lost_checkpoint_fails_trial_by_default_and_restarts_on_request():
    for restart in (False, True):
        prefer = {"winner": 0}

        def score(tid, c, prefer=prefer):
            return 5.0 if tid == prefer["winner"] else (1.0 if tid is None else 0.0)

        s = make(score, max_t=10, num_initial_random=2, checkpoints=PausedCheckpoints(restart_if_lost=restart))
        t0, t1 = start(s, 0), start(s, 1)
        for e in (1, 2, 3):
            report(s, t0, e, 1.0 / e)
        prefer["winner"] = 1
        assert report(s, t0, 4, 0.2) == D.PAUSE  # a new config wins (trial 1 is running)
        s.on_trial_remove(t0)
        start(s, 2)
        prefer["winner"] = 0
        assert report(s, t1, 1, 0.9) == D.PAUSE
        s.on_trial_remove(t1)
        assert s.suggest().checkpoint_trial_id == 0
        decision = report(s, t0, 1, 0.95)  # the job started over: checkpoint lost
        if not restart:
            assert decision == D.STOP and s.trial_status(0) is TrialStatus.FAILED
            assert len(s.observations.trials[0].scores) == 4  # nothing observed is lost
        else:
            assert decision == D.CONTINUE and s.observations.trials[0].scores == [-0.95]
            archived = [r for k, r in s.observations.trials.items() if k < 0]
            assert len(archived) == 1 and len(archived[0].scores) == 4
            assert archived[0].status is TrialStatus.FAILED


def test_lost_checkpoint_restart_with_max_resource_attr_runs_to_configured_segment_end():
    # Real polling: a resumed job (config max_epoch = k+1) that lost its checkpoint trains
    # epochs 1..k+1 and stops itself there. The scheduler must let it run to k+1 and decide
    # only then; pausing it at epoch 2 kills a job whose checkpoint may already be past 2,
    # so the next resume would find nothing to do and the trial would silently "complete".
    s = make(
        lambda tid, c: 5.0 if tid == 0 else 0.0,
        max_t=10,
        max_resource_attr="max_epoch",
        checkpoints=PausedCheckpoints(restart_if_lost=True),
    )
    sug = s.suggest()
    t0 = make_trial(0, sug.config)
    s.on_trial_add(t0)
    for epoch in (1, 2):
        assert report(s, t0, epoch, 1.0 / epoch) == D.PAUSE  # segment end: pause + resume at once
        s.on_trial_remove(t0)
        sug = s.suggest()
        assert sug.checkpoint_trial_id == 0 and sug.config["max_epoch"] == epoch + 1
        t0 = make_trial(0, sug.config)
    # the job with max_epoch=3 lost its checkpoint and starts over at epoch 1
    assert report(s, t0, 1, 0.9) == D.CONTINUE
    assert report(s, t0, 2, 0.8) == D.CONTINUE  # still inside the job's segment (ends at 3)
    assert report(s, t0, 3, 0.7) == D.PAUSE  # the job's configured end: decision
    s.on_trial_remove(t0)
    sug = s.suggest()
    assert sug.checkpoint_trial_id == 0 and sug.config["max_epoch"] == 4
    assert s.observations.trials[0].scores == [-0.9, -0.8, -0.7]


def test_lost_checkpoint_detected_for_a_trial_paused_at_epoch_1():
    # A trial paused after its first epoch whose resumed job lost the checkpoint reports epoch 1
    # again: that is a restart (with max_resource_attr no stale epoch-1 line can arrive after
    # a resume), not a repeated report to ignore while epoch 2 of the new run is taken as the
    # continuation of the old curve.
    for restart in (False, True):
        s = make(
            lambda tid, c: 5.0 if tid == 0 else 0.0,
            max_t=10,
            max_resource_attr="max_epoch",
            checkpoints=PausedCheckpoints(restart_if_lost=restart),
        )
        sug = s.suggest()
        t0 = make_trial(0, sug.config)
        s.on_trial_add(t0)
        assert report(s, t0, 1, 0.5) == D.PAUSE
        s.on_trial_remove(t0)
        sug = s.suggest()
        assert sug.checkpoint_trial_id == 0 and sug.config["max_epoch"] == 2
        t0 = make_trial(0, sug.config)
        decision = report(s, t0, 1, 0.6)  # the job started over
        if not restart:
            assert decision == D.STOP and s.trial_status(0) is TrialStatus.FAILED
            assert s.observations.trials[0].scores == [-0.5]
        else:
            assert decision == D.CONTINUE and s.observations.trials[0].scores == [-0.6]
            assert [r.scores for k, r in s.observations.trials.items() if k < 0] == [[-0.5]]
            assert report(s, t0, 2, 0.4) == D.PAUSE  # the job's segment end
            assert s.observations.trials[0].scores == [-0.6, -0.4]


def _six_trials_at_epoch_1(probability):
    # the policy always prefers new configs: only successive halving resumes anything
    table = [{"x": v} for v in np.linspace(0, 1, 12)]
    s = FreezeThawScheduler(
        {"x": choice([t["x"] for t in table]), "c": 7},
        "loss",
        PreferencePolicy(lambda tid, c: 1.0 if tid is None else 0.0),
        do_minimize=True,
        max_t=10,
        options=FreezeThawOptions(candidates=CandidateOptions(configs=table)),
        random_seed=0,
        completion=None,
    )
    trials = []
    for i, loss in enumerate([0.5, 0.3, 0.9, 0.8, 0.7, 0.6]):
        trials.append(start(s, i))
        # decide by rank after all six
        s._decider.promotion = SuccessiveHalvingPromotion(probability) if i == 5 else None
        assert report(s, trials[i], 1, loss) == D.PAUSE
    return s, trials


def test_sh_promotion_resumes_top_third_at_highest_epoch_before_asking_the_policy():
    s, trials = _six_trials_at_epoch_1(probability=1.0)
    # rung 1 holds 6 values: its top 6 // 3 = 2 are trials 1 (0.3) and 0 (0.5)
    sug = s.suggest()
    assert not sug.spawn_new_trial_id and sug.checkpoint_trial_id == 1
    assert report(s, trials[1], 2, 0.25) == D.PAUSE  # rung 2 has 1 value: none promotable
    sug = s.suggest()
    assert sug.checkpoint_trial_id == 0  # still in rung 1's top third
    assert report(s, trials[0], 2, 0.2) == D.PAUSE
    # rung 2: two values, 2 // 3 = 0 promotable; trials 0 and 1 have left rung 1: nothing
    assert s.suggest().spawn_new_trial_id
    assert s.metadata()["num_sh_promotions"] == 2


def test_promotion_probability_zero_leaves_decisions_to_the_policy():
    s, _ = _six_trials_at_epoch_1(probability=0.0)
    assert s.suggest().spawn_new_trial_id and s.metadata()["num_sh_promotions"] == 0


def test_bad_promotion_settings_are_refused_naming_the_field_and_value():
    with pytest.raises(
        ValueError, match=r"SuccessiveHalvingPromotion.probability must be a number in \[0, 1\], got 1.5"
    ):
        SuccessiveHalvingPromotion(probability=1.5)
    with pytest.raises(
        ValueError, match=re.escape("SuccessiveHalvingPromotion.reduction_factor must be a finite number > 1, got 1.0")
    ):
        SuccessiveHalvingPromotion(reduction_factor=1.0)
    with pytest.raises(
        ValueError,
        match=re.escape("FreezeThawOptions.promotion must be a SuccessiveHalvingPromotion or None, got 0.25"),
    ):
        make(lambda tid, c: 0.0, promotion=0.25)


def test_candidate_curves_use_the_normalisation_the_model_was_fitted_with(monkeypatch):
    """A fit from scratch re-estimates the score normalisation; the paused trials' curves the
    surrogate scores must be expressed in that new normalisation, not the one before the fit
    (they once reached |z| = 60 against normalised training rows)."""
    from syne_dyhpo.surrogates import deep_kernel_gp

    predicted_curves = []
    original_predict = deep_kernel_gp.DeepKernelGP.predict

    def recording_predict(self, candidates, budget):
        predicted_curves.append((candidates.curves.copy(), list(candidates.trial_ids)))
        return original_predict(self, candidates, budget)

    monkeypatch.setattr(deep_kernel_gp.DeepKernelGP, "predict", recording_predict)
    s = DyHPO(
        {"x": uniform(0, 1)},
        metric="acc",
        do_minimize=False,
        max_t=10,
        random_seed=0,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=8)),
    )
    rng = np.random.RandomState(0)
    checked = 0

    def check_last_prediction(_trial):
        nonlocal checked
        if not predicted_curves:
            return
        curves, trial_ids = predicted_curves[-1]
        for row, tid in zip(curves, trial_ids):
            if tid is not None:
                scores = np.asarray(s.observations.trials[tid].scores[: int(np.sum(~np.isnan(row)))])
                np.testing.assert_allclose(row[: len(scores)], s.policy.transform(scores), atol=1e-9)
                checked += 1

    # percent: far from N(0, 1)
    drive_one_worker(
        s,
        40,
        lambda trial, epoch: 50 + 40 * trial.config["x"] * (1 - 0.5**epoch) + rng.rand(),
        metric="acc",
        after_segment=check_last_prediction,
    )
    assert checked > 20


# ----- new configurations kept between decisions -------------------------------------------


def _prefer_high_x(trial_id, config):
    return -1.0 if trial_id is not None else config["x"]


class RecordingPreference(PreferencePolicy):
    """Prefers new configurations by ``x`` (trials never); records the new ones it scored."""

    def __init__(self):
        super().__init__(_prefer_high_x)
        self.offered: list[list[float]] = []

    def score(self, model, candidates, observations, pending=None):
        self.offered.append([c["x"] for t, c in zip(candidates.trial_ids, candidates.configs) if t is None])
        return super().score(model, candidates, observations)


def test_the_best_scored_new_configurations_are_offered_again_at_the_next_decision():
    policy = RecordingPreference()
    s = FreezeThawScheduler(
        SPACE,
        "loss",
        policy,
        do_minimize=True,
        max_t=5,
        random_seed=0,
        completion=None,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=8, num_kept=3, configs=TABLE)),
    )
    trial = start(s, 0)
    for i in range(1, 6):
        assert report(s, trial, 1, 0.5) == D.PAUSE  # a new configuration wins each time
        s.on_trial_remove(trial)
        trial = start(s, i)
        assert trial.config["x"] == max(policy.offered[-1])
    for before, after in zip(policy.offered, policy.offered[1:]):
        kept = sorted(before, reverse=True)[1:4]  # the best three but the one started
        assert after[:3] == kept
        assert len(after) == 8 and len(set(after)) == 8  # fresh draws fill up, none twice
        assert not set(after[3:]) & set(before[:1] + kept)
    assert s.metadata()["candidates"]["num_kept"] == 3


def test_without_kept_candidates_every_decision_draws_afresh():
    policy = RecordingPreference()
    s = FreezeThawScheduler(
        SPACE,
        "loss",
        policy,
        do_minimize=True,
        max_t=5,
        random_seed=0,
        completion=None,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=8, configs=TABLE)),
    )
    trial = start(s, 0)
    for i in range(1, 4):
        report(s, trial, 1, 0.5)
        s.on_trial_remove(trial)
        trial = start(s, i)
    # draws are sorted table rows: the best three of the last draw lead the next only by chance
    assert any(
        after[:3] != sorted(before, reverse=True)[1:4] for before, after in zip(policy.offered, policy.offered[1:])
    )


def test_divided_initial_random_count_is_per_worker_seen():
    divided = CandidateOptions(num_initial_random=10, divide_initial_random=True)
    assert [divided.num_random_starts(w) for w in (1, 2, 3, 4, 5, 11)] == [10, 5, 4, 3, 2, 1]
    assert [CandidateOptions(num_initial_random=10).num_random_starts(w) for w in (1, 4)] == [10, 10]
    assert CandidateOptions(num_initial_random=0, divide_initial_random=True).num_random_starts(4) == 0


def test_initial_random_count_divided_by_a_start_dearer_than_an_epoch():
    by_start = CandidateOptions(num_initial_random=10, divide_initial_random=True, divide_initial_random_by_start=True)
    # ceil(ceil(10 / w) x epoch / start), at least one, when the start costs more than the epoch
    assert [by_start.num_random_starts(1, start, 1.0) for start in (4.0, 2.5, 10.0, 100.0)] == [3, 4, 1, 1]
    assert [by_start.num_random_starts(4, start, 1.0) for start in (2.0, 4.0)] == [2, 1]
    # a start at most an epoch, or not known yet: only divided by the workers
    assert [by_start.num_random_starts(1, start, 1.0) for start in (1.0, 0.5, 0.0, None)] == [10, 10, 10, 10]
    assert by_start.num_random_starts(4, 4.0, None) == 3
    assert CandidateOptions(num_initial_random=10).num_random_starts(1, 4.0, 1.0) == 10
    assert CandidateOptions(num_initial_random=10, divide_initial_random_by_start=True).num_random_starts(
        2, 4.0, 1.0
    ) == 3
    assert CandidateOptions(num_initial_random=0, divide_initial_random_by_start=True).num_random_starts(
        1, 4.0, 1.0
    ) == 0


def test_divided_initial_random_decides_by_the_workers_seen():
    def prefer(tid, c):
        return 10.0 if tid == 0 else (1.0 if tid is None else 0.0)

    # one worker: three random starts, the loved trial 0 paused for them, then resumed
    s = make(prefer, candidates=CandidateOptions(num_initial_random=3, divide_initial_random=True, configs=TABLE))
    for i in range(3):
        trial = start(s, i)
        assert report(s, trial, 1, 0.5) == D.PAUSE
        s.on_trial_remove(trial)
    sug = s.suggest()
    assert not sug.spawn_new_trial_id and sug.checkpoint_trial_id == 0
    # two workers seen: ceil(3 / 2) = 2 random starts, so trial 0 keeps running at once ...
    s = make(prefer, candidates=CandidateOptions(num_initial_random=3, divide_initial_random=True, configs=TABLE))
    t0, _ = start(s, 0), start(s, 1)
    assert report(s, t0, 1, 0.5) == D.CONTINUE
    # ... where the undivided count still starts a third random configuration
    s = make(prefer, num_initial_random=3)
    t0, _ = start(s, 0), start(s, 1)
    assert report(s, t0, 1, 0.5) == D.PAUSE


def test_candidate_options_are_checked_naming_the_field_and_value():
    for value in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match=f"CandidateOptions.num_kept must be an integer >= 0, got {value!r}"):
            CandidateOptions(num_kept=value)
    with pytest.raises(ValueError, match=r"CandidateOptions.num_kept must be smaller than num_candidates \(8\), got 8"):
        CandidateOptions(num_candidates=8, num_kept=8)
    with pytest.raises(ValueError, match=re.escape("CandidateOptions.num_candidates must be an integer >= 1, got 0")):
        CandidateOptions(num_candidates=0)
    with pytest.raises(
        ValueError, match=re.escape("CandidateOptions.num_initial_random must be an integer >= 0, got -1")
    ):
        CandidateOptions(num_initial_random=-1)
    with pytest.raises(ValueError, match=re.escape("CandidateOptions.divide_initial_random must be True or False")):
        CandidateOptions(divide_initial_random=1)
    with pytest.raises(
        ValueError, match=re.escape("CandidateOptions.divide_initial_random_by_start must be True or False")
    ):
        CandidateOptions(divide_initial_random_by_start="yes")
    with pytest.raises(ValueError, match=re.escape("CandidateOptions.configs must be a list of configurations")):
        CandidateOptions(configs={"x": 0.5})
    with pytest.raises(ValueError, match=re.escape("FreezeThawOptions.candidates must be a CandidateOptions, got 256")):
        make(lambda tid, c: 0.0, candidates=256)


def test_paused_checkpoints_are_checked_naming_the_field_and_value():
    for value in (0, -1, 1.5, True, "2"):
        with pytest.raises(
            ValueError, match=re.escape(f"PausedCheckpoints.max_kept must be an integer >= 1 or None, got {value!r}")
        ):
            PausedCheckpoints(max_kept=value)
    for value in ("yes", 1, None):
        with pytest.raises(
            ValueError, match=re.escape(f"PausedCheckpoints.restart_if_lost must be True or False, got {value!r}")
        ):
            PausedCheckpoints(restart_if_lost=value)
    settings = PausedCheckpoints(max_kept=np.int64(3), restart_if_lost=np.True_)
    assert (settings.max_kept, settings.restart_if_lost) == (3, True)
    assert type(settings.max_kept) is int and type(settings.restart_if_lost) is bool
    with pytest.raises(ValueError, match=re.escape("FreezeThawOptions.checkpoints must be a PausedCheckpoints, got 2")):
        make(lambda tid, c: 0.0, checkpoints=2)
    # the default keeps every paused trial and registers no checkpoint removal
    assert make(lambda tid, c: 0.0).callback_for_checkpoint_removal(None) is None


def test_kept_candidates_spare_the_gp_most_new_triangular_solves():
    """Between two trainings, a kept configuration's whitened cross-covariance is extended by
    the rows appended since (O(n)); only the fresh draws and the reporting trial's new input go
    through a triangular solve against the whole conditioning set."""
    from syne_dyhpo.surrogates import deep_kernel_gp
    from syne_dyhpo.surrogates.deep_kernel_gp.posterior import _Posterior

    def whitened_per_prediction(num_kept):
        solved, calls = [], []
        original_whiten, original_predict = _Posterior.whiten, deep_kernel_gp.DeepKernelGP._predict

        def whiten(self, z, sq):
            solved[-1] += len(z)
            return original_whiten(self, z, sq)

        def predict(self, inputs, pending_inputs=None):
            solved.append(0)
            calls.append(self._params_version)
            return original_predict(self, inputs, pending_inputs)

        _Posterior.whiten, deep_kernel_gp.DeepKernelGP._predict = whiten, predict
        try:
            s = DyHPO(
                {"x": uniform(0, 1), "y": uniform(0, 1)},
                metric="loss",
                max_t=5,
                random_seed=0,
                options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=32, num_kept=num_kept)),
                completion=None,
            )
            rng = np.random.RandomState(0)
            drive_one_worker(
                s,
                60,
                lambda trial, epoch: (trial.config["x"] - 0.3) ** 2 + trial.config["y"] / epoch + 0.01 * rng.rand(),
            )
        finally:
            _Posterior.whiten, deep_kernel_gp.DeepKernelGP._predict = original_whiten, original_predict
        # predictions by the same weights as the one before (no training in between)
        return [n for n, version, prev in zip(solved[1:], calls[1:], calls) if version == prev]

    kept, afresh = whitened_per_prediction(24), whitened_per_prediction(0)
    assert len(kept) > 20 and len(afresh) > 20
    assert np.median(afresh) >= 32  # every new configuration is new to the GP
    assert np.median(kept) <= 8 + 1  # the fresh draws and at most the reporting trial


# ----- incumbent completion ------------------------------------------------------------------


def _report_first_epochs(s, losses):
    trials = []
    for i, loss in enumerate(losses):
        trials.append(start(s, i))
        assert report(s, trials[i], 1, loss) == D.PAUSE
        s.on_trial_remove(trials[i])
    return trials


def test_incumbent_is_trained_to_max_t_once_enough_configs_were_seen():
    # the policy always prefers new configurations: only the completion rule resumes a trial
    s = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=4, completion=completion(after=3))
    trials = _report_first_epochs(s, [0.5, 0.2, 0.9])  # trial 1 holds the best score
    sug = s.suggest()
    assert not sug.spawn_new_trial_id and sug.checkpoint_trial_id == 1
    assert report(s, trials[1], 2, 0.15) == D.CONTINUE  # still the incumbent: it goes on
    assert report(s, trials[1], 3, 0.3) == D.CONTINUE  # worse now, but it holds the best score
    assert report(s, trials[1], 4, 0.1) == D.STOP  # trained to max_t
    s.on_trial_remove(trials[1])
    assert s.suggest().spawn_new_trial_id  # a finished incumbent: back to the policy
    assert s.metadata()["num_completions"] == 3


def test_no_completion_before_enough_configs_or_when_switched_off():
    s = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=4, completion=completion(after=4))
    _report_first_epochs(s, [0.5, 0.2, 0.9])  # only 3 configurations seen
    assert s.suggest().spawn_new_trial_id
    s = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=4, completion=None)
    _report_first_epochs(s, [0.5, 0.2, 0.9, 0.8, 0.7])
    assert s.suggest().spawn_new_trial_id


@pytest.mark.parametrize(
    "workers, delay, started",
    [(1, 0.0, 3), (1, 1.0, 4), (1, 2.0, 8), (1, 2.5, 10), (1, 4.0, 16), (4, 16.0, 7), (4, 12.0, 6), (4, 0.0, 6)],
)
def test_the_completion_waits_for_delay_times_max_t_over_workers_squared_observed_epochs(workers, delay, started):
    # max_t = 4, trial 1 holds the best first epoch: the completion waits for ceil(delay * 4)
    # observed epochs with one worker and a sixteenth of that with four, and always for 3 first
    # epochs (with four workers, 4 trials start, then one more after each report)
    s = make(
        lambda tid, c: 1.0 if tid is None else 0.0, max_t=4, completion=completion(after=3, delay=delay, share=0.0)
    )
    running = [start(s, i) for i in range(workers)]
    while True:
        trial = running.pop(0)  # the oldest running trial reports epoch 1, its worker asks
        assert report(s, trial, 1, 0.2 if trial.trial_id == 1 else 0.5) == D.PAUSE
        s.on_trial_remove(trial)
        sug = s.suggest()
        if not sug.spawn_new_trial_id:
            break
        running.append(make_trial(len(s.observations.trials), sug.config))
        s.on_trial_add(running[-1])
    assert sug.checkpoint_trial_id == 1 and len(s.observations.trials) == started
    assert s.metadata()["completion"]["delay"] == delay


def test_the_core_takes_no_default_completion_and_the_completions_settings_are_checked_naming_field_and_value():
    # the core scheduler takes no default (the methods' differ); each method has its own
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'completion'"):
        FreezeThawScheduler(SPACE, "loss", PreferencePolicy(lambda tid, c: 0.0), max_t=5)
    s = FreezeThawScheduler(
        SPACE, "loss", PreferencePolicy(lambda tid, c: 0.0), max_t=5, completion=IncumbentCompletion()
    )
    assert DeepPowerLaw(SPACE, metric="loss", max_t=5).completion == DeepPowerLawCompletion()
    assert asdict(DeepPowerLawCompletion()) == asdict(IncumbentCompletion())
    assert s.metadata()["completion"] == {
        "after": 9,
        "delay": 2.0,
        "share": 0.5,
        "leaders_until_trained": False,
        "committed": 0,
        "commit_after": 0.5,
        "limit": None,
        "leader_score": "best",
    }
    bad = [
        ("delay", (-1, float("inf"), float("nan"), True, "2"), "a finite number >= 0"),
        ("share", (-0.1, 1.5, True, "half", float("nan")), r"a number in \[0, 1\]"),
        ("commit_after", (0, -0.5, 1.5, True, "half", float("nan")), r"None or a number in \(0, 1\]"),
        ("committed", (-1, 1.5, True, "2"), "an integer >= 0"),
        ("leaders_until_trained", (1, "yes", None), "True or False"),
        ("after", (0, 2.5, True, "9"), "an integer >= 1"),
        ("limit", (0, -1, 1.5, True, "2"), "an integer >= 1 or None"),
        ("leader_score", ("worst", "Latest", None, 1), "one of 'best', 'latest'"),
    ]
    for field, values, expected in bad:
        for value in values:
            message = f"IncumbentCompletion.{field} must be {expected}, got {re.escape(repr(value))}$"
            with pytest.raises(ValueError, match=message):
                IncumbentCompletion(**{field: value})
    with pytest.raises(ValueError, match="completion must be an IncumbentCompletion or None, got True"):
        make(lambda tid, c: 0.0, completion=True)


def test_one_completion_object_shared_by_two_schedulers_keeps_each_ones_state_apart():
    shared = completion(after=3, committed=1, limit=2)
    a = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=4, completion=shared)
    b = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=4, completion=shared)
    _report_first_epochs(a, [0.5, 0.2, 0.9])
    assert a.suggest().checkpoint_trial_id == 1
    assert a._decider.completion.committed == (1,) and a._decider.completion.chosen == frozenset({1})
    # b has seen nothing: nothing chosen, nothing committed; its own run decides by its own data
    assert b._decider.completion.committed == () and b._decider.completion.chosen == frozenset()
    _report_first_epochs(b, [0.2, 0.9, 0.5])
    assert b.suggest().checkpoint_trial_id == 0
    assert b._decider.completion.committed == (0,) and a._decider.completion.committed == (1,)
    assert shared == completion(after=3, committed=1, limit=2)  # the settings are unchanged


def _decisions(s, steps):
    """The suggestions and answers of ``s`` driven by one worker for ``steps`` segments."""
    log = []
    original = s.on_trial_result

    def on_trial_result(trial, result):
        log.append((trial.trial_id, result["epoch"], original(trial, result)))
        return log[-1][-1]

    s.on_trial_result = on_trial_result
    drive_one_worker(s, steps, value=lambda trial, epoch: (trial.config["x"] - 0.4) ** 2 + 1.0 / epoch)
    return log


def test_no_completion_decides_as_a_completion_that_never_starts():
    # completion=None (the papers) leaves every decision to the policy: the same decisions,
    # random draws included, as a completion waiting for more first epochs than the run has
    def prefer(tid, c):
        return c["x"] if tid is None else 0.5 + 0.01 * tid

    none = _decisions(make(prefer, max_t=4, completion=None), 40)
    never = _decisions(make(prefer, max_t=4, completion=completion(after=1000)), 40)
    assert none == never and len(none) >= 40
    # while a completion that starts after 3 first epochs decides otherwise
    assert _decisions(make(prefer, max_t=4, completion=completion(after=3)), 40) != none


@pytest.mark.parametrize("leader_score", ["best", "latest"])
def test_with_the_latest_score_a_leader_whose_curve_fell_below_another_loses_the_lead(leader_score):
    # one worker; the policy always prefers new configurations: only the completion resumes
    s = make(
        lambda tid, c: 1.0 if tid is None else 0.0,
        max_t=4,
        completion=completion(after=3, share=0.0, leader_score=leader_score),
    )
    _t0, t1, _ = _report_first_epochs(s, [0.3, 0.2, 0.9])  # t1 leads by its first epoch
    assert s.suggest().checkpoint_trial_id == 1
    # t1's loss rises to 0.5 (an early peak): its best, 0.2, still leads; its latest, 0.5, is
    # behind t0's 0.3, which takes the lead
    assert report(s, t1, 2, 0.5) == (D.CONTINUE if leader_score == "best" else D.PAUSE)
    if leader_score == "latest":
        s.on_trial_remove(t1)
        assert s.suggest().checkpoint_trial_id == 0
    obs = s.observations
    assert (obs.best_of(obs.trials[1]), obs.latest_of(obs.trials[1])) == (-0.2, -0.5)  # scores: higher is better
    assert obs.leader_threshold(2, latest=True) == -0.5 and obs.leader_threshold(2) == -0.3


def _t1_completed_then_overtaken_by_t0(s):
    """Three workers, one leader, the completion after 2 first epochs: t1 leads and is resumed
    by the completion, then t0 takes the lead while t1 runs. Returns (t0, t1)."""
    t0, t1, t2 = start(s, 0), start(s, 1), start(s, 2)
    assert report(s, t1, 1, 0.1) == D.PAUSE  # one configuration seen: the policy decides
    s.on_trial_remove(t1)
    assert s.suggest().spawn_new_trial_id
    assert report(s, t2, 1, 0.5) == D.PAUSE  # two seen: the paused leader t1 is next
    s.on_trial_remove(t2)
    assert s.suggest().checkpoint_trial_id == 1
    assert report(s, t0, 1, 0.05) == D.CONTINUE  # t0 takes the lead while t1 runs: it goes on
    return t0, t1


def test_leader_is_completed_when_it_may_get_a_segment_and_reporting_leader_goes_on():
    s = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=4, completion=completion(after=2))
    _t0, t1 = _t1_completed_then_overtaken_by_t0(s)
    assert report(s, t1, 2, 0.2) == D.PAUSE  # overtaken: left to the policy
    assert s.metadata()["num_completions"] == 2


@pytest.mark.parametrize("committed", [0, 1, 2])
def test_the_first_committed_completions_go_on_to_max_t_when_overtaken(committed):
    # one leader; the policy always prefers new configurations: only the completion resumes
    s = make(
        lambda tid, c: 1.0 if tid is None else 0.0,
        max_t=4,
        completion=completion(after=2, share=0.0, committed=committed),
    )
    t0, t1 = _t1_completed_then_overtaken_by_t0(s)  # t1 is the first completion, t0 the second
    # t1 was overtaken: committed, it goes on; otherwise it is left to the policy
    assert report(s, t1, 2, 0.2) == (D.CONTINUE if committed >= 1 else D.PAUSE)
    t3 = start(s, 3)
    assert report(s, t3, 1, 0.01) == D.CONTINUE  # t3 leads now
    assert report(s, t0, 2, 0.3) == (D.CONTINUE if committed >= 2 else D.PAUSE)
    if committed >= 1:
        assert report(s, t1, 3, 0.2) == D.CONTINUE
        assert report(s, t1, 4, 0.2) == D.STOP  # trained to max_t: the commitment ends
    assert s._decider.completion.committed == (1, 0)[:committed]
    assert s.metadata()["completion"]["committed"] == committed


@pytest.mark.parametrize("limit", [None, 1, 2])
def test_the_completion_chooses_at_most_limit_trials(limit):
    # one worker; the policy always prefers new configurations: only the completion resumes
    s = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=3, completion=completion(after=3, limit=limit))
    trials = _report_first_epochs(s, [0.5, 0.2, 0.9])  # t1 leads
    assert s.suggest().checkpoint_trial_id == 1  # the first choice
    assert report(s, trials[1], 2, 0.2) == D.CONTINUE
    assert report(s, trials[1], 3, 0.2) == D.STOP  # trained to max_t
    s.on_trial_remove(trials[1])
    t3 = start(s, 3)
    # t3 takes the lead at its first epoch: the second choice goes on, unless the limit of
    # one was reached (the policy decides: it prefers new configurations)
    assert report(s, t3, 1, 0.1) == (D.PAUSE if limit == 1 else D.CONTINUE)
    assert s.metadata()["completion"]["limit"] == limit
    assert s._decider.completion.chosen == (
        frozenset({1}) if limit == 1 else frozenset({1, 3}) if limit else frozenset()
    )


@pytest.mark.parametrize("max_t, after, goes_on", [(4, 0.5, True), (6, 0.5, False), (4, None, False), (4, 1.0, False)])
def test_a_completed_trial_past_commit_after_goes_on_to_max_t_when_overtaken(max_t, after, goes_on):
    # one leader; the policy always prefers new configurations: only the completion resumes
    s = make(
        lambda tid, c: 1.0 if tid is None else 0.0,
        max_t=max_t,
        completion=completion(after=2, share=0.0, commit_after=after),
    )
    _t0, t1 = _t1_completed_then_overtaken_by_t0(s)
    # t1 reaches epoch 2, overtaken: it goes on if 2 epochs are at least after x max_t
    assert report(s, t1, 2, 0.2) == (D.CONTINUE if goes_on else D.PAUSE)
    if goes_on:
        for epoch in range(3, max_t):
            assert report(s, t1, epoch, 0.2) == D.CONTINUE
        assert report(s, t1, max_t, 0.2) == D.STOP
    assert s.metadata()["completion"]["commit_after"] == after


@pytest.mark.parametrize("share, leaders", [(0.5, 2), (0.0, 1), (0.25, 1), (1.0, 4)])
def test_with_four_workers_the_top_share_of_them_complete_leaders(share, leaders):
    # the policy always prefers new configurations: only the completion rule continues a trial
    s = make(lambda tid, c: 1.0 if tid is None else 0.0, max_t=6, completion=completion(after=3, share=share))
    trials = {i: start(s, i) for i in range(4)}  # four workers busy
    assert s._decider.completion.num_leaders(s._workers_seen) == leaders
    for tid, loss in [(0, 0.5), (1, 0.2)]:  # fewer than 3 configurations seen: the policy decides
        assert report(s, trials[tid], 1, loss) == D.PAUSE
        s.on_trial_remove(trials[tid])
        trials[tid + 4] = start(s, tid + 4)
    assert report(s, trials[2], 1, 0.9) == D.PAUSE  # three seen: the paused incumbent t1 is next
    s.on_trial_remove(trials[2])
    assert s.suggest().checkpoint_trial_id == 1
    # t3 ranks second (t1 0.2, t3 0.3, t0 0.5, t2 0.9): a leader if two or more lead
    assert report(s, trials[3], 1, 0.3) == (D.CONTINUE if leaders >= 2 else D.PAUSE)
    assert report(s, trials[1], 2, 0.25) == D.CONTINUE  # the incumbent goes on whatever the share
    # t4 takes the lead; with two leaders (t4, t1) t3 drops out, with four it stays
    assert report(s, trials[4], 1, 0.1) == D.CONTINUE
    if leaders >= 2:
        assert report(s, trials[3], 2, 0.35) == (D.CONTINUE if leaders >= 3 else D.PAUSE)


@pytest.mark.parametrize("until_trained", [False, True])
def test_second_leader_is_completed_until_a_configuration_is_trained_if_asked(until_trained):
    s = make(
        lambda tid, c: 1.0 if tid is None else 0.0,
        max_t=3,
        completion=completion(after=3, share=0.5, leaders_until_trained=until_trained),
    )
    trials = {i: start(s, i) for i in range(4)}
    for tid, loss in [(0, 0.5), (1, 0.2)]:
        assert report(s, trials[tid], 1, loss) == D.PAUSE
        s.on_trial_remove(trials[tid])
        trials[tid + 4] = start(s, tid + 4)
    assert report(s, trials[2], 1, 0.9) == D.PAUSE
    s.on_trial_remove(trials[2])
    assert s.suggest().checkpoint_trial_id == 1
    assert report(s, trials[3], 1, 0.3) == D.CONTINUE  # second of two leaders: nothing trained yet
    assert report(s, trials[1], 2, 0.25) == D.CONTINUE
    assert report(s, trials[1], 3, 0.15) == D.STOP  # the first configuration trained to max_t
    s.on_trial_remove(trials[1])
    # t3 is still the second best; with the share only until a trained model, it is left to
    # the policy (which prefers new configurations) from now on
    assert report(s, trials[3], 2, 0.28) == (D.PAUSE if until_trained else D.CONTINUE)


def test_dyhpo_completes_one_committed_leader_and_deep_power_law_leaders_for_the_whole_run():
    from syne_dyhpo import DEEP_POWER_LAW_COMPLETION, DYHPO_COMPLETION, DeepPowerLaw

    space = {"x": uniform(0, 1)}
    dyhpo = DyHPO(space, metric="loss", max_t=5)
    dpl = DeepPowerLaw(space, metric="loss", max_t=5)
    # DyHPO completes one leader, chosen among 27 first epochs and committed to, and only the
    # incumbent once a configuration is trained; DeepPowerLaw the top half of the workers,
    # chosen among 9, for the whole run
    assert dyhpo.metadata()["completion"] == {
        "after": 27,
        "delay": 2.0,
        "share": 0.0,
        "leaders_until_trained": True,
        "committed": 1,
        "commit_after": 0.5,
        "limit": None,
        "leader_score": "best",
    }
    assert dpl.metadata()["completion"] == {
        "after": 9,
        "delay": 2.0,
        "share": 0.5,
        "leaders_until_trained": False,
        "committed": 0,
        "commit_after": 0.5,
        "limit": None,
        "leader_score": "best",
    }
    assert dyhpo.completion is DYHPO_COMPLETION and dpl.completion is DEEP_POWER_LAW_COMPLETION
    assert [dyhpo._decider.completion.num_leaders(workers) for workers in (1, 4, 8)] == [1, 1, 1]
    assert [dpl._decider.completion.num_leaders(workers) for workers in (1, 4, 8)] == [1, 2, 4]
    assert DyHPO(space, metric="loss", max_t=5, completion=None).metadata()["completion"] is None
    assert DeepPowerLaw(space, metric="loss", max_t=5, completion=None)._decider.completion is None


@pytest.mark.parametrize("method", ["DyHPO", "DeepPowerLaw"])
def test_normalisation_scores_reach_the_policy_and_survive_a_pickle(method):
    # the default switches to each trial's best only when every score would collapse the scale
    import syne_dyhpo

    cls = getattr(syne_dyhpo, method)
    settings = getattr(syne_dyhpo, f"{method}Surrogate")
    s = cls({"x": uniform(0, 1)}, metric="loss", max_t=5, surrogate=settings(normalisation_scores="trials"))
    assert s.policy.normalisation_scores == s.metadata()["policy"]["normalisation_scores"] == "trials"
    with pytest.raises(
        ValueError,
        match=rf"{method}Surrogate.normalisation_scores must be one of 'epochs', 'trials', "
        r"'trials_if_alike', got 1",
    ):
        settings(normalisation_scores=1)
    assert pickle.loads(pickle.dumps(s.policy)).normalisation_scores == "trials"
    assert cls({"x": uniform(0, 1)}, metric="loss", max_t=5).policy.normalisation_scores == "trials_if_alike"


def test_deep_power_law_default_training_the_paper_config_has_batch_norm_and_a_pickle_keeps_the_nets():
    import dill

    from syne_dyhpo import DeepPowerLaw, DeepPowerLawSurrogate, PowerLawConfig

    space = {"x": uniform(0, 1), "y": uniform(0, 1)}
    default = DeepPowerLaw(space, metric="loss", max_t=5)
    # no BatchNorm, 16 steps per refinement, at most 4000 from scratch, fewer steps per
    # refinement beyond 2000 observations; the paper's config has BatchNorm
    config = default.policy.surrogate.config
    assert (config.max_refine_steps, config.max_fit_steps, config.refine_steps_shrink_after) == (16, 4000, 2000)
    assert default.metadata()["policy"]["surrogate_config"]["batch_norm"] is False
    assert PowerLawConfig.paper().batch_norm is True
    s = DeepPowerLaw(
        space,
        metric="loss",
        max_t=5,
        random_seed=0,
        surrogate=DeepPowerLawSurrogate(model=PowerLawConfig(batch_norm=False, fit_epochs=5, max_refine_steps=2)),
    )
    trials = drive_one_worker(s, steps=12)
    ensemble = s.policy.surrogate
    assert ensemble._nets is not None and ensemble._nets.norms is None
    old = dill.loads(dill.dumps(s))  # as Tuner.save / Tuner.load do
    assert old.policy.surrogate.config == ensemble.config
    assert old.policy.surrogate._nets.norms is None
    num_observations = old.observations.num_observations
    for _ in range(6):  # it fits, refines and decides on as before
        one_epoch_per_decision(old, trials, lambda epoch: 1.0 / epoch)
    assert old.observations.num_observations == num_observations + 6
    assert old.policy.surrogate._nets.norms is None and old.metadata()["num_fallbacks"] == 0
