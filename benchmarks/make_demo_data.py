"""Builds the small benchmark copy shipped in benchmarks/data from the development data.

The repo ships, for its demo and tests, a subset of ../shared/data: 2 LCBench and 2 TaskSet
tasks, 300 configurations each (the same random rows for every task of a benchmark), only
the default metric and the elapsed-time objective. Provenance and licences are those of the
source folders (see benchmarks/data/README.md). Re-run with:

    python benchmarks/make_demo_data.py --source ../shared/data --out benchmarks/data
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

TASKS = {
    "lcbench": ["Australian", "car"],
    "taskset": [
        "FixedTextRNNClassification_imdb_patch32_GRU64_avg_bs128",
        "FixedTextRNNClassification_imdb_patch32_VRNN64_tanh_avg_bs128",
    ],
}


def subset(source: Path, out: Path, name: str, tasks: list[str], num_configs: int, seed: int) -> None:
    from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular, deserialize, serialize

    meta = json.loads((source / name / "metadata.json").read_text())
    keep = [meta["default_metric"], meta["metric_elapsed_time"]]
    bbs = deserialize(str(source / name))
    first = bbs[tasks[0]]
    rows = np.sort(np.random.RandomState(seed).choice(len(first.hyperparameters), num_configs, replace=False))
    small = {}
    for task in tasks:
        bb = bbs[task]
        cols = [bb.objectives_names.index(k) for k in keep]
        small[task] = BlackboxTabular(
            hyperparameters=bb.hyperparameters.iloc[rows].reset_index(drop=True),
            configuration_space=bb.configuration_space,
            fidelity_space=bb.fidelity_space,
            objectives_evaluations=bb.objectives_evaluations[rows][..., cols],
            fidelity_values=bb.fidelity_values,
            objectives_names=keep,
        )
    meta.update(
        objectives_names=keep,
        task_names=tasks,
        subset=f"{num_configs} configurations (rows drawn with numpy seed {seed}) of {source / name}",
    )
    serialize(small, str(out / name), metadata=meta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/data"))
    parser.add_argument("--num-configs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name, tasks in TASKS.items():
        subset(args.source, args.out, name, tasks, args.num_configs, args.seed)
        print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
