"""The lab's variants of our methods set exactly the deviations their names say."""

from dataclasses import asdict
from types import SimpleNamespace

import pytest
from syne_tune.config_space import choice

from benchmarks.runner import METHODS, VARIANTS
from syne_dyhpo import DEEP_POWER_LAW_COMPLETION, DYHPO_COMPLETION, DepthGate

COMPLETION = {"DyHPO": asdict(DYHPO_COMPLETION), "DeepPowerLaw": asdict(DEEP_POWER_LAW_COMPLETION)}
GATE = asdict(DepthGate())


@pytest.mark.parametrize("method, completion, gate", [
    ("DyHPO", "default", "default"),
    ("DeepPowerLaw", "default", "default"),
    ("DyHPO-no-completion", None, "default"),
    ("DeepPowerLaw-no-completion", None, "default"),
    ("DyHPO-no-depth-gate", "default", None),
    ("DeepPowerLaw-no-depth-gate", "default", None),
    ("DyHPO-papers", None, None),
    ("DeepPowerLaw-papers", None, None),
    ("DyHPO-costs", "default", "default"),
    ("DeepPowerLaw-costs", "default", "default"),
    ("DyHPO-costs-r10s", "default", "default"),
    ("DeepPowerLaw-costs-r10s", "default", "default"),
])
def test_each_variant_of_ours_sets_the_deviations_its_name_says(method, completion, gate):
    definition = SimpleNamespace(metric="loss", do_minimize=True, time_attr="epoch", max_t=3)
    scheduler = METHODS[method](definition, {"x": choice([1, 2])}, [{"x": 1}, {"x": 2}], 0)
    base = VARIANTS[method][0]
    assert type(scheduler).__name__ == base
    metadata = scheduler.metadata()
    assert metadata["completion"] == (COMPLETION[base] if completion == "default" else None)
    assert metadata["depth_gate"] == (GATE if gate == "default" else None)
    assert GATE == {"top_fraction": 0.75, "min_kept": 2}
    # job costs (a start's price learned, not given) only where the name says so
    costs = metadata["job_costs"]
    assert (costs is not None and costs["start_seconds_given"] is None) == ("-costs" in method)
    # ten random starts divided by the workers and the start only where the name says so
    candidates = metadata["candidates"]
    r10s = (candidates["num_initial_random"], candidates["divide_initial_random"],
            candidates["divide_initial_random_by_start"])
    assert r10s == ((10, True, True) if method.endswith("-r10s") else (1, False, False))


def test_every_variant_of_ours_is_covered():
    ours = {name for name, (preset, _) in VARIANTS.items() if preset in ("DyHPO", "DeepPowerLaw")}
    assert ours == {f"{m}{s}" for m in ("DyHPO", "DeepPowerLaw")
                    for s in ("", "-no-completion", "-no-depth-gate", "-papers", "-costs", "-costs-r10s")}
