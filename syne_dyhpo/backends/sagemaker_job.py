"""
What a SageMaker training job of one trial segment looks like: validated settings,
job names, hyperparameter encoding and the ``CreateTrainingJob`` request.

Jobs are created with plain boto3 (no SageMaker Python SDK), following the
conventions of SageMaker's framework containers (the SageMaker training toolkit in
the PyTorch images): the code is a ``sourcedir.tar.gz`` in S3 named by the
hyperparameter ``sagemaker_submit_directory``, the script by ``sagemaker_program``,
and every hyperparameter value is JSON-encoded; the toolkit decodes them and runs
``python <program> --key value ...``, just as Syne Tune's ``LocalBackend`` does.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from syne_dyhpo.backends.s3 import S3Location
from syne_dyhpo.checks import checked_integer

CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
"""Folder inside the job that SageMaker syncs with the job's ``checkpoint_s3_uri``."""

DLC_ACCOUNT = "763104351884"
"""AWS account of the Deep Learning Containers in most commercial regions."""

_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[\w+=,.@\-/]+$")
_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_PY_VERSION = re.compile(r"^py3\d+$")
_JOB_NAME_CHARS = re.compile(r"[^a-zA-Z0-9]+")
MAX_JOB_NAME = 63
MAX_HYPERPARAMETER_VALUE = 2500  # characters, SageMaker's limit
MAX_HYPERPARAMETERS = 100


def _check(condition: bool, name: str, value: Any, expected: str) -> None:
    if not condition:
        raise ValueError(f"{name} must be {expected}, got {value!r}")


@dataclass
class TrainingJobSettings:
    """
    Settings shared by the training jobs of all trials, checked on construction so
    that a typo fails before any job is created.

    :param role: IAM role ARN SageMaker assumes to run the jobs
        (``arn:aws:iam::<account>:role/<name>``)
    :param instance_type: Instance type, e.g. ``ml.m5.large``
    :param region: AWS region of the jobs, e.g. ``us-east-1``
    :param image_uri: Training image. Exactly one of ``image_uri`` and
        ``framework_version`` must be given
    :param framework_version: PyTorch version of the AWS Deep Learning Container to
        use, e.g. ``2.5.1`` (see :func:`pytorch_training_image_uri`)
    :param py_version: Python version of that container, e.g. ``py311``
    :param volume_size_gb: Size of the job's storage volume. Defaults to 30
    :param max_run_seconds: ``StoppingCondition.MaxRuntimeInSeconds`` of each job
        (one segment). Defaults to 86400 (a day)
    :param keep_alive_period_seconds: If given (1 to 3600), SageMaker keeps the
        instance of a finished job warm that long and gives it to the next job with the
        same settings (a resumed segment then starts in seconds, not minutes). Warm
        instances are billed; needs a warm-pool quota
    :param environment: Environment variables of the jobs
    :param tags: Tags of the jobs
    """

    role: str
    instance_type: str
    region: str
    image_uri: str | None = None
    framework_version: str | None = None
    py_version: str = "py311"
    volume_size_gb: int = 30
    max_run_seconds: int = 86400
    keep_alive_period_seconds: int | None = None
    environment: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        _check(isinstance(self.role, str) and bool(_ROLE_ARN.match(self.role)), "role", self.role,
               "an IAM role ARN like 'arn:aws:iam::123456789012:role/MySageMakerRole'")
        if self.instance_type in ("local", "local_gpu"):
            raise ValueError(
                f"instance_type {self.instance_type!r} (SageMaker local mode) is not supported; "
                "use Syne Tune's LocalBackend to run trials on this machine"
            )
        _check(isinstance(self.instance_type, str) and bool(_INSTANCE_TYPE.match(self.instance_type)),
               "instance_type", self.instance_type, "a SageMaker instance type like 'ml.m5.large'")
        _check(isinstance(self.region, str) and bool(_REGION.match(self.region)), "region", self.region,
               "an AWS region like 'us-east-1' (pass region=..., or configure a default region)")
        if (self.image_uri is None) == (self.framework_version is None):
            raise ValueError(
                "exactly one of image_uri and framework_version must be given, got "
                f"image_uri={self.image_uri!r} and framework_version={self.framework_version!r}"
            )
        if self.image_uri is not None:
            _check(isinstance(self.image_uri, str) and "/" in self.image_uri and " " not in self.image_uri,
                   "image_uri", self.image_uri, "a container image URI like "
                   "'<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>'")
        else:
            _check(isinstance(self.framework_version, str) and bool(_VERSION.match(self.framework_version)),
                   "framework_version", self.framework_version, "a PyTorch version like '2.5.1'")
            _check(isinstance(self.py_version, str) and bool(_PY_VERSION.match(self.py_version)),
                   "py_version", self.py_version, "a Python version tag like 'py311'")
        # kept as plain ints: botocore's request validation refuses numpy integers
        self.volume_size_gb = checked_integer("volume_size_gb", self.volume_size_gb, 1)
        self.max_run_seconds = checked_integer("max_run_seconds", self.max_run_seconds, 1)
        # SageMaker's warm pools keep an instance for at most an hour
        self.keep_alive_period_seconds = checked_integer(
            "keep_alive_period_seconds", self.keep_alive_period_seconds, 1, maximum=3600, allow_none=True
        )
        for name, mapping in (("environment", self.environment), ("tags", self.tags)):
            _check(isinstance(mapping, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in mapping.items()),
                   name, mapping, "a dict of strings to strings")

    @property
    def training_image(self) -> str:
        """The image the jobs run."""
        if self.image_uri is not None:
            return self.image_uri
        assert self.framework_version is not None  # one of the two is given (checked when made)
        return pytorch_training_image_uri(self.region, self.framework_version, self.py_version, self.instance_type)


