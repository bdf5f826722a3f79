"""The decision log: one row per decision of a freeze-thaw scheduler, and why it was made.

A row says when (the Tuner's clock), on which reporting trial and epoch, what the scheduler
answered for it (CONTINUE / PAUSE / STOP), what the next free worker gets (``next``: the
reporting trial goes on, a paused trial is resumed, a new configuration is started, or
nothing), why (:data:`~syne_dyhpo.core.reasons.REASONS`), the acquisition values of the
winner and of the runner-up, the model's prediction for the winner where the method has one,
the kind of fit the decision made, and the decision's milliseconds. Rows are kept in plain
Python lists (the core install needs no table library for them);
:meth:`DecisionLog.dataframe` converts them on request.

The log observes: the scheduler calls it from its one path through each callback
(:meth:`DecisionLog.result_arrived`, :meth:`DecisionLog.decided`, :meth:`DecisionLog.answered`,
:meth:`DecisionLog.trial_ended`, ...) with what it needs as arguments, above all the
:class:`~syne_dyhpo.core.decision.Decision`, which says why it was made. A disabled log's calls
do nothing, and a failure of the log is a warning, never the end of the tuning.

The log is part of the scheduler, so it is pickled with it (Syne Tune's ``Tuner.save`` /
``Tuner.load``). Once the scheduler knows the Tuner it runs in
(:func:`~syne_dyhpo.core.tuner_link.calling_tuner`), every
finished row is also appended to :data:`LOG_FILENAME` in the Tuner's experiment folder, so the
log is on disk while the run goes and after a crash. A row whose ``next`` is a new
configuration is finished (and written) once that configuration got its trial id.

Sessions: every run (every process) that writes into a folder's :data:`LOG_FILENAME` is a
session of its own, numbered in the ``session`` column. ``decision`` counts from 0 within each
session, so that (``session``, ``decision``) names one row of the file, and ``time`` restarts
at 0 with each session's clock. The first run in a folder is session 0; a run that continues in
that folder is numbered one after the highest session in the file, however it continues:
``Tuner.load`` with the saved scheduler (:meth:`DecisionLog.new_session`, then
:meth:`DecisionLog.bind`), a new scheduler set on a loaded tuner (``tuner.scheduler =
DyHPO(...)``), a loaded tuner started twice from the same save, or any other scheduler bound
to a folder whose log holds its session number already (:meth:`DecisionLog.bind` renumbers
it). Rows in the file are never rewritten and no key is written twice. Rows are appended as
they are finished (a decision waiting for a free worker after later ones, a decision pending
at a save possibly after rows of the next session), so sort by (``session``, ``decision``)
for the order the decisions were made. A scheduler holds (:meth:`DecisionLog.records`) the
rows of the sessions it made, those before a ``Tuner.load`` included; a new scheduler set on
a loaded tuner holds only its own.

The prediction logged for the winner is the one its acquisition value was computed from, at
the epoch the method's acquisition asks the model about: the next epoch for DyHPO, ``max_t``
for DeepPowerLaw. Asking DeepPowerLaw's ensemble once more at the next epoch would cost an
extra forward pass, about 2.5 % of a decision (``benchmarks/latency.py --log-overhead``), more
than the log's whole budget of 2 %.
"""

from __future__ import annotations

import csv
import functools
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from syne_dyhpo.core.run_info import RUN_INFO_FILENAME

logger = logging.getLogger(__name__)

LOG_FILENAME = "decision_log.csv"

COLUMNS = (
    "session",  # 0 for the first run in a folder; then 1 + the highest in the file (see above)
    "decision",  # order of the decisions within a session
    "time",  # the Tuner's clock (st_tuner_time; restarts at 0 in each session)
    "trial_id",  # reporting trial (empty for a free worker asking)
    "epoch",  # its last epoch
    "action",  # CONTINUE / PAUSE / STOP for the reporting trial (empty if none)
    "next",  # what the next free worker gets: continue / resume / start / nothing / dropped
    "next_trial_id",  # the trial that goes on, is resumed, or was started
    "next_epoch",  # the epoch it trains to next (end of its segment)
    "reason",  # one of REASONS (syne_dyhpo.core.reasons)
    "acquisition",  # the winner's acquisition value (log EI)
    "runner_up",  # the best acquisition value of the other candidates
    "pred_mean",  # the model's prediction for the winner at next_epoch (metric units), if its
    "pred_std",  # acquisition predicted there (DyHPO)
    "pred_mean_max_t",  # ... at max_t, if its acquisition predicted there (DeepPowerLaw, and
    "pred_std_max_t",  # any method for a winner whose next epoch is max_t)
    "fit",  # scratch / refine / rescale / condition / cached (empty: no model used)
    "ms",  # milliseconds of the scheduler call that made the decision
)


