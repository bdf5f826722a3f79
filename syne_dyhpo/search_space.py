"""Syne Tune config spaces <-> the unit hypercube, and candidate sampling.

Both surrogates see a configuration as a vector in [0, 1]^d: numerical hyperparameters are
scaled linearly, or logarithmically where the domain is log-scaled (as in the DyHPO and DPL
papers); categorical ones are one-hot encoded; ordinal ones keep their order as a position in
[0, 1]. Constants (non-``Domain`` entries) are passed through to the trial but not encoded.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from syne_tune.config_space import (
    Categorical,
    Domain,
    FiniteRange,
    Float,
    Integer,
    Ordinal,
    cast_config_values,
    is_log_space,
    postprocess_config,
)


class ConfigSpaceError(ValueError):
    """The config space cannot be used by a freeze-thaw scheduler."""


class _NumericalEncoding:
    """Linear or log scaling of one numerical hyperparameter to [0, 1]."""

    def __init__(self, name: str, lower: float, upper: float, log: bool):
        if log and lower <= 0:
            raise ConfigSpaceError(f"Hyperparameter '{name}': log scale needs lower > 0, got {lower}")
        self.log = log
        self.lower = math.log(lower) if log else float(lower)
        self.upper = math.log(upper) if log else float(upper)

    def encode(self, value: float) -> float:
        x = math.log(value) if self.log else float(value)
        span = self.upper - self.lower
        return 0.5 if span <= 0 else min(max((x - self.lower) / span, 0.0), 1.0)


class ConfigEncoder:
    """Encodes configurations of a Syne Tune config space as vectors in [0, 1]^d.

    :param config_space: Syne Tune configuration space (``Domain`` values are hyperparameters,
        other values are constants passed to the trial unchanged)
    :raises ConfigSpaceError: if the space has no hyperparameter or a domain type that
        cannot be encoded
    """

    def __init__(self, config_space: dict[str, Any]):
        if not isinstance(config_space, dict):
            raise ConfigSpaceError(f"config_space must be a dict, got {type(config_space).__name__}")
        self.config_space = config_space
        self.hp_names: list[str] = [k for k, v in config_space.items() if isinstance(v, Domain)]
        if not self.hp_names:
            raise ConfigSpaceError(
                "config_space has no hyperparameter (no syne_tune.config_space Domain value): "
                "there is nothing to tune"
            )
        self._encoders: list[tuple[str, str, Any]] = []  # (name, kind, encoding)
        dim = 0
        for name in self.hp_names:
            domain = config_space[name]
            if isinstance(domain, Ordinal):
                cats = list(domain.categories)
                self._encoders.append((name, "ordinal", cats))
                dim += 1
            elif isinstance(domain, Categorical):
                cats = list(domain.categories)
                if len(cats) == 0:
                    raise ConfigSpaceError(f"Hyperparameter '{name}': choice() with no categories")
                self._encoders.append((name, "onehot", cats))
                dim += len(cats)
            elif isinstance(domain, FiniteRange):
                enc = _NumericalEncoding(name, domain.lower, domain.upper, domain.log_scale)
                self._encoders.append((name, "numerical", enc))
                dim += 1
            elif isinstance(domain, (Float, Integer)):
                enc = _NumericalEncoding(name, domain.lower, domain.upper, is_log_space(domain))
                self._encoders.append((name, "numerical", enc))
                dim += 1
            else:
                raise ConfigSpaceError(
                    f"Hyperparameter '{name}': unsupported domain type {type(domain).__name__}; "
                    "use uniform, loguniform, randint, lograndint, choice, ordinal, finrange, "
                    "logfinrange or a constant"
                )
        self.dim = dim

    def encode(self, config: dict[str, Any]) -> np.ndarray:
        """
        :param config: configuration (may contain extra keys, which are ignored)
        :return: vector of shape ``(dim,)`` in [0, 1]
        """
        out = np.zeros(self.dim)
        pos = 0
        for name, kind, enc in self._encoders:
            if name not in config:
                raise ConfigSpaceError(f"Configuration {config} lacks hyperparameter '{name}'")
            value = config[name]
            if kind == "numerical":
                out[pos] = enc.encode(value)
                pos += 1
            elif kind == "ordinal":
                idx = _index_of(enc, value, name)
                out[pos] = idx / max(len(enc) - 1, 1)
                pos += 1
            else:
                out[pos + _index_of(enc, value, name)] = 1.0
                pos += len(enc)
        return out

    def encode_many(self, configs: Sequence[dict[str, Any]]) -> np.ndarray:
        """
        :param configs: configurations
        :return: matrix of shape ``(len(configs), dim)``
        """
        if len(configs) == 0:
            return np.zeros((0, self.dim))
        return np.stack([self.encode(c) for c in configs])

    def sample(self, rng: np.random.RandomState, num: int) -> list[dict[str, Any]]:
        """Samples configurations from the domains' own samplers (log-uniform where log).

        :param rng: random state
        :param num: number of configurations
        :return: full configurations (constants included), values cast to the domain types
        """
        columns = {
            name: self.config_space[name].sample(spec=None, size=num, random_state=rng)
            for name in self.hp_names
        }
        configs = []
        for i in range(num):
            config = {name: to_native(columns[name][i] if num > 1 else _first(columns[name])) for name in self.hp_names}
            configs.append(self.complete(config))
        return configs

    def complete(self, config: dict[str, Any]) -> dict[str, Any]:
        """Adds constants and casts values the way Syne Tune does before starting a trial."""
        return postprocess_config(cast_config_values(config, self.config_space), self.config_space)

    def key(self, config: dict[str, Any]) -> tuple:
        """Hashable identity of a configuration's hyperparameter values."""
        return tuple(to_native(config[name]) for name in self.hp_names)


