"""What things are: frozen, validated specs. No arithmetic beyond derived properties."""

from trainrig.specs.framework import CUSTOM_FRAMEWORK, FrameworkSpec
from trainrig.specs.gpu import GPU, PeakTflops
from trainrig.specs.hardware import CPU, HostMemory, Link, Storage
from trainrig.specs.job import HardwareSpec, Job, NetworkSpec, TrainingSpec
from trainrig.specs.model import ModelPreset, ModelSpec
from trainrig.specs.offer import Offer
from trainrig.specs.profile import HardwareProfile

__all__ = [
    "GPU",
    "FrameworkSpec",
    "CUSTOM_FRAMEWORK",
    "PeakTflops",
    "CPU",
    "HostMemory",
    "Link",
    "Storage",
    "HardwareSpec",
    "Job",
    "NetworkSpec",
    "TrainingSpec",
    "ModelPreset",
    "ModelSpec",
    "HardwareProfile",
    "Offer",
]
