"""The learning-curves picture: every trial's curve faint, the curves of trials trained to
``max_t`` in colour, the take-home trial's thick. A trial with one result (most of a
freeze-thaw run's trials: one epoch, never resumed) is a curve of one point, which a line does
not draw: those are dots, all in one grey scatter."""

from __future__ import annotations

import math
from pathlib import Path

from syne_dyhpo.report.loading import Run
from syne_dyhpo.report.summary import TakeHome, TrialHistory


def plot_curves(run: Run, histories: dict[int, TrialHistory], home: TakeHome, path: str | Path) -> Path:
    """Draws the learning curves into ``path`` (PNG).

    :return: ``path``
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=90)
    tab10 = plt.get_cmap("tab10")
    colours = [tab10(i) for i in range(tab10.N)]
    trained = [tid for tid in sorted(histories) if histories[tid].trained and tid != home.trial_id]
    dots: list[tuple[int, float]] = []
    for tid, h in histories.items():
        epochs, values = _finite(h)
        if len(epochs) == 1 and tid not in trained and tid != home.trial_id:
            dots.append((epochs[0], values[0]))
        elif epochs and tid not in trained and tid != home.trial_id:
            ax.plot(epochs, values, color="grey", alpha=0.25, linewidth=0.8)
    if dots:
        ax.scatter([d[0] for d in dots], [d[1] for d in dots], color="grey", alpha=0.5, s=12, zorder=2,
                   label=f"{len(dots)} trials of one result")
    for i, tid in enumerate(trained):
        epochs, values = _finite(histories[tid])
        ax.plot(epochs, values, color=colours[i % len(colours)], linewidth=1.4, marker=_marker(epochs),
                label=f"trial {tid}" if i < 8 else None)
    if home.trial_id is not None:
        epochs, values = _finite(histories[home.trial_id])
        ax.plot(epochs, values, color="black", linewidth=3.0, marker=_marker(epochs),
                label=f"trial {home.trial_id} (take home)")
    ax.set_xlabel(run.time_attr)
    ax.set_ylabel(run.metric)
    ax.set_xlim(0.5, run.max_t + 0.5)
    finite = [v for h in histories.values() for v in h.values if math.isfinite(v)]
    if finite:
        # a few diverging or very bad curves must not squash the rest
        finite.sort()
        lo, hi = finite[int(0.02 * (len(finite) - 1))], finite[int(0.98 * (len(finite) - 1))]
        lo, hi = min(lo, finite[0] if run.mode == "min" else lo), max(hi, finite[-1] if run.mode == "max" else hi)
        pad = 0.05 * (hi - lo or 1.0)
        ax.set_ylim(lo - pad, hi + pad)
    ax.grid(alpha=0.3)
    ax.set_title(f"Learning curves ({len(histories)} trials; coloured: trained to max_t={run.max_t})", fontsize=10)
    if trained or home.trial_id is not None or dots:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def _marker(epochs: list[int]) -> str | None:
    return "o" if len(epochs) == 1 else None  # one point: a line draws nothing


def _finite(h: TrialHistory) -> tuple[list[int], list[float]]:
    pairs = [(e, v) for e, v in zip(h.epochs, h.values) if math.isfinite(v)]
    return [p[0] for p in pairs], [p[1] for p in pairs]
