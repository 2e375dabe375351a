"""A fake NVML backend that replays recorded responses, for tests, demos and machines without GPUs.

Shipped in the package (like httpx's MockTransport) so that the monitor and users' own tests can
use it: `Nvml.open(FakeNvml.from_recording("h100_sxm_healthy"))`.

Recording format (`trainrig-nvml-recording/1`, written by `trainrig.probe.nvml_record`):

    {"format": "trainrig-nvml-recording/1", "label": "...", "source": "where the values come from",
     "system": {"nvmlSystemGetDriverVersion": "550.54.15", "nvmlSystemGetCudaDriverVersion": 12040},
     "devices": [{"nvmlDeviceGetName": "NVIDIA H100 80GB HBM3",
                  "nvmlDeviceGetClockInfo": {"1": 1980, "2": 2619},
                  "nvmlDeviceGetPowerUsage": {"nvml_error": "NotSupported"}, ...}]}

Each device maps a pynvml function name to its answer. A function called with arguments beyond the
device handle maps "arg1,arg2" to the answer (another GPU's handle is written as its index). An
answer is a JSON value (a mapping becomes an object with attributes, as pynvml's structs), or
`{"nvml_error": NAME}` where NAME is a pynvml error class suffix (`NotSupported`, `NoPermission`,
`FunctionNotFound`, `GPUIsLost`, …) or the numeric NVML return code. Two functions have their own
shapes: `nvmlDeviceGetFieldValues` maps field ids to values, and `nvmlGpmMetricsGet` maps GPM
metric ids to values. A call the recording lacks answers FunctionNotFound, so it reads as N/A.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from trainrig.errors import TrainrigError

__all__ = ["FakeNvml", "FakeHandle", "RECORDING_FORMAT", "recording_names", "load_recording",
           "ERROR_CODES", "error_name"]

RECORDING_FORMAT = "trainrig-nvml-recording/1"

# pynvml error class suffixes → NVML return codes (nvml.h nvmlReturn_t).
ERROR_CODES: dict[str, int] = {
    "Uninitialized": 1,
    "InvalidArgument": 2,
    "NotSupported": 3,
    "NoPermission": 4,
    "NotFound": 6,
    "DriverNotLoaded": 9,
    "LibraryNotFound": 12,
    "FunctionNotFound": 13,
    "GPUIsLost": 15,
    "ResetRequired": 16,
    "LibRmVersionMismatch": 18,
    "Unknown": 999,
}
_CODE_NAMES = {code: name for name, code in ERROR_CODES.items()}
_NOT_RECORDED = ERROR_CODES["FunctionNotFound"]


def error_name(code: int) -> str:
    """An NVML return code as the recording writes it (`NotSupported`, or the number)."""
    return _CODE_NAMES.get(code, str(code))


class FakeHandle:
    """A device handle of the fake backend: just the device index."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"FakeHandle({self.index})"


