"""What the core asks of a method's acquisition, and what an acquisition answers.

The core (:mod:`syne_dyhpo.core.policy`, :mod:`syne_dyhpo.core.decision`) depends only on
this protocol; the methods' acquisitions (:mod:`syne_dyhpo.acquisition`,
:mod:`syne_dyhpo.methods`) implement it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from syne_dyhpo.core.candidates import Candidates
    from syne_dyhpo.surrogates.outcome_transform import ScoreTransform


@dataclass(frozen=True)
class Prediction:
    """The model's predictive distribution of the metric (its units) for one candidate at one
    epoch.

    :param epoch: the epoch it is predicted at
    :param mean: predictive mean
    :param std: predictive standard deviation
    """

    epoch: int
    mean: float
    std: float


@dataclass(frozen=True)
class AcquisitionValues:
    """The acquisition values of a decision's candidates, and the predictions they were
    computed from.

    :param values: acquisition value per candidate, shape (m,); higher is better
    :param budgets: epoch at which each candidate's score was predicted, shape (m,)
    :param mean: predictive mean of each candidate's normalised score there, shape (m,)
    :param std: predictive standard deviation of each normalised score, shape (m,)
    :param transform: the outcome transform of the normalised scores, read by
        :meth:`prediction` (the policy's, changed by its next fit from scratch)
    """

    values: np.ndarray
    budgets: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    transform: ScoreTransform

    def prediction(self, i: int, sign: float) -> Prediction:
        """The prediction behind candidate ``i``'s value, in the metric's units.

        :param i: the candidate's index
        :param sign: +1 if the metric is maximised, -1 if minimised (scores are ``sign * value``)
        """
        loc, scale = self.transform.loc, self.transform.scale
        return Prediction(int(self.budgets[i]), sign * (loc + scale * float(self.mean[i])), scale * float(self.std[i]))


class Acquisition(Protocol):
    """A method's acquisition, built from a fitted model and the observations' incumbents
    (see :data:`~syne_dyhpo.core.policy.AcquisitionFactory`)."""

    def evaluate(self, candidates: Candidates) -> AcquisitionValues:
        """The acquisition value of each candidate (higher is better) and the predictions
        they were computed from.

        :param candidates: what the decision chooses from
        """
        ...
