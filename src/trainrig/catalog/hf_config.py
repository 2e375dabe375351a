"""A Hugging Face `config.json` → ModelSpec, read from a local file (never the network).

Supported `model_type`s, and how exact the resulting parameter count is against the checkpoint
(the sum of its tensors, or `model.num_parameters()` where the checkpoint also stores buffers):

Exact
    llama, mistral, mixtral, qwen2, gemma, phi3, gpt2, gpt_neox, opt, and falcon with two norms
    per block (new_decoder_architecture, falcon-40b/180b style). The tests check the first nine
    against published counts (Llama 3 8B, Mistral 7B, Mixtral 8x7B, Qwen2.5 7B, Gemma 7B, Phi-3
    mini, GPT-2, Pythia 160M, OPT 125M); falcon is exact by construction, not checked.
    deepseek_v2 (multi-head latent attention, DeepSeekMoE), checked against DeepSeek-V2-Lite.
    nemotron_h (hybrid Mamba-2 / attention / MLP / MoE layers), checked against Nemotron-H 8B.

Counted as the main model only
    deepseek_v3 with `num_nextn_predict_layers` (V3's one multi-token-prediction module, 11.5B
        parameters of its own and stored as `model.layers.61`) counts the 61 main layers, as
        DeepSeek's 671B does: the module serves the training objective and speculative decoding.

Approximate (small tensors ModelSpec has no field for; each well under 0.01 % of the model)
    qwen3, qwen3_moe
        per-head RMSNorms on queries and keys: 2·head_dim parameters per layer are missing.
    qwen2_moe
        the shared expert's sigmoid gate: hidden_size parameters per layer are missing.
    gemma2
        four norms per layer instead of two: 2·hidden_size per layer are missing (checked against
        Gemma 2 2B).
    gemma3_text (Gemma 3 1B; the language model of the larger, multimodal Gemma 3 checkpoints)
        four norms per layer and per-head RMSNorms on queries and keys: 2·hidden_size +
        2·head_dim per layer are missing (checked against Gemma 3 1B).
    gpt_oss
        each layer's attention sinks (one learned logit per query head: num_attention_heads
        values) and router bias (num_local_experts values) are missing (checked against the
        gpt-oss model card's 116.83B and 20.91B). With `attention_bias: false` the attention is
        still counted with biases: the experts keep theirs, and ModelSpec has no field for that.
    falcon with one LayerNorm shared by attention and MLP (falcon-7b: parallel_attn without
        new_decoder_architecture; num_ln_in_parallel_attn: 1)
        counted with two norms: 2·hidden_size per layer too many.
    `attention_bias: true` without `mlp_bias` (llama, mistral, qwen3, gemma, phi3)
        counted as Q/K/V biases only, missing the output projection's hidden_size bias per layer;
        `mlp_bias` alone is not counted. gpt_neox with `attention_bias: false` counts them anyway.
    opt with `word_embed_proj_dim` ≠ `hidden_size` (opt-350m)
        the embedding is counted hidden_size wide and the two projections are left out.
    qwen2_moe, qwen3_moe with `use_sliding_window: true` (no released checkpoint sets it)
        without a `layer_types` list the window is put on every layer; transformers' rule for
        which of these layers take it has changed between versions.
    deepseek_v3
        each MoE layer's router correction bias (`e_score_correction_bias`, n_routed_experts
        values, set by the auxiliary-loss-free balancing rule rather than by gradients; a buffer in
        transformers, a parameter in DeepSeek's own modeling code) is missing.
    deepseek with `attention_bias: true`
        counted as biases on every query and key/value linear and none on the output; the model
        code puts them on q_a_proj, kv_a_proj_with_mqa and o_proj only.

Sliding windows (`sliding_window`, `full_attention_layers`) follow the config's `layer_types` list
where it has one ("sliding_attention" and "full_attention" per layer, as transformers writes it),
and else the family's rule in transformers: gemma2 and gpt_oss alternate, layer i windowed when i
is even; gemma3_text makes every `sliding_window_pattern`-th layer (default 6) global, the others
windowed; qwen2 and qwen3 with `use_sliding_window: true` window the layers from
`max_window_layers` on; mistral, mixtral and phi3 window every layer. A model whose every layer is
global gets no sliding_window at all.

Anything else — an encoder (bert), an encoder-decoder (t5, whisper, `is_encoder_decoder: true`),
a vision or multimodal model (vit, clip, llava), a file that is not JSON or lacks the layer or width
fields, a missing file — is a TrainrigError on the field `model`: one sentence that says what the
file is and which model types are supported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainrig.catalog.files import read_text
from trainrig.errors import TrainrigError
from trainrig.specs.model import ModelSpec

__all__ = ["model_from_hf_config", "model_from_hf_mapping", "SUPPORTED_MODEL_TYPES"]

_NOT_DECODERS = {
    **dict.fromkeys(
        [
            "bert",
            "roberta",
            "distilbert",
            "albert",
            "electra",
            "deberta",
            "deberta-v2",
            "xlm-roberta",
            "camembert",
            "modernbert",
            "mpnet",
            "ernie",
        ],
        "an encoder-only model",
    ),
    **dict.fromkeys(
        [
            "t5",
            "mt5",
            "umt5",
            "bart",
            "mbart",
            "pegasus",
            "marian",
            "led",
            "longt5",
            "whisper",
            "speech_to_text",
            "seamless_m4t",
            "nllb-moe",
            "prophetnet",
        ],
        "an encoder-decoder model",
    ),
    **dict.fromkeys(
        [
            "vit",
            "deit",
            "beit",
            "swin",
            "convnext",
            "resnet",
            "dinov2",
            "detr",
            "sam",
            "clip",
            "clip_vision_model",
            "siglip",
            "wav2vec2",
            "hubert",
            "wavlm",
        ],
        "a vision or speech model",
    ),
}


def model_from_hf_config(path: str | Path) -> ModelSpec:
    """The ModelSpec a local Hugging Face config.json describes (a directory: its config.json)."""
    file = _config_file(Path(path))
    data = _read_json(file)
    return _spec(data, file, _name(data, file))


def model_from_hf_mapping(
    data: Any, label: str = "the config.json", default_name: str = "custom"
) -> ModelSpec:
    """The ModelSpec a config.json's already parsed content describes (an upload, a paste).

    Data only: nothing is read from disk or fetched; `label` names the source in error messages,
    and the spec is named by `_name_or_path`, else `default_name`."""
    if not isinstance(data, Mapping):
        raise TrainrigError(
            "model", f"{label} holds a JSON {_json_kind(data)}, not the object of a config.json."
        )
    data = dict(data)
    name = data.get("_name_or_path")
    return _spec(data, label, name.strip() if isinstance(name, str) and name.strip() else default_name)


def _spec(data: dict[str, Any], source: str | Path, name: str) -> ModelSpec:
    config = _Config(data, source)
    model_type = config.model_type()
    fields = _FAMILIES[model_type](config)
    fields["name"] = name
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise TrainrigError(
            "model", f"{source} gives an invalid {where or 'shape'}: {first.get('msg', 'invalid')}."
        ) from None
    except TrainrigError as error:
        raise TrainrigError(
            "model", f"{source} describes an impossible shape: {error.message}"
        ) from None


def _json_kind(data: object) -> str:
    kinds = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if data is None else kinds.get(type(data), type(data).__name__)


# ---- reading -------------------------------------------------------------------------------------


def _config_file(path: Path) -> Path:
    if path.is_dir():
        candidate = path / "config.json"
        if not candidate.is_file():
            raise TrainrigError(
                "model",
                f"directory {path} has no config.json; "
                "give the path to a Hugging Face config.json.",
            )
        return candidate
    if not path.is_file():
        raise TrainrigError(
            "model",
            f"no file at {path}; give a preset name (`trainrig models` lists them), "
            "a path to a Hugging Face config.json, or a mapping of model fields.",
        )
    return path


def _read_json(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_text(file, "model"))  # regular UTF-8 files up to the size cap
    except json.JSONDecodeError as error:
        raise TrainrigError(
            "model",
            f"{file} is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
            "expected a Hugging Face config.json.",
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise TrainrigError("model", f"{file} cannot be read as a text file ({error}).") from None
    if not isinstance(data, dict):
        raise TrainrigError(
            "model", f"{file} holds a JSON {type(data).__name__}, not the object of a config.json."
        )
    return data


def _name(data: Mapping[str, Any], file: Path) -> str:
    name = data.get("_name_or_path")
    if isinstance(name, str) and name.strip():
        return name.strip()
    if file.stem == "config" and file.parent.name:
        return file.parent.name
    return file.stem


class _Config:
    """Typed access to one config.json, with errors that name the file and the key."""

    def __init__(self, data: dict[str, Any], file: str | Path) -> None:
        self.data = data
        self.file = file

    def model_type(self) -> str:
        model_type = self.data.get("model_type")
        if not isinstance(model_type, str) or not model_type:
            model_type = _type_from_architectures(self.data.get("architectures"))
        if model_type is None:
            raise TrainrigError(
                "model",
                f"{self.file} has no model_type, so it is not a Hugging Face model config; "
                f"supported model types: {_supported_list()}.",
            )
        model_type = _TYPE_ALIASES.get(model_type, model_type)
        if model_type not in _FAMILIES:
            raise TrainrigError("model", self._unsupported(model_type))
        if self.data.get("is_encoder_decoder") is True:
            raise TrainrigError(
                "model",
                f"{self.file} describes an encoder-decoder model (is_encoder_decoder: true); "
                f"trainrig reads decoder-only language models of model type {_supported_list()}.",
            )
        return model_type

    def _unsupported(self, model_type: str) -> str:
        supported = f"trainrig reads decoder-only language models of model type {_supported_list()}"
        if isinstance(self.data.get("text_config"), dict):
            return (
                f"{self.file} describes '{model_type}', a multimodal model; {supported}, "
                "so give the config of its language model (its text_config) instead."
            )
        what = _NOT_DECODERS.get(model_type)
        if what is None and self.data.get("is_encoder_decoder") is True:
            what = "an encoder-decoder model"
        what = what or "a model type trainrig does not know"
        return f"{self.file} describes '{model_type}', {what}; {supported}."

    def int(self, *keys: str, default: int | None = None, what: str = "") -> int:
        """The first of `keys` present (not null), as an int; `default` or an error if none is."""
        for key in keys:
            value = self.data.get(key)
            if value is None:
                continue
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TrainrigError(
                    "model", f"{self.file} gives {key} = {value!r}, which is not a whole number."
                )
            return value
        if default is not None:
            return default
        names = " or ".join(keys)
        raise TrainrigError(
            "model",
            f"{self.file} has no {what or keys[0]} ({names}), which a decoder-only language "
            "model's config.json gives; it is not a model trainrig can read.",
        )

    def opt_int(self, *keys: str) -> int | None:
        return next((self.int(k) for k in keys if self.data.get(k) is not None), None)

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise TrainrigError(
                "model", f"{self.file} gives {key} = {value!r}, which is not true or false."
            )
        return value

    # shared shape fields -------------------------------------------------------------------------

    def layers(self) -> int:
        return self.int("num_hidden_layers", "n_layer", "num_layers", what="layer count")

    def hidden(self) -> int:
        return self.int("hidden_size", "n_embd", "d_model", "n_embed", what="model width")

    def heads(self) -> int:
        return self.int("num_attention_heads", "n_head", "num_heads", what="attention head count")

    def vocab(self) -> int:
        return self.int("vocab_size", what="vocabulary size")


def _type_from_architectures(architectures: object) -> str | None:
    if not isinstance(architectures, list):
        return None
    prefixes = {
        "LlamaFor": "llama",
        "MistralFor": "mistral",
        "MixtralFor": "mixtral",
        "NemotronHFor": "nemotron_h",
        "Qwen2MoeFor": "qwen2_moe",
        "Qwen2For": "qwen2",
        "Qwen3MoeFor": "qwen3_moe",
        "Qwen3For": "qwen3",
        "Gemma2For": "gemma2",
        "Gemma3ForCausalLM": "gemma3_text",  # not Gemma3ForConditionalGeneration, the multimodal one
        "GemmaFor": "gemma",
        "Phi3For": "phi3",
        "GPT2LMHead": "gpt2",
        "GPTNeoXFor": "gpt_neox",
        "OPTFor": "opt",
        "FalconFor": "falcon",
        "DeepseekV2For": "deepseek_v2",
        "DeepseekV3For": "deepseek_v3",
        "GptOssFor": "gpt_oss",
    }
    for arch in architectures:
        for prefix, model_type in prefixes.items():
            if isinstance(arch, str) and arch.startswith(prefix):
                return model_type
    return None


# ---- families ------------------------------------------------------------------------------------


def _decoder(c: _Config, *, tied_default: bool) -> dict[str, Any]:
    """The fields every Llama-style family shares: gated MLP, RMSNorm, rotary positions."""
    return {
        "n_layers": c.layers(),
        "hidden": c.hidden(),
        "n_heads": c.heads(),
        "n_kv_heads": c.opt_int("num_key_value_heads"),
        "head_dim": c.opt_int("head_dim"),
        "ffn_hidden": c.int("intermediate_size", what="MLP width"),
        "vocab": c.vocab(),
        "gated_mlp": True,
        "tied_embeddings": c.flag("tie_word_embeddings", tied_default),
        "norm": "rmsnorm",
        "position_embedding": "rope",
    }


def _window(c: _Config, n_layers: int, window: int | None, full_layers: int) -> dict[str, Any]:
    """`sliding_window` and `full_attention_layers`: the layers without the window are those the
    config's `layer_types` marks "full_attention" where it lists them, else `full_layers` (the
    family's rule). No window where no layer keeps one."""
    listed = _full_layers_listed(c, n_layers)
    full = min(full_layers if listed is None else listed, n_layers)
    if window is None or full >= n_layers:
        return {"sliding_window": None, "full_attention_layers": None}
    return {"sliding_window": window, "full_attention_layers": full or None}


