"""SageMakerBackend against AWS mocks: moto for S3, CloudWatch Logs and SageMaker's
CreateTrainingJob / DescribeTrainingJob, and a botocore Stubber (limited to that one
operation) for StopTrainingJob, which moto does not implement. ``tests/e2e/sagemaker_fake.py``
plays SageMaker's part: job states, logs and, in the end-to-end test, real local
processes for the jobs. Nothing here reaches AWS (fake credentials, everything mocked).

The unit tests start no process: they move jobs through their states and write their logs
by hand. The end-to-end test (slow) runs a real Tuner with DyHPO on launch/train_mlp.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import sys
import tarfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("boto3")
pytest.importorskip("moto")

import boto3
import dill
from botocore.stub import Stubber
from moto import mock_aws
from sagemaker_fake import (
    BUCKET,
    REGION,
    ROLE,
    FakeSageMaker,
    LocalJobRunner,
    OperationStubber,
    fake_aws_environment,
)
from syne_tune.backend.trial_status import Status
from syne_tune.optimizer.scheduler import SchedulerDecision as D
from syne_tune.tuner_callback import TunerCallback

from syne_dyhpo.backends.cloudwatch_logs import LOG_GROUP, JobLogTail
from syne_dyhpo.backends.s3 import S3Location
from syne_dyhpo.backends.sagemaker import SageMakerBackend
from syne_dyhpo.backends.sagemaker_job import job_name_base, training_job_name

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "launch"))

TUNER = "unit-run-2025-01-01-00-00-00-000"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Mocked AWS account with a bucket, and the fake SageMaker service."""
    fake_aws_environment(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "syne-tune"))
    with mock_aws():
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        service = FakeSageMaker(monkeypatch)
        yield service
        for stubber in service.stubbers:
            stubber.deactivate()


