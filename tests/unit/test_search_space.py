import numpy as np
import pytest
from syne_tune.config_space import (
    choice,
    finrange,
    logfinrange,
    lograndint,
    loguniform,
    ordinal,
    randint,
    uniform,
)

from syne_dyhpo.search_space import CandidateSampler, ConfigEncoder, ConfigSpaceError

SPACE = {
    "lr": loguniform(1e-4, 1e-1),
    "mom": uniform(0.0, 1.0),
    "layers": randint(1, 5),
    "units": lograndint(16, 1024),
    "act": choice(["relu", "tanh", "elu"]),
    "drop": finrange(0.0, 0.5, 6),
    "bs": logfinrange(16, 256, 5, cast_int=True),
    "size": ordinal([1, 2, 4]),
    "epochs_const": 50,
}


def test_encoding_values():
    enc = ConfigEncoder(SPACE)
    assert enc.dim == 1 + 1 + 1 + 1 + 3 + 1 + 1 + 1
    config = {"lr": 1e-4 * 10**1.5, "mom": 0.25, "layers": 5, "units": 128, "act": "tanh", "drop": 0.1,
              "bs": 64, "size": 2, "epochs_const": 50}
    x = enc.encode(config)
    # log scale: 10^-2.5 is the middle of [1e-4, 1e-1]
    assert x[0] == pytest.approx(0.5)
    assert x[1] == pytest.approx(0.25)
    assert x[2] == pytest.approx(1.0)
    assert x[3] == pytest.approx(np.log(128 / 16) / np.log(1024 / 16))
    assert list(x[4:7]) == [0.0, 1.0, 0.0]  # one-hot
    assert x[7] == pytest.approx(0.2)
    assert x[8] == pytest.approx(0.5)  # log(64/16)/log(256/16)
    assert x[9] == pytest.approx(0.5)  # ordinal position


def test_sampling_is_seeded_in_range_and_keeps_constants():
    enc = ConfigEncoder(SPACE)
    a = enc.sample(np.random.RandomState(3), 50)
    b = enc.sample(np.random.RandomState(3), 50)
    assert a == b
    x = enc.encode_many(a)
    assert x.min() >= 0.0 and x.max() <= 1.0
    assert all(c["epochs_const"] == 50 for c in a)
    assert all(isinstance(c["layers"], int) and 1 <= c["layers"] <= 5 for c in a)
    # log-uniform sampling: about half the learning rates below the geometric middle
    lrs = np.array([c["lr"] for c in enc.sample(np.random.RandomState(0), 2000)])
    assert 0.45 < np.mean(lrs < 10**-2.5) < 0.55


@pytest.mark.parametrize(
    "space, message",
    [({}, "no hyperparameter"), ({"a": 3, "b": "x"}, "no hyperparameter"), ([uniform(0, 1)], "must be a dict")],
)
def test_bad_spaces(space, message):
    with pytest.raises((ConfigSpaceError, ValueError), match=message):
        ConfigEncoder(space)


def test_unknown_domain_type_is_named():
    from syne_tune.config_space import Domain

    class Weird(Domain):
        pass

    with pytest.raises(ConfigSpaceError, match="'w': unsupported domain type Weird"):
        ConfigEncoder({"w": Weird(), "a": uniform(0, 1)})


def test_finite_candidates_each_used_once():
    space = {"a": choice([1, 2, 3, 4]), "b": choice(["x", "y"])}
    table = [{"a": a, "b": b} for a in [1, 2, 3, 4] for b in ["x", "y"]]
    sampler = CandidateSampler(ConfigEncoder(space), table)
    rng = np.random.RandomState(0)
    configs, x = sampler.propose(rng, 5)
    assert len(configs) == 5 and x.shape == (5, 6)
    assert all(c in table for c in configs)
    for c in table[:6]:
        sampler.mark_used(c)
    left, _ = sampler.propose(rng, 5)
    assert sorted(map(str, left)) == sorted(map(str, table[6:]))
    for c in table[6:]:
        sampler.mark_used(c)
    assert sampler.propose(rng, 5)[0] == []


def test_a_pickled_sampler_proposes_the_same():
    import pickle

    encoder = ConfigEncoder({"x": choice([1, 2, 3, 4, 5]), "y": uniform(0, 1)})
    table = [{"x": x, "y": y} for x in (1, 2, 3, 4, 5) for y in (0.1, 0.5)]
    sampler = CandidateSampler(encoder, table)
    sampler.mark_used(table[3])
    old = pickle.loads(pickle.dumps(sampler))
    new_configs, new_keys, new_x = sampler.propose_with_keys(np.random.RandomState(0), 4)
    old_configs, old_keys, old_x = old.propose_with_keys(np.random.RandomState(0), 4)
    assert new_configs == old_configs and new_keys == old_keys and np.array_equal(new_x, old_x)
    assert new_keys == [encoder.key(c) for c in new_configs]
    assert encoder.key(table[3]) not in new_keys
