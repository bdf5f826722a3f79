"""The timeline picture: one row per trial, time on the x axis, each epoch trained drawn as a
bar coloured by why the scheduler chose it (the decision log's ``reason``); pauses are gaps.
Trials trained to ``max_t`` end in a black bar, diverged ones in a red cross, failed ones in a
red square; the take-home trial's row is highlighted.

With many trials the picture keeps every trial that trained more than one epoch, or that ended
trained, diverged or failed (up to :data:`MAX_ROWS`, the earliest first), and draws
the others in one shared row at the bottom.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from syne_dyhpo.report.job_starts import segment_start_times
from syne_dyhpo.report.loading import Run
from syne_dyhpo.report.summary import TakeHome, TrialHistory

if TYPE_CHECKING:
    from matplotlib.artist import Artist

#: most trials drawn in rows of their own
MAX_ROWS = 60

DPI = 90
WIDTH_PX = 990


def height_px(num_rows: int) -> int:
    """Height of the timeline in pixels: 20 per row (at most 1440)."""
    return min(180 + 20 * num_rows, 1440)


#: colour of each reason (the decision log's ``reason``); "unknown": no row in the log
REASON_COLOURS = {
    "points_to_evaluate": "#8c564b",
    "initial_random": "#7f7f7f",
    "random": "#bcbd22",
    "model_failed": "#e377c2",
    "acquisition": "#1f77b4",
    "completion": "#2ca02c",
    "sh_promotion": "#ff7f0e",
    "time_resume": "#9467bd",
    "unknown": "#c7c7c7",
}


#: ``next`` of the decisions that give a trial a segment of epochs
SEGMENT_DECISIONS = ("start", "resume", "continue")


def epoch_reasons(run: Run, trial_id: int, epochs: list[int]) -> list[str]:
    """Why each of the trial's epochs was trained: the reason of the last decision that gave
    the trial the segment ending at or after that epoch (``next_epoch``)."""
    log = run.log
    if not len(log):
        return ["unknown"] * len(epochs)
    chosen = log[(log["next_trial_id"] == trial_id) & log["next"].isin(SEGMENT_DECISIONS)]
    return _reasons(zip(chosen["next_epoch"].astype(float), chosen["reason"].astype(str)), epochs)


def reasons_by_trial(run: Run, histories: dict[int, TrialHistory]) -> dict[int, list[str]]:
    """:func:`epoch_reasons` of every trial's reported epochs (``histories``), the log read once."""
    log = run.log
    if not len(log):
        return {tid: ["unknown"] * len(h.epochs) for tid, h in histories.items()}
    chosen = log[log["next"].isin(SEGMENT_DECISIONS)]
    given = {tid: list(zip(g["next_epoch"].astype(float), g["reason"].astype(str)))
             for tid, g in chosen.groupby("next_trial_id", sort=False)}
    return {tid: _reasons(given.get(tid, []), h.epochs) for tid, h in histories.items()}


def _reasons(decisions: Iterable[tuple[float, str]], epochs: list[int]) -> list[str]:
    """``decisions``: (next_epoch, reason) of the decisions that gave a trial a segment, in the
    log's order; of those ending at or after an epoch, the one ending first (the first in the log
    of equal ones) gave it."""
    pairs = sorted(decisions, key=lambda p: p[0])
    out = []
    for epoch in epochs:
        reason = next((r for e, r in pairs if e >= epoch), "unknown")
        out.append(reason if reason in REASON_COLOURS else "unknown")
    return out


def segment_bars(run: Run, h: TrialHistory) -> list[tuple[float, float, str]]:
    """(start, width, reason) of the bars of a trial: an epoch runs from the trial's previous
    result (within a segment) or from the decision that started or resumed the segment (else
    one typical epoch before the result) to its result; consecutive epochs trained for the
    same reason make one bar."""
    reasons = epoch_reasons(run, h.trial_id, h.epochs)
    durations = [b - a for a, b in zip(h.times, h.times[1:]) if b > a]
    typical = float(np.median(durations)) if durations else 1.0
    starts = segment_start_times(run, h)
    bars: list[tuple[float, float, str]] = []
    for i, (t, reason) in enumerate(zip(h.times, reasons)):
        if i in h.segment_starts:
            begin = starts.get(i)
            if begin is None or begin > t or t - begin > 20 * typical:
                begin = t - typical
        else:
            begin = h.times[i - 1]
        previous = bars[-1] if bars else None
        if previous is not None and previous[2] == reason and abs(previous[0] + previous[1] - begin) < 1e-9:
            bars[-1] = (previous[0], t - previous[0], reason)  # the same segment, the same reason
        else:
            bars.append((begin, max(t - begin, 1e-9), reason))
    return bars


