"""The job-file reference (`docs/job-file.md`), generated from the specs' attribute docstrings.

The docstring under each field of a spec is the one description of that field; this module reads
those docstrings from the modules' source with `ast` (pydantic keeps no attribute docstrings unless
a model opts in, and the specs should not change for the sake of their documentation), and takes
types, choices, bounds and defaults from the models themselves. What the job file does differently
from the specs (catalog names where a spec holds a resolved object, loader defaults) is stated
here, next to the hardware table it changes.

`scripts/gen_job_file_doc.py` writes the result; `tests/test_job_file_doc.py` fails when the
committed file and the specs disagree.
"""

from __future__ import annotations

import ast
import inspect
import re
import types
import typing
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = ["job_file_reference_markdown", "field_docstrings"]

GENERATOR = "scripts/gen_job_file_doc.py"

# How the job file writes the hardware fields whose spec type is a resolved catalog object, and the
# defaults the loader (catalog/job_file.py) fills in where the spec itself has none.
HARDWARE_IN_FILE: dict[str, tuple[str | None, str | None]] = {
    "gpu": ("GPU catalog id or alias, or a mapping `{base: ID, …}` ([GPU overrides](#gpu-overrides))", None),
    "n_gpus": (None, "`1`"),
    "gpus_per_node": (None, "`min(n_gpus, 8)`"),
    "intra_node": ("link catalog id", "the GPU's scale-up link (`scale_up`); the host link for PCIe-only cards"),
    "inter_node": ("link catalog id, or a mapping ([inter_node](#inter-node))",
                   "none on one node; [by scale-up generation](#inter-node) on several"),
    "host_link": ("link catalog id; the key `pcie` is accepted too",
                  "the GPU's `host_link` (NVLink-C2C on GB200/GB300), else `pcie<gen>-x<lanes>` of its host interface"),
    "cpu": ("CPU catalog id", None),
    "host_memory": ("host-memory catalog id", "the CPU's `memory` when `cpu` is given, else `null`"),
    "storage": ("storage catalog id", None),
    "profile": ("path to a `trainrig probe --save` file (relative to the job file), or its content as a mapping",
                None),
}

# `inter_node: {…}` keys the loader reads; `bandwidth_gbps` has no spec field behind it (the loader
# builds a Link from it), so its description lives here.
INTER_NODE_BANDWIDTH_DOC = (
    "Speed of one port in Gb/s, as network speeds are quoted; latency and efficiency are taken from "
    "the catalog's InfiniBand link of the nearest speed. Give either this or `link`."
)

# Measured-run keys: behaviour of catalog/cases.py, which has no docstrings per key.
MEASURED_RUN_KEY_DOCS = {
    "source": "Required. Where the measurement comes from: a paper and table, a README, a run log.",
    "measured": "Required. A mapping of at least one of the metrics below.",
    "id": "Name of the run in reports; default `<file stem>_<position in the file>`.",
    "note": "Free text kept with the run, e.g. how a source's TFLOP/s were converted to tokens/s.",
    "name": "A label; accepted and ignored, so a run can be read as a plain job file.",
}
# The keys DESIGN.md promises in every estimate; the others may change between versions.
STABLE_ESTIMATE_KEYS = (
    "fits", "memory_per_gpu_gib", "memory_breakdown_gib", "step_time_s", "step_breakdown_s", "tokens_per_s",
    "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "bottleneck", "total_time_s", "gpu_hours",
    "cost_usd", "warnings",
)

# Units spelled in field names, tried in order (so `tokens_per_s` wins over a bare `_s`).
_NAME_UNITS = (
    (r"tokens_per_s", "tokens/s"), (r"tflops", "TFLOP/s"), (r"usd_per_gpu_hour", "USD per GPU-hour"),
    (r"(^|_)gpu_hours$", "GPU-hours"), (r"_usd$", "USD"), (r"_gib(_|$)", "GiB"), (r"_gbs(_|$)", "GB/s"),
    (r"_gbps(_|$)", "Gb/s"), (r"_gb(_|$)", "GB"), (r"_w$", "W"), (r"_mhz$", "MHz"), (r"_ghz$", "GHz"),
    (r"_mts$", "MT/s"), (r"_us$", "µs"), (r"_ms$", "ms"), (r"_s$", "s"), (r"_bits$", "bits"), (r"_iops$", "IOPS"),
)
# Units a docstring states ("… in GB/s", "…, GiB", "(GiB)"), and counted things it opens with
# ("Tokens per sequence", "Steps between checkpoints").
_DOC_UNIT = re.compile(r"(?:\bin |, |\()(GB/s|Gb/s|GiB|GB|TFLOP/s|TOPS|watts|microseconds|milliseconds)\b")
_DOC_COUNT = re.compile(r"^(?:[A-Za-z]+ ){0,2}?(tokens|sequences|micro-batches|steps)\b (?:per|between|in)\b",
                        re.IGNORECASE)
