"""
S3 locations of the SageMaker backend, and the prefix-wide operations it needs
(list, copy, delete every object of a trial's checkpoint "folder").

S3 has no folders: a location ``s3://bucket/a/b`` stands for every object whose key
starts with ``a/b/``. The trailing slash matters: the checkpoint of trial 1 lives
under ``.../1/`` and deleting it must not touch ``.../10/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Bucket names: 3 to 63 characters, lower-case letters, digits, dots and hyphens,
# starting and ending with a letter or digit (AWS's naming rules, without the rarer ones)
_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(?:/(?P<key>.*))?$")

_DELETE_BATCH = 1000  # most keys DeleteObjects accepts in one call


@dataclass(frozen=True)
class S3Location:
    """
    A bucket and a key prefix, without leading or trailing slashes.

    :param bucket: Bucket name
    :param key: Key prefix ("" for the whole bucket)
    """

    bucket: str
    key: str = ""

    @classmethod
    def parse(cls, uri: str, name: str = "S3 URI") -> S3Location:
        """
        :param uri: ``s3://bucket`` or ``s3://bucket/some/prefix`` (a trailing slash is
            ignored)
        :param name: Name of the argument ``uri`` came from, used in the error message
        :return: Parsed location
        :raises ValueError: if ``uri`` is not an ``s3://`` URI with a valid bucket name
        """
        match = _S3_URI.match(uri) if isinstance(uri, str) else None
        if match is None:
            raise ValueError(
                f"{name} must be an S3 URI like 's3://my-bucket/some/prefix', got {uri!r}"
            )
        key = (match.group("key") or "").strip("/")
        if "//" in key:
            raise ValueError(f"{name} must not contain an empty path segment ('//'), got {uri!r}")
        return cls(bucket=match.group("bucket"), key=key)

    @property
    def uri(self) -> str:
        """``s3://bucket/key`` (no trailing slash)."""
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"

    @property
    def prefix(self) -> str:
        """Key prefix of the objects "inside" this location: ``key + "/"`` ("" for a bucket)."""
        return f"{self.key}/" if self.key else ""

    def child(self, *parts: str | int) -> S3Location:
        """
        :param parts: Path segments appended to the key
        :return: ``s3://bucket/key/part1/part2...``
        """
        segments = [self.key] if self.key else []
        segments += [str(p).strip("/") for p in parts]
        return S3Location(self.bucket, "/".join(s for s in segments if s))

    def __str__(self) -> str:
        return self.uri


def list_keys(s3_client: Any, location: S3Location) -> list[str]:
    """
    :param s3_client: boto3 S3 client
    :param location: Location whose objects are listed
    :return: Keys of all objects under ``location.prefix``, in S3's (lexicographic) order
    """
    keys: list[str] = []
    paginator = s3_client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=location.bucket, Prefix=location.prefix):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    return keys


def delete_prefix(s3_client: Any, location: S3Location) -> int:
    """
    Deletes every object under ``location.prefix``. Nothing there is not an error.

    :param s3_client: boto3 S3 client
    :param location: Location to empty; must not be a whole bucket
    :return: Number of objects deleted
    :raises ValueError: if ``location`` is a whole bucket (a guard against wiping it)
    :raises RuntimeError: if S3 reports objects it could not delete
    """
    if not location.key:
        raise ValueError(f"refusing to delete a whole bucket ({location.uri})")
    keys = list_keys(s3_client, location)
    for start in range(0, len(keys), _DELETE_BATCH):
        batch = keys[start : start + _DELETE_BATCH]
        response = s3_client.delete_objects(
            Bucket=location.bucket,
            Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
        )
        errors = response.get("Errors", [])
        if errors:
            first = errors[0]
            raise RuntimeError(
                f"could not delete {len(errors)} object(s) under {location.uri}, e.g. "
                f"{first.get('Key')}: {first.get('Code')} {first.get('Message')}"
            )
    return len(keys)


def copy_prefix(s3_client: Any, source: S3Location, target: S3Location) -> int:
    """
    Copies every object under ``source.prefix`` to the same relative key under
    ``target.prefix`` (server side).

    :param s3_client: boto3 S3 client
    :param source: Location copied from
    :param target: Location copied to
    :return: Number of objects copied
    """
    keys = list_keys(s3_client, source)
    for key in keys:
        s3_client.copy_object(
            CopySource={"Bucket": source.bucket, "Key": key},
            Bucket=target.bucket,
            Key=target.prefix + key[len(source.prefix) :],
        )
    return len(keys)
