"""A fast stand-in for a checkpointed training script (no torch): ``tests/e2e/test_continuation.py``
runs many segments with it. Loss ``(x - 0.3)^2 + 1 / epoch``, epochs of 0.1 to 0.6 s; like ``launch/train_mlp.py`` it
resumes from its checkpoint at the next epoch, stops after ``--epochs`` and checkpoints each
epoch (atomically) before reporting it. ``--linger S`` keeps the process alive S seconds after
its last epoch (a job the tuner has to kill, or an orphan if the tuner dies).
"""

import argparse
import json
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--linger", type=float, default=0.0)
    parser.add_argument("--st_checkpoint_dir", required=True)
    args, _ = parser.parse_known_args()
    path = os.path.join(args.st_checkpoint_dir, "checkpoint.json")
    start = 1
    if os.path.exists(path):
        with open(path) as f:
            start = json.load(f)["epoch"] + 1
    for epoch in range(start, args.epochs + 1):
        time.sleep(0.1 + 0.5 * args.x)  # "training": jobs of different configs take different times
        os.makedirs(args.st_checkpoint_dir, exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump({"epoch": epoch}, f)
        os.replace(path + ".tmp", path)
        result = {"epoch": epoch, "loss": (args.x - 0.3) ** 2 + 1.0 / epoch, "st_worker_timestamp": time.time()}
        print(f"[tune-metric]: {json.dumps(result)}", flush=True)
    time.sleep(args.linger)


if __name__ == "__main__":
    main()
