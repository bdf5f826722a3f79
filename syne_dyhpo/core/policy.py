"""The seam between the freeze-thaw core and a method: surrogate, outcome transform, fit
schedule and acquisition.

One decision flows one way through a policy: :meth:`SurrogatePolicy.fit` trains (or refines,
or only conditions) the surrogate on all observations and returns the :class:`FittedModel`;
the method's acquisition, built from that model and the observations' incumbent, scores the
candidates. The policy owns the outcome transform, so candidates, training rows and incumbents
are always expressed in the normalisation the model was trained with.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, is_dataclass, replace
from typing import Any, Protocol

import numpy as np
from scipy.special import bdtrc

from syne_dyhpo.checks import checked_choice, checked_flag, checked_integer, checked_number
from syne_dyhpo.core.acquisition_protocol import Acquisition, AcquisitionValues
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import Observations, RowBuffer, TrainingData
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform


@dataclass(frozen=True)
class SurrogateCapabilities:
    """What a surrogate can do beyond ``fit``, ``condition`` and ``predict`` (see
    :class:`Surrogate`); the policy uses a capability only when it is declared.

    :param misfit: ``misfit()`` returns the standardised one-step-ahead errors of the rows
        conditioned on since the last training (used by ``FitSchedule.refine_on_misfit``)
    :param rescale: ``rescale(old, new)`` carries the trained model over to a new outcome
        transform (used by ``FitSchedule.rescale_when_outdated``)
    :param pending: ``predict`` takes ``pending`` inputs and conditions on them (used by the
        policy's ``condition_on_pending``)
    """

    misfit: bool = False
    rescale: bool = False
    pending: bool = False


def _undeclared(surrogate: Surrogate, capability: str) -> NotImplementedError:
    # a call, not a bare `raise NotImplementedError`: the optional methods are not abstract
    return NotImplementedError(f"{type(surrogate).__name__} declares no {capability} capability")


class Surrogate(Protocol):
    """A probabilistic model of the normalised score at (config, budget, curve so far).

    Implementations subclass this protocol and declare :attr:`capabilities`; the optional
    methods are called only when declared there.
    """

    #: the optional methods this surrogate implements
    capabilities: SurrogateCapabilities = SurrogateCapabilities()
    #: its settings (a dataclass), reported in the scheduler's metadata; None: none
    config: Any = None

    def fit(self, data: TrainingData, from_scratch: bool, seed: int) -> None:
        """Trains on ``data``: from scratch, or a warm-started refinement of the last fit."""

    def condition(self, data: TrainingData) -> None:
        """Makes predictions use ``data`` without training (cheap; may do nothing)."""

    def predict(
        self,
        candidates: Candidates,
        budget: np.ndarray,
        pending: Candidates | None = None,
        pending_budget: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the normalised score at ``budget``.

        :param pending: with ``capabilities.pending``: inputs whose observations are on their
            way (running trials at the end of their segments), to condition on as if each
            returned its predicted mean
        :param pending_budget: budgets of the pending inputs
        """

    def misfit(self) -> np.ndarray:
        """With ``capabilities.misfit``: the standardised one-step-ahead prediction errors of
        the rows conditioned on since the last training (N(0, 1) if the model is right)."""
        raise _undeclared(self, "misfit")

    def rescale(self, old: ScoreTransform, new: ScoreTransform) -> None:
        """With ``capabilities.rescale``: carries the trained model over from outcome
        transform ``old`` to ``new``, predictions unchanged."""
        raise _undeclared(self, "rescale")


@dataclass(frozen=True)
class FitSchedule:
    """When the surrogate is trained from scratch, refined (warm start), or only conditioned.

    Between trainings the surrogate is conditioned on all data (for the GP: the exact
    posterior on all points), so no observation is ignored by a decision. Whatever the
    schedule, a fit from scratch also happens whenever the observations have outgrown the
    outcome transform (see :meth:`ScoreTransform.outdated`), which is only re-estimated then
    (or, with ``rescale_when_outdated``, when the surrogate is carried over to it).

    The methods' schedules differ, so each method has its own subclass, whose defaults are
    the method's and whose ``paper()`` is its paper's:
    :class:`~syne_dyhpo.methods.dyhpo.DyHPOFitSchedule` and
    :class:`~syne_dyhpo.methods.deep_power_law.DeepPowerLawFitSchedule`. This class's defaults
    are those of neither method's schedule; it is what a :class:`SurrogatePolicy` takes.

    :param refine_every: refine after this many new observations (1: after every one)
    :param refit_growth: train from scratch once the data grew by this factor since the last
        fit from scratch (inf: never for that reason)
    :param initial_full_fits: the first this many fits are all from scratch
    :param refit_on_stall: train from scratch after ``refit_on_stall * max_t`` observations in
        a row without improving the best score (None: never for that reason)
    :param refine_on_misfit: refine on evidence of misfit rather than on the clock alone (not
        in the papers, which refine after every observation). A surrogate that can say how
        well it predicted the observations it was conditioned on since it was last trained
        (the standardised one-step-ahead errors ``z_i``, N(0, 1) if the model is right: the
        exact GP's are by-products of its incremental Cholesky factor) is refined as soon as
        too many of them are large: a one-sided sign test of ``|z_i|`` beyond its median under
        the model (0.674), binomial tail probability below this level; otherwise at the
        latest after ``refine_every`` observations. A sign test, not a chi-square test of
        ``sum z_i^2``: learning curves have jumps that one-step-ahead predictions cannot know,
        and a handful of them (``|z|`` of 20 and more) would trigger a chi-square test at
        every step. None (default): refine every ``refine_every`` observations
    :param rescale_when_outdated: when the observations have outgrown the outcome transform,
        re-estimate it and carry the trained surrogate over to the new scale (a surrogate
        declaring the ``rescale`` capability, such as DPL's ensemble, whose predictions go through an
        adjustable affine output map) and refine it, instead of training from scratch (not in the
        papers, which do not normalise scores). Surrogates without it (the GP, whose inputs
        hold transformed curves) are trained from scratch. Defaults to False
    :param refine_every_fraction: refine every ``max(refine_every, ceil(fraction * n))``
        observations instead (``n``: observations so far; not in the papers). A refine costs
        the same whatever ``n`` (it trains on a bounded subset) plus a new factorisation of the
        conditioning set, while each one moves the kernel less as data accumulates; a refine
        at every ``refine_every``-th decision would dominate a large study's latency. None
        (default): every ``refine_every`` observations
    """

    refine_every: int
    refit_growth: float = math.inf
    initial_full_fits: int = 1
    refit_on_stall: float | None = None
    refine_on_misfit: float | None = None
    refine_every_fraction: float | None = None
    rescale_when_outdated: bool = False

    def __post_init__(self):
        # frozen: the checked values are stored in their canonical types (plain int / float)
        def canonical(field: str, value: Any) -> None:
            object.__setattr__(self, field, value)

        canonical("refine_every", checked_integer("refine_every", self.refine_every, 1))
        canonical("initial_full_fits", checked_integer("initial_full_fits", self.initial_full_fits, 1))
        # the bounds are open: the next float after 1 (or 0) and before 1 stand for them
        canonical("refit_growth", checked_number(
            "refit_growth", self.refit_growth, math.nextafter(1.0, 2.0), math.inf, "a number > 1 (inf: never)"))
        if self.refit_on_stall is not None:
            canonical("refit_on_stall", checked_number(
                "refit_on_stall", self.refit_on_stall, math.ulp(0.0), math.inf, "a number > 0 or None"))
        if self.refine_on_misfit is not None:
            canonical("refine_on_misfit", checked_number(
                "refine_on_misfit", self.refine_on_misfit, math.ulp(0.0), math.nextafter(1.0, 0.0),
                "a number in (0, 1) or None"))
        if self.refine_every_fraction is not None:
            canonical("refine_every_fraction", checked_number(
                "refine_every_fraction", self.refine_every_fraction, math.ulp(0.0), sys.float_info.max,
                "a finite number > 0 or None"))
        canonical("rescale_when_outdated", checked_flag("rescale_when_outdated", self.rescale_when_outdated))

    def refine_interval(self, num_observations: int) -> int:
        """New observations after which the surrogate is refined, with ``num_observations``
        observed."""
        if self.refine_every_fraction is None:
            return self.refine_every
        return max(self.refine_every, math.ceil(self.refine_every_fraction * num_observations))


class FittedModel:
    """A trained surrogate bound to the outcome transform its training data went through.

    :param surrogate: the trained surrogate
    :param transform: the outcome transform of its training data
    :param pending: running trials at the epoch their current segment ends, whose results are
        on their way (raw curves); None: none. Made by :meth:`SurrogatePolicy.score` when the
        policy conditions on pending results
    :param fit_kind: what the fit that returned it did, one of :data:`FIT_KINDS`; None: not
        made by a fit
    """

    def __init__(
        self,
        surrogate: Surrogate,
        transform: ScoreTransform,
        pending: Candidates | None = None,
        fit_kind: str | None = None,
    ):
        self.surrogate = surrogate
        self.transform = transform
        self.pending = pending
        self.fit_kind = fit_kind

    def predict(self, candidates: Candidates, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the normalised score of each candidate at
        ``budget``; the candidates' raw curves are normalised like the training rows were.
        With :attr:`pending` results, the posterior is also conditioned on them as if each had
        come out at its predicted mean (kriging believer): means are unchanged, and candidates
        correlated with a running trial are less uncertain, so that free workers do not all
        chase what a running trial is already finding out."""
        normalised = replace(candidates, curves=self.transform.curves(candidates.curves))
        if self.pending is not None and len(self.pending):
            pending = replace(self.pending, curves=self.transform.curves(self.pending.curves))
            return self.surrogate.predict(normalised, budget, pending=pending, pending_budget=pending.budget)
        return self.surrogate.predict(normalised, budget)


#: what a fit (:meth:`SurrogatePolicy.fit`) did: trained from scratch, rescaled to a new outcome
#: transform and refined, refined, only conditioned on new observations, or nothing (no new
#: observation since the last fit)
FIT_KINDS = ("scratch", "rescale", "refine", "condition", "cached")

#: the values of ``normalisation_scores`` (see :meth:`SurrogatePolicy.transform_scores`)
NORMALISATION_SCORES = ("epochs", "trials", "trials_if_alike")

#: the default ``normalisation_scores`` of :class:`SurrogatePolicy` and of both methods
DEFAULT_NORMALISATION_SCORES = "trials_if_alike"

AcquisitionFactory = Callable[[FittedModel, Observations], Acquisition]
"""``(model, observations) -> acquisition``: a method's acquisition given its incumbents."""


class SurrogatePolicy:
    """Fits a surrogate on a :class:`FitSchedule` and scores candidates with an acquisition.

    :param surrogate: the model
    :param acquisition: builds the method's acquisition from the fitted model and the
        observations (which give the incumbents)
    :param schedule: when to train from scratch / refine / condition only
    :param min_observations: fewest observations before the surrogate is used
    :param num_threads: torch threads while fitting and scoring (restored after). Defaults to
        1: the models are small, and extra threads mostly spin, which on a busy machine costs
        several times the work itself. None: leave torch's setting alone
    :param condition_on_pending: condition predictions on the running trials' pending results
        (see :class:`FittedModel`; needs a surrogate declaring the ``pending`` capability).
        Defaults to False
    :param normalisation_scores: the scores the outcome transform is fitted on, one of
        :data:`NORMALISATION_SCORES` (see :meth:`transform_scores`). Defaults to
        :data:`DEFAULT_NORMALISATION_SCORES` (``"trials_if_alike"``, as both methods)
    """

    # the counters of the fits so far (:meth:`metadata`), declared here so that a subclass
    # that makes no fits reports none
    #: fits from scratch (new outcome transform, surrogate trained anew)
    num_full_fits: int = 0
    #: refinements (the surrogate trained further from its current state)
    num_refines: int = 0
    #: refinements due to a misfit of the rows conditioned on (``FitSchedule.refine_on_misfit``)
    num_misfit_refines: int = 0
    #: rescales (new outcome transform, surrogate rescaled to it and refined)
    num_rescales: int = 0

    def __init__(
        self,
        surrogate: Surrogate,
        acquisition: AcquisitionFactory,
        schedule: FitSchedule,
        min_observations: int = 2,
        num_threads: int | None = 1,
        condition_on_pending: bool = False,
        normalisation_scores: str = DEFAULT_NORMALISATION_SCORES,
    ):
        if checked_flag("condition_on_pending", condition_on_pending) and not surrogate.capabilities.pending:
            raise ValueError(
                f"condition_on_pending=True needs a surrogate with the pending capability; "
                f"{type(surrogate).__name__} has {surrogate.capabilities}"
            )
        self.condition_on_pending = bool(condition_on_pending)
        self.normalisation_scores = checked_choice("normalisation_scores", normalisation_scores, NORMALISATION_SCORES)
        self.surrogate = surrogate
        self.acquisition = acquisition
        self.schedule = schedule
        self.min_observations = min_observations
        self.num_threads = num_threads
        self.transform = ScoreTransform()
        self._rows: _TransformedRows | None = None  # training rows through the transform
        self._size_at_full_fit = 0
        self._size_at_refine = 0
        self._size_at_fit = -1
        self._best_score = -math.inf
        self._size_at_improvement = 0
        self.num_full_fits = 0
        self.num_refines = 0
        self.num_misfit_refines = 0
        self.num_rescales = 0

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_rows"] = None  # a cache of the transformed rows, rebuilt at the next fit
        return state

    def transform_scores(self, observations: Observations) -> np.ndarray:
        """The scores the outcome transform is fitted on (``normalisation_scores``): every
        observed score (``"epochs"``), each trial's best (``"trials"``), or every observed score
        unless they are so alike that only the resolution bound sets the scale, then each
        trial's best (``"trials_if_alike"``).

        Every observed score counts a trial once per epoch it was resumed, so whatever the
        method resumes most sets the scale. That puts the resolution where the method looks,
        near the best scores. When the method keeps resuming configurations whose scores are
        all alike (a loss stuck at chance level), those scores fill the sample and the scale
        falls to its resolution bound, ``1e-3 * |median|``: every configuration slightly worse
        than them is mapped to the floor with the diverged ones. One score per trial describes
        how configurations differ, whatever the method chose to look at again, but spreads the
        scale over the bad ones too. ``"trials_if_alike"`` is the methods' default; the papers
        do not normalise (docs/deviations.md).
        """
        if self.normalisation_scores == "trials":
            return observations.best_scores_per_trial()
        scores = observations.all_scores()
        if self.normalisation_scores == "trials_if_alike":
            probe = ScoreTransform()
            probe.fit(scores)
            if probe.degenerate:
                return observations.best_scores_per_trial()
        return scores

    def ready(self, observations: Observations) -> bool:
        return observations.num_observations >= self.min_observations

    def fit(self, observations: Observations, seed: int) -> FittedModel:
        """Trains, refines or conditions the surrogate on all observations, as the schedule
        says, and returns it bound to its outcome transform, saying which it did
        (:attr:`FittedModel.fit_kind`)."""
        n = observations.num_observations
        if n == self._size_at_fit and self._size_at_full_fit > 0:
            # nothing new since the last fit
            return FittedModel(self.surrogate, self.transform, fit_kind="cached")
        self._size_at_fit = n
        with torch_threads(self.num_threads):
            # the scores a new transform would be fitted on: read once, for the check and the fit
            scores = self.transform_scores(observations)
            scheduled, outdated = self._from_scratch_due(observations, scores)
            if not scheduled and outdated and self._can_rescale():
                old = copy.copy(self.transform)
                self.transform.fit(scores)
                self.surrogate.rescale(old, self.transform)
                self.surrogate.fit(self._training_data(observations), from_scratch=False, seed=seed)
                self._size_at_refine = n
                self.num_rescales += 1
                return FittedModel(self.surrogate, self.transform, fit_kind="rescale")
            if scheduled or outdated:
                self.transform.fit(scores)  # moves only with a fit from scratch
                self.surrogate.fit(self._training_data(observations), from_scratch=True, seed=seed)
                self._size_at_full_fit = self._size_at_refine = n
                self.num_full_fits += 1
                return FittedModel(self.surrogate, self.transform, fit_kind="scratch")
            data = self._training_data(observations)
            refine, conditioned = n - self._size_at_refine >= self.schedule.refine_interval(n), False
            if not refine and self.schedule.refine_on_misfit is not None and self.surrogate.capabilities.misfit:
                self.surrogate.condition(data)  # also measures how well the new rows were predicted
                refine, conditioned = self._misfit(), True
                self.num_misfit_refines += refine
            if refine:
                self.surrogate.fit(data, from_scratch=False, seed=seed)
                self._size_at_refine = n
                self.num_refines += 1
            elif not conditioned:
                self.surrogate.condition(data)
        return FittedModel(self.surrogate, self.transform, fit_kind="refine" if refine else "condition")

    def score(
        self,
        model: FittedModel,
        candidates: Candidates,
        observations: Observations,
        pending: Candidates | None = None,
    ) -> AcquisitionValues:
        """The acquisition value of each candidate (higher is better), and the predictions
        they were computed from.

        :param model: the model :meth:`fit` returned
        :param candidates: the candidates to score
        :param observations: the observations (the acquisition's incumbents)
        :param pending: running trials at the end of their current segments; the model is
            conditioned on their pending results when ``condition_on_pending`` is set, else
            they are ignored
        """
        scored = model
        if pending is not None and self.condition_on_pending:
            scored = FittedModel(model.surrogate, model.transform, pending=pending)
        with torch_threads(self.num_threads):
            return self.acquisition(scored, observations).evaluate(candidates)

    def _misfit(self) -> bool:
        """Whether the rows conditioned on since the last training were predicted worse than
        the surrogate's own predictive distribution allows (``FitSchedule.refine_on_misfit``)."""
        threshold = self.schedule.refine_on_misfit
        assert threshold is not None  # called only when refining on misfit
        return misfit_p_value(self.surrogate.misfit()) < threshold

    def reset(self) -> None:
        """Forces a fit from scratch at the next :meth:`fit` (after a numerical failure)."""
        self._size_at_full_fit = 0

    def _can_rescale(self) -> bool:
        return self.schedule.rescale_when_outdated and self.surrogate.capabilities.rescale

    def _from_scratch_due(self, observations: Observations, scores: np.ndarray) -> tuple[bool, bool]:
        """Whether the schedule calls for a fit from scratch and, if not, whether the
        observations have outgrown the outcome transform (which also calls for one, unless the
        surrogate is rescaled instead: ``FitSchedule.rescale_when_outdated``).

        :param scores: the scores a new transform would be fitted on (:meth:`transform_scores`)
        """
        n = observations.num_observations
        schedule = self.schedule
        stalled = False
        if schedule.refit_on_stall is not None:
            best = observations.best_score()
            if best > self._best_score:
                self._best_score, self._size_at_improvement = best, n
            stalled = n - self._size_at_improvement >= schedule.refit_on_stall * observations.max_t
            if stalled:
                self._size_at_improvement = n  # patience starts again after the restart
        scheduled = (
            self._size_at_full_fit == 0
            or self.num_full_fits < schedule.initial_full_fits
            or n >= schedule.refit_growth * self._size_at_full_fit
            or stalled
        )
        # targets and curve inputs are transformed once per fit from scratch (or rescale): when
        # the data has outgrown that transform, the model must move to a new one
        return scheduled, not scheduled and self.transform.outdated(scores)

    def _training_data(self, observations: Observations) -> TrainingData:
        """All observations as training rows, through the outcome transform. Rows only ever
        get appended between two versions of the data or of the transform, so only new rows
        are transformed."""
        raw = observations.training_data()
        version = (raw.version, self.transform.version)
        if self._rows is None or self._rows.version != version or self._rows.buffer.n > len(raw):
            self._rows = _TransformedRows(version, raw.max_t)
        rows = self._rows
        if rows.buffer.n < len(raw):
            new = slice(rows.buffer.n, len(raw))
            rows.buffer.extend(y=self.transform(raw.y[new]), curves=self.transform.curves(raw.curves[new]))
        return replace(raw, y=rows.buffer.view("y"), curves=rows.buffer.view("curves"), version=version)

    def metadata(self) -> dict[str, Any]:
        return {
            "surrogate": type(self.surrogate).__name__,
            "surrogate_config": _settings(self.surrogate.config),
            "schedule": {k: (None if v is None or v == math.inf else v) for k, v in vars(self.schedule).items()},
            "num_full_fits": self.num_full_fits,
            "num_refines": self.num_refines,
            "num_misfit_refines": self.num_misfit_refines,
            "num_rescales": self.num_rescales,
            "normalisation_scores": self.normalisation_scores,
        }


def _settings(config: Any) -> dict[str, Any] | None:
    """The fields of a surrogate's settings dataclass, or None if it has none."""
    return asdict(config) if is_dataclass(config) and not isinstance(config, type) else None


#: median of |z| for z ~ N(0, 1)
_MEDIAN_ABS_Z = 0.6744897501960817


def misfit_p_value(errors: np.ndarray) -> float:
    """One-sided sign test that standardised errors are larger than N(0, 1) allows: the
    probability, if the model were right, of at least as many ``|z| > 0.674`` (the median of
    ``|z|``) among ``errors``. 1 for no errors."""
    errors = np.asarray(errors, dtype=float)
    if len(errors) == 0:
        return 1.0
    exceed = int(np.sum(np.abs(errors) > _MEDIAN_ABS_Z))
    if exceed == 0:
        return 1.0
    return float(bdtrc(exceed - 1, len(errors), 0.5))  # P(Binomial(n, 1/2) >= exceed)


class _TransformedRows:
    """The training rows' scores and curves through one version of the outcome transform."""

    def __init__(self, version: tuple, max_t: int):
        self.version = version
        self.buffer = RowBuffer({"y": 0, "curves": max_t})


@contextlib.contextmanager
def torch_threads(num: int | None) -> Iterator[None]:
    """Runs the block with ``num`` torch threads (None: unchanged), restoring the setting."""
    import torch

    before = torch.get_num_threads()
    if num is None or num == before:
        yield
        return
    torch.set_num_threads(num)
    try:
        yield
    finally:
        torch.set_num_threads(before)
