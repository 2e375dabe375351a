"""Job files (YAML or JSON, or the same content as a mapping) → a validated `Job`.

Names in the file are catalog ids or aliases; what the loader decides on the user's behalf (an
alias's choice of part, a default link, a power cap's effect) is recorded in `Job.notes`. Every
mistake ends in one TrainrigError naming the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from trainrig.catalog import Catalog, load_catalog
from trainrig.catalog.files import load_data_file, read_text
from trainrig.catalog.models import resolve_model
from trainrig.catalog.yaml_text import load_yaml
from trainrig.errors import TrainrigError, from_validation_error
from trainrig.specs import CUSTOM_FRAMEWORK, GPU, HardwareProfile, HardwareSpec, Job, Link, NetworkSpec, TrainingSpec
from trainrig.specs.base import MAX_GPUS, check_number

__all__ = ["load_job", "read_job_file", "job_to_mapping", "load_profile", "MEASURED_RUN_KEYS"]

JOB_KEYS = {"model", "hardware", "training"}
# keys of the measured-run format (DESIGN.md) that a job file may carry and the estimate ignores
MEASURED_RUN_KEYS = {"id", "source", "measured", "note", "name"}
HARDWARE_KEYS = {
    "gpu", "n_gpus", "gpus_per_node", "intra_node", "inter_node", "host_link", "pcie",
    "gpus_per_pcie_switch", "cpu", "cpu_cores_per_node", "ram_gb_per_node", "host_memory",
    "storage", "profile",
}
# The network a node of each scale-up generation usually has, one port per GPU: DGX-1/2 EDR,
# DGX A100 HDR, DGX H100 and DGX B200 ConnectX-7 NDR (NVIDIA DGX user guides, "network ports").
DEFAULT_NETWORK = {"nvlink2": "ib-edr", "nvlink3": "ib-hdr", "nvlink4": "ib-ndr", "nvlink5": "ib-ndr",
                   "infinity-fabric-3": "eth-400g", "gaudi3-roce": "eth-400g", "gaudi2-roce": "eth-100g"}


def read_job_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML or JSON job file."""
    path = Path(path)
    data = load_data_file(path, "job")  # regular UTF-8 files of bounded size only, one sentence if not
    if not isinstance(data, dict):
        raise TrainrigError("job", f"{path} must hold a mapping with model, hardware and training.")
    if isinstance(data.get("hardware"), dict) and isinstance(data["hardware"].get("profile"), str):
        data["hardware"]["profile"] = str((path.parent / data["hardware"]["profile"]).resolve())
    return data


def load_job(source: str | Path | Mapping[str, Any], extra_dirs: tuple[str, ...] = ()) -> Job:
    """A Job from a job file's path or its content as a mapping."""
    if not isinstance(source, str | Path | Mapping):  # e.g. a parsed JSON array: one sentence, not a TypeError
        raise TrainrigError("job", "must be a job file's path or a mapping with model, hardware and training.")
    data = dict(source) if isinstance(source, Mapping) else read_job_file(source)
    unknown = set(data) - JOB_KEYS - MEASURED_RUN_KEYS
    if unknown:
        raise TrainrigError(sorted(unknown)[0], "is not a job-file section; use model, hardware and training.")
    for key in ("model", "hardware"):
        if key not in data:
            raise TrainrigError(key, "is required.")
    catalog = load_catalog(tuple(extra_dirs))
    model, model_note = resolve_model(data["model"], tuple(extra_dirs))
    hardware, notes = _hardware(data["hardware"], catalog)
    raw_training = data.get("training") or {}
    named = raw_training.get("framework", "custom") if isinstance(raw_training, Mapping) else "custom"
    # an alias (transformers, peft, lit-gpt …) resolves to the catalog id the spec knows
    framework = _lookup(catalog.frameworks, named, "training.framework").entry if isinstance(named, str) else None
    if framework is not None and isinstance(raw_training, Mapping) and "framework" in raw_training:
        raw_training = {**raw_training, "framework": framework.id}
    training = _training(raw_training)  # a framework that is not a name fails here, naming the field
    notes = ([model_note] if model_note else []) + notes
    try:
        return Job(model=model, hardware=hardware, training=training, framework=framework or CUSTOM_FRAMEWORK,
                   notes=tuple(notes))
    except ValidationError as error:
        raise from_validation_error(error) from None


def _training(raw: Any) -> TrainingSpec:
    if not isinstance(raw, Mapping):
        raise TrainrigError("training", "must be a mapping of training settings.")
    try:
        return TrainingSpec.model_validate(dict(raw))
    except ValidationError as error:
        raise from_validation_error(error, prefix="training") from None