_UNIT_WORDS = {"watts": "W", "microseconds": "µs", "milliseconds": "ms"}


# ---- reading the sources ---------------------------------------------------------------------


@cache
def _own_docstrings(cls: type) -> dict[str, str]:
    """The string literal right after each annotated assignment in `cls`'s own body."""
    tree = ast.parse(Path(inspect.getsourcefile(cls)).read_text())
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__), None)
    if node is None:
        raise LookupError(f"class {cls.__name__} is not at the top level of {inspect.getsourcefile(cls)}")
    docs: dict[str, str] = {}
    for stmt, after in zip(node.body, node.body[1:], strict=False):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def field_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Each field's attribute docstring, inherited ones included (a subclass's wins)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            docs.update(_own_docstrings(cls))
    return docs


def _docstring(model: type[BaseModel], name: str) -> str:
    doc = field_docstrings(model).get(name)
    if not doc:
        # the reference is only complete if every field explains itself; fail where it is written
        raise ValueError(f"{model.__name__}.{name} has no docstring; add one under the field in its spec.")
    return doc


# ---- rendering values ------------------------------------------------------------------------


def _yaml(value: Any) -> str:
    """A value as it is written in a job file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _type_text(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        choices = ", ".join(f"`{_yaml(a)}`" for a in args)
        return choices if len(args) == 1 else f"one of {choices}"
    if origin in (typing.Union, types.UnionType):
        parts = [_type_text(a) for a in args if a is not type(None)]
        if type(None) in args:
            parts.append("null")
        return " or ".join(parts)
    if origin in (tuple, list):
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin is dict or annotation is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return {int: "int", float: "number", str: "string", bool: "bool", Any: "any"}.get(annotation, str(annotation))


def _bounds(info: FieldInfo) -> str:
    """`> 0`, `≥ 0` or `0–3` from the field's numeric constraints (pydantic keeps them as
    annotated-types objects in `metadata`, read here by attribute to avoid importing that package)."""
    bound = {key: getattr(item, key) for item in info.metadata for key in ("gt", "ge", "lt", "le")
             if getattr(item, key, None) is not None}
    if "ge" in bound and "le" in bound:
        return f"{bound['ge']}–{bound['le']}"
    texts = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    return ", ".join(f"{texts[key]} {bound[key]}" for key in texts if key in bound)


def _field_type(info: FieldInfo) -> str:
    bounds = _bounds(info)
    text = _type_text(info.annotation)
    return f"{text}, {bounds}" if bounds else text


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return f"`{_yaml(info.default_factory())}`"
    if info.default is PydanticUndefined:
        return "required"
    return f"`{_yaml(info.default)}`"


def _is_number(info: FieldInfo) -> bool:
    args = typing.get_args(info.annotation) or (info.annotation,)
    return any(a in (int, float) for a in args) or info.annotation is dict or typing.get_origin(info.annotation) is dict


def _unit(name: str, doc: str, info: FieldInfo | None = None, fallback: str = "") -> str:
    """The unit a field's name or docstring gives; none for flags, choices and names."""
    if info is not None and not _is_number(info):
        return ""
    for pattern, unit in _NAME_UNITS:
        if re.search(pattern, name):
            return unit
    if match := _DOC_UNIT.search(doc):
        return _UNIT_WORDS.get(match.group(1), match.group(1))
    if match := _DOC_COUNT.search(doc):
        return match.group(1).lower()
    return fallback