_LAYER_TYPES = ("sliding_attention", "full_attention")
"""The `layer_types` entries of the families read here (transformers' names)."""


def _full_layers_listed(c: _Config, n_layers: int) -> int | None:
    """How many layers `layer_types` marks "full_attention"; None when the config has no list."""
    types = c.data.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or any(t not in _LAYER_TYPES for t in types):
        raise TrainrigError(
            "model", f"{c.file} gives layer_types that are not a list of"
            f" {' and '.join(repr(t) for t in _LAYER_TYPES)} entries, one a layer.",
        )
    if len(types) != n_layers:
        raise TrainrigError(
            "model", f"{c.file} lists {len(types)} layer_types for its {n_layers} layers (num_hidden_layers).",
        )
    return types.count("full_attention")


def _attention_bias(c: _Config) -> str:
    """Llama-style `attention_bias` (Q, K, V and output) and `mlp_bias` flags → ModelSpec.bias."""
    attention, mlp = c.flag("attention_bias", False), c.flag("mlp_bias", False)
    if attention and mlp:
        return "all"
    return "qkv" if attention else "none"


def _llama(c: _Config) -> dict[str, Any]:
    return _decoder(c, tied_default=False) | {"bias": _attention_bias(c)}


def _mistral(c: _Config) -> dict[str, Any]:
    fields = _llama(c)
    window = c.opt_int("sliding_window") if "sliding_window" in c.data else 4096
    return fields | _window(c, fields["n_layers"], window, full_layers=0)  # every layer windowed


