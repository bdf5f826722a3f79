"""The benchmark CLI with the speed variants of DyHPO and DeepPowerLaw weighed in
``docs/speed.md`` registered as extra methods (the grid runs in-process: use ``--n-jobs 1``).

    PYTHONPATH=. python benchmarks/speed_variants.py --methods DPL-s4f500 --data ... --n-jobs 1 \\
        --results-dir /work/results-speed/variants

Each variant is the method's current defaults with the settings named here replaced.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

from benchmarks import run_benchmarks, runner  # noqa: E402


def _variant(class_name: str, **overrides):
    def factory(d, cs, configs, seed):
        import syne_dyhpo

        return getattr(syne_dyhpo, class_name)(
            cs, metric=d.metric, do_minimize=d.do_minimize, time_attr=d.time_attr, max_t=d.max_t,
            random_seed=seed, candidate_configs=configs, max_resource_attr=runner.SEGMENT_END_ATTR,
            **{k: v() for k, v in overrides.items()},
        )

    return factory


def _gp(**kw):
    from dataclasses import replace

    from syne_dyhpo.methods.dyhpo import DEFAULT_GP_CONFIG

    return lambda: replace(DEFAULT_GP_CONFIG, **kw)


def _pl(**kw):
    from dataclasses import replace

    from syne_dyhpo.methods.deep_power_law import DEFAULT_POWER_LAW_CONFIG

    return lambda: replace(DEFAULT_POWER_LAW_CONFIG, **kw)


def _schedule(**kw):
    from syne_dyhpo.core.policy import FitSchedule

    return lambda: FitSchedule(**kw)


VARIANTS = {
    # DyHPO: refine on evidence of misfit (sign test at level p), at the latest every 100
    "DyHPO-misfit01": _variant("DyHPO", fit_schedule=_schedule(refine_every=100, refit_growth=4.0, refine_on_misfit=0.01)),
    "DyHPO-misfit001": _variant("DyHPO", fit_schedule=_schedule(refine_every=100, refit_growth=4.0, refine_on_misfit=0.001)),
    # ... and the conditioning set bounded at 512 rows (exact up to 640)
    "DyHPO-misfit01-c512": _variant("DyHPO", fit_schedule=_schedule(refine_every=100, refit_growth=4.0, refine_on_misfit=0.01),
                                    surrogate_config=_gp(max_condition_points=512)),
    # DPL: minibatch steps per refinement (every observation) / per fit from scratch
    "DPL-s4f500": _variant("DeepPowerLaw", surrogate_config=_pl(max_refine_steps=4, max_fit_steps=500)),
    "DPL-s2f250": _variant("DeepPowerLaw", surrogate_config=_pl(max_refine_steps=2, max_fit_steps=250)),
}

for _name, _factory in VARIANTS.items():
    runner.register_method(_name, _factory)

if __name__ == "__main__":
    sys.exit(run_benchmarks.main())