def _hardware(raw: Any, catalog: Catalog) -> tuple[HardwareSpec, list[str]]:
    if not isinstance(raw, Mapping):
        raise TrainrigError("hardware", "must be a mapping with at least gpu and n_gpus.")
    unknown = set(raw) - HARDWARE_KEYS
    if unknown:
        field = sorted(unknown)[0]
        raise TrainrigError(f"hardware.{field}", f"is not a known field; valid: {', '.join(sorted(HARDWARE_KEYS))}.")
    if "gpu" not in raw:
        raise TrainrigError("hardware.gpu", "is required (a catalog name such as H100-SXM5-80GB).")
    notes: list[str] = []
    gpu = _gpu(raw["gpu"], catalog, notes)
    n_gpus = _positive_int(raw.get("n_gpus", 1), "hardware.n_gpus")
    gpus_per_node = _positive_int(raw.get("gpus_per_node", min(n_gpus, 8)), "hardware.gpus_per_node")
    host_link = _link(raw.get("host_link", raw.get("pcie")) or gpu.host_link or f"pcie{gpu.pcie_gen}-x{gpu.pcie_lanes}",
                      catalog, "hardware.host_link", notes)
    intra = raw.get("intra_node") or gpu.scale_up
    intra_link = _link(intra, catalog, "hardware.intra_node", notes) if intra else host_link
    fields: dict[str, Any] = {
        "gpu": gpu, "n_gpus": n_gpus, "gpus_per_node": gpus_per_node, "intra_node": intra_link,
        "host_link": host_link,
        "inter_node": _network(raw.get("inter_node"), gpu, n_gpus, gpus_per_node, catalog, notes),
    }
    for key, section in (("cpu", catalog.cpus), ("host_memory", catalog.host_memory), ("storage", catalog.storage)):
        if raw.get(key) is not None:
            resolved = _lookup(section, raw[key], f"hardware.{key}")
            fields[key] = resolved.entry
    if fields.get("cpu") is not None and "host_memory" not in fields:
        fields["host_memory"] = catalog.host_memory.get(fields["cpu"].memory).entry
    for key in ("cpu_cores_per_node", "ram_gb_per_node", "gpus_per_pcie_switch"):
        if raw.get(key) is not None:
            fields[key] = raw[key]
    if raw.get("profile") is not None:
        fields["profile"] = load_profile(raw["profile"])
    try:
        return HardwareSpec.model_validate(fields), notes
    except ValidationError as error:
        raise from_validation_error(error, prefix="hardware") from None


def _gpu(raw: Any, catalog: Catalog, notes: list[str]) -> GPU:
    """A catalog GPU, or `{base: NAME, field: value …}` overriding some of its figures.

    A lower `tdp_w` without new peak rates scales the peaks by (tdp/base)^(1/3): dynamic power
    grows about with f·V² and voltage with frequency, so sustained clocks follow P^(1/3)."""
    if isinstance(raw, str):
        resolved = _lookup(catalog.gpus, raw, "hardware.gpu")
        if resolved.note:
            notes.append(resolved.note)
        return resolved.entry
    if not isinstance(raw, Mapping) or "base" not in raw:
        raise TrainrigError("hardware.gpu", "must be a catalog name or a mapping with `base` and overrides.")
    base = _lookup(catalog.gpus, str(raw["base"]), "hardware.gpu.base").entry
    overrides = {k: v for k, v in raw.items() if k != "base"}
    data = base.model_dump()
    data.update(overrides)
    tdp_w = overrides.get("tdp_w")
    is_watts = isinstance(tdp_w, int | float) and not isinstance(tdp_w, bool)  # else GPU validation names it
    if is_watts and "peak_tflops" not in overrides and 0 < tdp_w < base.tdp_w:
        scale = (overrides["tdp_w"] / base.tdp_w) ** (1 / 3)
        data["peak_tflops"] = {k: (v * scale if v else v) for k, v in base.peak_tflops.model_dump().items()}
        notes.append(f"{base.id} at {overrides['tdp_w']:g} W of {base.tdp_w:g} W: peak rates scaled by {scale:.3f}"
                     " (sustained clock ∝ power^(1/3))")
    data["name"] = f"{base.name} (modified: {', '.join(sorted(overrides))})"
    try:
        return GPU.model_validate(data)
    except ValidationError as error:
        raise from_validation_error(error, prefix="hardware.gpu") from None


