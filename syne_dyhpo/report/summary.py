"""What a run did, in numbers, and the model to take home.

Counts come from Syne Tune's results (one row per result the Tuner saw): a trial is *resumed*
once per result that follows a PAUSE of it, *trained to max_t* if it reported a finite value at
``max_t``, *diverged* if it reported NaN or inf. *Failed* trials (a job that crashed, or a
checkpoint lost on a resume) are in the decision log only, and so are trials started that never
reported; *started* counts those too. *Job starts* and the share of worker time they took are
:mod:`~syne_dyhpo.report.job_starts`'s.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from syne_dyhpo.core.reasons import CHOICE_REASONS
from syne_dyhpo.report.job_starts import JobStarts, job_starts
from syne_dyhpo.report.loading import Run


@dataclass
class TrialHistory:
    """One trial's results in the order seen.

    :param epochs: reported epochs
    :param values: reported metric values
    :param times: ``t`` of each result (seconds, one axis over all sessions)
    :param segment_starts: index (into ``epochs``) of the first result of each segment: a
        result that follows a PAUSE of the trial starts a new one
    """

    trial_id: int
    epochs: list[int]
    values: list[float]
    times: list[float]
    segment_starts: list[int]
    trained: bool = False
    diverged: bool = False
    failed: bool = False
    failed_at: float | None = None  # ``t`` of the failure (decision log)

    @property
    def num_resumes(self) -> int:
        return len(self.segment_starts) - 1

    def value_at(self, epoch: int) -> float | None:
        for e, v in zip(self.epochs, self.values):
            if e == epoch:
                return v
        return None


@dataclass
class TakeHome:
    """The model to take home: the best trial trained to ``max_t``, by its value there.

    :param trial_id: None if no trial was trained to ``max_t``
    :param best_any: (trial_id, epoch, value) of the best value seen at any epoch
    :param partial_is_better: the best value at any epoch beats the take-home model's value at
        ``max_t`` and comes from a trial not trained to ``max_t`` (or no trial was)
    """

    trial_id: int | None
    value: float | None = None
    config: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None
    checkpoint_exists: bool | None = None
    best_any: tuple[int, int, float] | None = None
    partial_is_better: bool = False


@dataclass
class Summary:
    started: int
    resumed: int  # trials resumed at least once
    resumes: int
    trained: int
    diverged: int
    failed: int
    epochs: int
    first_epochs: int
    scheduler_seconds: float | None
    decisions: int
    reasons: dict[str, int]
    jobs: JobStarts | None = None

    @property
    def first_epoch_share(self) -> float:
        return self.first_epochs / self.epochs if self.epochs else math.nan

    @property
    def epochs_per_trained_model(self) -> float | None:
        return self.epochs / self.trained if self.trained else None


def trial_histories(run: Run) -> dict[int, TrialHistory]:
    """Each trial's results, segments and end (trained / diverged / failed)."""
    histories: dict[int, TrialHistory] = {}
    df = run.results
    if len(df):
        decisions = df["st_decision"].astype(str).tolist() if "st_decision" in df else [""] * len(df)
        paused: set[int] = set()
        for tid, epoch, value, t, decision in zip(
            df["trial_id"].astype(int), df[run.time_attr], df[run.metric], df["t"], decisions
        ):
            h = histories.get(tid)
            if h is None:
                h = histories[tid] = TrialHistory(tid, [], [], [], [0])
            elif tid in paused:
                h.segment_starts.append(len(h.epochs))
            paused.discard(tid)
            value = _number(value)
            h.epochs.append(int(epoch))
            h.values.append(value)
            h.times.append(float(t))
            if decision.upper() == "PAUSE":
                paused.add(tid)
            if not math.isfinite(value):
                h.diverged = True
            elif int(epoch) >= run.max_t:
                h.trained = True
    # trials that never reported (a job that failed at once) are known from the decision log
    log = run.log
    if len(log):
        started = log.loc[log["next"] == "start", "next_trial_id"].dropna().astype(int)
        for tid in sorted(set(started) | failed_trials(run)):
            if tid not in histories:
                histories[tid] = TrialHistory(tid, [], [], [], [0])
        failures = log[log["reason"].isin(["failed", "lost_checkpoint"])]
        for tid, t in zip(failures["trial_id"].astype(int), failures["t"].astype(float)):
            histories[tid].failed = True
            histories[tid].failed_at = t
    return dict(sorted(histories.items()))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def failed_trials(run: Run) -> set[int]:
    """Trials whose job failed or whose checkpoint was lost (from the decision log)."""
    if not len(run.log):
        return set()
    rows = run.log[run.log["reason"].isin(["failed", "lost_checkpoint"])]
    return {int(t) for t in rows["trial_id"].dropna()}


