"""Syne Tune config spaces <-> the unit hypercube, and candidate sampling.

Both surrogates see a configuration as a vector in [0, 1]^d: numerical hyperparameters are
scaled linearly, or logarithmically where the domain is log-scaled (as in the DyHPO and DPL
papers); categorical ones are one-hot encoded; ordinal ones keep their order as a position in
[0, 1]. Constants (non-``Domain`` entries) are passed through to the trial but not encoded.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence
from typing import Any

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


#: spaces with at most this many configurations are enumerated, so that new configurations are
#: drawn without replacement and the scheduler knows when none is left
MAX_ENUMERATED_CONFIGS = 10_000


def _finite_size(domain: Domain) -> int | None:
    """Number of values of a finite domain, without listing them (None for a continuous one)."""
    if isinstance(domain, Categorical):  # ordinal is categorical too
        return len(domain.categories)
    if isinstance(domain, FiniteRange):
        return int(domain.size)
    if isinstance(domain, Integer):
        return int(domain.upper) - int(domain.lower) + 1
    return None


def _finite_values(domain: Domain) -> list | None:
    """All values of a finite domain (None for a continuous one). An integer range is listed
    in full: check :func:`_finite_size` first."""
    if isinstance(domain, Categorical):  # ordinal is categorical too
        return list(domain.categories)
    if isinstance(domain, FiniteRange):
        return list(domain.values)
    if isinstance(domain, Integer):
        return list(range(int(domain.lower), int(domain.upper) + 1))
    return None


def _in_integer_range(value: Any, lower: int, upper: int) -> bool:
    """Whether ``value`` is one of ``range(lower, upper + 1)`` (equal to one, or written as
    one), decided without listing the range."""
    if isinstance(value, (int, float, np.integer, np.floating)):
        return math.isfinite(float(value)) and value == int(value) and lower <= int(value) <= upper
    text = str(value)
    try:
        number = int(text)
    except ValueError:
        return False
    return str(number) == text and lower <= number <= upper


def _is_hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class _NumericalEncoding:
    """Linear or log scaling of one numerical hyperparameter to [0, 1]."""

    def __init__(self, name: str, lower: float, upper: float, log: bool):
        if log and lower <= 0:
            raise ConfigSpaceError(f"Hyperparameter '{name}': log scale needs lower > 0, got {lower}")
        self.log = log
        self.lower = math.log(lower) if log else float(lower)
        self.upper = math.log(upper) if log else float(upper)

    def encode(self, value: float) -> float:
        return float(self.encode_array(np.array([value], dtype=float))[0])

    def encode_array(self, values: np.ndarray) -> np.ndarray:
        span = self.upper - self.lower
        if span <= 0:
            return np.full(len(values), 0.5)
        x = np.log(values) if self.log else values
        return np.clip((x - self.lower) / span, 0.0, 1.0)


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
        #: categorical hyperparameters with an unhashable category (e.g. a list of layer widths):
        #: sampled by index and identified by their category's index in :meth:`key`
        self._by_index: set[str] = {
            name for name, kind, enc in self._encoders if kind != "numerical" and not all(_is_hashable(c) for c in enc)
        }
        # category -> position where all categories have one hashable type; a value of that
        # type is then found by one lookup, anything else by _index_of (same answer)
        self._category_index: dict[str, tuple[type, dict] | None] = {}
        for name, kind, enc in self._encoders:
            if kind == "numerical":
                continue
            types = {type(c) for c in enc}
            index: tuple[type, dict] | None = None
            if len(types) == 1:
                try:
                    index = (types.pop(), {})
                    for i, c in enumerate(enc):
                        index[1].setdefault(c, i)
                except TypeError:
                    index = None
            self._category_index[name] = index

    def encode(self, config: dict[str, Any]) -> np.ndarray:
        """
        :param config: configuration (may contain extra keys, which are ignored)
        :return: vector of shape ``(dim,)`` in [0, 1]
        """
        return self.encode_many([config])[0]

    def encode_many(self, configs: Sequence[dict[str, Any]]) -> np.ndarray:
        """Encodes configurations column by column (one vectorised pass per hyperparameter).

        :param configs: configurations (may contain extra keys, which are ignored)
        :return: matrix of shape ``(len(configs), dim)``
        """
        num = len(configs)
        out = np.zeros((num, self.dim))
        if num == 0:
            return out
        pos = 0
        for name, kind, enc in self._encoders:
            try:
                values = [c[name] for c in configs]
            except KeyError:
                missing = next(c for c in configs if name not in c)
                raise ConfigSpaceError(f"Configuration {missing} lacks hyperparameter '{name}'") from None
            if kind == "numerical":
                out[:, pos] = enc.encode_array(np.array(values, dtype=float))
                pos += 1
                continue
            index = self._category_index[name]
            idx = np.array([_lookup(index, enc, v, name) for v in values], dtype=np.int64)
            if kind == "ordinal":
                out[:, pos] = idx / max(len(enc) - 1, 1)
                pos += 1
            else:
                out[np.arange(num), pos + idx] = 1.0
                pos += len(enc)
        return out

    def sample(self, rng: np.random.RandomState, num: int) -> list[dict[str, Any]]:
        """Samples configurations from the domains' own samplers (log-uniform where log).

        :param rng: random state
        :param num: number of configurations
        :return: full configurations (constants included), values cast to the domain types
            (what :meth:`complete` gives: the samplers' values are the domains' own, so
            casting again changes nothing, and the configs are built from a template)
        """
        return self.sample_with_keys(rng, num)[0]

    def sample_with_keys(self, rng: np.random.RandomState, num: int) -> tuple[list[dict[str, Any]], list[tuple]]:
        """:meth:`sample`, and each configuration's :meth:`key` (the sampled values in order
        of ``hp_names``: no second pass over the configurations)."""
        columns = []
        for name in self.hp_names:
            if name in self._by_index:
                # what the domain's sampler draws (an index per value), kept as indices
                columns.append(list(rng.choice(len(self.config_space[name].categories), size=num)))
                continue
            values = self.config_space[name].sample(spec=None, size=num, random_state=rng)
            columns.append([to_native(v) for v in values] if num > 1 else [to_native(_first(values))])
        template = dict(self.config_space)
        configs, keys = [], list(zip(*columns))
        if self._by_index:
            keys = [tuple(int(v) if n in self._by_index else v for n, v in zip(self.hp_names, row)) for row in keys]
        for row in keys:
            config = dict(template)
            config.update(zip(self.hp_names, row))
            for name in self._by_index:
                config[name] = copy.deepcopy(self.config_space[name].categories[config[name]])
            configs.append(config)
        return configs, keys

    def complete(self, config: dict[str, Any]) -> dict[str, Any]:
        """Adds constants and casts values the way Syne Tune does before starting a trial."""
        return postprocess_config(cast_config_values(config, self.config_space), self.config_space)

    def validate(self, config: dict[str, Any], where: str) -> None:
        """Raises :class:`ConfigSpaceError` naming ``where``, the hyperparameter and the value
        if ``config`` lacks a hyperparameter or has a value outside its domain."""
        for name in self.hp_names:
            if name not in config:
                raise ConfigSpaceError(f"{where} lacks hyperparameter '{name}' (has {sorted(config)})")
            domain, value = self.config_space[name], config[name]
            if isinstance(domain, Integer):
                inside = _in_integer_range(value, int(domain.lower), int(domain.upper))
            else:
                values = _finite_values(domain)
                inside = (
                    domain.is_valid(value) if values is None else (value in values or str(value) in map(str, values))
                )
            if not inside:
                raise ConfigSpaceError(f"{where}: {name}={value!r} is outside its domain {domain}")

    def grid(self) -> list[dict[str, Any]] | None:
        """Every configuration of the space if all its domains are finite and there are at
        most :data:`MAX_ENUMERATED_CONFIGS` of them, else None (sized before anything is
        listed: a huge integer range costs nothing)."""
        sizes = [_finite_size(self.config_space[name]) for name in self.hp_names]
        finite_sizes = [n for n in sizes if n is not None]
        if len(finite_sizes) < len(sizes) or math.prod(finite_sizes) > MAX_ENUMERATED_CONFIGS:
            return None
        values = [_finite_values(self.config_space[name]) or [] for name in self.hp_names]
        return [self.complete(dict(zip(self.hp_names, combo))) for combo in itertools.product(*values)]

    def key(self, config: dict[str, Any]) -> tuple:
        """Hashable identity of a configuration's hyperparameter values (a categorical
        hyperparameter with an unhashable category, e.g. a list, by its category's index)."""
        if not self._by_index:
            return tuple(to_native(config[name]) for name in self.hp_names)
        return tuple(
            _index_of(self.config_space[name].categories, config[name], name)
            if name in self._by_index
            else to_native(config[name])
            for name in self.hp_names
        )


