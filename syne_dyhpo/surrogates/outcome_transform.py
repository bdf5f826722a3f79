"""The surrogates' outcome transform: a fixed affine normalisation of scores, floored.

Both methods model *scores* (values to maximise, see :mod:`syne_dyhpo.core.observations`).
Metrics come in any scale and direction (accuracy in percent, losses that explode), and
neither paper normalises, so the policy owns this transform, as BoTorch's models own their
``outcome_transform``: it is re-estimated only when the surrogate is trained from scratch (or
carried over to the new one, ``FitSchedule.rescale_when_outdated``), and everything the model
sees or is compared with (training targets, learning-curve inputs of training rows and of
candidates, incumbents) goes through the same instance.
"""

from __future__ import annotations

import numpy as np


class ScoreTransform:
    """``z = max((score - loc) / scale, floor)``; NaN and -inf (diverged) map to ``floor``.

    :param floor: lowest normalised value; non-finite and extremely bad scores map to it, so a
        diverged configuration teaches the surrogate "bad here" without setting its scale.
        Defaults to -4
    """

    def __init__(self, floor: float = -4.0):
        self.floor = floor
        self.loc = 0.0
        self.scale = 1.0
        self.degenerate = False
        #: bumped by every :meth:`fit`: data transformed by different fits are not comparable
        self.version = 0

    def fit(self, scores: np.ndarray) -> None:
        """Sets location (median) and scale from the finite scores: the larger of a robust
        spread and a third of the distance from the median to the best score.

        :param scores: the scores to fit on (NaN gaps and -inf divergences are ignored; see
            :meth:`~syne_dyhpo.core.policy.SurrogatePolicy.transform_scores`)
        """
        self.version += 1
        finite = scores[np.isfinite(scores)]
        if len(finite) == 0:
            return
        # the bad side only enters through quantiles: diverged curves (losses of 1e5 and more)
        # must not set the scale
        self.loc = float(np.median(finite))
        q25, q75 = np.percentile(finite, [25, 75])
        # the good tail bounds the scale from below: when most scores are alike (all configs
        # at epoch 1 of a loss that starts equal), the quantile spread alone is ~0 and the
        # good scores, the ones that matter, would map to hundreds of units
        spread = max((q75 - q25) / 1.349, (float(finite.max()) - self.loc) / 3.0)
        resolution = 1e-3 * max(abs(self.loc), 1e-6)
        #: whether the scores are so alike that the scale is only the resolution bound
        self.degenerate = spread < resolution
        self.scale = max(spread, resolution, 1e-12)

    def outdated(self, scores: np.ndarray, tolerance: float = 2.0) -> bool:
        """Whether a transform fitted on ``scores`` would differ from this one by more than a
        factor ``tolerance`` in scale or by more than one scale in location. Early on the
        transform sees few, similar values (epoch-1 results of a handful of configs), and a
        scale set from them would blow later values up to hundreds of units.

        :param scores: the scores a new fit would see
        """
        fresh = ScoreTransform(self.floor)
        fresh.fit(scores)
        ratio = fresh.scale / self.scale
        return not (1.0 / tolerance <= ratio <= tolerance) or abs(fresh.loc - self.loc) > self.scale

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        """Normalised scores, same shape; NaN and -inf map to ``floor``."""
        z = (np.asarray(scores, dtype=float) - self.loc) / self.scale
        return np.where(np.isnan(z), self.floor, np.maximum(z, self.floor))

    def curves(self, raw: np.ndarray) -> np.ndarray:
        """Normalised learning curves: like :meth:`__call__`, but NaN gaps stay NaN (a gap is
        no value, a diverged epoch is the floor)."""
        gaps = np.isnan(raw)
        z = self(np.where(gaps, 0.0, raw))
        z[gaps] = np.nan
        return z