_ROW_INDEX = {name: i for i, name in enumerate(COLUMNS)}
_MISSING = object()


def _never_fails(what: str) -> Callable:
    """Decorates a method of the log: a failure is a warning naming ``what`` (the log must
    never stop the tuning)."""

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def guarded(*args: Any, **kwargs: Any) -> None:
            try:
                method(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - the log must never stop the tuning
                logger.warning(f"Decision log: {what} failed ({type(err).__name__}: {err})")

        return guarded

    return decorate


class DecisionLog:
    """The rows of a scheduler's decisions (see the module docstring).

    :param enabled: keep rows (False: every call does nothing; for measuring the log's cost)
    """

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.rows: list[list[Any]] = []
        self.session = 0
        self.num_decisions = 0
        self.path: str | None = None  # the CSV file rows are appended to
        self.bound = False  # the Tuner (or a front end) of this session was looked for
        self._session_path: str | None = None  # the file this session writes to, once bound
        self._session_start = 0  # index in rows of this session's first row made in this process
        self._unwritten: list[list[Any]] = []  # rows finished while no file was bound
        self._open: dict[int, tuple[Any, list[Any]]] = {}  # id(decision) -> (decision, row)
        #: (configuration, row) of starts carried out whose trials have no id yet
        self._starting: list[tuple[dict[str, Any], list[Any]]] = []
        self._start_stamp: float | None = None  # time.time() at the start of the Tuner's run
        self._perf_start: float | None = None  # without a Tuner: the first call's perf_counter
        self._results_clock = False  # results carry the Tuner's time (the simulator)
        self._last_time = 0.0
        self._file: TextIO | None = None  # the CSV file, open for appending (line-buffered: each row is on disk)
        self._writer: Any = None  # a csv.writer on _file

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # the open rows' decisions are the scheduler's pending ones (pickled with it): kept as a
        # list, rebuilt into a dict of their new ids when unpickled
        state["_open"] = list(self._open.values())
        state["_file"] = state["_writer"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open = {id(decision): (decision, row) for decision, row in state["_open"]}
        self.bound = False  # the loaded tuner tells its folder and clock again
        # a new process: its rows are a session of their own in the file it binds to (see bind),
        # kept in memory until it binds; the rows before are the saved process's (written by it,
        # or by this one once carried out)
        self.path = None
        self._session_path = None
        self._session_start = len(self.rows)
        self._start_stamp = None
        self._perf_start = None
        self._last_time = 0.0  # the Tuner's clock starts again at 0

    # ----- the clock ---------------------------------------------------------------------------

    def now(self, result: dict[str, Any] | None = None) -> float:
        """The Tuner's clock: ``st_tuner_time`` of the result if it has one (Syne Tune's simulator
        sets it), else seconds since the Tuner's run started (what Syne Tune stores as
        ``st_tuner_time`` for real backends), else the last time known (a simulator's free
        worker) or, driven without a Tuner, seconds since the first call."""
        if result is not None and "st_tuner_time" in result:
            self._results_clock = True
            self._last_time = float(result["st_tuner_time"])
        elif self._results_clock:
            pass
        elif self._start_stamp is not None:
            self._last_time = time.time() - self._start_stamp
        else:
            if self._perf_start is None:
                self._perf_start = time.perf_counter()
            self._last_time = time.perf_counter() - self._perf_start
        return self._last_time

    # ----- binding to a folder -----------------------------------------------------------------

    def bind(self, folder: str | os.PathLike | None, start_timestamp: float | None = None,
             run_info: dict[str, Any] | None = None) -> None:
        """Appends rows to :data:`LOG_FILENAME` in ``folder`` from now on (None: keep them in
        memory only) and reads time from ``start_timestamp`` (``time.time()`` when the run
        started; None: see :meth:`now`). Rows finished while no file was bound are written now
        (into a new file: every row finished so far).

        The first time a session binds to a file that holds rows of its session number or a
        higher one (another run wrote there: e.g. a new scheduler set on a tuner loaded with
        ``Tuner.load``), the session takes the number after the highest in the file and counts
        its decisions from 0, so that no (``session``, ``decision``) key is written twice (see
        the module docstring). So does a log unpickled in another process and bound without
        :meth:`new_session`: the rows it was pickled with stay as they are.

        :param run_info: written to :data:`~syne_dyhpo.core.run_info.RUN_INFO_FILENAME` in ``folder`` for the report
        """
        self.bound = True
        if start_timestamp is not None:
            self._start_stamp = float(start_timestamp)
        if folder is None or not self.enabled:
            return
        os.makedirs(folder, exist_ok=True)
        if self._file is not None:
            self._file.close()
            self._file = None
        self.path = os.path.join(os.fspath(folder), LOG_FILENAME)
        if run_info is not None:
            with open(os.path.join(os.fspath(folder), RUN_INFO_FILENAME), "w") as f:
                json.dump(run_info, f, indent=1, default=str)
        unwritten, self._unwritten = self._unwritten, []
        if not os.path.exists(self.path):  # the whole log so far
            open_rows = {id(row) for _, row in [*self._open.values(), *self._starting]}
            unwritten = [row for row in self.rows if id(row) not in open_rows]
        elif self._session_path != self.path:  # this session's first rows in a file with rows
            highest = highest_session(self.path)
            if highest is not None and highest >= self.session:
                self._renumber_session(highest + 1)
        self._write(unwritten)
        self._session_path = self.path

    def _renumber_session(self, session: int) -> None:
        """This session becomes ``session``: the rows this process made in it so far are
        renumbered, their decisions counted from 0."""
        rows = self.rows[self._session_start:]
        for decision, row in enumerate(rows):
            row[0], row[1] = session, decision
        self.session = session
        self.num_decisions = len(rows)

    def _write(self, rows: Iterable[list[Any]]) -> None:
        if self.path is None:
            self._unwritten.extend(rows)
            return
        if self._file is None:
            new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
            # kept open across calls (one row per decision), closed by close()
            self._file = open(self.path, "a", newline="", buffering=1)  # noqa: SIM115
            self._writer = csv.writer(self._file)
            if new:
                self._writer.writerow(COLUMNS)
        self._writer.writerows([_csv_value(v) for v in row] for row in rows)

    # ----- the scheduler's calls -----------------------------------------------------------------

    #: the row of the decision made at the result being answered, and that decision
    _answer_due: tuple[list[Any] | None, Any] | None = None

    def result_arrived(self, result: dict[str, Any]) -> None:
        """A result arrives at the scheduler: its clock (the simulator's ``st_tuner_time``) is
        the time of the rows it leads to."""
        self._answer_due = None
        if self.enabled:
            self.now(result)

    @_never_fails("the row of a decision")
    def decided(self, decision: Any, reporting: Any, trials: Mapping[int, Any], max_t: int, started: float) -> None:
        """Adds the row of a decision just made (its answer for the reporting trial is set by
        :meth:`answered`), and a row per trial the decision retired.

        :param decision: the :class:`~syne_dyhpo.core.decision.Decision` (None: nothing to
            choose from)
        :param reporting: the reporting trial's record (None: a free worker asked)
        :param trials: the scheduler's trial records by id (the retired trials' last epochs)
        :param max_t: the maximum budget (the epoch of ``pred_mean_max_t``)
        :param started: ``time.perf_counter()`` when the scheduler call began
        """
        if not self.enabled:
            return
        now = self.now()
        trial_id, epoch = (None, None) if reporting is None else (reporting.trial_id, reporting.last_epoch)
        if decision is None:
            next_, next_id, next_epoch, why = "nothing", None, None, {"reason": "nothing_left"}
        else:
            next_epoch, why = decision.epoch, _why(decision, max_t)
            if decision.kind.value == "start":
                next_, next_id = "start", None
            else:
                next_ = "continue" if decision.trial_id == trial_id else "resume"
                next_id = decision.trial_id
        ms = 1000.0 * (time.perf_counter() - started)
        # written once carried out (the answer for the reporting trial is set before)
        row = self.add(now, trial_id, epoch, next_=next_, next_trial_id=next_id, next_epoch=next_epoch, why=why,
                       ms=ms, decision=decision, hold=reporting is not None)
        if reporting is not None:
            self._answer_due = (row, decision)
        elif decision is not None:  # suggest() carries it out at once
            self.carried_out(decision)
        for retired in () if decision is None else decision.retire:
            self.add(now, retired, trials[retired].last_epoch, reason="retired")

    @_never_fails("the row of a result")
    def answered(self, answer: str, started: float) -> None:
        """The scheduler answered the result whose decision :meth:`decided` logged: sets the
        answer on its row (written now, unless the decision waits for a free worker).

        :param answer: CONTINUE / PAUSE / STOP
        :param started: ``time.perf_counter()`` when the scheduler call began
        """
        due, self._answer_due = self._answer_due, None
        if due is None:
            return
        row, decision = due
        if row is None:
            return
        action = str(answer).upper()
        self.set(row, action=action, ms=1000.0 * (time.perf_counter() - started))
        if row[_ROW_INDEX["next"]] == "continue" and action != "CONTINUE":
            self.set(row, next="resume")  # the job stops itself at its segment end: resumed at once
        if decision is None:
            self.release(row)
        elif action == "CONTINUE":  # the reporting trial goes on: nothing pending
            self.carried_out(decision)

    @_never_fails("the row of a result")
    def trial_ended(self, trial_id: int, epoch: int, status: str, started: float) -> None:
        """A running trial's result stopped it without a decision: it reached ``max_t``
        (``status`` "finished"), diverged ("diverged"), or restarted after its checkpoint was
        lost.

        :param status: the trial's status after the result (a ``TrialStatus`` value)
        :param started: ``time.perf_counter()`` when the scheduler call began
        """
        reason = {"finished": "max_t", "diverged": "diverged"}.get(status, "lost_checkpoint")
        self.add(self.now(), trial_id, epoch, action="STOP", reason=reason,
                 ms=1000.0 * (time.perf_counter() - started))

    # ----- rows ----------------------------------------------------------------------------------

    def add(self, time_: float, trial_id: int | None = None, epoch: int | None = None, action: str = "",
            next_: str = "nothing", next_trial_id: int | None = None, next_epoch: int | None = None,
            reason: str = "", why: dict[str, Any] | None = None, ms: float | None = None,
            decision: Any = None, hold: bool = False) -> list[Any] | None:
        """Adds a row and writes it, unless ``hold`` (fields still to be set: written by
        :meth:`release`) or ``decision`` is given: a decision not carried out yet, written
        once it is (:meth:`carried_out`; a start once its trial has an id, :meth:`started`)
        or once it is given up (:meth:`dropped`)."""
        if not self.enabled:
            return None
        row = [self.session, self.num_decisions, time_, trial_id, epoch, action, next_, next_trial_id, next_epoch,
               reason, None, None, None, None, None, None, "", ms]
        self.num_decisions += 1
        if why:
            for key, value in why.items():
                row[_ROW_INDEX[key]] = value
        self.rows.append(row)
        if decision is not None:
            self._open[id(decision)] = (decision, row)
        elif not hold:
            self._write([row])
        return row

    def release(self, row: list[Any] | None) -> None:
        """Writes a row added with ``hold`` (unless it waits for its trial id)."""
        if row is not None and not any(open_row is row for _, open_row in self._open.values()):
            self._write([row])

    def set(self, row: list[Any] | None, **fields: Any) -> None:
        """Changes fields of a row not written yet (see :meth:`add`)."""
        if row is not None:
            for key, value in fields.items():
                row[_ROW_INDEX[key]] = value

    def carried_out(self, decision: Any) -> None:
        """A decision is carried out now; a start's trial id comes with :meth:`started`."""
        entry = self._open.pop(id(decision), None)
        if entry is None:
            return
        row = entry[1]
        if row[_ROW_INDEX["next"]] == "start":
            self._starting.append((decision.config, row))
        else:
            self._write([row])

    def started(self, trial_id: int, config: dict[str, Any], ignore: str | None = None) -> None:
        """A trial got ``trial_id`` for ``config``: the row of the start carried out for that
        configuration is finished (a trial the scheduler did not start has none).

        :param ignore: a key set anew on every start (``max_resource_attr``), not compared
        """
        row = self._pop_starting(config, ignore)
        if row is not None:
            row[_ROW_INDEX["next_trial_id"]] = trial_id
            self._write([row])

    def start_given_up(self, config: dict[str, Any], ignore: str | None = None) -> None:
        """A start carried out will never get a trial (a front end discarded the configuration
        before starting it): its row is finished as ``dropped``.

        :param config: the configuration of the start
        :param ignore: see :meth:`started`
        """
        row = self._pop_starting(config, ignore)
        if row is not None:
            row[_ROW_INDEX["next"]] = "dropped"
            self._write([row])

    def _pop_starting(self, config: dict[str, Any], ignore: str | None) -> list[Any] | None:
        """The row of the first start carried out for ``config`` (``ignore``: a key not
        compared), taken off the starts waiting for their trial ids; None if there is none."""
        match = next((i for i, (c, _) in enumerate(self._starting)
                      if all(config.get(k, _MISSING) == v for k, v in c.items() if k != ignore)), None)
        return None if match is None else self._starting.pop(match)[1]

    def dropped(self, decision: Any) -> None:
        """A decision is given up: the configuration to start was taken, or the trial to
        resume is no longer resumable (e.g. chosen twice, and already resumed)."""
        entry = self._open.pop(id(decision), None)
        if entry is not None:
            entry[1][_ROW_INDEX["next"]] = "dropped"
            self._write([entry[1]])

    def new_session(self) -> None:
        """The scheduler continues after ``Tuner.load``: the next session, decisions numbered
        anew (:meth:`bind` numbers it after the highest session of its file, if that is higher)."""
        self.session += 1
        self.num_decisions = 0
        self._session_path = None
        self._session_start = len(self.rows)

    # ----- reading ---------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts (keys :data:`COLUMNS`), in the order they were made."""
        return [dict(zip(COLUMNS, row)) for row in self.rows]

    def dataframe(self):
        """The rows as a pandas DataFrame (columns :data:`COLUMNS`)."""
        try:
            import pandas as pd
        except ImportError as err:  # pragma: no cover - pandas comes with syne-tune
            raise ImportError("decision_log() needs pandas: pip install pandas") from err
        return pd.DataFrame(self.rows, columns=list(COLUMNS))


def highest_session(path: str | os.PathLike) -> int | None:
    """The highest ``session`` in a decision log file, None if it has no row with one (a value
    that is no whole number is skipped; a file without its header line is read in the order of
    :data:`COLUMNS`).

    :param path: a :data:`LOG_FILENAME`
    """
    highest = None
    with open(path, newline="") as f:
        reader = csv.reader(f)
        column = 0
        for i, line in enumerate(reader):
            if i == 0 and "session" in line:
                column = line.index("session")
                continue
            try:
                session = int(line[column])
            except (IndexError, ValueError):
                continue
            highest = session if highest is None else max(highest, session)
    return highest


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def _why(decision: Any, max_t: int) -> dict[str, Any]:
    """The ``reason``, ``fit``, acquisition and prediction fields of a decision's row (only
    those the decision has)."""
    why: dict[str, Any] = {"reason": decision.reason}
    if decision.fit is not None:
        why["fit"] = decision.fit
    if decision.acquisition is not None:
        why["acquisition"] = decision.acquisition
    if decision.runner_up is not None:
        why["runner_up"] = decision.runner_up
    prediction = decision.prediction
    if prediction is not None:
        if prediction.epoch == decision.epoch:
            why["pred_mean"], why["pred_std"] = prediction.mean, prediction.std
        if prediction.epoch == max_t:
            why["pred_mean_max_t"], why["pred_std_max_t"] = prediction.mean, prediction.std
    return why