def _mixtral(c: _Config) -> dict[str, Any]:
    fields = _llama(c)
    return fields | _window(c, fields["n_layers"], c.opt_int("sliding_window"), full_layers=0) | {
        "n_experts": c.int("num_local_experts", what="expert count"),
        "top_k": c.int("num_experts_per_tok", default=2),
    }


def _qwen_window(c: _Config, n_layers: int, *, from_max_window_layers: bool) -> dict[str, Any]:
    """Qwen's window, only with `use_sliding_window: true`. Qwen2 and Qwen3 (transformers'
    Qwen2Config/Qwen3Config `layer_types`) window the layers at index `max_window_layers` (default
    28) and above, so the ones below it attend to the whole sequence; the MoE variants get it on
    every layer (see the module docstring)."""
    window = c.opt_int("sliding_window") if c.flag("use_sliding_window", False) else None
    full = c.int("max_window_layers", default=28) if from_max_window_layers else 0
    return _window(c, n_layers, window, full_layers=max(full, 0))


def _qwen_moe_layers(c: _Config, n_layers: int) -> int:
    """Layers with a dense MLP: those in `mlp_only_layers` and those off `decoder_sparse_step`."""
    step = c.int("decoder_sparse_step", default=1)
    dense_only = c.data.get("mlp_only_layers") or []
    if not isinstance(dense_only, list):
        raise TrainrigError(
            "model", f"{c.file} gives mlp_only_layers = {dense_only!r}, not a list."
        )
    if step <= 0:
        return n_layers
    # counted, not looped over: a config may claim any number of layers (ModelSpec bounds them later)
    off_step = n_layers - n_layers // step
    listed = {int(i) for i in dense_only if isinstance(i, int) or (isinstance(i, float) and i.is_integer())}
    listed_on_step = {i for i in listed if 0 <= i < n_layers and (i + 1) % step == 0}
    return off_step + len(listed_on_step)


