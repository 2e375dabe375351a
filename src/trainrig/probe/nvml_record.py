"""Record what a real NVML answers, in the format `FakeNvml` replays.

The recorder wraps the real backend and writes down every answer the NVML layer asks for while it
reads each GPU's static facts, a sample, its NVLinks, a GPM interval and the topology. Replaying the
file through `FakeNvml` therefore answers exactly the calls the layer makes.

    trainrig probe --record-nvml gpu.json            # from the CLI
    python -c "from trainrig.probe.nvml_record import record_nvml; record_nvml('gpu.json')"
"""

from __future__ import annotations

import ctypes
import datetime as dt
import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainrig.probe.nvml import Nvml
from trainrig.probe.nvml_fake import RECORDING_FORMAT, error_name

__all__ = ["RecordingBackend", "record_nvml", "recording_from_session"]

_NOT_RECORDED = {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetHandleByIndex", "nvmlGpmSampleAlloc",
                 "nvmlGpmSampleFree"}


class RecordingBackend:
    """Passes every call to `inner` (pynvml) and keeps each answer or error for the recording."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.NVMLError = inner.NVMLError
        self.c_nvmlGpmMetricsGet_t = getattr(inner, "c_nvmlGpmMetricsGet_t", None)
        self.system: dict[str, Any] = {}
        self.devices: dict[int, dict[str, Any]] = {}
        self._handles: list[tuple[Any, int]] = []
        self._gpm_device: int | None = None

    def __getattr__(self, function: str) -> Callable[..., Any]:
        target = getattr(self.inner, function)

        def call(*args: Any) -> Any:
            try:
                result = target(*args)
            except self.NVMLError as error:
                self._store(function, args, {"nvml_error": error_name(error.value)})
                raise
            self._after(function, args, result)
            return result

        return call

    def _after(self, function: str, args: tuple[Any, ...], result: Any) -> None:
        if function == "nvmlDeviceGetHandleByIndex":
            self._handles.append((result, int(args[0])))
            self.devices.setdefault(int(args[0]), {})
        elif function == "nvmlGpmSampleGet":
            self._gpm_device = self._index(args[0])
        elif function == "nvmlGpmMetricsGet":
            self._store_gpm(result)
        elif function == "nvmlDeviceGetFieldValues":
            self._store_fields(args, result)
        else:
            self._store(function, args, to_json(result))

    def _index(self, handle: Any) -> int | None:
        return next((i for h, i in self._handles if h is handle), None)

    def _store(self, function: str, args: tuple[Any, ...], value: Any) -> None:
        if function in _NOT_RECORDED or function.startswith("nvmlGpm") and function not in (
            "nvmlGpmQueryDeviceSupport", "nvmlGpmMetricsGet"
        ):
            return
        index = self._index(args[0]) if args else None
        if index is None:
            self.system[function] = value
            return
        rest = args[1:]
        device = self.devices.setdefault(index, {})
        if not rest:
            device[function] = value
            return
        key = ",".join(str(self._index(a) if self._index(a) is not None else a) for a in rest)
        existing = device.get(function)
        if not isinstance(existing, dict) or "nvml_error" in existing:
            existing = device[function] = {}
        existing[key] = value

    def _store_gpm(self, result: Any) -> None:
        if self._gpm_device is None:
            return
        metrics = {}
        for slot in range(result.numMetrics):
            metric = result.metrics[slot]
            code = int(metric.nvmlReturn)
            metrics[str(int(metric.metricId))] = (
                float(metric.value) if code == 0 else {"nvml_error": error_name(code)}
            )
        self.devices.setdefault(self._gpm_device, {})["nvmlGpmMetricsGet"] = metrics

    def _store_fields(self, args: tuple[Any, ...], result: Any) -> None:
        index = self._index(args[0])
        if index is None:
            return
        fields = {}
        for value in result:
            code = int(value.nvmlReturn)
            if code:
                fields[str(int(value.fieldId))] = {"nvml_error": error_name(code)}
            else:
                fields[str(int(value.fieldId))] = int(value.value.ullVal)
        self.devices.setdefault(index, {})["nvmlDeviceGetFieldValues"] = fields


def to_json(value: Any) -> Any:
    """pynvml's answers (ctypes structs, bytes, tuples) as plain JSON values."""
    if isinstance(value, bytes):
        return value.decode(errors="replace").rstrip("\x00")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple, ctypes.Array)):
        return [to_json(v) for v in value]
    if isinstance(value, ctypes.Structure):
        return {name: to_json(getattr(value, name)) for name, *_ in value._fields_}
    if hasattr(value, "value"):  # ctypes scalars
        return to_json(value.value)
    if hasattr(value, "__dict__"):  # pynvml's "friendly objects"
        return {k: to_json(v) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


def recording_from_session(backend: RecordingBackend, label: str, source: str) -> dict[str, Any]:
    """The recording dictionary of what `backend` has seen so far."""
    return {
        "format": RECORDING_FORMAT,
        "label": label,
        "source": source,
        "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "system": backend.system,
        "devices": [backend.devices[i] for i in sorted(backend.devices)],
    }


def record_nvml(path: str | Path, label: str = "", source: str | None = None,
                gpm_interval_s: float = 0.2, inner: Any | None = None) -> dict[str, Any]:
    """Read every GPU through a recording backend and write the recording JSON to `path`."""
    if inner is None:
        import pynvml as inner  # lazy: only a recording needs the real library
    backend = RecordingBackend(inner)
    with Nvml.open(backend) as nvml:
        nvml.driver_version()
        nvml.cuda_driver_version()
        for index in range(nvml.device_count()):
            nvml.static(index)
            nvml.sample(index)
            nvml.nvlinks(index)
            nvml.gpm(index, gpm_interval_s)
        nvml.topology()
    recording = recording_from_session(
        backend,
        label or "recorded",
        source or f"recorded by trainrig from a real GPU on {platform.node()}",
    )
    Path(path).write_text(json.dumps(recording, indent=1) + "\n")
    return recording
