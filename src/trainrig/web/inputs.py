"""What the API accepts: request bodies, and the checks that keep a request to data only.

The bodies mirror the CLI: an estimate request is a job file's content (`model`, `hardware`,
`training`) plus `what_if` and `price_usd_per_gpu_hour`; a plan request carries `trainrig plan`'s
options. Field values are checked by the same loaders the CLI uses (`load_job`, `plan`), so the
messages are the CLI's. What the web adds is a refusal to touch the server's files: a model is a
preset name, a mapping of model fields or the content of a config.json, never a path, and a hardware
profile is a mapping, never a path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from trainrig.catalog import load_catalog
from trainrig.catalog.hf_config import model_from_hf_mapping
from trainrig.catalog.job_file import apply_change
from trainrig.catalog.models import load_model
from trainrig.errors import TrainrigError
from trainrig.web.settings import MAX_GPU_TYPES, MAX_NAME_CHARS, MAX_PLAN_GPUS, MAX_TOP_PLANS, MAX_WHAT_IFS

__all__ = ["ModelBody", "EstimateBody", "PlanBody", "CompareBody", "model_source", "job_mapping",
           "plan_arguments", "checked_what_ifs", "resolved_model",
           "body_error"]

_NO_FILES = ("the web API reads no files on the server: give a preset name (GET /api/models), "
             "a mapping of model fields, or {\"hf_config\": <the content of a config.json>}.")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, protected_namespaces=())


MODEL_DESCRIPTION = ("A preset name or alias (GET /api/models), a mapping of model fields "
                     "({n_layers, hidden, n_heads, …}), or {hf_config: <a config.json's content>}.")
# Checked by `model_source` (one error naming `model`), described here for the OpenAPI schema.
ModelField = Annotated[Any, WithJsonSchema({
    "description": MODEL_DESCRIPTION,
    "anyOf": [
        {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS, "title": "preset"},
        {"type": "object", "title": "hf_config", "required": ["hf_config"], "additionalProperties": False,
         "properties": {"hf_config": {"type": "object", "description": "A config.json's content (data only)."}}},
        {"type": "object", "title": "model fields", "description": "ModelSpec fields, as a job file's model:."},
    ],
})]


class ModelBody(_Body):
    model: ModelField = Field(description=MODEL_DESCRIPTION, examples=["llama3-8b"])


class EstimateBody(_Body):
    """A job file's content, and what `trainrig estimate` takes beside it."""

    model: ModelField = Field(description=MODEL_DESCRIPTION, examples=["llama3-8b"])
    hardware: dict[str, Any] = Field(
        description="The job file's hardware section: gpu, n_gpus, gpus_per_node, intra_node, inter_node, "
                    "cpu_cores_per_node, ram_gb_per_node, storage … (profile as a mapping, not a path).",
        examples=[{"gpu": "H100-SXM5-80GB", "n_gpus": 8}])
    training: dict[str, Any] = Field(
        default_factory=dict, description="The job file's training section (seq_len, global_batch, tokens …).",
        examples=[{"seq_len": 4096, "global_batch": 256, "tokens": 1e11}])
    what_if: list[str] = Field(default_factory=list, max_length=MAX_WHAT_IFS,
                               description="Variants beside the base, key=value (as `--what-if`).",
                               examples=[["zero=3", "inter_node=eth-100g"]])
    price_usd_per_gpu_hour: float | None = Field(None, gt=0, description="Price per GPU-hour for the cost (`--price`).")

    def job(self) -> dict[str, Any]:
        """The job file this request describes (what `trainrig estimate JOB` would read)."""
        return {"model": self.model, "hardware": self.hardware, "training": self.training}


_SEARCH_EXAMPLE = {"model": "gpt3-125m", "tokens": 1e9, "gpus": ["H100-SXM5-80GB"], "max_gpus": 8,
                   "deadline_days": 1, "budget_usd": 1000}


class CompareBody(_Body):
    """`trainrig compare`'s options (the catalog's offers price the plans)."""

    model_config = ConfigDict(json_schema_extra={"examples": [_SEARCH_EXAMPLE]})

    model: ModelField = Field(description=MODEL_DESCRIPTION)
    tokens: float = Field(description="Training tokens, e.g. 2e12.")
    seq_len: int | None = Field(None, description="Tokens per sequence (default 4096).")
    global_batch: int | str | None = Field(None, description="Sequences per step, or a range such as '512-2048'.")
    precision: str | None = Field(None, description="fp32 | fp16 | bf16 | fp8 | fp4 (default bf16).")
    method: str | None = Field(None, description="full | lora | qlora (default full).")
    deadline_days: float | None = Field(None, description="Finish within this many days.")
    budget_usd: float | None = Field(None, description="Spend at most this many US dollars.")
    max_gpus: int = Field(1024, ge=1, le=MAX_PLAN_GPUS, description="Largest number of GPUs to consider.")
    max_nodes: int | None = Field(None, description="Largest number of nodes to consider.")
    gpus: list[str] | None = Field(None, max_length=MAX_GPU_TYPES,
                                   description="Allowed GPU types (catalog names); default all.")
    objective: str = Field("cost", description="cost | time | pareto.")
    priced_only: bool = Field(False, description="Only hardware with a known price (cloud offers).")
    training: dict[str, Any] = Field(default_factory=dict,
                                     description="Other training fields held fixed (optimizer, lora_rank …).")