def _qwen2(c: _Config) -> dict[str, Any]:
    fields = _decoder(c, tied_default=False)
    return fields | {"bias": "qkv"} | _qwen_window(c, fields["n_layers"], from_max_window_layers=True)


def _qwen2_moe(c: _Config) -> dict[str, Any]:
    fields = _decoder(c, tied_default=False)
    fields |= {"bias": "qkv"} | _qwen_window(c, fields["n_layers"], from_max_window_layers=False)
    n_experts = c.int("num_experts", default=0)
    if n_experts:
        shared = c.int("shared_expert_intermediate_size", default=0)
        fields |= {
            "n_experts": n_experts,
            "top_k": c.int("num_experts_per_tok", what="experts per token"),
            "expert_ffn_hidden": c.int("moe_intermediate_size", what="expert MLP width"),
            "n_shared_experts": 1 if shared else 0,
            "shared_ffn_hidden": shared or None,
            "n_dense_layers": _qwen_moe_layers(c, fields["n_layers"]),
        }
    return fields


def _qwen3(c: _Config) -> dict[str, Any]:
    fields = _decoder(c, tied_default=False)
    return fields | {"bias": _attention_bias(c)} | _qwen_window(c, fields["n_layers"], from_max_window_layers=True)


def _qwen3_moe(c: _Config) -> dict[str, Any]:
    fields = _decoder(c, tied_default=False)
    fields |= {"bias": _attention_bias(c)} | _qwen_window(c, fields["n_layers"], from_max_window_layers=False)
    n_experts = c.int("num_experts", default=0)
    if n_experts:
        fields |= {
            "n_experts": n_experts,
            "top_k": c.int("num_experts_per_tok", what="experts per token"),
            "expert_ffn_hidden": c.int("moe_intermediate_size", what="expert MLP width"),
            "n_dense_layers": _qwen_moe_layers(c, fields["n_layers"]),
        }
    return fields