def _cell(text: str) -> str:
    """One table cell: a single line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _spec_rows(model: type[BaseModel], names: Iterable[str] | None = None,
               in_file: dict[str, tuple[str | None, str | None]] | None = None,
               unit_fallback: str = "") -> list[list[str]]:
    rows = []
    for name in names or model.model_fields:
        info = model.model_fields[name]
        doc = _docstring(model, name)
        kind, default = (in_file or {}).get(name, (None, None))
        rows.append([f"`{name}`", kind or _field_type(info), default or _default(info),
                     _unit(name, doc, info, unit_fallback), doc])
    return rows


FIELD_HEADER = ("field", "type", "default", "unit", "description")


# ---- the document --------------------------------------------------------------------------


def _change_keys_section() -> list[str]:
    """What `--set` and `--what-if` take (catalog/job_file.py `apply_change`)."""
    from trainrig.catalog.job_file import CHANGE_ALIASES, HARDWARE_KEYS

    aliases = ", ".join(f"`{k}` = `{section}.{field}`" for k, (section, field) in CHANGE_ALIASES.items())
    return [
        "## Keys for --set and --what-if",
        "",
        "`trainrig estimate` and `trainrig fit` take `--set key=value` to change the job; `estimate` also takes "
        "`--what-if key=value` to show a variant beside it, as the web page's what-ifs. The value is read as YAML "
        "(`8`, `1e12`, `ib-ndr`, `{bandwidth_gbps: 400}`). A key is",
        "",
        "- `model` (a preset name, a config.json path, or a mapping);",
        "- any field of [hardware](#hardware) or [training](#training), with or without its section: "
        "`zero=3`, `training.zero=3`, `inter_node=eth-100g`, `hardware.inter_node=eth-100g`;",
        f"- a short name: {aliases}.",
        "",
        "Several changes separated by commas are one change: `--what-if \"zero=3, recompute=full\"` is one variant "
        "with both, the same as applying them in turn. A comma inside a value (`lora_targets=[q, v]`) does not start "
        "a new change.",
        "",
        f"Hardware fields: {', '.join(f'`{k}`' for k in sorted(HARDWARE_KEYS))}.",
        "",
    ]


def job_file_reference_markdown() -> str:
    """docs/job-file.md: every job-file field with its type, default, unit and description."""
    # Imported here rather than at the top: specs/ sits below catalog/ and estimate/ in the data
    # flow, and only this reference needs to look upward.
    from trainrig.catalog import cases

    MEASURED_METRICS = cases.MEASURED_METRICS
    # the Estimate attribute each measured metric is scored against
    METRIC_ESTIMATE_KEY = getattr(cases, "METRIC_ESTIMATE_KEY", {"memory_gib": "memory_allocated_gib"})
    from trainrig.catalog.job_file import DEFAULT_NETWORK, HARDWARE_KEYS, MEASURED_RUN_KEYS
    from trainrig.estimate.result import RESOURCES, Estimate
    from trainrig.specs.base import CatalogEntry
    from trainrig.specs.gpu import GPU, PeakTflops
    from trainrig.specs.job import HardwareSpec, Job, NetworkSpec, TrainingSpec
    from trainrig.specs.model import ModelSpec

    out = [
        "# The job file",
        "",
        f"<!-- Generated by {GENERATOR} from the docstrings of the specs in src/trainrig/specs/ (and of",
        "     Estimate in src/trainrig/estimate/result.py). Edit those and run the script; do not edit this file. -->",
        "",
        "A job file is YAML or JSON (by its suffix) holding one mapping with three sections; `trainrig.load_job` "
        "takes the same content as a dict. A key that these sections do not know is an error that names it, "
        "not ignored. [contract.md](contract.md) says which parts of this format are stable.",
        "",
        *_table(("section", "required", "description"), [
            ["`model`", "yes", _docstring(Job, "model") + " [model](#model)"],
            ["`hardware`", "yes", _docstring(Job, "hardware") + " [hardware](#hardware)"],
            ["`training`", "no (every field has a default)", _docstring(Job, "training") + " [training](#training)"],
        ]),
        "Sizes follow the vendors: device memory in GiB (binary), host RAM and bandwidths in GB and GB/s "
        "(decimal), network ports in Gb/s. A unit column left empty means a count, a fraction, a flag or a name.",
        "",
    ]

    out += [
        "## model",
        "",
        "`model:` is one of",
        "",
        "- a preset id or alias from the catalog (`llama3-8b`, `meta-llama/Meta-Llama-3-8B`; `trainrig models` "
        "lists them), matched case-insensitively;",
        "- a path to a Hugging Face `config.json`, or to a directory holding one, read locally;",
        "- a mapping of the fields below (`{n_layers: 32, hidden: 4096, …}`).",
        "",
        f"A mapping gives the fields below; a preset or a config.json fills in the same ones. {ModelSpec.__doc__}",
        "",
        *_table(FIELD_HEADER, _spec_rows(ModelSpec)),
    ]

    missing = set(HardwareSpec.model_fields) - set(HARDWARE_KEYS)
    if missing:
        raise ValueError(f"HardwareSpec fields {sorted(missing)} are not job-file keys; document how to set them.")
    out += [
        "## hardware",
        "",
        "Catalog ids are matched case-insensitively, and a known alias resolves to its entry (`h100` → "
        "`H100-SXM5-80GB`, with a note that says so). `trainrig gpus` lists the GPUs; user catalogs add "
        "entries (`--catalog DIR`).",
        "",
        *_table(FIELD_HEADER, _spec_rows(HardwareSpec, in_file=HARDWARE_IN_FILE)),
        '<a id="gpu-overrides"></a>',
        "",
        "### GPU overrides",
        "",
        "`gpu: {base: H100-SXM5-80GB, memory_gib: 96, tdp_w: 500}` starts from the catalog entry `base` and "
        "replaces the fields given; the result is validated like a catalog entry. A lower `tdp_w` without new "
        "`peak_tflops` scales every peak rate by (tdp_w / base tdp_w)^(1/3), as sustained clocks follow about "
        "the cube root of power. Fields:",
        "",
        *_table(FIELD_HEADER, _spec_rows(GPU, [n for n in GPU.model_fields if n not in CatalogEntry.model_fields])),
        "`peak_tflops` is a mapping of dense peak rates; give all of them, as it replaces the base's:",
        "",
        *_table(FIELD_HEADER, _spec_rows(PeakTflops, unit_fallback="TFLOP/s")),
        '<a id="inter-node"></a>',
        "",
        "### inter_node",
        "",
        f"{_docstring(HardwareSpec, 'inter_node')} As a name, the port count is the link's usual one, else one "
        "per GPU. As a mapping:",
        "",
        *_table(FIELD_HEADER, [
            ["`link`", "link catalog id", "—", "", _docstring(NetworkSpec, "link")],
            ["`bandwidth_gbps`", "number, > 0", "—", "Gb/s", INTER_NODE_BANDWIDTH_DOC],
            ["`ports_per_node`", _field_type(NetworkSpec.model_fields["ports_per_node"]), "`gpus_per_node`", "",
             _docstring(NetworkSpec, "ports_per_node")],
        ]),
        "When a job spans several nodes and names no network, the loader assumes the network that nodes "
        "with the GPU's scale-up link usually have (and records that in the estimate's notes):",
        "",
        *_table(("scale-up link", "default inter_node"),
                [[f"`{link}`", f"`{net}`"] for link, net in sorted(DEFAULT_NETWORK.items())]
                + [["other, or none", "`eth-100g`"]]),
    ]

    out += [
        "## training",
        "",
        f"{TrainingSpec.__doc__} `dp` and `grad_accum` are resolved against the hardware when the job is "
        "loaded: a parallel layout that does not multiply to `n_gpus`, or a `grad_accum` that disagrees with "
        "`global_batch / (micro_batch · dp)`, is an error.",
        "",
        *_table(FIELD_HEADER, _spec_rows(TrainingSpec)),
    ]
    out += _change_keys_section()

    missing_docs = set(MEASURED_RUN_KEYS) - set(MEASURED_RUN_KEY_DOCS)
    if missing_docs:
        raise ValueError(f"measured-run keys {sorted(missing_docs)} need a line in MEASURED_RUN_KEY_DOCS.")
    out += [
        "## Measured runs",
        "",
        "`trainrig validate` reads measured runs: a job file with the keys below beside `model`, `hardware` "
        "and `training`. A file holds one run, or several as `cases: [ … ]`. The estimator ignores these "
        "keys, so a measured run is also a valid job file.",
        "",
        *_table(("key", "description"),
                [[f"`{k}`", doc] for k, doc in MEASURED_RUN_KEY_DOCS.items() if k in MEASURED_RUN_KEYS]),
        "Metrics under `measured:`, each compared with the estimate key named (throughput as tokens/s per "
        "GPU, which does not depend on how a source counts FLOPs). Peak memory keeps the unit and the "
        "allocator statistic its source printed: `memory_gb` is decimal GB (10^9 bytes, "
        "`max_memory_allocated() / 1e9` as LitGPT prints it), the others GiB (2^30 bytes), and the estimate "
        "is converted to that unit. `oom: true` marks a run that ran out of memory and may be the only key: "
        "it is scored as a fit verdict alone (every other run must be predicted to fit, this one not).",
        "",
        *_table(("metric", "unit", "compared with", "that key's meaning"), [
            [f"`{m}`", _unit(m, ""), f"`{METRIC_ESTIMATE_KEY.get(m, m)}`",
             _docstring(Estimate, METRIC_ESTIMATE_KEY.get(m, m))]
            for m in MEASURED_METRICS
        ]),
    ]

    out += [
        "## Estimate keys",
        "",
        "`trainrig estimate --json` prints these keys; `trainrig.estimate(job)` returns an `Estimate` with "
        "the same attributes, and `.to_dict()` gives the JSON. Keys marked stable are always present; the "
        "others may change. `bottleneck` names one of "
        + ", ".join(f"`{r}`" for r in [*RESOURCES, "pipeline_bubble"]) + ".",
        "",
        *_table(("key", "type", "unit", "stable", "description"), [
            [f"`{name}`", _type_text(info.annotation), _unit(name, _docstring(Estimate, name), info),
             "yes" if name in STABLE_ESTIMATE_KEYS else "", _docstring(Estimate, name)]
            for name, info in Estimate.model_fields.items()
        ]),
    ]
    return "\n".join(out).rstrip("\n") + "\n"
