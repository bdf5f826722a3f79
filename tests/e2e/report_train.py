"""A fast checkpointed training stand-in (no torch) with a crashing and a diverging region, for
``tests/e2e/test_report_e2e.py``. Loss ``(x - 0.3)^2 + 1 / epoch``, epochs of 0.05 to 0.15 s; it
resumes from its checkpoint at the next epoch, stops after ``--epochs`` and checkpoints each
epoch (atomically) before reporting it. ``x < 0.02``: the job crashes (exit status 1) before
its first epoch; ``x > 0.98``: it reports NaN at its first epoch.
"""

import argparse
import json
import os
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--st_checkpoint_dir", required=True)
    args, _ = parser.parse_known_args()
    path = os.path.join(args.st_checkpoint_dir, "checkpoint.json")
    start = 1
    if os.path.exists(path):
        with open(path) as f:
            start = json.load(f)["epoch"] + 1
    if args.x < 0.02:
        print("crashing on purpose", file=sys.stderr, flush=True)
        sys.exit(1)
    for epoch in range(start, args.epochs + 1):
        time.sleep(0.05 + 0.1 * args.x)
        os.makedirs(args.st_checkpoint_dir, exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump({"epoch": epoch}, f)
        os.replace(path + ".tmp", path)
        loss = float("nan") if args.x > 0.98 else (args.x - 0.3) ** 2 + 1.0 / epoch
        result = {"epoch": epoch, "loss": loss, "st_worker_timestamp": time.time()}
        print(f"[tune-metric]: {json.dumps(result)}", flush=True)



if __name__ == "__main__":
    main()