def _gemma(c: _Config) -> dict[str, Any]:
    return _decoder(c, tied_default=True) | {"bias": _attention_bias(c)}


def _phi3(c: _Config) -> dict[str, Any]:
    fields = _decoder(c, tied_default=False)
    return fields | {"bias": _attention_bias(c)} | _window(
        c, fields["n_layers"], c.opt_int("sliding_window"), full_layers=0
    )


def _gpt2(c: _Config) -> dict[str, Any]:
    hidden = c.hidden()
    return {
        "n_layers": c.layers(),
        "hidden": hidden,
        "n_heads": c.heads(),
        "ffn_hidden": c.int("n_inner", default=4 * hidden),
        "vocab": c.vocab(),
        "gated_mlp": False,
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "norm": "layernorm",
        "bias": "all",
        "position_embedding": "learned",
        "max_positions": c.int(
            "n_positions", "n_ctx", "max_position_embeddings", what="context length"
        ),
    }


def _gpt_neox(c: _Config) -> dict[str, Any]:
    return {
        "n_layers": c.layers(),
        "hidden": c.hidden(),
        "n_heads": c.heads(),
        "ffn_hidden": c.int("intermediate_size", what="MLP width"),
        "vocab": c.vocab(),
        "gated_mlp": False,
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "norm": "layernorm",
        "bias": "all",
        "position_embedding": "rope",
    }