def summarise(run: Run, histories: dict[int, TrialHistory]) -> Summary:
    epochs = [e for h in histories.values() for e in h.epochs]
    log = run.log
    decided = log[log["reason"].isin(CHOICE_REASONS)] if len(log) else log
    reasons = decided["reason"].value_counts().to_dict() if len(decided) else {}
    return Summary(
        started=len(histories),
        resumed=sum(h.num_resumes > 0 for h in histories.values()),
        resumes=sum(h.num_resumes for h in histories.values()),
        trained=sum(h.trained for h in histories.values()),
        diverged=sum(h.diverged for h in histories.values()),
        failed=len(failed_trials(run)),
        epochs=len(epochs),
        first_epochs=sum(e == 1 for e in epochs),
        scheduler_seconds=float(log["ms"].astype(float).sum()) / 1000.0 if len(log) else None,
        decisions=len(decided),
        reasons={str(k): int(v) for k, v in reasons.items()},
        jobs=job_starts(run, histories),
    )


def take_home(run: Run, histories: dict[int, TrialHistory]) -> TakeHome:
    """The best trial trained to ``max_t`` (by its value at ``max_t``), and whether a better
    value was seen elsewhere."""
    better = (lambda a, b: a < b) if run.mode == "min" else (lambda a, b: a > b)
    best_id, best_value = None, None
    for tid, h in histories.items():
        value = h.value_at(run.max_t)
        if (h.trained and value is not None and math.isfinite(value)
                and (best_value is None or better(value, best_value))):
            best_id, best_value = tid, value
    best_any = None
    for tid, h in histories.items():
        for e, v in zip(h.epochs, h.values):
            if math.isfinite(v) and (best_any is None or better(v, best_any[2])):
                best_any = (tid, e, v)
    result = TakeHome(trial_id=best_id, value=best_value, best_any=best_any)
    if best_any is not None:
        result.partial_is_better = best_id is None or (
            better(best_any[2], best_value) and not histories[best_any[0]].trained
        )
    if best_id is not None:
        result.config = run.config(best_id)
        result.checkpoint = run.checkpoint(best_id)
        if result.checkpoint is not None and "://" not in result.checkpoint:
            result.checkpoint_exists = os.path.isdir(result.checkpoint)
    return result


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def report_text(run: Run, summary: Summary, home: TakeHome) -> list[str]:
    """The report's text, line by line."""
    lines = [
        f"Run {run.path}",
        f"  {run.scheduler or 'scheduler ?'} on {run.backend or 'backend ?'}; "
        f"{run.metric} ({run.mode}), max_t={run.max_t}",
        *(f"Warning: {w}" for w in run.warnings),
        "",
    ]
    if home.trial_id is None:
        lines.append(f"Model to take home: none: no trial trained to max_t={run.max_t}")
    else:
        lines.append(
            f"Model to take home: trial {home.trial_id}, {run.metric}={_fmt(home.value)} at "
            f"{run.time_attr} {run.max_t} (max_t)"
        )
        lines += [f"  {k}: {v}" for k, v in home.config.items()]
        if home.checkpoint is not None:
            where = {True: "", False: " (not there: deleted, or not written)", None: ""}[home.checkpoint_exists]
            lines.append(f"  checkpoint: {home.checkpoint}{where}")
        elif run.checkpoint_template is None:
            lines.append("  checkpoint: none (the backend keeps no checkpoints, or did not say where)")
    if home.best_any is not None and home.partial_is_better:
        tid, epoch, value = home.best_any
        lines.append(
            f"Better value seen: trial {tid}, {run.metric}={_fmt(value)} at {run.time_attr} {epoch}, "
            f"but trial {tid} was not trained to max_t: its model at max_t is unknown"
        )
    s = summary
    lines += [
        "",
        f"Trials: {s.started} started, {s.resumed} resumed ({s.resumes} resumes), {s.trained} trained to max_t, "
        f"{s.diverged} diverged, {s.failed} failed",
        f"Epochs: {s.epochs}, of which first epochs {s.first_epochs} ({100 * s.first_epoch_share:.0f} %)"
        if s.epochs
        else "Epochs: none reported yet",
    ]
    per_model = s.epochs_per_trained_model
    lines.append(
        f"Epochs per trained model: {per_model:.1f}"
        if per_model is not None
        else "Epochs per trained model: n/a (no trial trained to max_t)"
    )
    lines += job_lines(s)
    if s.scheduler_seconds is not None:
        lines.append(f"Scheduler: {s.scheduler_seconds:.1f} s over {s.decisions} decisions")
        if s.reasons:
            lines.append(
                "Decisions by reason: "
                + ", ".join(f"{k} {v}" for k, v in sorted(s.reasons.items(), key=lambda kv: -kv[1]))
            )
    else:
        lines.append("Scheduler: no decision log in this folder")
    return lines