class PlanBody(CompareBody):
    """`trainrig plan`'s options."""

    top: int = Field(5, ge=1, le=MAX_TOP_PLANS, description="How many configurations to show.")


def model_source(value: Any) -> str | dict[str, Any]:
    """A model the loaders can take without reading a file: a preset name or a mapping of fields."""
    if isinstance(value, str):
        return _preset_name(value)
    if isinstance(value, Mapping) and set(value) == {"hf_config"}:
        spec = model_from_hf_mapping(value["hf_config"], label="the uploaded config.json")
        fields = spec.model_dump(mode="json", exclude_defaults=True)
        return {"name": spec.name, **fields}
    if isinstance(value, Mapping):
        return dict(value)
    raise TrainrigError("model", f"must be a preset name or a mapping; {_NO_FILES}")


def _preset_name(name: str) -> str:
    """A catalog name, checked against the catalog alone: the server's file system is never consulted, so
    the answer for a path is the same whether that path exists or not."""
    if len(name) > MAX_NAME_CHARS:
        raise TrainrigError("model", f"is longer than {MAX_NAME_CHARS} characters; give a preset name.")
    try:
        load_catalog().models.get(name)
    except TrainrigError:
        if _looks_like_path(name):
            raise TrainrigError("model", f"'{name}' is not a preset name, and {_NO_FILES}") from None
        raise  # the catalog's "unknown model …, did you mean …"
    return name


def _looks_like_path(name: str) -> bool:
    """Spelled as a file or directory would be (judged from the text only, never looked up)."""
    text = name.strip()
    return ("/" in text or "\\" in text or text.startswith(("~", ".")) or text.lower().endswith(".json"))


def job_mapping(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job mapping whose model and hardware profile are data, never server paths."""
    mapping = dict(job)
    if "model" in mapping:
        mapping["model"] = model_source(mapping["model"])
    profile = mapping["hardware"].get("profile") if isinstance(mapping.get("hardware"), Mapping) else None
    if profile is not None and not isinstance(profile, Mapping):
        raise TrainrigError("hardware.profile", "the web API reads no files on the server: give the profile's "
                                                    "content (the JSON `trainrig probe --save` writes) as a mapping.")
    return mapping


def checked_what_ifs(mapping: Mapping[str, Any], changes: list[str]) -> list[str]:
    """The changes, each checked to leave the job data-only (a what-if could name a file too)."""
    for change in changes:
        if len(change) > 2 * MAX_NAME_CHARS:
            raise TrainrigError("what_if", f"'{change[:40]}…' is longer than {2 * MAX_NAME_CHARS} characters.")
        changed = apply_change(mapping, change)
        try:
            job_mapping(changed)
        except TrainrigError as error:
            raise TrainrigError("what_if", f"'{change}': {error.message}") from None
    return changes


# `plan()` names two arguments differently from the request (and the CLI's flags)
_BODY_NAMES = {"gpu_types": "gpus", "top_k": "top"}


def body_error(error: TrainrigError) -> TrainrigError:
    """A search's input error, naming the request's field (`gpus`, not `gpu_types`)."""
    field = _BODY_NAMES.get(error.field, error.field)
    return TrainrigError(field, error.message) if field != error.field else error


def plan_arguments(body: CompareBody) -> dict[str, Any]:
    """The keyword arguments of `plan`/`compare` for a request; options left out keep their defaults.
    `model` is as sent: the worker process turns it into data (`model_source`) under the time limit."""
    given = body.model_dump(exclude_unset=True, exclude_none=True, exclude={"model", "gpus", "top"})
    arguments: dict[str, Any] = {**given, "model": body.model, "tokens": body.tokens}
    if body.gpus is not None:
        arguments["gpu_types"] = body.gpus
    if isinstance(body, PlanBody) and "top" in body.model_fields_set:
        arguments["top_k"] = body.top
    return arguments


def resolved_model(value: Any) -> dict[str, Any]:
    """`POST /api/model`: the spec a model source gives, as the job file's `model:` mapping."""
    spec = load_model(model_source(value))
    fields = spec.model_dump(mode="json", exclude_defaults=True)
    return {"model": {"name": spec.name, **fields}, "n_params": spec.n_params,
            "n_active_params": spec.n_active_params}