def _network(raw: Any, gpu: GPU, n_gpus: int, gpus_per_node: int, catalog: Catalog, notes: list[str]):
    if raw is None:
        if n_gpus <= gpus_per_node:
            return None
        name = DEFAULT_NETWORK.get(gpu.scale_up or "", "eth-100g")
        link = catalog.links.get(name).entry
        ports = link.default_ports_per_node or gpus_per_node
        notes.append(f"hardware.inter_node defaulted to {ports} × {link.id} per node; set it to change")
        return NetworkSpec(link=link, ports_per_node=ports)
    if isinstance(raw, str):
        link = _link(raw, catalog, "hardware.inter_node", notes)
        return NetworkSpec(link=link, ports_per_node=link.default_ports_per_node or gpus_per_node)
    if isinstance(raw, Mapping):
        return _network_mapping(raw, gpus_per_node, catalog, notes)
    raise TrainrigError("hardware.inter_node", "must be a link name or {bandwidth_gbps, ports_per_node}.")


def _network_mapping(raw: Mapping, gpus_per_node: int, catalog: Catalog, notes: list[str]) -> NetworkSpec:
    """`{link: NAME, ports_per_node: N}` or `{bandwidth_gbps: G, ports_per_node: N}`: a port of G Gb/s
    takes latency and efficiency from the catalog link of the nearest InfiniBand speed."""
    ports = _positive_int(raw.get("ports_per_node", gpus_per_node), "hardware.inter_node.ports_per_node")
    if "link" in raw:
        return NetworkSpec(link=_link(raw["link"], catalog, "hardware.inter_node.link", notes), ports_per_node=ports)
    gbps = check_number("hardware.inter_node.bandwidth_gbps", raw.get("bandwidth_gbps"), what="of Gb/s per port")
    networks = [link for link in catalog.links if link.line_rate_gbps and link.kind == "infiniband"]
    nearest = min(networks, key=lambda link: abs(link.line_rate_gbps - gbps))
    port = {"id": f"{gbps:g}gbps", "name": f"{gbps:g} Gb/s port ({nearest.id} latency and efficiency)",
            "line_rate_gbps": float(gbps), "bandwidth_gbs": nearest.bandwidth_gbs * gbps / nearest.line_rate_gbps}
    try:  # validated, not model_copy: the scaled rate must stay within the spec's bounds
        link = Link.model_validate({**nearest.model_dump(), **port})
    except ValidationError as error:
        raise from_validation_error(error, prefix="hardware.inter_node") from None
    return NetworkSpec(link=link, ports_per_node=ports)


def _link(name: Any, catalog: Catalog, field: str, notes: list[str]) -> Link:
    if not isinstance(name, str):
        raise TrainrigError(field, "must be a link name such as nvlink4, pcie5-x16 or ib-ndr.")
    resolved = _lookup(catalog.links, name, field)
    return resolved.entry


def _lookup(section, name: Any, field: str):
    if not isinstance(name, str):
        raise TrainrigError(field, f"must be a {section.kind} name.")
    try:
        return section.get(name)
    except TrainrigError as error:
        raise TrainrigError(field, error.message) from None


def load_profile(raw: Any) -> HardwareProfile:
    """A HardwareProfile from a mapping or a `trainrig probe --save` file."""
    try:
        if isinstance(raw, Mapping):
            return HardwareProfile.model_validate(dict(raw))
        return HardwareProfile.model_validate_json(read_text(str(raw), "hardware.profile"))
    except ValidationError as error:
        raise from_validation_error(error, prefix="hardware.profile") from None


