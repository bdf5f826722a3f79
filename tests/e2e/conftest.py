"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def local_ray(request):
    """A local Ray (2 CPUs) for the tests of one module, shut down after them. Ray workers
    cannot import a test module by name, so the requesting module is shipped by value (its
    trainables with it)."""
    ray = pytest.importorskip("ray", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
    ray.cloudpickle.register_pickle_by_value(request.module)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