def pytorch_training_image_uri(region: str, framework_version: str, py_version: str, instance_type: str) -> str:
    """
    URI of AWS's PyTorch training Deep Learning Container, in the form its short tags
    take: ``763104351884.dkr.ecr.<region>.amazonaws.com/pytorch-training:<version>-<cpu|gpu>-<py>``.
    That account serves most commercial regions; some (e.g. China, GovCloud and a few
    opt-in regions) use another one: pass ``image_uri`` there. Check that the tag exists
    for your version (AWS's list of available Deep Learning Containers images).

    :param region: AWS region
    :param framework_version: PyTorch version, e.g. "2.5.1"
    :param py_version: e.g. "py311"
    :param instance_type: e.g. "ml.g5.xlarge" (GPU families p*, g* get the GPU image)
    :return: Image URI
    """
    family = instance_type.split(".")[1] if instance_type.count(".") >= 2 else ""
    device = "gpu" if family[:1] in ("p", "g") else "cpu"
    return f"{DLC_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/pytorch-training:{framework_version}-{device}-{py_version}"


def job_name_base(tuner_name: str, max_length: int = MAX_JOB_NAME - 12) -> str:
    """
    Turns a tuner name into the common prefix of its jobs' names: characters other than
    letters and digits become "-", and a name longer than ``max_length`` is cut and
    ends with 6 hex digits of its hash (so that two long names stay distinct).
    The default leaves room for ``-<trial id>-<segment>`` within SageMaker's 63.

    :param tuner_name: Tuner name (Syne Tune adds a time stamp, which keeps job
        names unique within the account, as SageMaker requires)
    :param max_length: Longest prefix returned
    :return: Job name prefix
    """
    base = _JOB_NAME_CHARS.sub("-", tuner_name).strip("-") or "syne-tune"
    if len(base) > max_length:
        digest = hashlib.sha1(base.encode()).hexdigest()[:6]
        base = base[: max_length - 7].rstrip("-") + "-" + digest
    return base


