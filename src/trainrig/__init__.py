"""trainrig: will it fit, how long, what cost, which hardware — and does the machine deliver?

The public Python API. Everything not listed in `__all__` is private and may change.
"""

from trainrig.catalog import get_gpu, get_link, load_catalog
from trainrig.catalog.job_file import load_job
from trainrig.catalog.models import load_model
from trainrig.errors import TrainrigError
from trainrig.estimate import Estimate, ModelParameters
from trainrig.estimate import estimate as estimate
from trainrig.fit_answers import FitResult
from trainrig.fit_answers import fit as fit
from trainrig.monitor import monitor as monitor
from trainrig.plan import PlanResult
from trainrig.plan import plan as plan
from trainrig.specs import GPU, HardwareProfile, HardwareSpec, Job, Link, ModelSpec, TrainingSpec

__version__ = "0.1.0"

__all__ = [
    "load_model",
    "load_job",
    "estimate",
    "Estimate",
    "fit",
    "FitResult",
    "plan",
    "PlanResult",
    "monitor",
    "ModelParameters",
    "load_catalog",
    "get_gpu",
    "get_link",
    "ModelSpec",
    "Job",
    "TrainingSpec",
    "HardwareSpec",
    "HardwareProfile",
    "GPU",
    "Link",
    "TrainrigError",
    "__version__",
]
