"""Why a decision was made: the one list of reasons, used by the decisions
(:attr:`~syne_dyhpo.core.decision.Decision.reason`), the decision log's ``reason`` column and
the report."""

from __future__ import annotations

#: the reason of a pause-and-resume that prices a job start (JobCosts.timed_resumes)
TIME_RESUME = "time_resume"

#: the rules a decision can be made by: what a free worker (or the reporting trial) gets next
DECISION_REASONS = {
    "points_to_evaluate": "a configuration of points_to_evaluate, started first",
    "initial_random": "a random configuration, before the model is used",
    "random": "a random paused trial (too few observations for the model)",
    "model_failed": "a random choice: the model failed at this decision",
    "completion": "the completion of the leader (IncumbentCompletion)",
    "sh_promotion": "a successive-halving promotion (sh_probability)",
    "acquisition": "the highest acquisition value",
    TIME_RESUME: "the trial paused and resumed at once to price a job start (JobCosts.timed_resumes)",
}

#: a free worker asked and got nothing
NOTHING_LEFT = {"nothing_left": "no paused trial and no new configuration left"}

#: ends and changes of a trial's state, not choices
TRIAL_EVENT_REASONS = {
    "max_t": "the trial reached max_t",
    "diverged": "the trial reported NaN or inf",
    "lost_checkpoint": "the trial restarted at epoch 1 after a resume (its checkpoint was lost)",
    "failed": "the trial's job failed",
    "retired": "ranked hopeless (PausedCheckpoints.max_kept): never resumed",
    "restored": "restored after Tuner.load (Syne Tune) or Tuner.restore (Ray): resumable again",
    "archived": "started after the last save of the loaded tuner: results kept, never resumed",
}

#: every reason of the decision log's ``reason`` column
REASONS = {**DECISION_REASONS, **TRIAL_EVENT_REASONS, **NOTHING_LEFT}

#: the reasons of rows that chose what a free worker does (the others are a trial's events)
CHOICE_REASONS = (*DECISION_REASONS, *NOTHING_LEFT)