@pytest.fixture
def code(tmp_path) -> Path:
    """A source folder with a script (never run in the unit tests) and a dependency package."""
    src = tmp_path / "code"
    (src / "__pycache__").mkdir(parents=True)
    (src / "train.py").write_text("print('hello')\n")
    (src / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    dep = tmp_path / "mypkg"
    dep.mkdir()
    (dep / "__init__.py").write_text("VALUE = 1\n")
    return src


def make_backend(fake: FakeSageMaker, code: Path, **kwargs) -> SageMakerBackend:
    args = dict(
        entry_point="train.py", source_dir=str(code), dependencies=[str(code.parent / "mypkg")],
        requirements=["syne-tune==0.16.0"], role=ROLE, instance_type="ml.m5.large",
        s3_path=f"s3://{BUCKET}/runs/", region=REGION, framework_version="2.5.1", log_grace_period=0.0,
        poll_interval=0.05,
    )
    args.update(kwargs)
    backend = SageMakerBackend(**args)
    backend.set_path(results_root=None, tuner_name=TUNER)
    fake.stub_stop_calls(backend.sagemaker_client)
    return backend


def metric_line(epoch: int, acc: float = 0.5) -> str:
    payload = {"epoch": epoch, "val_accuracy": acc, "st_worker_timestamp": time.time(), "st_worker_iter": epoch - 1}
    return f"[tune-metric]: {json.dumps(payload)}"


def epochs(results) -> list[tuple[int, int]]:
    return [(tid, r["epoch"]) for tid, r in results]


def poll(backend, trial_ids):
    status, results = backend.fetch_status_results(trial_ids)
    return {tid: s for tid, (_, s) in status.items()}, epochs(results)


# --------------------------------------------------------------------------- arguments


GOOD = dict(entry_point="train.py", role=ROLE, instance_type="ml.m5.large", s3_path=f"s3://{BUCKET}/x",
            region=REGION, framework_version="2.5.1")


@pytest.mark.parametrize(
    "changes, argument, value",
    [
        ({"role": ""}, "role", ""),
        ({"role": "SageMakerRole"}, "role", "SageMakerRole"),
        ({"instance_type": "m5.large"}, "instance_type", "m5.large"),
        ({"instance_type": "ml.m5"}, "instance_type", "ml.m5"),
        ({"instance_type": "local"}, "instance_type", "local"),
        ({"s3_path": "my-bucket/prefix"}, "s3_path", "my-bucket/prefix"),
        ({"s3_path": "https://my-bucket.s3.amazonaws.com/x"}, "s3_path", "https://my-bucket.s3.amazonaws.com/x"),
        ({"s3_path": "s3://My_Bucket/x"}, "s3_path", "s3://My_Bucket/x"),
        ({"region": "Virginia"}, "region", "Virginia"),
        ({"framework_version": "latest"}, "framework_version", "latest"),
        ({"image_uri": "1.dkr.ecr.us-east-1.amazonaws.com/x:1"}, "image_uri", "1.dkr.ecr.us-east-1.amazonaws.com/x:1"),
        ({"framework_version": None}, "framework_version", None),
        ({"keep_alive_period_seconds": 7200}, "keep_alive_period_seconds", 7200),
        ({"volume_size_gb": True}, "volume_size_gb", True),
        ({"max_run_seconds": "3600"}, "max_run_seconds", "3600"),
        ({"entry_point": "missing.py"}, "entry_point", "missing.py"),
        ({"dependencies": ["no/such/dir"]}, "dependencies", "no/such/dir"),
        ({"log_grace_period": -1}, "log_grace_period", -1),
        ({"poll_interval": float("nan")}, "poll_interval", float("nan")),
        ({"stop_timeout": True}, "stop_timeout", True),
    ],
)
def test_bad_arguments_fail_naming_argument_and_value(code, monkeypatch, changes, argument, value):
    monkeypatch.chdir(code)  # entry_point "train.py" exists here
    with pytest.raises(ValueError) as info:
        SageMakerBackend(**{**GOOD, **changes})
    message = str(info.value)
    assert argument in message
    assert repr(value) in message or str(value) in message, message


def test_good_arguments_build_without_contacting_aws(code, monkeypatch):
    monkeypatch.chdir(code)
    backend = SageMakerBackend(**{**GOOD, "instance_type": "ml.g5.xlarge"})
    assert backend.settings.training_image == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311")
    assert backend._clients == {}  # nothing was created, let alone called


def test_numpy_sizes_are_kept_as_plain_ints(code, monkeypatch):
    # botocore's request validation refuses numpy integers, so the settings hold ints
    monkeypatch.chdir(code)
    backend = SageMakerBackend(**{**GOOD, "volume_size_gb": np.int64(50), "keep_alive_period_seconds": np.int32(600)})
    assert type(backend.settings.volume_size_gb) is int and backend.settings.volume_size_gb == 50
    assert type(backend.settings.keep_alive_period_seconds) is int


def test_job_names_fit_sagemaker_rules():
    long_a = "my_tuner." + "x" * 80 + "-2025-01-01-00-00-00-001"
    long_b = "my_tuner." + "x" * 80 + "-2025-01-01-00-00-00-002"
    base_a, base_b = job_name_base(long_a), job_name_base(long_b)
    assert base_a != base_b
    for base in (base_a, base_b, job_name_base(TUNER)):
        name = training_job_name(base, trial_id=12345, segment=999)
        assert len(name) <= 63 and re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", name), name
    assert job_name_base(TUNER) == TUNER


def test_launcher_ships_launch_folder_and_package_and_checks_its_arguments(monkeypatch):
    import tune_sagemaker

    parser = tune_sagemaker.build_parser()
    base = ["--role", ROLE, "--region", REGION]
    argv = base + ["--s3-path", f"s3://{BUCKET}/p"]
    backend = tune_sagemaker.build_backend(parser.parse_args(argv + ["--max-paused-checkpoints", "3"]))
    assert backend.source_dir == str(REPO / "launch") and backend.entry_point == "train_mlp.py"
    assert [Path(d).name for d in backend.dependencies] == ["syne_dyhpo"]
    assert "syne-tune==0.16.0" in backend.requirements
    assert backend.delete_checkpoints and not backend.delete_checkpoints_at_end
    assert backend.settings.training_image.endswith("pytorch-training:2.5.1-cpu-py311")
    assert not tune_sagemaker.build_backend(parser.parse_args(argv)).delete_checkpoints
    with pytest.raises(ValueError, match=r"s3_path must be an S3 URI.*'my-bucket'"):
        tune_sagemaker.build_backend(parser.parse_args(base + ["--s3-path", "my-bucket"]))
    with pytest.raises(ValueError, match=r"instance_type.*'p3.2xlarge'"):
        tune_sagemaker.build_backend(parser.parse_args(argv + ["--instance-type", "p3.2xlarge"]))


# --------------------------------------------------------------------------- jobs


def test_start_creates_job_with_config_checkpoint_uri_and_code(fake, code):
    backend = make_backend(fake, code, keep_alive_period_seconds=300)
    configs = [{"learning_rate": np.float64(0.05), "n_units": np.int64(64), "epochs": 3, "opt": "sgd"},
               {"learning_rate": 0.1, "n_units": 32, "epochs": 3, "opt": "adam"}]
    for config in configs:
        backend.start_trial(config)
    assert backend.job_names(0) == [f"{TUNER}-0-0"] and backend.job_names(1) == [f"{TUNER}-1-0"]
    uris = []
    for tid, config in enumerate(configs):
        desc = fake.request(backend.job_names(tid)[0])
        hps = desc["DecodedHyperParameters"]
        user = {k: v for k, v in hps.items() if not k.startswith("sagemaker_")}
        assert user == {**{k: (v.item() if isinstance(v, np.generic) else v) for k, v in config.items()},
                        "st_checkpoint_dir": "/opt/ml/checkpoints"}
        assert hps["sagemaker_program"] == "train.py"
        assert desc["CheckpointConfig"] == {"S3Uri": f"s3://{BUCKET}/runs/{TUNER}/checkpoints/{tid}",
                                            "LocalPath": "/opt/ml/checkpoints"}
        uris.append(desc["CheckpointConfig"]["S3Uri"])
        assert desc["RoleArn"] == ROLE
        assert desc["ResourceConfig"]["InstanceType"] == "ml.m5.large"
        assert desc["ResourceConfig"]["InstanceCount"] == 1
        assert desc["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 300  # accepted by botocore's model
        assert desc["AlgorithmSpecification"]["TrainingImage"] == (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311")
        assert desc["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/runs/{TUNER}/output"
    assert len(set(uris)) == 2
    # the code archive: source folder, the dependency at the root, requirements; no bytecode
    source = S3Location.parse(fake.request(backend.job_names(0)[0])["DecodedHyperParameters"]
                              ["sagemaker_submit_directory"])
    assert source.uri == f"s3://{BUCKET}/runs/{TUNER}/source/sourcedir.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(fake.get(source.bucket, source.key)), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        assert names == ["mypkg/__init__.py", "requirements.txt", "train.py"]
        assert tar.extractfile("requirements.txt").read().decode().split() == ["syne-tune==0.16.0"]
    assert poll(backend, [0, 1]) == ({0: Status.in_progress, 1: Status.in_progress}, [])


def test_each_result_is_delivered_once_in_order_across_polls_pause_and_resume(fake, code, caplog):
    backend = make_backend(fake, code)
    backend.start_trial({"epochs": 3})
    job0 = backend.job_names(0)[0]
    fake.log(job0, "Invoking script with the following command:", metric_line(1))
    assert poll(backend, [0]) == ({0: Status.in_progress}, [(0, 1)])
    assert poll(backend, [0]) == ({0: Status.in_progress}, [])  # polled again: nothing twice
    fake.log(job0, metric_line(2), '[tune-metric]: {"epoch": 3, "val_acc', metric_line(3))
    with caplog.at_level(logging.WARNING):
        assert poll(backend, [0])[1] == [(0, 2), (0, 3)]  # the line cut in half is skipped
    assert "unparsable metric line" in caplog.text

    # pause: StopTrainingJob (the stub), the job is Stopping and still prints a line
    backend.pause_trial(0)
    assert fake.stopped_jobs() == [job0] and fake.status(job0) == "Stopping"
    fake.log(job0, metric_line(4))
    assert poll(backend, [0]) == ({0: Status.paused}, [])
    # resume while the old job is still Stopping: no new job yet (S3 may still change)
    backend.resume_trial(0, {"epochs": 6})
    status, seen = poll(backend, [0])
    assert status == {0: Status.in_progress} and backend.job_names(0) == [job0]
    assert seen == [(0, 4)]  # printed after the pause decision, delivered on resume, once
    fake.log(job0, "late line of the old job")
    fake.set_status(job0, "Stopped")
    assert poll(backend, [0]) == ({0: Status.in_progress}, [])
    job1 = backend.job_names(0)[1]
    assert job1 == f"{TUNER}-0-1"
    assert fake.request(job1)["CheckpointConfig"] == fake.request(job0)["CheckpointConfig"]
    assert fake.request(job1)["DecodedHyperParameters"]["epochs"] == 6
    fake.log(job1, metric_line(5))
    assert poll(backend, [0])[1] == [(0, 5)]
    fake.log(job1, metric_line(6))
    fake.set_status(job1, "Completed")
    assert poll(backend, [0]) == ({0: Status.completed}, [(0, 6)])
    assert poll(backend, [0]) == ({0: Status.completed}, [])
    lines = "".join(backend.stdout(0))
    assert lines.index("late line of the old job") < lines.index('"epoch": 5')


def test_log_tail_pages_through_streams_and_never_reads_another_jobs(fake):
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName=LOG_GROUP)

    def write(stream, *messages):
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        now = int(time.time() * 1000)
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream,
                            logEvents=[{"timestamp": now, "message": m} for m in messages])

    tail = JobLogTail("run-1-1", page_limit=2, discover_interval=3600)
    assert tail.read_new(logs) == []  # no stream yet
    write("run-1-1/algo-1-100", *[f"a{i}" for i in range(5)])
    write("run-1-10/algo-1-100", "other job")  # trial 1's 11th segment: must not be read
    write("run-1-1/algo-2-100", "second host")
    assert [x.message for x in tail.read_new(logs)] == ["a0", "a1", "a2", "a3", "a4"]
    assert tail.read_new(logs) == []
    write("run-1-1/algo-1-100", "a5", "a6", "a7")
    write("run-1-1/algo-1-200", "b0")  # restarted on a new instance: a new stream
    # streams are looked for again after discover_interval, or when the job has ended
    assert [x.message for x in tail.read_new(logs)] == ["a5", "a6", "a7"]
    assert [x.message for x in tail.read_new(logs, final=True)] == ["b0"]
    assert tail.read_new(logs, final=True) == []
    assert tail.streams == ["run-1-1/algo-1-100", "run-1-1/algo-1-200"]


def test_failed_job_fails_trial_with_reason_and_keeps_its_results(fake, code, caplog):
    backend = make_backend(fake, code)
    backend.start_trial({"epochs": 3})
    backend.start_trial({"epochs": 3})
    job0, job1 = backend.job_names(0)[0], backend.job_names(1)[0]
    fake.log(job0, metric_line(1), "Traceback (most recent call last):", "RuntimeError: CUDA out of memory")
    reason = "AlgorithmError: ExecuteUserScriptError: ExitCode 1 RuntimeError: CUDA out of memory"
    fake.set_status(job0, "Failed", failure_reason=reason)
    fake.set_status(job1, "Completed")  # ended without printing a result
    with caplog.at_level(logging.WARNING):
        status, seen = poll(backend, [0, 1])
    assert status == {0: Status.failed, 1: Status.failed}
    assert seen == [(0, 1)]
    assert backend.failure_reason(0) == f"training job {job0} failed: {reason}"
    assert "without reporting any result" in backend.failure_reason(1)
    assert f"FailureReason: {backend.failure_reason(0)}\n" == backend.stderr(0)[-1]
    assert caplog.text.count("trial_id 0 failed") == 1
    poll(backend, [0, 1])
    assert caplog.text.count("trial_id 0 failed") == 1  # said once


def test_job_sagemaker_refuses_to_create_fails_only_that_trial(fake, code):
    """botocore Stubber for the two calls (moto never refuses to create a job): the refusal,
    then the check whether the job exists nevertheless."""
    backend = make_backend(fake, code)
    with Stubber(backend.sagemaker_client) as stub:
        stub.add_client_error("create_training_job", service_error_code="ResourceLimitExceeded",
                              service_message="The account-level service limit 'ml.m5.large for training job "
                                              "usage' is 2 Instances", http_status_code=400)
        stub.add_client_error("describe_training_job", service_error_code="ValidationException",
                              service_message="Requested resource not found.", http_status_code=400,
                              expected_params={"TrainingJobName": f"{TUNER}-0-0"})
        backend.start_trial({"epochs": 3})  # must not raise
        stub.assert_no_pending_responses()
    backend.start_trial({"epochs": 3})
    assert poll(backend, [0, 1])[0] == {0: Status.failed, 1: Status.in_progress}
    assert "ResourceLimitExceeded" in backend.failure_reason(0)
    assert backend.job_names(0) == [] and backend.job_names(1) == [f"{TUNER}-1-0"]


def test_job_created_by_a_retried_request_is_adopted_not_failed(fake, code):
    """A create whose first attempt went through but whose answer was lost: botocore's retry
    is told the name is taken. OperationStubber answers that (moto would overwrite the job);
    the job itself exists in moto."""
    backend = make_backend(fake, code)
    backend.start_trial({"epochs": 3})  # trial 0, created normally
    first = fake.request(f"{TUNER}-0-0")
    fake.sagemaker.create_training_job(  # "the first attempt" of trial 1's create
        TrainingJobName=f"{TUNER}-1-0", HyperParameters=first["HyperParameters"],
        AlgorithmSpecification={"TrainingImage": first["AlgorithmSpecification"]["TrainingImage"],
                                "TrainingInputMode": "File"},
        RoleArn=ROLE, OutputDataConfig=first["OutputDataConfig"], ResourceConfig=first["ResourceConfig"],
        StoppingCondition=first["StoppingCondition"])
    stub = OperationStubber(backend.sagemaker_client, "CreateTrainingJob", lambda params: (
        "ValidationException", "Training job names must be unique within an AWS account and region"))
    stub.activate()
    try:
        backend.start_trial({"epochs": 3})
    finally:
        stub.deactivate()
    assert [c["TrainingJobName"] for c in stub.calls] == [f"{TUNER}-1-0"]
    assert backend.job_names(1) == [f"{TUNER}-1-0"] and backend.failure_reason(1) is None
    fake.log(f"{TUNER}-1-0", metric_line(1))
    assert poll(backend, [0, 1]) == ({0: Status.in_progress, 1: Status.in_progress}, [(1, 1)])


def test_busy_trials_are_running_or_waiting_to_resume_not_paused(fake, code):
    backend = make_backend(fake, code)
    for _ in range(3):
        backend.start_trial({"epochs": 2})
    jobs = [backend.job_names(tid)[0] for tid in range(3)]
    backend.pause_trial(0)
    backend.pause_trial(1)
    backend.resume_trial(1, {"epochs": 3})  # waits: its job is still Stopping
    fake.set_status(jobs[2], "Completed")
    fake.log(jobs[2], metric_line(1))
    assert sorted(backend.busy_trial_ids()) == [(1, Status.in_progress)]
    fake.set_status(jobs[0], "Stopped")
    fake.set_status(jobs[1], "Stopped")
    assert sorted(backend.busy_trial_ids()) == [(1, Status.in_progress)]
    assert backend.job_names(1) == [jobs[1], f"{TUNER}-1-1"]  # created once the old job ended


# --------------------------------------------------------------------------- checkpoints


def put_checkpoint(fake, backend, trial_id, name="checkpoint.pt", data=b"weights"):
    loc = backend.checkpoint_location(trial_id)
    fake.put(loc.bucket, f"{loc.prefix}{name}", data)


def stored(fake, backend, trial_id) -> list[str]:
    loc = backend.checkpoint_location(trial_id)
    return [k[len(loc.prefix):] for k in fake.keys(loc)]


def test_delete_waits_for_the_job_to_end_and_touches_only_that_trial(fake, code):
    backend = make_backend(fake, code, delete_checkpoints=True)
    for _ in range(11):
        backend.start_trial({"epochs": 2})
    put_checkpoint(fake, backend, 1)
    put_checkpoint(fake, backend, 10)  # prefix ".../1" + "0": must survive deleting trial 1
    job = backend.job_names(1)[0]
    backend.pause_trial(1)
    backend.delete_checkpoint(1)  # like the scheduler's retirement callback
    assert stored(fake, backend, 1) == ["checkpoint.pt"]  # job still Stopping: not yet
    put_checkpoint(fake, backend, 1, "checkpoint.pt", b"last upload while stopping")
    fake.set_status(job, "Stopped")
    poll(backend, [0])  # the tuner polls running trials; trial 1 is paused
    assert stored(fake, backend, 1) == []
    assert stored(fake, backend, 10) == ["checkpoint.pt"]
    backend.delete_checkpoint(1)  # nothing there: fine
    # a job that has ended: deleted at once
    fake.set_status(backend.job_names(10)[0], "Completed")
    poll(backend, [10])
    backend.delete_checkpoint(10)
    assert stored(fake, backend, 10) == []


@pytest.mark.parametrize("at_end", [False, True])
def test_stop_all_keeps_resumable_checkpoints_unless_asked(fake, code, at_end):
    backend = make_backend(fake, code, delete_checkpoints=True, delete_checkpoints_at_end=at_end)
    for tid in range(3):
        backend.start_trial({"epochs": 2})
        put_checkpoint(fake, backend, tid)
    jobs = [backend.job_names(tid)[0] for tid in range(3)]
    fake.set_status(jobs[0], "Completed")
    fake.log(jobs[0], metric_line(1))
    poll(backend, [0, 1, 2])
    backend.pause_trial(0)  # paused, resumable
    backend.stop_trial(2)  # stopped by the scheduler: its checkpoint goes (Syne Tune's semantics)
    fake.set_status(jobs[2], "Stopped")
    # trial 1 is still running when tuning ends; its job takes a while to stop
    timer = threading.Timer(0.3, lambda: fake.set_status(jobs[1], "Stopped"))
    timer.start()
    start = time.monotonic()
    backend.stop_all()
    timer.join()
    assert jobs[1] in fake.stopped_jobs() and jobs[0] not in fake.stopped_jobs()
    assert stored(fake, backend, 2) == []
    if at_end:
        assert time.monotonic() - start >= 0.3  # waited for trial 1's job to end before deleting
        assert stored(fake, backend, 0) == [] and stored(fake, backend, 1) == []
    else:
        assert stored(fake, backend, 0) == ["checkpoint.pt"] and stored(fake, backend, 1) == ["checkpoint.pt"]


def test_copy_checkpoint_copies_every_object(fake, code):
    backend = make_backend(fake, code)
    backend.start_trial({"epochs": 2})
    fake.set_status(backend.job_names(0)[0], "Completed")
    put_checkpoint(fake, backend, 0, "checkpoint.pt", b"w0")
    put_checkpoint(fake, backend, 0, "sub/extra.bin", b"e0")
    backend.start_trial({"epochs": 2}, checkpoint_trial_id=0)
    assert stored(fake, backend, 1) == ["checkpoint.pt", "sub/extra.bin"]
    loc = backend.checkpoint_location(1)
    assert fake.get(loc.bucket, loc.prefix + "sub/extra.bin") == b"e0"


def test_backend_pickles_without_clients_and_goes_on_polling(fake, code):
    backend = make_backend(fake, code)
    backend.start_trial({"epochs": 2})
    fake.log(backend.job_names(0)[0], metric_line(1))
    assert poll(backend, [0])[1] == [(0, 1)]
    restored = dill.loads(dill.dumps(backend))  # as Tuner.save does
    assert restored._clients == {}
    fake.log(backend.job_names(0)[0], metric_line(2))
    assert poll(restored, [0])[1] == [(0, 2)]  # position in the log kept, new clients made


# --------------------------------------------------------------------------- end to end


class Watch(TunerCallback):
    """Records which trials the Tuner's checkpoint-removal callback retired (a deletion for a
    trial whose last decision was PAUSE), and S3's content when tuning ends (before stop_all)."""

    def __init__(self, fake: FakeSageMaker):
        self.fake = fake
        self.tuner = None
        self.deleted: dict[int, float] = {}
        self.s3_at_end: dict[int, list[str]] = {}

    def on_tuning_start(self, tuner):
        self.tuner = tuner
        backend = tuner.trial_backend
        delete = backend.delete_checkpoint

        def recording_delete(trial_id):
            self.deleted.setdefault(trial_id, time.monotonic())
            return delete(trial_id)

        backend.delete_checkpoint = recording_delete

    def on_tuning_end(self):
        backend = self.tuner.trial_backend
        for tid in backend.trial_ids:
            self.s3_at_end[tid] = stored(self.fake, backend, tid)


def printed_epochs_per_job(backend, fake, trial_id) -> list[list[int]]:
    """Epochs each job of the trial printed, read from its CloudWatch stream (all of it)."""
    logs = boto3.client("logs", region_name=REGION)
    out = []
    for job in backend.job_names(trial_id):
        lines = JobLogTail(job).read_new(logs)
        out.append([json.loads(m.group(1))["epoch"] for line in lines
                    if (m := re.search(r"\[tune-metric\]: (\{.*\})", line.message))])
    return out


def checkpoint_epoch(fake, backend, trial_id) -> int:
    import torch

    loc = backend.checkpoint_location(trial_id)
    data = fake.get(loc.bucket, loc.prefix + "checkpoint.pt")
    return torch.load(io.BytesIO(data), weights_only=True)["epoch"]


@pytest.mark.slow
def test_tuner_with_dyhpo_pauses_and_resumes_sagemaker_jobs_end_to_end(fake, tmp_path, caplog):
    import tune_sagemaker

    caplog.set_level(logging.INFO)
    runner = LocalJobRunner(fake, tmp_path / "jobs", stop_delay=0.3, corrupt_checkpoint_of_resume=2)
    args = tune_sagemaker.build_parser().parse_args([
        "--role", ROLE, "--s3-path", f"s3://{BUCKET}/tuning", "--region", REGION,
        "--method", "dyhpo", "--n-workers", "2", "--max-epochs", "6", "--budget-epochs", "16",
        "--max-paused-checkpoints", "2", "--sleep-time", "0.5", "--max-wallclock-time", "400", "--seed", "1",
    ])
    backend = tune_sagemaker.build_backend(args, log_grace_period=0.0, poll_interval=0.1, stop_timeout=60)
    fake.stub_stop_calls(backend.sagemaker_client)
    watch = Watch(fake)
    start = time.monotonic()
    tr = tune_sagemaker.run(args, backend=backend, callbacks=[watch])
    wall = time.monotonic() - start
    runner.join()
    assert runner.errors == []
    trial_ids = list(backend.trial_ids)
    events = tr.log.per_trial()
    seen = {tid: [e.epoch for e in events.get(tid, []) if e.kind == "result"] for tid in trial_ids}
    printed = {tid: printed_epochs_per_job(backend, fake, tid) for tid in trial_ids}
    statuses = tr.tuner.tuning_status.last_trial_status_seen

    # (1) resumed trials continue after their last epoch: no epoch trained twice
    resumed = 0
    for tid in trial_ids:
        flat = [e for job in printed[tid] for e in job]
        assert flat == list(range(1, len(flat) + 1)), (tid, printed[tid])
        resumed += sum(1 for job in printed[tid][1:] if job)
        names = backend.job_names(tid)
        assert len({fake.request(n)["CheckpointConfig"]["S3Uri"] for n in names}) == 1
    assert resumed >= 2, printed

    # (2) every reported epoch reached the scheduler once, in order; only the trials stopped by
    # the end of tuning may have printed epochs that were not fetched any more
    running_at_end = {tid for tid in trial_ids if events[tid][-1].kind != "result"}
    for tid in trial_ids:
        flat = [e for job in printed[tid] for e in job]
        assert seen[tid] == flat[: len(seen[tid])], (tid, seen[tid], flat)
        if tid not in running_at_end:
            assert seen[tid] == flat, (tid, seen[tid], flat)
    assert sum(map(len, seen.values())) >= 16

    # (3) the job whose checkpoint was corrupt failed; its trial is failed, never resumed again,
    # its earlier results kept, and tuning went on
    assert runner.corrupted_job is not None
    failed_tid = next(tid for tid in trial_ids if runner.corrupted_job in backend.job_names(tid))
    assert backend.job_names(failed_tid)[-1] == runner.corrupted_job
    assert fake.status(runner.corrupted_job) == "Failed"
    assert statuses[failed_tid] == Status.failed
    assert tr.tuner.tuning_status.num_trials_failed == 1
    reason = backend.failure_reason(failed_tid)
    assert "ExitCode 1" in reason and "Refusing to silently restart" in reason, reason
    assert printed[failed_tid][-1] == [] and seen[failed_tid] == [e for j in printed[failed_tid] for e in j]
    assert f"trial_id {failed_tid} failed" in caplog.text
    fail_time = max(e.time for e in events[failed_tid])
    assert any(e.kind == "result" and e.time > fail_time for tid in trial_ids if tid != failed_tid
               for e in events[tid])

    # (4) retired checkpoints are gone from S3; resumable (paused) trials keep theirs, at the
    # epoch they last reported
    retired = {tid for tid in watch.deleted if events[tid][-1].kind == "result"
               and events[tid][-1].decision == D.PAUSE}
    assert retired, (watch.deleted, {t: events[t][-1] for t in trial_ids})
    # deleted during the run (the scheduler's callback), not only by the final clean-up
    assert any(watch.s3_at_end[tid] == [] for tid in retired), (retired, watch.s3_at_end)
    for tid in watch.deleted:
        assert stored(fake, backend, tid) == [], tid
        assert not any(e.kind == "resume" and e.time > watch.deleted[tid] for e in events[tid])
    kept = [tid for tid in trial_ids if tid not in watch.deleted and tid != failed_tid and seen[tid]]
    assert kept
    for tid in kept:
        # read after every job ended: SageMaker (and the fake) upload the checkpoint folder
        # asynchronously, so a job that saved and reported just before tuning ended may have
        # had nothing in S3 yet when on_tuning_end looked
        assert "checkpoint.pt" in stored(fake, backend, tid), (tid, watch.s3_at_end[tid])
        flat = [e for job in printed[tid] for e in job]
        # a job stopped by the end of tuning may have been killed between save and report
        allowed = (flat[-1], flat[-1] + 1) if tid in running_at_end else (flat[-1],)
        assert checkpoint_epoch(fake, backend, tid) in allowed, (tid, flat)
    # (5) the report of the run: its counts, and checkpoints named by their S3 location
    from syne_dyhpo.report import make_report

    report = make_report(tr.tuner.tuner_path, pictures=False)
    assert report.summary.failed == 1 and report.histories[failed_tid].failed
    assert report.summary.started == len(trial_ids)
    for tid in trial_ids:
        assert report.run.checkpoint(tid) == backend.checkpoint_location(tid).uri
    if report.take_home.trial_id is not None:
        assert report.take_home.checkpoint == backend.checkpoint_location(report.take_home.trial_id).uri
    print(f"[sagemaker e2e] wall={wall:.1f}s trials={len(trial_ids)} jobs="
          f"{sum(len(backend.job_names(t)) for t in trial_ids)} resumed_jobs={resumed} "
          f"epochs_seen={sum(map(len, seen.values()))} retired={sorted(retired)} "
          f"deleted={sorted(watch.deleted)} failed={failed_tid}", file=sys.__stdout__)
