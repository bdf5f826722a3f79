"""The freeze-thaw core's settings beyond Syne Tune's constructor arguments: how new
configurations are offered, how long a segment is, paused trials' checkpoints, promotions, the
price of job starts and the decision log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syne_dyhpo.checks import checked_flag, checked_integer
from syne_dyhpo.core.candidates import CandidateOptions
from syne_dyhpo.core.checkpoints import PausedCheckpoints
from syne_dyhpo.core.job_costs import JobCosts
from syne_dyhpo.core.promotion import SuccessiveHalvingPromotion


def checked_instance(name: str, value: Any, cls: type, allow_none: bool = False) -> Any:
    """``value`` if it is a ``cls`` (or None where allowed), else a ValueError naming the
    argument, the value and the class to use.

    :param name: the argument's name, for the message
    :param value: the value passed
    :param cls: the class it must be
    :param allow_none: None is a valid value (the setting is off)
    """
    if isinstance(value, cls) or (allow_none and value is None):
        return value
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    expected = f"{article} {cls.__name__}" + (" or None" if allow_none else "")
    raise ValueError(f"{name} must be {expected}, got {value!r}")


@dataclass(frozen=True)
class FreezeThawOptions:
    """The settings of the freeze-thaw core that both methods share and that most runs leave
    at their defaults (a scheduler's ``options``). Changing a field changes only that field.

    :param candidates: how new configurations are offered
        (:class:`~syne_dyhpo.core.candidates.CandidateOptions`): how many are scored per
        decision and kept for the next, how many are started at random first, and optionally
        the finite set they are drawn from (e.g. a tabular benchmark's rows). Defaults to
        ``CandidateOptions()``: 256 fresh draws from the configuration space per decision, one
        random start
    :param budget_step: epochs a trial runs per decision. Defaults to 1 (the papers)
    :param checkpoints: housekeeping of paused trials' checkpoints
        (:class:`~syne_dyhpo.core.checkpoints.PausedCheckpoints`): an optional cap on the
        paused trials kept resumable (the others, ranked lowest by the acquisition, are retired
        and their checkpoints deleted), and whether a resumed trial that lost its checkpoint is
        failed or restarted from scratch. Defaults to ``PausedCheckpoints()``: every paused
        trial kept, a lost checkpoint fails its trial
    :param promotion: successive-halving promotions tried before consulting the surrogate
        (:class:`~syne_dyhpo.core.promotion.SuccessiveHalvingPromotion`; Syne Tune's former
        DyHPO used one with probability 0.25). Defaults to None (the papers)
    :param job_costs: decisions that pay for job starts
        (:class:`~syne_dyhpo.core.job_costs.JobCosts`): jobs are told to run to ``max_t``, a
        winning trial keeps running (CONTINUE) and is paused only when it loses, and each
        candidate's acquisition value is divided by its expected seconds (a paused or new
        trial pays a job start), the costs learned from the results' timestamps. Defaults to
        None (the papers: resumes are free, and with ``max_resource_attr`` every segment is a
        job of its own)
    :param log_decisions: keep the decision log (the scheduler's ``decision_log()``; written
        into the Tuner's experiment folder as it grows, see
        :mod:`syne_dyhpo.core.decision_log`). Defaults to True
    """

    candidates: CandidateOptions = CandidateOptions()
    budget_step: int = 1
    checkpoints: PausedCheckpoints = PausedCheckpoints()
    promotion: SuccessiveHalvingPromotion | None = None
    job_costs: JobCosts | None = None
    log_decisions: bool = True

    def __post_init__(self) -> None:
        name = type(self).__name__
        checked_instance(f"{name}.candidates", self.candidates, CandidateOptions)
        checked_instance(f"{name}.checkpoints", self.checkpoints, PausedCheckpoints)
        checked_instance(f"{name}.promotion", self.promotion, SuccessiveHalvingPromotion, allow_none=True)
        checked_instance(f"{name}.job_costs", self.job_costs, JobCosts, allow_none=True)
        # frozen: the checked values are stored in their canonical types (plain int / bool);
        # integral floats pass, as for max_t
        object.__setattr__(
            self, "budget_step", checked_integer(f"{name}.budget_step", self.budget_step, 1, integral_floats=True)
        )
        object.__setattr__(self, "log_decisions", checked_flag(f"{name}.log_decisions", self.log_decisions))