def select_rows(histories: dict[int, TrialHistory], home: TakeHome, max_rows: int = MAX_ROWS
                ) -> tuple[list[int], list[int]]:
    """(trials drawn in rows of their own, trials drawn together in the last row)."""
    ids = sorted(histories)
    if len(ids) <= max_rows:
        return ids, []

    def notable(tid: int) -> bool:
        h = histories[tid]
        return tid == home.trial_id or h.trained or h.diverged or h.failed or len(h.epochs) > 1

    keep = [t for t in ids if notable(t)]
    if len(keep) > max_rows - 1:  # the take-home, trained, failed and diverged ones first
        ranked = sorted(keep, key=lambda t: (not (t == home.trial_id or histories[t].trained or histories[t].failed
                                                  or histories[t].diverged), -len(histories[t].epochs), t))
        keep = sorted(ranked[: max_rows - 1])
    kept = set(keep)
    return keep, [t for t in ids if t not in kept]


def plot_timeline(run: Run, histories: dict[int, TrialHistory], home: TakeHome, path: str | Path,
                  max_rows: int = MAX_ROWS) -> Path:
    """Draws the timeline into ``path`` (PNG).

    :return: ``path``
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    own, grouped = select_rows(histories, home, max_rows)
    rows = own + ([None] if grouped else [])
    fig, ax = plt.subplots(figsize=(WIDTH_PX / DPI, height_px(len(rows)) / DPI), dpi=DPI)
    used = set()
    for y, tid in enumerate(rows):
        members = [tid] if tid is not None else grouped
        if tid is not None and tid == home.trial_id:
            ax.axhspan(y - 0.5, y + 0.5, color="#ffe680", zorder=0)
        for member in members:
            h = histories[member]
            bars = segment_bars(run, h)
            for reason in {b[2] for b in bars}:
                ax.broken_barh([(b[0], b[1]) for b in bars if b[2] == reason], (y - 0.35, 0.7),
                               facecolors=REASON_COLOURS[reason], edgecolor="none", zorder=2)
                used.add(reason)
            end = h.times[-1] if h.times else (h.failed_at or 0.0)
            if h.trained:
                ax.plot([end], [y], marker="|", color="black", markersize=12, mew=2.5, zorder=3)
            if h.diverged:
                ax.plot([end], [y], marker="x", color="red", markersize=8, mew=2, zorder=3)
            if h.failed:
                at = h.failed_at if h.failed_at is not None else end
                ax.plot([at], [y], marker="s", color="red", markersize=6, zorder=3)
    labels = [(f"trial {tid}" + (" (take home)" if tid == home.trial_id else "")) if tid is not None
              else f"{len(grouped)} other trials" for tid in rows]
    step = max(1, math.ceil(len(rows) / 60))
    ax.set_yticks(range(0, len(rows), step))
    ax.set_yticklabels(labels[::step], fontsize=7 if len(rows) > 30 else 8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time (s, the Tuner's clock)")
    ax.grid(axis="x", alpha=0.3)
    handles: list[Artist] = [
        Patch(color=REASON_COLOURS[r], label=r.replace("_", " ")) for r in REASON_COLOURS if r in used
    ]
    from matplotlib.lines import Line2D

    handles += [
        Line2D([], [], marker="|", color="black", linestyle="none", markersize=10, mew=2.5, label="trained to max_t"),
        Line2D([], [], marker="x", color="red", linestyle="none", markersize=7, mew=2, label="diverged"),
        Line2D([], [], marker="s", color="red", linestyle="none", markersize=6, label="failed"),
        Patch(color="#ffe680", label="model to take home"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(
        f"{run.scheduler or 'scheduler'}: why each epoch was trained ({len(histories)} trials, max_t={run.max_t})",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)
