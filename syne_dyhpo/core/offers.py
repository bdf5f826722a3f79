"""The new configurations a freeze-thaw scheduler offers to its decisions: the configurations
of ``points_to_evaluate`` first, then those kept from the last decision, then fresh draws."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from syne_dyhpo.core.candidates import CandidateOptions
from syne_dyhpo.search_space import CandidateSampler, ConfigEncoder


class NewConfigOffers:
    """Keeps the new configurations offered to the decisions.

    :param encoder: the configuration space's encoder
    :param sampler: draws the new configurations and knows those used
    :param candidates: how many are drawn per decision and kept for the next
    :param points_to_evaluate: configurations started first, in the given order (each must be
        complete and, with a finite set of configurations, one of them)
    """

    def __init__(
        self,
        encoder: ConfigEncoder,
        sampler: CandidateSampler,
        candidates: CandidateOptions,
        points_to_evaluate: Sequence[dict[str, Any]] | None,
    ):
        self.encoder = encoder
        self.sampler = sampler
        self.candidates = candidates
        self.points = self._checked_points(points_to_evaluate)
        #: configurations offered again at the next decision, their keys and encodings
        self.kept: tuple[list[dict[str, Any]], list[tuple], np.ndarray] | None = None

    def offered(self, rng: np.random.RandomState) -> tuple[list[dict[str, Any]], list[tuple], np.ndarray]:
        """New configurations for a decision, their keys and encodings: those kept from the
        last one (still free), then fresh draws up to ``num_candidates``.

        :param rng: random state of the draws
        """
        if self.kept is None:
            return self.sampler.propose_with_keys(rng, self.candidates.num_candidates)
        configs, keys, x = self.kept
        free = [i for i, key in enumerate(keys) if self.sampler.is_free_key(key)]
        on_offer = [keys[i] for i in free]
        fresh, fresh_keys, fresh_x = self.sampler.propose_with_keys(
            rng, self.candidates.num_candidates - len(free), exclude=frozenset(on_offer)
        )
        return [configs[i] for i in free] + fresh, on_offer + fresh_keys, np.concatenate([x[free], fresh_x])

    def keep_best(
        self,
        new_configs: list[dict[str, Any]],
        new_keys: list[tuple],
        new_x: np.ndarray,
        values: np.ndarray | None,
        started: dict[str, Any] | None,
    ) -> None:
        """Keeps the ``candidates.num_kept`` new configurations the acquisition scored highest
        (the one to be started excepted); a decision made without the acquisition (completion,
        promotion, random start) keeps those kept before.

        :param values: the acquisition values of ``new_configs`` (None: not consulted)
        :param started: the configuration the decision starts, if any
        """
        if self.candidates.num_kept == 0 or values is None or len(values) != len(new_configs):
            return
        ranked = [i for i in np.argsort(-values, kind="stable") if new_configs[i] is not started]
        order = ranked[: self.candidates.num_kept]
        self.kept = ([new_configs[i] for i in order], [new_keys[i] for i in order], new_x[order])

    def next_point(self, decided: set[tuple]) -> dict[str, Any] | None:
        """The first of ``points_to_evaluate`` not started yet, nor decided on.

        :param decided: keys of the configurations already decided on (waiting to be started)
        """
        for point in self.points:
            if self.sampler.is_free(point) and self.encoder.key(point) not in decided:
                return point
        return None

    def _checked_points(self, points: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
        if points is None:
            return []
        if isinstance(points, dict) or not all(isinstance(p, dict) for p in points):
            raise ValueError(f"points_to_evaluate must be a list of configurations (dicts), got {points!r}")
        checked = []
        for i, point in enumerate(points):
            self.encoder.validate(point, where=f"points_to_evaluate[{i}]")
            config = self.encoder.complete(dict(point))
            # CandidateSampler.keys() is a set of configuration keys, the sampler no mapping
            if self.sampler.finite and self.encoder.key(config) not in self.sampler.keys():  # noqa: SIM118
                raise ValueError(f"points_to_evaluate[{i}] = {point} is not one of the candidate configurations")
            checked.append(config)
        return checked