class FakeNvml:
    """Answers pynvml's functions from a recording; raises pynvml's own NVMLError types."""

    NVMLError = pynvml.NVMLError
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    def __init__(self, recording: dict[str, Any]) -> None:
        if recording.get("format") != RECORDING_FORMAT:
            raise TrainrigError("--nvml-fake", f"not a {RECORDING_FORMAT} recording.")
        self.recording = recording
        self.system: dict[str, Any] = recording.get("system", {})
        self.devices: list[dict[str, Any]] = recording.get("devices", [])
        self._gpm_device: int | None = None
        self.calls: list[str] = []

    @classmethod
    def from_recording(cls, name_or_path: str | Path) -> FakeNvml:
        """A shipped recording by name (`h100_sxm_healthy`) or any recording file by path."""
        return cls(load_recording(name_or_path))

    # -- system-level functions -----------------------------------------------------------
    def nvmlInit(self) -> None:
        self._system_answer("nvmlInit", None)

    def nvmlShutdown(self) -> None:
        return None

    def nvmlSystemGetDriverVersion(self) -> Any:
        return self._system_answer("nvmlSystemGetDriverVersion")

    def nvmlSystemGetCudaDriverVersion(self) -> Any:
        return self._system_answer("nvmlSystemGetCudaDriverVersion")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        if not 0 <= index < len(self.devices):
            raise pynvml.NVMLError(ERROR_CODES["InvalidArgument"])
        return FakeHandle(index)

    def _system_answer(self, function: str, default: Any = ...) -> Any:
        self.calls.append(function)
        if function not in self.system:
            if default is ...:
                raise pynvml.NVMLError(_NOT_RECORDED)
            return default
        return _answer(self.system[function])

    # -- GPM ---------------------------------------------------------------------------------
    def nvmlGpmSampleAlloc(self) -> Any:
        return pynvml.c_nvmlGpmSample_t()

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        return None

    def nvmlGpmSampleGet(self, handle: FakeHandle, sample: Any) -> Any:
        self._device_answer("nvmlGpmQueryDeviceSupport", handle, ())
        self._gpm_device = handle.index
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        if self._gpm_device is None:
            raise pynvml.NVMLError(ERROR_CODES["InvalidArgument"])
        recorded = self.devices[self._gpm_device].get("nvmlGpmMetricsGet")
        if recorded is None:
            raise pynvml.NVMLError(_NOT_RECORDED)
        _raise_if_error(recorded)
        for slot in range(request.numMetrics):
            metric = request.metrics[slot]
            value = recorded.get(str(metric.metricId))
            if value is None or _error_code(value) is not None:
                metric.nvmlReturn = _error_code(value) or ERROR_CODES["NotSupported"]
            else:
                metric.nvmlReturn, metric.value = 0, float(value)
        return request

    # -- every device-level function --------------------------------------------------------
    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, field_ids: list[int]) -> list[Any]:
        recorded = self._device_answer_raw("nvmlDeviceGetFieldValues", handle)
        return [_field_value(field_id, recorded.get(str(field_id))) for field_id in field_ids]

    def __getattr__(self, function: str) -> Any:
        if not function.startswith("nvml"):
            raise AttributeError(function)

        def call(handle: Any = None, *args: Any) -> Any:
            if not isinstance(handle, FakeHandle):
                raise pynvml.NVMLError(_NOT_RECORDED)
            return self._device_answer(function, handle, args)

        return call

    def _device_answer_raw(self, function: str, handle: FakeHandle) -> Any:
        self.calls.append(function)
        recorded = self.devices[handle.index].get(function)
        if recorded is None:
            raise pynvml.NVMLError(_NOT_RECORDED)
        _raise_if_error(recorded)
        return recorded

    def _device_answer(self, function: str, handle: FakeHandle, args: tuple[Any, ...]) -> Any:
        recorded = self._device_answer_raw(function, handle)
        if args:
            key = args_key(args)
            if not isinstance(recorded, dict) or key not in recorded:
                raise pynvml.NVMLError(_NOT_RECORDED)
            recorded = recorded[key]
        return _answer(recorded)


def args_key(args: tuple[Any, ...]) -> str:
    """The recording's key for the arguments after the handle: `1,0`; a handle is its index."""
    return ",".join(str(a.index if isinstance(a, FakeHandle) else a) for a in args)


def recording_names() -> list[str]:
    """The recordings shipped in `trainrig/probe/recordings/`."""
    folder = resources.files("trainrig.probe") / "recordings"
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def load_recording(name_or_path: str | Path) -> dict[str, Any]:
    """A recording by shipped name or by file path; TrainrigError if neither exists."""
    path = Path(name_or_path)
    if path.suffix == ".json" and path.is_file():
        text = path.read_text()
    else:
        shipped = resources.files("trainrig.probe") / "recordings" / f"{name_or_path}.json"
        if not shipped.is_file():
            names = ", ".join(recording_names())
            raise TrainrigError("--nvml-fake", f"no recording '{name_or_path}'; shipped: {names}.")
        text = shipped.read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise TrainrigError("--nvml-fake", f"{name_or_path} is not valid JSON ({error.msg}).") from None


def _error_code(value: Any) -> int | None:
    if isinstance(value, dict) and "nvml_error" in value:
        name = value["nvml_error"]
        return int(name) if isinstance(name, int) or str(name).isdigit() else ERROR_CODES[name]
    return None


def _raise_if_error(value: Any) -> None:
    code = _error_code(value)
    if code is not None:
        raise pynvml.NVMLError(code)


def _answer(value: Any) -> Any:
    """A recorded JSON value as pynvml would return it: mappings become attribute objects."""
    _raise_if_error(value)
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _answer(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_answer(v) for v in value]
    return value


def _field_value(field_id: int, value: Any) -> SimpleNamespace:
    code = ERROR_CODES["NotSupported"] if value is None else _error_code(value)
    number = 0 if code is not None else value
    union = SimpleNamespace(dVal=float(number), uiVal=int(number), ulVal=int(number),
                            ullVal=int(number), sllVal=int(number), siVal=int(number),
                            usVal=int(number))
    return SimpleNamespace(fieldId=field_id, nvmlReturn=code or 0, valueType=3, value=union)
