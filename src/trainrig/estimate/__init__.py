"""The performance model: pure functions from specs to an Estimate. No I/O, no clock, no torch."""

from trainrig.estimate.estimator import estimate
from trainrig.estimate.params import DEFAULT_PARAMETERS, ModelParameters
from trainrig.estimate.result import Estimate

__all__ = ["estimate", "Estimate", "ModelParameters", "DEFAULT_PARAMETERS"]
