"""trainrig: will it fit, how long, what cost, which hardware — and does the machine deliver?

The public Python API. Everything not listed in `__all__` is private and may change.

Names are imported on first use (PEP 562), so `import trainrig` — and every CLI verb, which imports
it — costs only what is used: numpy, pydantic and the catalog load with the first estimate.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name → (module, attribute)
_EXPORTS = {
    "load_model": ("trainrig.catalog.models", "load_model"),
    "load_job": ("trainrig.catalog.job_file", "load_job"),
    "estimate": ("trainrig.estimate", "estimate"),
    "Estimate": ("trainrig.estimate", "Estimate"),
    "fit": ("trainrig.fit_answers", "fit"),
    "FitResult": ("trainrig.fit_answers", "FitResult"),
    "plan": ("trainrig.plan", "plan"),
    "PlanResult": ("trainrig.plan", "PlanResult"),
    "monitor": ("trainrig.monitor", "monitor"),
    "ModelParameters": ("trainrig.estimate", "ModelParameters"),
    "load_catalog": ("trainrig.catalog", "load_catalog"),
    "get_gpu": ("trainrig.catalog", "get_gpu"),
    "get_link": ("trainrig.catalog", "get_link"),
    "ModelSpec": ("trainrig.specs", "ModelSpec"),
    "Job": ("trainrig.specs", "Job"),
    "TrainingSpec": ("trainrig.specs", "TrainingSpec"),
    "HardwareSpec": ("trainrig.specs", "HardwareSpec"),
    "HardwareProfile": ("trainrig.specs", "HardwareProfile"),
    "GPU": ("trainrig.specs", "GPU"),
    "Link": ("trainrig.specs", "Link"),
    "TrainrigError": ("trainrig.errors", "TrainrigError"),
}

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from trainrig.catalog import get_gpu as get_gpu
    from trainrig.catalog import get_link as get_link
    from trainrig.catalog import load_catalog as load_catalog
    from trainrig.catalog.job_file import load_job as load_job
    from trainrig.catalog.models import load_model as load_model
    from trainrig.errors import TrainrigError as TrainrigError
    from trainrig.estimate import Estimate as Estimate
    from trainrig.estimate import ModelParameters as ModelParameters
    from trainrig.estimate import estimate as estimate
    from trainrig.fit_answers import FitResult as FitResult
    from trainrig.fit_answers import fit as fit
    from trainrig.monitor import monitor as monitor
    from trainrig.plan import PlanResult as PlanResult
    from trainrig.plan import plan as plan
    from trainrig.specs import GPU as GPU
    from trainrig.specs import HardwareProfile as HardwareProfile
    from trainrig.specs import HardwareSpec as HardwareSpec
    from trainrig.specs import Job as Job
    from trainrig.specs import Link as Link
    from trainrig.specs import ModelSpec as ModelSpec
    from trainrig.specs import TrainingSpec as TrainingSpec


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'trainrig' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later lookups find it directly
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


class _PublicApi(types.ModuleType):
    """`trainrig.estimate`, `.plan` and `.monitor` are functions that share their names with
    subpackages; importing a subpackage must not rebind the function's name to the package."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _PublicApi
