"""
Test fixture playing SageMaker's part behind moto's AWS mocks, so that
``syne_dyhpo.backends.sagemaker`` runs offline against the real boto3 API.

What is moto and what is ours:

* moto implements S3, CloudWatch Logs and SageMaker's ``CreateTrainingJob`` /
  ``DescribeTrainingJob`` / ``ListTrainingJobs``. Its training jobs, though, are born
  ``Completed`` and never run: :class:`FakeSageMaker` hooks moto's job creation so a
  new job starts ``InProgress`` (as on SageMaker) and moves it through ``Stopping`` /
  ``Stopped`` / ``Completed`` / ``Failed`` by setting the fields of moto's job record,
  which ``DescribeTrainingJob`` then returns.
* moto has no ``StopTrainingJob``: :class:`OperationStubber`, a botocore ``Stubber``
  limited to that one operation, answers it on the backend's client
  (``{}`` and the job goes ``Stopping``; a ``ValidationException`` for a job that has
  already ended or does not exist, as SageMaker does). Every other call goes to moto.
* :class:`LocalJobRunner` is SageMaker's job runner and training toolkit: for every
  created job it unpacks ``sagemaker_submit_directory`` from the mocked S3 into a
  private folder standing for the container's ``/opt/ml/code``, downloads the job's
  ``checkpoint_s3_uri`` into the folder standing for ``/opt/ml/checkpoints``, runs
  ``python <sagemaker_program> --key value ...`` (JSON-decoded hyperparameters, paths
  under ``/opt/ml`` mapped into that private folder) as a real local process, writes
  each line it prints to the job's CloudWatch stream ``<job>/algo-1-<time>``, uploads
  the checkpoint folder while it runs and a last time when it ends, and ends the job
  ``Completed`` (exit 0), ``Failed`` (exit != 0, with SageMaker's kind of
  ``FailureReason``) or, after a stop request (SIGTERM, like SageMaker), ``Stopped``
  after ``stop_delay`` seconds of ``Stopping``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber
from moto.core.botocore_stubber import BotocoreStubber
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sagemaker import models as sagemaker_models

from syne_dyhpo.backends.cloudwatch_logs import LOG_GROUP
from syne_dyhpo.backends.s3 import S3Location, list_keys

logger = logging.getLogger("sagemaker_fake")

REGION = "us-east-1"
ACCOUNT = DEFAULT_ACCOUNT_ID
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTestRole"
BUCKET = "syne-dyhpo-test-bucket"
TERMINAL = ("Completed", "Failed", "Stopped")


def fake_aws_environment(monkeypatch) -> None:
    """Fake credentials and region, so that nothing can reach a real account."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


class OperationStubber(Stubber):
    """
    botocore ``Stubber`` for one operation of a client, every other call going on to moto.
    A plain Stubber intercepts every operation and needs its responses queued in call
    order; the tuner's calls come in no fixed order, so this one hooks only
    ``operation`` and queues each answer when the call arrives (the Stubber machinery
    still checks the parameters and validates the response against the service model).

    :param client: The boto3 client (the backend's)
    :param operation: API name, e.g. "StopTrainingJob"
    :param answer: Called with the call's parameters; returns the response dict, or a
        pair ``(error code, message)`` for a ``ClientError``
    """

    def __init__(self, client: Any, operation: str, answer: Callable[[dict], Any]):
        super().__init__(client)
        self.operation = operation
        self.method = next(m for m, api in client.meta.method_to_api_mapping.items() if api == operation)
        self.service = client.meta.service_model.service_name
        self._answer = answer
        self.calls: list[dict] = []

    def _events(self) -> list[tuple[str, Any, str]]:
        key = f"{self.service}.{self.operation}"
        return [(f"before-parameter-build.{key}", self._assert_expected_params, f"op_stub_params_{key}"),
                (f"before-call.{key}", self._get_response_handler, f"op_stub_call_{key}")]

    def activate(self):
        for event, handler, unique_id in self._events():
            self.client.meta.events.register_first(event, handler, unique_id=unique_id)

    def deactivate(self):
        for event, _, unique_id in self._events():
            self.client.meta.events.unregister(event, unique_id=unique_id)

    def _assert_expected_params(self, model, params, context, **kwargs):
        self.calls.append(dict(params))
        answer = self._answer(params)
        if isinstance(answer, tuple):
            code, message = answer
            self.add_client_error(self.method, service_error_code=code, service_message=message,
                                  http_status_code=400, expected_params=dict(params))
        else:
            self.add_response(self.method, answer, expected_params=dict(params))
        super()._assert_expected_params(model, params, context, **kwargs)