def _opt(c: _Config) -> dict[str, Any]:
    # OPT's learned position table has two extra rows (positions are offset by 2).
    return {
        "n_layers": c.layers(),
        "hidden": c.hidden(),
        "n_heads": c.heads(),
        "ffn_hidden": c.int("ffn_dim", what="MLP width"),
        "vocab": c.vocab(),
        "gated_mlp": False,
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "norm": "layernorm",
        "bias": "all" if c.flag("enable_bias", True) else "none",
        "position_embedding": "learned",
        "max_positions": c.int("max_position_embeddings", what="context length") + 2,
    }


def _falcon(c: _Config) -> dict[str, Any]:
    hidden, heads = c.hidden(), c.heads()
    if c.flag("new_decoder_architecture", False):
        kv_heads = c.int("num_kv_heads", "n_head_kv", default=heads)
    elif c.flag("multi_query", True):
        kv_heads = 1
    else:
        kv_heads = heads
    return {
        "n_layers": c.layers(),
        "hidden": hidden,
        "n_heads": heads,
        "n_kv_heads": kv_heads,
        "head_dim": c.opt_int("head_dim"),
        "ffn_hidden": c.int("ffn_hidden_size", default=4 * hidden),
        "vocab": c.vocab(),
        "gated_mlp": False,
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "norm": "layernorm",
        "bias": "all" if c.flag("bias", False) else "none",
        "position_embedding": "alibi" if c.flag("alibi", False) else "rope",
    }


def _default_window(c: _Config, default: int) -> int | None:
    """`sliding_window`, the config class's default where the key is absent (null: none)."""
    return c.opt_int("sliding_window") if "sliding_window" in c.data else default


