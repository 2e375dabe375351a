"""Probe: detect the machine, measure what it delivers, judge it against its spec.

`run_probe(ProbeOptions(...))` returns a `ProbeResult`; `to_profile(result)` turns it into the
`HardwareProfile` that estimates and plans accept. The NVML layer (`trainrig.probe.nvml`) is shared
with the monitor. torch and NVML are imported lazily, only where a section needs them.
"""

from trainrig.probe.profile import to_profile
from trainrig.probe.results import SECTIONS, Check, ProbeResult
from trainrig.probe.runner import ProbeOptions, run_probe

__all__ = ["ProbeOptions", "ProbeResult", "Check", "SECTIONS", "run_probe", "to_profile"]