@dataclass
class JobRecord:
    """What the fake knows about one job."""

    name: str
    created: float = field(default_factory=time.monotonic)
    stop_requested: bool = False
    stream: str | None = None
    last_timestamp: int = 0
    exit_code: int | None = None
    started_from_epoch: int | None = None  # epoch of the checkpoint it started from (runner)


class FakeSageMaker:
    """
    The service side of SageMaker training jobs, on top of moto's records.

    Must be created inside ``moto.mock_aws()``; ``monkeypatch`` undoes the hook.

    :param monkeypatch: pytest's monkeypatch
    :param region: Region of the mocked account
    """

    def __init__(self, monkeypatch, region: str = REGION):
        # moto's in-memory backends are not thread safe (a listing can race an upload
        # in another thread): the job runner's threads and the tuner call it at once, so
        # its request handling is serialised, as a real service would be consistent
        moto_lock = threading.RLock()
        dispatch = BotocoreStubber.__call__

        def locked_dispatch(stubber_self, *args, **kwargs):
            with moto_lock:
                return dispatch(stubber_self, *args, **kwargs)

        monkeypatch.setattr(BotocoreStubber, "__call__", locked_dispatch)
        self.region = region
        self.jobs: dict[str, JobRecord] = {}
        # guards the fake's own state (job records, processes); never held while calling
        # moto, which may hold moto_lock and wait for it (job creation): no lock cycle
        self.lock = threading.RLock()
        self.on_created: Callable[[str], None] | None = None  # set by a job runner
        self.on_stop: Callable[[str], None] | None = None
        self.stubbers: list[OperationStubber] = []
        session = boto3.Session(region_name=region)
        self.s3 = session.client("s3")
        self.logs = session.client("logs")
        self.sagemaker = session.client("sagemaker")
        original = sagemaker_models.SageMakerModelBackend.create_training_job
        fake = self

        def create_training_job(backend_self, *args, **kwargs):
            job = original(backend_self, *args, **kwargs)
            fake._created(job)
            return job

        monkeypatch.setattr(sagemaker_models.SageMakerModelBackend, "create_training_job", create_training_job)

    # ---- job records (moto's) ------------------------------------------------

    def _moto_job(self, name: str):
        return sagemaker_models.sagemaker_backends[ACCOUNT][self.region].training_jobs[name]

    def _created(self, job) -> None:
        # SageMaker answers CreateTrainingJob with a job that is InProgress / Starting
        job.training_job_status = "InProgress"
        job.secondary_status = "Starting"
        job.training_end_time = None
        with self.lock:
            self.jobs[job.training_job_name] = JobRecord(job.training_job_name)
        if self.on_created is not None:
            self.on_created(job.training_job_name)

    def status(self, name: str) -> str:
        return self._moto_job(name).training_job_status

    def set_status(self, name: str, status: str, failure_reason: str | None = None) -> None:
        """Moves a job to ``status`` (what SageMaker's control plane does)."""
        job = self._moto_job(name)
        with self.lock:
            job.secondary_status = {"InProgress": "Training"}.get(status, status)
            if failure_reason is not None:
                job.failure_reason = failure_reason
            if status in TERMINAL:
                job.training_end_time = sagemaker_models.utcnow()
            job.last_modified_time = sagemaker_models.utcnow()
            job.training_job_status = status

    def request(self, name: str) -> dict[str, Any]:
        """The job as ``DescribeTrainingJob`` returns it, hyperparameters JSON-decoded."""
        desc = self.sagemaker.describe_training_job(TrainingJobName=name)
        desc["DecodedHyperParameters"] = {k: _decode(v) for k, v in desc["HyperParameters"].items()}
        return desc

    def stop_training_job(self, name: str) -> str | None:
        """SageMaker's answer to ``StopTrainingJob``: None if accepted, else the error message."""
        with self.lock:
            if name not in self.jobs:
                return f"Requested resource not found: training job {name}"
            status = self.status(name)
            if status in TERMINAL or status == "Stopping":
                return f"The request was rejected because the training job is in status {status}."
            self.jobs[name].stop_requested = True
            self.set_status(name, "Stopping")
        if self.on_stop is not None:
            self.on_stop(name)
        return None

    def stub_stop_calls(self, client: Any) -> OperationStubber:
        """Answers ``StopTrainingJob`` (moto has none) on ``client``, the backend's, from now on."""

        def answer(params):
            error = self.stop_training_job(params["TrainingJobName"])
            return {} if error is None else ("ValidationException", error)

        stubber = OperationStubber(client, "StopTrainingJob", answer)
        stubber.activate()
        self.stubbers.append(stubber)
        return stubber

    def stopped_jobs(self) -> list[str]:
        """Names of the jobs ``StopTrainingJob`` was called for, in call order."""
        return [c["TrainingJobName"] for s in self.stubbers if s.operation == "StopTrainingJob" for c in s.calls]

    # ---- logs ---------------------------------------------------------------

    def log(self, name: str, *messages: str) -> None:
        """Appends lines to the job's CloudWatch stream (created on first use). Called by
        one thread per job (the runner's pump, or the test), so the record needs no lock."""
        record = self.jobs[name]
        if record.stream is None:
            with contextlib.suppress(self.logs.exceptions.ResourceAlreadyExistsException):
                self.logs.create_log_group(logGroupName=LOG_GROUP)
            record.stream = f"{name}/algo-1-{int(time.time())}"
            self.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=record.stream)
        events = []
        for message in messages:
            # CloudWatch orders a stream by time stamp: keep them non-decreasing
            record.last_timestamp = max(record.last_timestamp, int(time.time() * 1000))
            events.append({"timestamp": record.last_timestamp, "message": message})
        if events:
            self.logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=record.stream, logEvents=events)

    # ---- S3 -----------------------------------------------------------------

    def keys(self, location: S3Location) -> list[str]:
        return list_keys(self.s3, location)

    def get(self, bucket: str, key: str) -> bytes:
        return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=bucket, Key=key, Body=data)