def _first(values: Any) -> Any:
    return values[0] if isinstance(values, (list, np.ndarray)) else values


def to_native(value: Any) -> Any:
    """numpy scalars -> Python scalars (Syne Tune's tabular lookup matches exact values)."""
    return value.item() if isinstance(value, np.generic) else value


def _index_of(categories: list, value: Any, name: str) -> int:
    for i, c in enumerate(categories):
        if c == value or str(c) == str(value):
            return i
    raise ConfigSpaceError(f"Hyperparameter '{name}': value {value!r} is not one of {categories}")


class CandidateSampler:
    """Proposes new configurations: sampled from the space, or drawn from a finite set.

    With ``candidate_configs`` (e.g. the rows of a tabular benchmark), new configurations
    are drawn only from that set, each at most once.

    :param encoder: encoder of the config space
    :param candidate_configs: optional finite set of configurations to draw from
    """

    def __init__(self, encoder: ConfigEncoder, candidate_configs: Sequence[dict[str, Any]] | None = None):
        self.encoder = encoder
        self.finite = candidate_configs is not None
        self._pool: list[dict[str, Any]] = []
        self._pool_encoded = np.zeros((0, encoder.dim))
        self._pool_index: dict[tuple, int] = {}
        self._used: set[tuple] = set()
        if candidate_configs is not None:
            if len(candidate_configs) == 0:
                raise ConfigSpaceError("candidate_configs is empty")
            for c in candidate_configs:
                full = encoder.complete({k: to_native(v) for k, v in c.items()})
                key = encoder.key(full)
                if key not in self._pool_index:
                    self._pool_index[key] = len(self._pool)
                    self._pool.append(full)
            self._pool_encoded = encoder.encode_many(self._pool)
        self._pool_free = np.ones(len(self._pool), dtype=bool)

    def mark_used(self, config: dict[str, Any]) -> None:
        """Excludes a configuration from later proposals (it has a trial already)."""
        key = self.encoder.key(config)
        self._used.add(key)
        if key in self._pool_index:
            self._pool_free[self._pool_index[key]] = False

    def is_free(self, config: dict[str, Any]) -> bool:
        """Whether no trial was started with this configuration yet."""
        return self.encoder.key(config) not in self._used

    def propose(self, rng: np.random.RandomState, num: int) -> tuple[list[dict[str, Any]], np.ndarray]:
        """
        :param rng: random state
        :param num: maximum number of configurations
        :return: (configurations, their encodings); fewer than ``num`` (possibly none) when
            a finite set is nearly exhausted
        """
        if not self.finite:
            configs = [c for c in self.encoder.sample(rng, num) if self.encoder.key(c) not in self._used]
            return configs, self.encoder.encode_many(configs)
        free = np.flatnonzero(self._pool_free)
        if len(free) > num:
            free = np.sort(rng.choice(free, size=num, replace=False))
        return [dict(self._pool[i]) for i in free], self._pool_encoded[free]
