"""Same seed, same decisions on the paths benchmarks/latency.py times (its synthetic driver:
many observations, few epochs each), whatever torch's global seed."""

import pytest
import torch

from benchmarks import latency


@pytest.mark.parametrize("method", ["DyHPO", "DeepPowerLaw"])
def test_same_seed_same_decisions_on_the_fast_paths(method):
    torch.manual_seed(123)  # the schedulers must not depend on the global torch seed
    first = _decisions(method)
    torch.manual_seed(456)
    assert _decisions(method) == first


def _decisions(method):
    seen = []
    original = latency.make_scheduler

    def recording(*args, **kwargs):
        scheduler = original(*args, **kwargs)
        suggest = scheduler.suggest

        def wrapped():
            suggestion = suggest()
            seen.append(None if suggestion is None else (suggestion.spawn_new_trial_id, suggestion.checkpoint_trial_id,
                                                         tuple(sorted((suggestion.config or {}).items()))))
            return suggestion

        scheduler.suggest = wrapped
        return scheduler

    latency.make_scheduler = recording
    try:
        latency.drive(method, 60, max_t=6, seed=3)
    finally:
        latency.make_scheduler = original
    return seen