def _decode(value: str) -> Any:
    # the SageMaker training toolkit: JSON-decode, fall back to the raw string
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


class LocalJobRunner:
    """
    Runs every job :class:`FakeSageMaker` sees created as a local process (see the
    module docstring).

    :param fake: The fake service
    :param workdir: Folder for the jobs' private "container" folders
    :param stop_delay: Seconds a stopped job stays ``Stopping`` after its process ended
        and its checkpoint was uploaded
    :param sync_interval: Seconds between checkpoint uploads while a job runs
    :param corrupt_checkpoint_of_resume: If n >= 1, the n-th job that starts from an
        existing checkpoint finds it corrupt in S3 (overwritten with garbage just before
        it is downloaded), so its script fails
    """

    def __init__(self, fake: FakeSageMaker, workdir: Path, stop_delay: float = 0.5,
                 sync_interval: float = 0.2, corrupt_checkpoint_of_resume: int | None = None):
        self.fake = fake
        self.workdir = Path(workdir)
        self.stop_delay = stop_delay
        self.sync_interval = sync_interval
        self.corrupt_checkpoint_of_resume = corrupt_checkpoint_of_resume
        self.resumes_seen = 0
        self.corrupted_job: str | None = None
        self.errors: list[str] = []  # exceptions inside the runner (the test asserts none)
        self._last_lines: dict[str, list[str]] = {}
        self._procs: dict[str, subprocess.Popen] = {}
        self._threads: list[threading.Thread] = []
        fake.on_created = self._start
        fake.on_stop = self._stop

    def _start(self, name: str) -> None:
        thread = threading.Thread(target=self._run_guarded, args=(name,), name=f"job-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _stop(self, name: str) -> None:
        with self.fake.lock:
            proc = self._procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # SageMaker sends SIGTERM, then SIGKILL after 120 s

    def join(self, timeout: float = 30.0) -> None:
        """Waits for all job threads (after the tuner stopped every job)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _run_guarded(self, name: str) -> None:
        try:
            self._run(name)
        except Exception as ex:  # noqa: BLE001 - reported through self.errors
            self.errors.append(f"{name}: {type(ex).__name__}: {ex}")
            self.fake.set_status(name, "Failed", failure_reason=f"InternalServerError: fake runner: {ex}")

    def _run(self, name: str) -> None:
        fake = self.fake
        desc = fake.request(name)
        hps = desc["DecodedHyperParameters"]
        root = self.workdir / name
        code = root / "opt/ml/code"
        code.mkdir(parents=True)
        src = S3Location.parse(hps["sagemaker_submit_directory"])
        with tarfile.open(fileobj=io.BytesIO(fake.get(src.bucket, src.key)), mode="r:gz") as tar:
            tar.extractall(code, filter="data")
        ckpt_cfg = desc["CheckpointConfig"]
        ckpt_uri = S3Location.parse(ckpt_cfg["S3Uri"])
        local_ckpt = root / ckpt_cfg["LocalPath"].lstrip("/")
        local_ckpt.mkdir(parents=True)
        self._download_checkpoint(name, ckpt_uri, local_ckpt)
        args: list[str] = []
        for key in sorted(hps):
            if key.startswith("sagemaker_"):
                continue
            value = str(hps[key])
            if value.startswith("/opt/ml/"):
                value = str(root / value.lstrip("/"))  # the container's file system
            args += [f"--{key}", value]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the code ships its own packages
        env["PYTHONUNBUFFERED"] = "1"
        with fake.lock:
            if fake.jobs[name].stop_requested:  # stopped before it started
                fake.set_status(name, "Stopped")
                return
            fake.set_status(name, "InProgress")
            proc = subprocess.Popen([sys.executable, hps["sagemaker_program"], *args], cwd=code, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self._procs[name] = proc
        logger.info(f"job {name}: process {proc.pid} started: {hps['sagemaker_program']} {' '.join(args)}")
        pump = threading.Thread(target=self._pump, args=(name, proc), daemon=True)
        pump.start()
        uploaded: dict[str, tuple[int, int]] = {}
        while proc.poll() is None:
            self._upload_checkpoint(local_ckpt, ckpt_uri, uploaded)
            time.sleep(self.sync_interval)
        pump.join()
        self._upload_checkpoint(local_ckpt, ckpt_uri, uploaded)  # SageMaker's last upload
        record = fake.jobs[name]
        record.exit_code = proc.returncode
        logger.info(f"job {name}: process exited with {proc.returncode}")
        if record.stop_requested:
            time.sleep(self.stop_delay)
            fake.set_status(name, "Stopped")
        elif proc.returncode == 0:
            fake.set_status(name, "Completed")
        else:
            last = [m for m in self._last_lines.get(name, []) if m.strip()][-3:]
            fake.set_status(name, "Failed", failure_reason=(
                f"AlgorithmError: ExecuteUserScriptError:\nExitCode {proc.returncode}\n"
                f"ErrorMessage \"{' '.join(last)}\""[:1024]))

    def _pump(self, name: str, proc: subprocess.Popen) -> None:
        last: list[str] = []
        self._last_lines[name] = last
        for line in proc.stdout:
            line = line.rstrip("\n")
            last.append(line)
            del last[:-10]
            if line:  # CloudWatch takes no empty event
                self.fake.log(name, line)

    def _download_checkpoint(self, name: str, uri: S3Location, local: Path) -> None:
        keys = self.fake.keys(uri)
        if any(k.endswith(".pt") for k in keys):
            self.resumes_seen += 1
            if self.resumes_seen == self.corrupt_checkpoint_of_resume:
                for key in keys:
                    if key.endswith(".pt"):
                        self.fake.put(uri.bucket, key, b"not a torch checkpoint: corrupted in S3")
                self.corrupted_job = name
        for key in keys:
            target = local / key[len(uri.prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.fake.get(uri.bucket, key))

    def _upload_checkpoint(self, local: Path, uri: S3Location, uploaded: dict[str, tuple[int, int]]) -> None:
        for path in sorted(local.rglob("*")):
            try:
                stat = path.stat()
                if not path.is_file():
                    continue
                rel = path.relative_to(local).as_posix()
                stamp = (stat.st_mtime_ns, stat.st_size)
                if uploaded.get(rel) == stamp:
                    continue
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # a temporary file renamed meanwhile (atomic save)
            self.fake.put(uri.bucket, uri.prefix + rel, data)
            uploaded[rel] = stamp
