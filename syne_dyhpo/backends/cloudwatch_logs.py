"""
Reading a SageMaker training job's log from CloudWatch Logs, incrementally, and the
metrics Syne Tune's :class:`~syne_tune.Reporter` printed into it.

SageMaker writes a job's stdout and stderr to the log group
``/aws/sagemaker/TrainingJobs``, one stream per host named
``<job name>/algo-<host>-<epoch seconds>`` (a job restarted on a new instance gets a
new stream). :class:`JobLogTail` remembers the forward token of every stream it read,
so each call returns only the events that arrived since the previous call: every line
is returned exactly once, in order, however often the log is polled. (Syne Tune 0.13
re-read whole logs on every poll, and matched streams by the bare job name, so job
``x-1`` also read the streams of job ``x-10``.)
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from syne_tune.constants import ST_METRIC_TAG, ST_WORKER_TIMESTAMP

logger = logging.getLogger(__name__)

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
"""Log group SageMaker writes training job logs to."""

# The line Reporter prints (syne_tune/report.py): "[tune-metric]: {json}"
_METRIC_LINE = re.compile(r"\[" + re.escape(ST_METRIC_TAG) + r"\]: (.*)$")

# Pages read from one stream per call; a bound against a token that never settles
_MAX_PAGES = 1000


@dataclass(frozen=True)
class LogLine:
    """
    One log event.

    :param timestamp: Event time in milliseconds since the epoch (CloudWatch's unit)
    :param message: The line, without its newline
    :param stream: Name of the log stream it came from
    """

    timestamp: int
    message: str
    stream: str


class JobLogTail:
    """
    Incremental reader of one training job's log (the streams of one host).

    The client is passed to :meth:`read_new` rather than kept, so that a tail can be
    pickled with the backend (Syne Tune's ``Tuner.save``).

    :param job_name: Training job name
    :param host: Host whose streams are read. Default "algo-1": with one instance per
        job this is the only one; with several, every host runs the script and the
        first host's report is the one kept
    :param page_limit: ``limit`` passed to ``get_log_events`` (events per page);
        None: the service's default (up to 10000 events / 1 MB)
    :param discover_interval: Once a stream is known, look for new ones (a host
        restarted on a new instance) at most this often, in seconds, and on every
        ``final`` read. ``DescribeLogStreams`` has a low request quota (a few per second
        per account), shared by all running trials. Defaults to 30
    """

    def __init__(
        self,
        job_name: str,
        host: str = "algo-1",
        page_limit: int | None = None,
        discover_interval: float = 30.0,
    ):
        self.job_name = job_name
        # "job/algo-1-" and not "job": the job name of a resumed segment ("...-1-1")
        # must not match the first segment's prefix ("...-1-")
        self._prefix = f"{job_name}/{host}-"
        self._page_limit = page_limit
        self._discover_interval = discover_interval
        self._last_discovery: float | None = None
        self._tokens: dict[str, str | None] = {}  # stream name -> next forward token
        self._stream_order: list[str] = []

    @property
    def streams(self) -> list[str]:
        """Names of the streams found so far, in the order they are read."""
        return list(self._stream_order)

    def read_new(self, logs_client: Any, final: bool = False) -> list[LogLine]:
        """
        :param logs_client: boto3 CloudWatch Logs client
        :param final: The job has ended: look for new streams whatever the interval
        :return: Events that arrived since the previous call (all events on the first
            call), stream by stream in order of stream creation, each stream in event
            order. Empty if the log group or the job's streams do not exist yet (the
            job has not started writing)
        :raises botocore.exceptions.ClientError: on other service errors; the tail's
            position is kept, so the next call returns what this one did not
        """
        now = time.monotonic()
        if (final or not self._stream_order or self._last_discovery is None
                or now - self._last_discovery >= self._discover_interval):
            self._discover_streams(logs_client)
            self._last_discovery = now
        lines: list[LogLine] = []
        for stream in self._stream_order:
            lines += self._read_stream(logs_client, stream)
        return lines

    def _discover_streams(self, client: Any) -> None:
        found: list[tuple[int, str]] = []
        kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": self._prefix}
        try:
            while True:
                response = client.describe_log_streams(**kwargs)
                found += [(s.get("creationTime", 0), s["logStreamName"]) for s in response.get("logStreams", [])]
                token = response.get("nextToken")
                if not token or token == kwargs.get("nextToken"):
                    break
                kwargs["nextToken"] = token
        except client.exceptions.ResourceNotFoundException:
            return  # no log group yet: no job of this account has written a log
        for _, name in sorted(found):
            if name not in self._tokens:
                self._tokens[name] = None
                self._stream_order.append(name)

    def _read_stream(self, client: Any, stream: str) -> list[LogLine]:
        lines: list[LogLine] = []
        for _ in range(_MAX_PAGES):
            token = self._tokens[stream]
            kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True}
            if token is not None:
                kwargs["nextToken"] = token
            if self._page_limit is not None:
                kwargs["limit"] = self._page_limit
            response = client.get_log_events(**kwargs)
            lines += [
                LogLine(timestamp=int(e.get("timestamp", 0)), message=e.get("message", "").rstrip("\n"), stream=stream)
                for e in response.get("events", [])
            ]
            new_token = response.get("nextForwardToken")
            if new_token is None or new_token == token:
                break  # CloudWatch returns the token it was given at the end of the stream
            # remember the position only once its events are in `lines`
            self._tokens[stream] = new_token
        return lines


def metrics_from_log_lines(lines: list[LogLine], job_name: str = "") -> list[dict[str, Any]]:
    """
    Extracts the results :class:`~syne_tune.Reporter` printed (``[tune-metric]: {...}``
    lines), in order. A line whose JSON cannot be parsed (e.g. cut by a crash) is
    skipped with a warning instead of failing the tuner. A result without
    ``st_worker_timestamp`` (a line printed by hand) gets the log event's time, since
    Syne Tune sorts results by it.

    :param lines: Log lines, in order
    :param job_name: Used in warnings
    :return: Reported results
    """
    results = []
    for line in lines:
        match = _METRIC_LINE.search(line.message)
        if match is None:
            continue
        payload = match.group(1)
        # like Syne Tune's own parser, the JSON object ends at the last "}" of the line
        payload = payload[: payload.rfind("}") + 1]
        try:
            result = json.loads(payload)
        except json.JSONDecodeError as ex:
            logger.warning(f"job {job_name}: skipping unparsable metric line {line.message!r} ({ex})")
            continue
        if not isinstance(result, dict):
            logger.warning(f"job {job_name}: skipping metric line that is not a JSON object: {line.message!r}")
            continue
        result.setdefault(ST_WORKER_TIMESTAMP, line.timestamp / 1000.0)
        results.append(result)
    return results
