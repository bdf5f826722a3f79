"""Expected improvement and the incumbents the two methods use (scores are maximised)."""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx, ndtr

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def expected_improvement(mean: np.ndarray, std: np.ndarray, incumbent: np.ndarray | float) -> np.ndarray:
    """EI of a Gaussian posterior over a score to maximise.

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
    Improvement"): same ranking as EI where EI is representable, and still a ranking where EI
    underflows to 0 (candidates many standard deviations below the incumbent).

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


def per_budget_incumbent(best_per_budget: np.ndarray, budgets: np.ndarray) -> np.ndarray:
    """DyHPO's incumbent for EI_MF: the best score observed at the candidate's budget by any
    configuration if one was observed there, otherwise the best score observed at any budget.

    :param best_per_budget: best score at epochs 1..max_t, -inf where none was observed
    :param budgets: candidate budgets (epochs, 1-based), shape (m,)
    :return: incumbent per candidate, shape (m,)
    """
    best_any = np.max(best_per_budget) if len(best_per_budget) else -np.inf
    at_budget = best_per_budget[np.asarray(budgets, dtype=int) - 1]
    return np.where(np.isfinite(at_budget), at_budget, best_any)
