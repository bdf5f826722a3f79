"""What becomes of paused trials' checkpoints: how many are kept, and what a resumed trial
that lost its checkpoint becomes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syne_dyhpo.checks import checked_flag, checked_integer


@dataclass(frozen=True)
class PausedCheckpoints:
    """Housekeeping of paused trials' checkpoints (neither paper discusses it).

    :param max_kept: optional cap on the number of paused trials whose checkpoints are kept.
        After each decision, paused trials beyond the cap with the lowest acquisition values
        are *retired*: never resumed again, and their checkpoints deleted (with a backend
        created with ``delete_checkpoints=True``, which also deletes checkpoints of stopped
        trials). Defaults to None (every paused trial stays resumable)
    :param restart_if_lost: what to do when a resumed trial reports epoch 1 again (its
        checkpoint was missing or unreadable and the script started over): False (default)
        marks it failed and stops it; True keeps its earlier curve as an archived,
        never-resumed record and lets the trial continue from scratch
    """

    max_kept: int | None = None
    restart_if_lost: bool = False

    def __post_init__(self) -> None:
        name = type(self).__name__
        object.__setattr__(self, "max_kept", checked_integer(f"{name}.max_kept", self.max_kept, 1, allow_none=True))
        object.__setattr__(self, "restart_if_lost", checked_flag(f"{name}.restart_if_lost", self.restart_if_lost))

    def metadata(self) -> dict[str, Any]:
        return {"max_kept": self.max_kept, "restart_if_lost": self.restart_if_lost}