def _gemma2(c: _Config) -> dict[str, Any]:
    """Gemma 2: layer i is windowed when i is even, global when odd (transformers' Gemma2Config
    `layer_types`; Gemma Team 2024, Gemma 2 report, section 2: local and global attention in
    alternating layers), so n_layers // 2 are global; the window defaults to 4096."""
    fields = _gemma(c)
    return fields | _window(c, fields["n_layers"], _default_window(c, 4096), full_layers=fields["n_layers"] // 2)


def _gemma3_text(c: _Config) -> dict[str, Any]:
    """Gemma 3's language model: every `sliding_window_pattern`-th layer is global ((i + 1) %
    pattern == 0 in transformers' Gemma3TextConfig, default 6: five local layers to one global),
    so n_layers // pattern are; the window defaults to 4096."""
    fields = _gemma(c)
    pattern = c.int("sliding_window_pattern", "_sliding_window_pattern", default=6)
    if pattern <= 0:
        raise TrainrigError(
            "model", f"{c.file} gives sliding_window_pattern = {pattern}; it must be 1 or more (every n-th"
            " layer global).",
        )
    return fields | _window(c, fields["n_layers"], _default_window(c, 4096),
                            full_layers=fields["n_layers"] // pattern)


def _gpt_oss(c: _Config) -> dict[str, Any]:
    """OpenAI gpt-oss (transformers' GptOssConfig and modeling code): grouped-query attention with
    biases on q, k, v and o, every layer a mixture of experts (a top-k router with a bias; each
    expert a gated MLP with biases on its fused gate/up and down projections), untied head.
    Layer i attends within the window (128 tokens in both released models) when i is even and to
    the whole sequence when odd (GptOssConfig's default `layer_types`, which the released configs
    also list)."""
    fields = _decoder(c, tied_default=False)
    n_experts = c.int("num_local_experts", "num_experts", what="expert count")
    fields |= {
        "bias": "all",  # the experts' biases are unconditional; attention_bias (default true) the rest
        "n_experts": n_experts,
        "top_k": c.int("num_experts_per_tok", "experts_per_token", what="experts per token"),
        "expert_ffn_hidden": fields["ffn_hidden"],  # intermediate_size is one expert's width
    }
    return fields | _window(c, fields["n_layers"], _default_window(c, 128), full_layers=fields["n_layers"] // 2)


def _deepseek(c: _Config) -> dict[str, Any]:
    """DeepSeek-V2/V3: multi-head latent attention (kv_lora_rank, q_lora_rank) and DeepSeekMoE
    (fine-grained routed experts, shared experts, leading dense layers)."""
    n_layers = c.layers()
    nope = c.int("qk_nope_head_dim", what="non-rotary query/key head width")
    rope = c.int("qk_rope_head_dim", what="rotary query/key head width")
    fields: dict[str, Any] = {
        "n_layers": n_layers,
        "hidden": c.hidden(),
        "n_heads": c.heads(),
        # num_key_value_heads is the head count: every head has its own key and value. The whole
        # query/key head is its two parts (a `head_dim` key, where newer transformers write one, is
        # the rotary part alone, so it is not read).
        "head_dim": nope + rope,
        "v_head_dim": c.int("v_head_dim", what="value head width"),
        "kv_lora_rank": c.int("kv_lora_rank", what="key/value latent width"),
        "q_lora_rank": c.opt_int("q_lora_rank") or None,  # null (V2-Lite): queries straight from hidden
        "qk_rope_head_dim": rope,
        "ffn_hidden": c.int("intermediate_size", what="MLP width"),
        "vocab": c.vocab(),
        "gated_mlp": True,
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "norm": "rmsnorm",
        "bias": "qkv" if c.flag("attention_bias", False) else "none",
        "position_embedding": "rope",
    }
    n_experts = c.int("n_routed_experts", default=0)  # null: every layer dense
    if n_experts:
        step = c.int("moe_layer_freq", default=1)
        if step != 1:
            raise TrainrigError(
                "model",
                f"{c.file} gives moe_layer_freq = {step}; trainrig reads DeepSeek models whose layers past"
                " first_k_dense_replace are all MoE (moe_layer_freq 1, as every released one).",
            )
        fields |= {
            "n_experts": n_experts,
            "top_k": c.int("num_experts_per_tok", what="experts per token"),
            "expert_ffn_hidden": c.int("moe_intermediate_size", what="expert MLP width"),
            "n_shared_experts": c.int("n_shared_experts", default=0),  # each moe_intermediate_size wide
            # the model code makes layer i MoE from i = first_k_dense_replace on: past the end, none
            "n_dense_layers": min(c.int("first_k_dense_replace", default=0), n_layers),
        }
    return fields


def _nemotron_h(c: _Config) -> dict[str, Any]:
    """Nemotron-H and Nemotron 3 (transformers NemotronHConfig): one Mamba-2, attention, MLP or MoE
    block per `hybrid_override_pattern` symbol, RMSNorm, squared-ReLU MLPs of two matrices, no
    position embedding in attention."""
    pattern = c.data.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern:
        raise TrainrigError("model", f"{c.file} has no hybrid_override_pattern, which a Nemotron-H config gives.")
    fields = _decoder(c, tied_default=False) | {
        "head_dim": c.opt_int("head_dim", "attention_head_dim"), "gated_mlp": False, "position_embedding": "none",
        "layer_pattern": pattern, "mamba_heads": c.opt_int("mamba_num_heads"),
        "mamba_head_dim": c.int("mamba_head_dim", default=64), "mamba_state_dim": c.int("ssm_state_size", default=128),
        "mamba_groups": c.int("n_groups", "mamba_n_groups", default=8),
        "mamba_conv_kernel": c.int("conv_kernel", default=4),
        "mamba_chunk_size": c.int("chunk_size", default=128)}
    if "E" in pattern:
        shared = c.int("n_shared_experts", default=0)
        fields |= {"n_experts": c.int("n_routed_experts", what="expert count"),
                   "top_k": c.int("num_experts_per_tok", what="experts per token"),
                   "expert_ffn_hidden": c.int("moe_intermediate_size", what="expert MLP width"),
                   "n_shared_experts": shared}
        if shared:
            fields["shared_ffn_hidden"] = c.int("moe_shared_expert_intermediate_size", what="shared expert width")
    return fields


_FAMILIES: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3_text": _gemma3_text,
    "phi3": _phi3,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "opt": _opt,
    "falcon": _falcon,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt_oss": _gpt_oss,
    "nemotron_h": _nemotron_h,
}

_TYPE_ALIASES = {"RefinedWebModel": "falcon", "RefinedWeb": "falcon"}
"""Model types of checkpoints written before their family joined transformers."""

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_FAMILIES)
"""The `model_type`s `model_from_hf_config` reads."""


def _supported_list() -> str:
    return ", ".join(SUPPORTED_MODEL_TYPES)
