"""Expected improvement, computed stably, and the acquisition base class of both methods.

Scores are maximised. Each method's acquisition (:mod:`syne_dyhpo.methods`) is a small
:class:`LogExpectedImprovement` given its incumbent ``best_f`` and the budget at which it asks
the model, in the style of BoTorch's ``LogExpectedImprovement``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.special import erfcx, ndtr

from syne_dyhpo.core.acquisition_protocol import AcquisitionValues

if TYPE_CHECKING:
    from syne_dyhpo.core.candidates import Candidates
    from syne_dyhpo.core.policy import FittedModel

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def expected_improvement(mean: np.ndarray, std: np.ndarray, incumbent: np.ndarray | float) -> np.ndarray:
    """EI of a Gaussian posterior over a score to maximise (Jones et al., 1998, eq. 15):
    ``EI = (mu - y*) Phi(z) + sigma phi(z)``, ``z = (mu - y*) / sigma``; with ``sigma = 0`` it
    is ``max(mu - y*, 0)``.

    :param mean: posterior means, shape (m,)
    :param std: posterior standard deviations, shape (m,)
    :param incumbent: value(s) to improve on, scalar or shape (m,)
    :return: EI per candidate, shape (m,)
    """
    mean = np.asarray(mean, dtype=float)
    std = np.asarray(std, dtype=float)
    improvement = mean - np.asarray(incumbent, dtype=float)
    safe_std = np.where(std > 0, std, 1.0)
    z = improvement / safe_std
    ei = improvement * ndtr(z) + safe_std * _INV_SQRT_2PI * np.exp(-0.5 * z**2)
    return np.where(std > 0, np.maximum(ei, 0.0), np.maximum(improvement, 0.0))


def log_expected_improvement(mean: np.ndarray, std: np.ndarray, incumbent: np.ndarray | float) -> np.ndarray:
    """log EI, computed stably (Ament et al., 2023, "Unexpected Improvements to Expected
    Improvement", eq. 9): same ranking as EI where EI is representable, and still a ranking
    where EI underflows to 0 (candidates many standard deviations below the incumbent).

    :return: log EI per candidate (-inf only where ``std = 0`` and there is no improvement)
    """
    mean = np.asarray(mean, dtype=float)
    std = np.asarray(std, dtype=float)
    improvement = mean - np.asarray(incumbent, dtype=float)
    safe_std = np.where(std > 0, std, 1.0)
    z = improvement / safe_std
    # both branches are evaluated everywhere and np.where keeps the valid one: the tail branch
    # overflows for large positive z, where it is discarded
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # h(z) = z Phi(z) + phi(z); for z < -1 use Phi(z)/phi(z) = sqrt(pi/2) erfcx(-z/sqrt(2))
        log_h_direct = np.log(np.maximum(z * ndtr(z) + _INV_SQRT_2PI * np.exp(-0.5 * z**2), 1e-300))
        ratio = np.sqrt(np.pi / 2) * erfcx(-z / np.sqrt(2))
        log_h_tail = -0.5 * z**2 - 0.5 * np.log(2 * np.pi) + np.log1p(np.maximum(z * ratio, -1 + 1e-16))
        log_h = np.where(z > -1, log_h_direct, log_h_tail)
        no_noise = np.log(np.maximum(improvement, 0.0))
    return np.where(std > 0, np.log(safe_std) + log_h, no_noise)


class LogExpectedImprovement:
    """log EI of a fitted model's predictive distribution at :meth:`budgets` of the candidates,
    against the incumbent score :meth:`best_f` (raw scores; compared in the model's normalised
    space through its outcome transform). An
    :class:`~syne_dyhpo.core.acquisition_protocol.Acquisition`.

    Subclasses say at which budget the model is asked and what the incumbent is.

    :param model: the fitted surrogate and its outcome transform
    """

    def __init__(self, model: FittedModel):
        self.model = model

    def budgets(self, candidates: Candidates) -> np.ndarray:
        """Epoch at which each candidate's score is predicted."""
        raise NotImplementedError

    def best_f(self, candidates: Candidates) -> np.ndarray:
        """Incumbent score per candidate (raw score units), shape (m,)."""
        raise NotImplementedError

    def evaluate(self, candidates: Candidates) -> AcquisitionValues:
        """
        :param candidates: what the decision chooses from
        :return: log EI per candidate, shape (m,), higher is better, and the predictions it
            was computed from
        """
        budgets = self.budgets(candidates)
        mean, std = self.model.predict(candidates, budgets)
        values = log_expected_improvement(mean, std, self.model.transform(self.best_f(candidates)))
        return AcquisitionValues(values, budgets, mean, std, self.model.transform)

    def __call__(self, candidates: Candidates) -> np.ndarray:
        """
        :param candidates: what the decision chooses from
        :return: log EI per candidate, shape (m,); higher is better
        """
        return self.evaluate(candidates).values