def training_job_name(base: str, trial_id: int, segment: int) -> str:
    """
    :param base: Prefix from :func:`job_name_base`
    :param trial_id: Trial ID
    :param segment: 0 for the trial's first job, n for its n-th resume
    :return: ``<base>-<trial_id>-<segment>``
    :raises ValueError: if the name is longer than SageMaker allows
    """
    name = f"{base}-{trial_id}-{segment}"
    if len(name) > MAX_JOB_NAME:
        raise ValueError(f"training job name {name!r} is longer than {MAX_JOB_NAME} characters")
    return name


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode_hyperparameters(config: dict[str, Any]) -> dict[str, str]:
    """
    JSON-encodes every value, as the SageMaker SDK does for framework containers (the
    training toolkit decodes them before passing ``--key value`` to the script).

    :param config: Hyperparameters (numpy scalars allowed)
    :return: ``{key: json string}``
    :raises ValueError: if a value is not JSON serializable or longer than SageMaker's
        2500 characters, or there are more than 100 hyperparameters
    """
    if len(config) > MAX_HYPERPARAMETERS:
        raise ValueError(f"SageMaker accepts at most {MAX_HYPERPARAMETERS} hyperparameters, got {len(config)}")
    encoded = {}
    for key, value in config.items():
        try:
            text = json.dumps(value, default=_json_default)
        except TypeError as ex:
            raise ValueError(f"hyperparameter {key!r}={value!r} cannot be passed to SageMaker: {ex}") from ex
        if len(text) > MAX_HYPERPARAMETER_VALUE:
            raise ValueError(
                f"hyperparameter {key!r} is {len(text)} characters long once encoded; SageMaker "
                f"accepts at most {MAX_HYPERPARAMETER_VALUE}"
            )
        encoded[str(key)] = text
    return encoded


def create_training_job_request(
    settings: TrainingJobSettings,
    job_name: str,
    config: dict[str, Any],
    program: str,
    source_uri: S3Location,
    checkpoint_uri: S3Location,
    output_uri: S3Location,
    checkpoint_dir_arg: str | None = "st_checkpoint_dir",
) -> dict[str, Any]:
    """
    The keyword arguments of ``sagemaker_client.create_training_job`` for one segment.

    :param settings: Shared settings
    :param job_name: Name of the job
    :param config: The trial's configuration (hyperparameters of the script)
    :param program: Entry point, relative to the source archive's root
    :param source_uri: S3 URI of ``sourcedir.tar.gz``
    :param checkpoint_uri: The trial's checkpoint location, synced with
        :data:`CHECKPOINT_LOCAL_PATH` inside the job
    :param output_uri: ``OutputDataConfig.S3OutputPath`` (required by the API; the
        script's ``/opt/ml/model`` ends up there)
    :param checkpoint_dir_arg: Hyperparameter through which the script learns its
        checkpoint folder (Syne Tune's ``st_checkpoint_dir``); None: not passed
    :return: Request
    """
    hyperparameters = dict(config)
    if checkpoint_dir_arg is not None:
        hyperparameters[checkpoint_dir_arg] = CHECKPOINT_LOCAL_PATH
    encoded = encode_hyperparameters(hyperparameters)
    encoded.update(
        encode_hyperparameters(
            {
                "sagemaker_program": program,
                "sagemaker_submit_directory": source_uri.uri,
                "sagemaker_region": settings.region,
                "sagemaker_container_log_level": 20,
                "sagemaker_job_name": job_name,
            }
        )
    )
    resource_config: dict[str, Any] = {
        "InstanceType": settings.instance_type,
        "InstanceCount": 1,
        "VolumeSizeInGB": settings.volume_size_gb,
    }
    if settings.keep_alive_period_seconds is not None:
        resource_config["KeepAlivePeriodInSeconds"] = settings.keep_alive_period_seconds
    request: dict[str, Any] = {
        "TrainingJobName": job_name,
        "HyperParameters": encoded,
        "AlgorithmSpecification": {"TrainingImage": settings.training_image, "TrainingInputMode": "File"},
        "RoleArn": settings.role,
        "OutputDataConfig": {"S3OutputPath": output_uri.uri},
        "ResourceConfig": resource_config,
        "StoppingCondition": {"MaxRuntimeInSeconds": settings.max_run_seconds},
        "CheckpointConfig": {"S3Uri": checkpoint_uri.uri, "LocalPath": CHECKPOINT_LOCAL_PATH},
    }
    if settings.environment:
        request["Environment"] = dict(settings.environment)
    if settings.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in settings.tags.items()]
    return request


def program_name(entry_point: str | Path, source_dir: str | Path | None) -> str:
    """
    :param entry_point: The script, relative to ``source_dir`` if given
    :param source_dir: Folder shipped with the script, or None (only the script)
    :return: Path of the script inside the source archive (POSIX separators)
    """
    if source_dir is None:
        return Path(entry_point).name
    return Path(entry_point).as_posix()
