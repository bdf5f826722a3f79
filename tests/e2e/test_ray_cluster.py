"""Ray Tune front end on two Ray nodes (``ray.cluster_utils.Cluster``: a head and a second node
on this machine): a paused trial resumed on the other node continues from its checkpoint,
which travels through the run's ``storage_path``, with nothing lost."""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
from ray import tune  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from syne_tune.config_space import uniform  # noqa: E402

from syne_dyhpo import CandidateOptions, DyHPOSurrogate, FreezeThawOptions  # noqa: E402
from syne_dyhpo.ray_tune import ray_scheduler  # noqa: E402
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGPConfig  # noqa: E402

MAX_EPOCHS = 3
NODES = ("node_a", "node_b")  # a custom resource per node: a trial needs one, so it runs there


def trainable(config: dict) -> None:
    """One report per epoch with a checkpoint holding every epoch trained so far (its history);
    every epoch is logged as ``trial epoch restored_from node``."""
    trial_id = tune.get_context().get_trial_id()
    node = ray.get_runtime_context().get_node_id()
    history: list[int] = []
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            history = json.loads(Path(d, "state.json").read_text())["history"]
    restored_from = history[-1] if history else 0
    for epoch in range(restored_from + 1, config["max_epochs"] + 1):
        time.sleep(0.05)
        history.append(epoch)
        with open(config["log_path"], "a") as f:
            f.write(f"{trial_id} {epoch} {restored_from} {node}\n")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "state.json").write_text(json.dumps({"history": history}))
            tune.report({"epoch": epoch, "loss": (config["x"] - 0.3) ** 2 + 1.0 / epoch, "node": node},
                        checkpoint=tune.Checkpoint.from_directory(d))


class ResumeOnTheOtherNode(tune.Callback):
    """Before a paused trial can be resumed, it needs the other node's resource: Ray resumes it
    there, and nowhere else."""

    def __init__(self, resource_of_node: dict[str, str]):
        self.resource_of_node = resource_of_node

    def on_step_begin(self, iteration: int, trials: list, **info) -> None:
        for trial in trials:
            node = trial.last_result.get("node")
            if trial.status == "PAUSED" and node is not None:
                other = next(r for n, r in self.resource_of_node.items() if n != node)
                if other not in trial.placement_group_factory.required_resources:
                    trial.update_resources({"CPU": 1, other: 1})


@pytest.fixture(scope="module")
def two_nodes():
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {NODES[0]: 1}, "include_dashboard": False},
    )
    second = cluster.add_node(num_cpus=1, resources={NODES[1]: 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    yield {cluster.head_node.node_id: NODES[0], second.node_id: NODES[1]}
    ray.shutdown()
    cluster.shutdown()


@pytest.mark.slow  # starts a two-node Ray cluster and a Tuner
def test_a_trial_resumed_on_the_other_node_continues_from_its_checkpoint(two_nodes, tmp_path):
    log_path = tmp_path / "epochs.log"
    sched = ray_scheduler(
        "dyhpo", {"x": uniform(0.0, 1.0)}, metric="loss", mode="min", max_t=MAX_EPOCHS, max_concurrent=1,
        max_num_trials=2, random_seed=3, options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)),
        surrogate=DyHPOSurrogate(model=DeepKernelGPConfig(max_iterations=30, refine_iterations=5)),
    )
    results = tune.Tuner(
        tune.with_resources(trainable, tune.PlacementGroupFactory([{"CPU": 1, NODES[0]: 1}])),
        param_space={"max_epochs": MAX_EPOCHS, "log_path": str(log_path)},
        tune_config=sched.tune_config(reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "storage"), name="exp", verbose=0,
                                  callbacks=[ResumeOnTheOtherNode(two_nodes)]),
    ).fit()
    assert not results.errors, results.errors

    lines = [line.split() for line in log_path.read_text().splitlines()]
    by_trial: dict[str, list[tuple[int, int, str]]] = {}
    for t, e, r, node in lines:
        by_trial.setdefault(t, []).append((int(e), int(r), node))
    assert len(by_trial) == 2
    moved = 0
    for t, epochs in by_trial.items():
        # each epoch trained once, in order, from 1 to max_t
        assert [e for e, _, _ in epochs] == list(range(1, MAX_EPOCHS + 1)), (t, epochs)
        for (e0, _, node0), (_e1, restored_from, node1) in itertools.pairwise(epochs):
            if node1 != node0:  # resumed on the other node: from the checkpoint of the last epoch
                assert restored_from == e0, (t, epochs)
                moved += 1
    assert moved >= 1, f"no trial was resumed on the other node: {by_trial}"
    assert sched.num_resumes >= 1
    for _int_id, paused_after, first_after in sched.resume_log:
        assert first_after == paused_after + 1

    # nothing lost: each trial's last checkpoint, in the storage path, holds every epoch it trained
    for result in results:
        assert result.metrics["epoch"] == MAX_EPOCHS
        assert Path(result.checkpoint.path).is_relative_to(tmp_path / "storage")
        with result.checkpoint.as_directory() as d:
            assert json.loads(Path(d, "state.json").read_text())["history"] == list(range(1, MAX_EPOCHS + 1))
