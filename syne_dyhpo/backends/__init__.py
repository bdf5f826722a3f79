"""
Trial backends for Syne Tune 0.16 that Syne Tune itself no longer ships.

* :mod:`syne_dyhpo.backends.sagemaker`: :class:`SageMakerBackend` runs every segment
  of a trial (start, and each resume after a pause) as an Amazon SageMaker training
  job that continues from the trial's checkpoint in S3. Needs the ``sagemaker`` extra
  (``pip install "syne-dyhpo[sagemaker]"``, i.e. boto3).

Nothing is imported here, so that ``import syne_dyhpo.backends`` works without boto3;
import the backend from its module::

    from syne_dyhpo.backends.sagemaker import SageMakerBackend
"""