def job_lines(summary: Summary) -> list[str]:
    """The job starts and the share of worker time they took, in words."""
    jobs = summary.jobs
    if jobs is None:
        return []
    per_job = f"; {summary.epochs / jobs.count:.1f} epochs per job start" if jobs.count and summary.epochs else ""
    lines = [
        f"Job starts: {jobs.count} ({jobs.first_starts} first starts, {jobs.count - jobs.first_starts} "
        f"resumes{per_job})"
    ]
    if jobs.seconds is not None:
        epoch = f"epoch {jobs.epoch_seconds:.3g} s (median)"
        measured = f"measured for {jobs.measured} of {jobs.count} job starts"
        if jobs.share is not None:
            lines.append(
                f"Time of job starts: {100 * jobs.share:.1f} % of worker time: {jobs.seconds:.1f} s beyond the "
                f"epoch time, of {jobs.worker_seconds:.1f} s ({jobs.n_workers} workers x {jobs.run_seconds:.1f} s; "
                f"{measured}; {epoch})"
            )
        else:
            lines.append(
                f"Time of job starts: {jobs.seconds:.1f} s beyond the epoch time ({measured}; {epoch}); "
                f"share of worker time unknown: {jobs.unknown}"
            )
    else:
        lines.append(f"Time of job starts: unknown: {jobs.unknown}")
    return lines


def summary_dict(summary: Summary) -> dict[str, Any]:
    """The summary's numbers by name (for tests and tables)."""
    out = {k: getattr(summary, k) for k in summary.__dataclass_fields__}
    out["first_epoch_share"] = summary.first_epoch_share
    out["epochs_per_trained_model"] = summary.epochs_per_trained_model
    return out


def as_frame(histories: dict[int, TrialHistory]) -> pd.DataFrame:
    """One row per trial: epochs, resumes, trained / diverged / failed."""
    return pd.DataFrame(
        [
            {
                "trial_id": h.trial_id,
                "epochs": len(h.epochs),
                "last_epoch": max(h.epochs, default=0),
                "resumes": h.num_resumes,
                "trained": h.trained,
                "diverged": h.diverged,
                "failed": h.failed,
                "best": np.nanmax(h.values) if h.values and np.isfinite(h.values).any() else np.nan,
            }
            for h in histories.values()
        ]
    )