def _first(values: Any) -> Any:
    return values[0] if isinstance(values, (list, np.ndarray)) else values


def to_native(value: Any) -> Any:
    """numpy scalars -> Python scalars (Syne Tune's tabular lookup matches exact values)."""
    return value.item() if isinstance(value, np.generic) else value


def _lookup(index: tuple[type, dict] | None, categories: list, value: Any, name: str) -> int:
    if index is not None and type(value) is index[0]:
        i = index[1].get(value)
        if i is not None:
            return i
    return _index_of(categories, value, name)


def _index_of(categories: list, value: Any, name: str) -> int:
    for i, c in enumerate(categories):
        if c == value or str(c) == str(value):
            return i
    raise ConfigSpaceError(f"Hyperparameter '{name}': value {value!r} is not one of {categories}")


class CandidateSampler:
    """Proposes new configurations: sampled from the space, or drawn from a finite pool.

    The pool is ``candidates.configs`` (e.g. the rows of a tabular benchmark) if given, else the
    whole space when it is small and finite (:meth:`ConfigEncoder.grid`); new configurations
    are then drawn only from it, each at most once.

    :param encoder: encoder of the config space
    :param candidate_configs: optional finite set of configurations to draw from
        (``CandidateOptions.configs``); each must lie in the space
    :raises ConfigSpaceError: if ``candidate_configs`` is empty or one of them lacks a
        hyperparameter or has a value outside its domain
    """

    def __init__(self, encoder: ConfigEncoder, candidate_configs: Sequence[dict[str, Any]] | None = None):
        self.encoder = encoder
        self._pool: list[dict[str, Any]] = []
        self._pool_index: dict[tuple, int] = {}
        self._pool_keys: list[tuple] = []
        self._used: set[tuple] = set()
        if candidate_configs is not None:
            if len(candidate_configs) == 0:
                raise ConfigSpaceError("candidates.configs is empty")
            for i, c in enumerate(candidate_configs):
                native = {k: to_native(v) for k, v in c.items()}
                encoder.validate(native, where=f"candidates.configs[{i}]")
                self._add_to_pool(encoder.complete(native))
        else:
            for config in encoder.grid() or []:
                self._add_to_pool(config)
        self.finite = len(self._pool) > 0
        self._pool_encoded = encoder.encode_many(self._pool)
        self._pool_free = np.ones(len(self._pool), dtype=bool)

    def _add_to_pool(self, config: dict[str, Any]) -> None:
        key = self.encoder.key(config)
        if key not in self._pool_index:
            self._pool_index[key] = len(self._pool)
            self._pool.append(config)
            self._pool_keys.append(key)

    def mark_used(self, config: dict[str, Any]) -> None:
        """Excludes a configuration from later proposals (it has a trial already)."""
        key = self.encoder.key(config)
        self._used.add(key)
        if key in self._pool_index:
            self._pool_free[self._pool_index[key]] = False

    def is_free(self, config: dict[str, Any]) -> bool:
        """Whether no trial was started with this configuration yet."""
        return self.is_free_key(self.encoder.key(config))

    def is_free_key(self, key: tuple) -> bool:
        """:meth:`is_free` of the configuration with this :meth:`ConfigEncoder.key`."""
        return key not in self._used

    def keys(self) -> set[tuple]:
        """Identities (:meth:`ConfigEncoder.key`) of the pool's configurations."""
        return set(self._pool_index)

    def num_free(self) -> int | None:
        """Configurations of the pool not started yet (None: sampling never runs out)."""
        return int(self._pool_free.sum()) if self.finite else None

    def propose(self, rng: np.random.RandomState, num: int) -> tuple[list[dict[str, Any]], np.ndarray]:
        """
        :param rng: random state
        :param num: maximum number of configurations
        :return: (configurations, their encodings); fewer than ``num`` (possibly none) when
            a finite pool is nearly exhausted
        """
        configs, _, encoded = self.propose_with_keys(rng, num)
        return configs, encoded

    def propose_with_keys(
        self, rng: np.random.RandomState, num: int, exclude: frozenset[tuple] = frozenset()
    ) -> tuple[list[dict[str, Any]], list[tuple], np.ndarray]:
        """:meth:`propose`, with each configuration's key (:meth:`ConfigEncoder.key`).

        :param exclude: keys of configurations not to propose (those on offer already)
        :return: (configurations, their keys, their encodings)
        """
        if not self.finite:
            configs, keys = self.encoder.sample_with_keys(rng, num)
            chosen = [i for i, key in enumerate(keys) if key not in self._used and key not in exclude]
            configs = [configs[i] for i in chosen]
            return configs, [keys[i] for i in chosen], self.encoder.encode_many(configs)
        if exclude:
            free_mask = self._pool_free.copy()
            free_mask[[self._pool_index[k] for k in exclude if k in self._pool_index]] = False
            free = np.flatnonzero(free_mask)
        else:
            free = np.flatnonzero(self._pool_free)
        if len(free) > num:
            free = np.sort(rng.choice(free, size=num, replace=False))
        return [dict(self._pool[i]) for i in free], [self._pool_keys[i] for i in free], self._pool_encoded[free]