def _positive_int(value: Any, field: str) -> int:
    """A GPU, node or port count: bounded like the spec fields, before any default is derived from it."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_GPUS:
        raise TrainrigError(field, f"must be a whole number from 1 to {MAX_GPUS} (got {value!r}).")
    return value


def _where(error: Exception) -> str:
    mark = getattr(error, "problem_mark", None)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(error, json.JSONDecodeError):
        return f"line {error.lineno}, column {error.colno}"
    return "syntax error"


def job_to_mapping(job: Job) -> dict[str, Any]:
    """A job-file mapping that `load_job` turns back into an equal Job (for plans to re-estimate)."""
    hw = job.hardware
    hardware: dict[str, Any] = {
        "gpu": hw.gpu.id if not hw.gpu.name.endswith(")") or "modified" not in hw.gpu.name else _gpu_mapping(hw.gpu),
        "n_gpus": hw.n_gpus, "gpus_per_node": hw.gpus_per_node, "intra_node": hw.intra_node.id,
        "host_link": hw.host_link.id, "gpus_per_pcie_switch": hw.gpus_per_pcie_switch,
    }
    if hw.inter_node is not None:
        hardware["inter_node"] = {"link": hw.inter_node.link.id, "ports_per_node": hw.inter_node.ports_per_node}
    for key in ("cpu", "host_memory", "storage"):
        if getattr(hw, key) is not None:
            hardware[key] = getattr(hw, key).id
    for key in ("cpu_cores_per_node", "ram_gb_per_node"):
        if getattr(hw, key) is not None:
            hardware[key] = getattr(hw, key)
    if hw.profile is not None:
        hardware["profile"] = hw.profile.model_dump(mode="json")
    model = job.model.model_dump(mode="json", exclude_defaults=True)
    model.setdefault("name", job.model.name)
    training = job.training.model_dump(mode="json", exclude_none=True)
    return {"model": model, "hardware": hardware, "training": training}


def _gpu_mapping(gpu: GPU) -> dict[str, Any]:
    data = gpu.model_dump(mode="json")
    data["name"] = data["name"].split(" (modified")[0]
    return {"base": gpu.id, **{k: v for k, v in data.items() if k not in ("id", "aliases", "sources")}}


# Short names a `--what-if` or `--set` may use, and where they live in the job file.
CHANGE_ALIASES = {
    "gpus": ("hardware", "n_gpus"), "pcie": ("hardware", "host_link"), "cpu_cores": ("hardware", "cpu_cores_per_node"),
    "ram_gb": ("hardware", "ram_gb_per_node"), "network": ("hardware", "inter_node"),
}
TRAINING_KEYS = set(TrainingSpec.model_fields)


# a comma that starts the next `key=` of a combined change (`zero=3, recompute=full`); commas inside a
# value (`lora_targets=[q, v]`) are not followed by a key and an equals sign
_NEXT_CHANGE = re.compile(r",\s*(?=[A-Za-z_][A-Za-z0-9_.]*\s*=)")


def apply_change(mapping: Mapping[str, Any], change: str) -> dict[str, Any]:
    """A copy of a job mapping with a `key=value` change (value parsed as YAML: numbers, names), or
    several at once separated by commas (`zero=3, recompute=full`: one variant with both).

    Keys are job-file fields with or without their section (`inter_node`, `hardware.inter_node`,
    `zero`, `training.zero`), plus the short names `gpus`, `pcie`, `cpu_cores`, `ram_gb`, `network`.
    """
    parts = _NEXT_CHANGE.split(change)
    if len(parts) > 1:
        changed = dict(mapping)
        for part in parts:
            changed = _apply_one_change(changed, part, change)
        return changed
    return _apply_one_change(mapping, change, change)


def _apply_one_change(mapping: Mapping[str, Any], change: str, whole: str) -> dict[str, Any]:
    if "=" not in change:
        raise TrainrigError("what_if", f"'{change}' is not key=value (e.g. inter_node=eth-10g).")
    key, _, raw = change.partition("=")
    key = key.strip()
    try:
        value = load_yaml(raw, source=f"what_if '{key}'") if raw.strip() else None
    except yaml.YAMLError:
        value = raw.strip()
    section, field = _change_target(key)
    changed = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in mapping.items()}
    if section == "model":
        changed["model"] = value
        return changed
    if not isinstance(changed.get(section) or {}, Mapping):
        raise TrainrigError(section, f"must be a mapping of {section} settings, so {key} cannot be changed in it.")
    target = dict(changed.get(section) or {})
    target[field] = value
    if section == "training" and field in ("tp", "pp", "cp") and "dp" not in str(whole):
        target["dp"] = "auto"
        target.pop("grad_accum", None)
    if section == "training" and field in ("micro_batch", "global_batch"):
        target.pop("grad_accum", None)
    changed[section] = target
    return changed


def _change_target(key: str) -> tuple[str, str]:
    if key == "model":
        return "model", "model"
    if "." in key:
        section, field = key.split(".", 1)
        if section not in ("hardware", "training") or not field:
            raise TrainrigError("what_if", f"'{key}' must be hardware.<field> or training.<field>.")
        return section, field
    if key in CHANGE_ALIASES:
        return CHANGE_ALIASES[key]
    if key in HARDWARE_KEYS:
        return "hardware", key
    if key in TRAINING_KEYS:
        return "training", key
    valid = sorted(HARDWARE_KEYS | TRAINING_KEYS | set(CHANGE_ALIASES))
    raise TrainrigError("what_if", f"unknown key '{key}'; valid: {', '.join(valid)}.")
