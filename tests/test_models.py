"""Model presets, the Hugging Face config.json reader and `load_model`.

Official counts are the sum of the checkpoint's tensors as the Hugging Face safetensors metadata
reports it (or `model.num_parameters()` where the checkpoint also stores buffers); the presets'
`sources` and `notes` say where each comes from.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainrig.catalog import load_catalog
from trainrig.catalog.hf_config import SUPPORTED_MODEL_TYPES, model_from_hf_config
from trainrig.catalog.models import load_model, resolve_model
from trainrig.catalog.registry import normalize_name
from trainrig.errors import TrainrigError
from trainrig.specs.model import ModelSpec

HF = Path(__file__).parent / "data" / "hf"

PRESET_IDS = [
    *("gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b"),
    *("gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b"),
    *("llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mistral-7b", "mixtral-8x7b"),
    *("qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b"),
]

PRESETS = list(load_catalog().models)


def preset(name: str):
    return load_catalog().models.get(name).entry


# ---- presets -------------------------------------------------------------------------------------


def test_every_required_preset_exists():
    ids = {p.id for p in PRESETS}
    assert set(PRESET_IDS) <= ids


@pytest.mark.parametrize("entry", [p for p in PRESETS if p.official_params], ids=lambda p: p.id)
def test_preset_count_equals_the_official_count_exactly(entry):
    assert entry.spec.n_params == entry.official_params


@pytest.mark.parametrize(
    ("name", "official"),
    [
        ("llama2-7b", 6_738_415_616),
        ("llama2-13b", 13_015_864_320),
        ("llama2-70b", 68_976_648_192),
        ("llama3-8b", 8_030_261_248),
        ("llama3-70b", 70_553_706_496),
        ("llama3.1-8b", 8_030_261_248),
        ("llama3.1-70b", 70_553_706_496),
        ("llama3.1-405b", 405_853_388_800),
        ("mistral-7b", 7_241_732_096),
        ("mixtral-8x7b", 46_702_792_704),
        ("qwen2.5-7b", 7_615_616_512),
        ("qwen2.5-14b", 14_770_033_664),
        ("qwen2.5-32b", 32_763_876_352),
        ("qwen2.5-72b", 72_706_203_648),
        ("deepseek-v2-lite", 15_706_484_224),
        ("deepseek-v2", 235_741_434_880),
    ],
)
def test_official_counts_are_recorded(name, official):
    assert preset(name).official_params == official
    assert preset(name).spec.n_params == official


# GPT-3's Table 2.1 gives nominal sizes, rounded loosely: "350M" is 355.9M exactly (GPT-2 Medium's
# shape), "2.7B" is 2.65B. Every preset lands within 2 % of its label.
GPT3_NOMINAL = {
    "gpt3-125m": 125e6,
    "gpt3-350m": 350e6,
    "gpt3-760m": 760e6,
    "gpt3-1.3b": 1.3e9,
    "gpt3-2.7b": 2.7e9,
    "gpt3-6.7b": 6.7e9,
    "gpt3-13b": 13.0e9,
    "gpt3-175b": 175.0e9,
}


# presets whose makers publish only a rounded count (DeepSeek-V3: "671B" for the main model; the Hub's
# exact total includes the MTP module and the fp8 scales. gpt-oss: the model card's 116.83B and 20.91B,
# which also hold each layer's attention sinks and router biases, tensors ModelSpec has no field for.
# Nemotron-H: the paper and NeMo's configs name 8B, 47B and 56B; no exact count was transcribed, the
# Hub's safetensors metadata being out of reach when the presets were added)
ROUNDED_COUNT_ONLY = {"deepseek-v3", "gpt-oss-120b", "gpt-oss-20b", "nemotron-h-8b", "nemotron-h-47b", "nemotron-h-56b"}


@pytest.mark.parametrize(("name", "nominal"), GPT3_NOMINAL.items())
def test_gpt3_presets_match_the_papers_rounded_size(name, nominal):
    entry = preset(name)
    assert entry.official_params is None
    assert abs(entry.spec.n_params - nominal) <= 0.02 * nominal


def test_gpt3_175b_rounds_to_175b():
    assert 174.5e9 <= preset("gpt3-175b").spec.n_params <= 175.5e9


def test_gpt3_architecture_is_gpt2_style():
    for name in GPT3_NOMINAL:
        spec = preset(name).spec
        assert spec.vocab == 50257
        assert spec.ffn_hidden == 4 * spec.hidden
        assert (spec.norm, spec.bias, spec.position_embedding) == ("layernorm", "all", "learned")
        assert spec.max_positions == 2048
        assert spec.tied_embeddings and not spec.gated_mlp


def test_mixtral_active_parameters():
    spec = preset("mixtral-8x7b").spec
    assert spec.is_moe and (spec.n_experts, spec.top_k) == (8, 2)
    assert 12.8e9 < spec.n_active_params < 13.0e9  # "12.9B active" (Mixtral paper)


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [("deepseek-v2-lite", 15.7e9, 2.4e9), ("deepseek-v2", 236e9, 21e9), ("deepseek-v3", 671e9, 37e9)],
)
def test_deepseek_presets_match_their_published_sizes(name, total, active):
    spec = preset(name).spec
    assert spec.is_mla and spec.is_moe and spec.n_kv_heads is None
    assert (spec.head_width, spec.value_head_width, spec.rope_head_width) == (192, 128, 64)
    assert abs(spec.n_params - total) <= 0.01 * total
    # active, the input embedding (a lookup) left out: within 4 % of the published figure
    assert abs(spec.n_active_params - spec.vocab * spec.hidden - active) <= 0.04 * active


# gpt-oss model card (arXiv:2508.10925), Table 1, in billions rounded to two decimals: total, active
# (unembedding counted, embedding not), MLP (experts and router), attention, embedding + unembedding.
GPT_OSS_TABLE_1 = {
    "gpt-oss-120b": (116.83, 5.13, 114.71, 0.96, 1.16),
    "gpt-oss-20b": (20.91, 3.61, 19.12, 0.64, 1.16),
}


@pytest.mark.parametrize(("name", "table"), GPT_OSS_TABLE_1.items())
def test_gpt_oss_presets_round_to_the_model_cards_table(name, table):
    spec = preset(name).spec
    assert preset(name).official_params is None and name in ROUNDED_COUNT_ONLY
    total, active, mlp, attention, embeddings = table
    # Not modelled: per layer, one attention sink per query head (GptOssAttention.sinks) and the
    # router's bias (GptOssTopKRouter.bias, one per expert): 36 x (64 + 128) = 6,912 values for the
    # 120b, 24 x (64 + 32) = 2,304 for the 20b, about 1e-7 of the model.
    sinks = spec.n_layers * spec.n_heads
    router_bias = spec.n_layers * spec.n_experts
    assert sinks + router_bias == {"gpt-oss-120b": 6_912, "gpt-oss-20b": 2_304}[name]
    for counted in (spec.n_params, spec.n_params + sinks + router_bias):
        assert round(counted / 1e9, 2) == total  # within the table's rounding: half a unit of 0.01B
    embedding = spec.vocab * spec.hidden
    assert round((spec.n_active_params - embedding + sinks + router_bias) / 1e9, 2) == active
    router = spec.n_moe_layers * spec.hidden * spec.n_experts
    assert round((spec.expert_params + router + router_bias) / 1e9, 2) == mlp
    assert round((spec.n_layers * spec.attention_params_per_layer + sinks) / 1e9, 2) == attention
    assert round(2 * embedding / 1e9, 2) == embeddings


def test_gpt_oss_presets_are_moe_with_biases_and_alternating_windows():
    for name, experts, layers in (("gpt-oss-120b", 128, 36), ("gpt-oss-20b", 32, 24)):
        spec = preset(name).spec
        assert (spec.n_layers, spec.hidden, spec.n_heads, spec.kv_heads, spec.head_width) == (layers, 2880, 64, 8, 64)
        assert (spec.n_experts, spec.top_k, spec.expert_ffn, spec.n_dense_layers) == (experts, 4, 2880, 0)
        assert (spec.bias, spec.gated_mlp, spec.tied_embeddings, spec.vocab) == ("all", True, False, 201088)
        assert (spec.sliding_window, spec.full_attention_layers, spec.windowed_layer_share) == (128, layers // 2, 0.5)


def test_qwen25_has_qkv_bias_and_untied_head():
    for name in ("qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b"):
        spec = preset(name).spec
        assert spec.bias == "qkv" and not spec.tied_embeddings


def test_preset_spec_is_named_by_its_id_and_cites_sources():
    for entry in PRESETS:
        assert entry.spec.name == entry.id
        assert entry.sources
        if not entry.id.startswith("gpt3-") and entry.id not in ROUNDED_COUNT_ONLY:
            assert entry.hf_id and entry.official_params


def test_aliases_are_unambiguous():
    seen: dict[str, str] = {}
    for entry in PRESETS:
        for name in (entry.id, *entry.aliases):
            key = normalize_name(name)
            assert seen.setdefault(key, entry.id) == entry.id, f"{name} names two presets"


# ---- lookup by name ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "target"),
    [
        ("llama-3-8b", "llama3-8b"),
        ("meta-llama/Meta-Llama-3-8B", "llama3-8b"),
        ("Llama-3.1-8B", "llama3.1-8b"),
        ("gpt3-xl", "gpt3-1.3b"),
        ("gpt-3-175b", "gpt3-175b"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
        ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("gptoss-20b", "gpt-oss-20b"),
    ],
)
def test_aliases_resolve_with_a_note(alias, target):
    spec, note = resolve_model(alias)
    assert spec.name == target
    assert spec == preset(target).spec
    assert note and target in note


def test_an_id_needs_no_note_and_is_case_insensitive():
    spec, note = resolve_model("LLAMA3-8B")
    assert spec.name == "llama3-8b" and note is None
    assert load_model("llama3-8b").n_params == 8_030_261_248


def test_unknown_name_suggests_close_ones():
    with pytest.raises(TrainrigError) as info:
        load_model("llama3-7b")
    assert info.value.field == "model"
    assert "did you mean" in str(info.value) and "llama3-8b" in str(info.value)


def test_unknown_far_name_points_to_the_list():
    with pytest.raises(TrainrigError, match="trainrig models"):
        load_model("zzzzzz")


def test_user_catalog_adds_a_preset(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "models:\n"
        "- id: tiny-test\n"
        "  name: Tiny\n"
        "  sources: [made up for a test]\n"
        "  spec: {n_layers: 2, hidden: 64, n_heads: 4, ffn_hidden: 128, vocab: 100}\n"
    )
    spec = load_model("tiny-test", extra_dirs=(str(tmp_path),))
    assert spec.name == "tiny-test"  # named by the id although the spec did not say
    assert spec.n_layers == 2


# ---- mappings ------------------------------------------------------------------------------------

LLAMA3_8B = {
    "n_layers": 32,
    "hidden": 4096,
    "n_heads": 32,
    "n_kv_heads": 8,
    "ffn_hidden": 14336,
    "gated_mlp": True,
    "vocab": 128256,
    "tied_embeddings": False,
}


def test_mapping_gives_a_custom_model():
    spec = load_model(LLAMA3_8B)
    assert spec.name == "custom"
    assert spec.n_params == 8_030_261_248
    assert resolve_model(LLAMA3_8B)[1] is None


def test_mapping_keeps_its_name():
    assert load_model(LLAMA3_8B | {"name": "mine"}).name == "mine"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_heads": 0}, "model.n_heads"),
        ({"n_heads": 30}, "model.n_heads"),  # 30 heads do not divide 4096
        ({"n_kv_heads": 5}, "model.n_kv_heads"),
        ({"hidden": "wide"}, "model.hidden"),
        ({"norm": "batchnorm"}, "model.norm"),
        ({"n_layer": 32}, "model.n_layer"),
    ],
)
def test_mapping_with_a_bad_field_names_it(change, field):
    with pytest.raises(TrainrigError) as info:
        load_model(LLAMA3_8B | change)
    assert info.value.field == field


def test_mapping_missing_a_field_names_it():
    data = dict(LLAMA3_8B)
    del data["vocab"]
    with pytest.raises(TrainrigError) as info:
        load_model(data)
    assert info.value.field == "model.vocab"


def test_a_spec_passes_through_and_other_types_are_refused():
    spec = preset("llama3-8b").spec
    assert load_model(spec) is spec
    with pytest.raises(TrainrigError) as info:
        load_model(42)  # type: ignore[arg-type]
    assert info.value.field == "model"


# ---- Hugging Face config.json --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "official"),
    [
        ("Meta-Llama-3-8B.json", 8_030_261_248),
        ("Mixtral-8x7B-v0.1/config.json", 46_702_792_704),
        ("Qwen2.5-7B.json", 7_615_616_512),
        ("Mistral-7B-v0.1.json", 7_241_732_096),
        ("gemma-7b.json", 8_537_680_896),
        ("Phi-3-mini-4k-instruct.json", 3_821_079_552),
        ("gpt2.json", 124_439_808),  # num_parameters(); the safetensors also hold 12 causal masks
        ("pythia-160m.json", 162_322_944),
        ("opt-125m.json", 125_239_296),
        ("DeepSeek-V2-Lite.json", 15_706_484_224),
    ],
)
def test_hf_config_of_exact_families_gives_the_official_count(file, official):
    assert model_from_hf_config(HF / file).n_params == official


@pytest.mark.parametrize(
    ("file", "official", "missing"),
    [
        # Qwen3: per-head q_norm and k_norm (2 x head_dim per layer) are not modelled.
        ("Qwen3-8B.json", 8_190_735_360, 36 * 2 * 128),
        ("Qwen3-30B-A3B.json", 30_532_122_624, 48 * 2 * 128),
        # Qwen2-MoE: the shared expert's gate (hidden_size per layer) is not modelled.
        ("Qwen2-57B-A14B.json", 57_408_658_944, 28 * 3584),
        # Gemma 2: four norms per layer, two counted (2 x hidden_size per layer missing).
        ("gemma-2-2b-it.json", 2_614_341_888, 26 * 2 * 2304),
        # Gemma 3: the two extra norms and the per-head q_norm and k_norm (2 x head_dim).
        ("gemma-3-1b-it.json", 999_885_952, 26 * (2 * 1152 + 2 * 256)),
        # gpt-oss: no exact published count; Table 1's totals are checked with the presets above.
    ],
)
def test_hf_config_of_approximate_families_misses_only_documented_tensors(file, official, missing):
    assert model_from_hf_config(HF / file).n_params == official - missing


def test_hf_config_matches_the_preset_of_the_same_checkpoint():
    pairs = [
        ("Meta-Llama-3-8B.json", "llama3-8b"),
        ("Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("Qwen2.5-7B.json", "qwen2.5-7b"),
        ("Mistral-7B-v0.1.json", "mistral-7b"),
        ("DeepSeek-V3.json", "deepseek-v3"),
        ("DeepSeek-V2-Lite.json", "deepseek-v2-lite"),
        ("gpt-oss-120b.json", "gpt-oss-120b"),
        ("gpt-oss-20b.json", "gpt-oss-20b"),
    ]
    for file, name in pairs:
        loaded = model_from_hf_config(HF / file).model_dump(exclude={"name"})
        assert loaded == preset(name).spec.model_dump(exclude={"name"}), file


def test_hf_config_fields_by_family():
    mixtral = model_from_hf_config(HF / "Mixtral-8x7B-v0.1")
    assert (mixtral.n_experts, mixtral.top_k, mixtral.sliding_window) == (8, 2, None)
    assert model_from_hf_config(HF / "Mistral-7B-v0.1.json").sliding_window == 4096
    # Qwen2.5 names a window but switches it off (use_sliding_window: false).
    assert model_from_hf_config(HF / "Qwen2.5-7B.json").sliding_window is None

    gemma = model_from_hf_config(HF / "gemma-7b.json")
    assert gemma.tied_embeddings and gemma.head_dim == 256  # gemma ties by default

    gpt2 = model_from_hf_config(HF / "gpt2.json")
    assert (gpt2.position_embedding, gpt2.max_positions, gpt2.norm, gpt2.bias) == (
        "learned",
        1024,
        "layernorm",
        "all",
    )
    assert gpt2.tied_embeddings and not gpt2.gated_mlp and gpt2.ffn_hidden == 3072

    opt = model_from_hf_config(HF / "opt-125m.json")
    assert opt.max_positions == 2050  # OPT offsets positions by 2

    qwen_moe = model_from_hf_config(HF / "Qwen2-57B-A14B.json")
    assert (qwen_moe.n_experts, qwen_moe.top_k, qwen_moe.expert_ffn_hidden) == (64, 8, 2560)
    assert (qwen_moe.n_shared_experts, qwen_moe.shared_ffn_hidden) == (1, 20480)
    assert qwen_moe.bias == "qkv" and qwen_moe.n_dense_layers == 0

    falcon = model_from_hf_config(HF / "falcon-7b.json")
    assert (falcon.kv_heads, falcon.norm, falcon.bias, falcon.position_embedding) == (
        1,
        "layernorm",
        "none",
        "rope",
    )
    assert falcon.tied_embeddings and falcon.head_width == 64


def test_hf_config_of_deepseek_reads_latent_attention_and_its_experts():
    v3 = model_from_hf_config(HF / "DeepSeek-V3.json")
    assert (v3.n_layers, v3.hidden, v3.n_heads, v3.n_kv_heads, v3.vocab) == (61, 7168, 128, None, 129280)
    assert (v3.kv_lora_rank, v3.q_lora_rank, v3.qk_rope_head_dim) == (512, 1536, 64)
    assert (v3.head_dim, v3.v_head_dim) == (192, 128)  # qk_nope_head_dim 128 + qk_rope_head_dim 64
    assert (v3.ffn_hidden, v3.expert_ffn_hidden, v3.n_experts, v3.top_k) == (18432, 2048, 256, 8)
    assert (v3.n_shared_experts, v3.shared_ffn, v3.n_dense_layers) == (1, 2048, 3)
    assert (v3.bias, v3.tied_embeddings, v3.norm, v3.gated_mlp) == ("none", False, "rmsnorm", True)
    # the multi-token-prediction module (num_nextn_predict_layers) is outside DeepSeek's 671B
    assert abs(v3.n_params - 671e9) <= 0.001 * 671e9

    lite = model_from_hf_config(HF / "DeepSeek-V2-Lite.json")
    assert (lite.n_layers, lite.hidden, lite.n_heads, lite.vocab) == (27, 2048, 16, 102400)
    assert (lite.kv_lora_rank, lite.q_lora_rank, lite.head_dim, lite.v_head_dim) == (512, None, 192, 128)
    assert (lite.n_experts, lite.top_k, lite.expert_ffn_hidden, lite.n_shared_experts) == (64, 6, 1408, 2)
    assert lite.n_dense_layers == 1 and lite.ffn_hidden == 10944
    assert abs(lite.n_params - 15.7e9) <= 0.01 * 15.7e9  # the model card's 15.7B


def test_hf_config_of_deepseek_variants(tmp_path):
    data = json.loads((HF / "DeepSeek-V3.json").read_text())
    file = tmp_path / "config.json"

    def load(**changes):
        file.write_text(json.dumps(data | changes))
        return model_from_hf_config(file)

    # newer transformers write head_dim = qk_rope_head_dim; the whole query/key head is still 192
    assert load(head_dim=64).head_dim == 192
    assert load(q_lora_rank=None).q_lora_rank is None
    assert load(attention_bias=True).bias == "qkv"
    dense = load(n_routed_experts=None)
    assert not dense.is_moe and dense.n_dense_layers == 0
    assert load(first_k_dense_replace=99).n_moe_layers == 0  # past the last layer: every layer dense
    del data["model_type"]  # the architectures name the family
    assert load().is_mla
    with pytest.raises(TrainrigError, match="moe_layer_freq = 2"):
        load(moe_layer_freq=2)
    with pytest.raises(TrainrigError, match="kv_lora_rank"):
        load(kv_lora_rank=None)


def test_hf_config_names(tmp_path):
    assert model_from_hf_config(HF / "Meta-Llama-3-8B.json").name == "Meta-Llama-3-8B"  # file stem
    mixtral = HF / "Mixtral-8x7B-v0.1" / "config.json"
    assert model_from_hf_config(mixtral).name == "Mixtral-8x7B-v0.1"  # config.json: its directory
    assert model_from_hf_config(HF / "Phi-3-mini-4k-instruct.json").name == "Phi-3-mini-4k-instruct"
    data = json.loads((HF / "gpt2.json").read_text()) | {"_name_or_path": "openai-community/gpt2"}
    (tmp_path / "config.json").write_text(json.dumps(data))
    assert model_from_hf_config(tmp_path).name == "openai-community/gpt2"


def test_load_model_takes_config_paths():
    as_str = load_model(str(HF / "Meta-Llama-3-8B.json"))
    as_path = load_model(HF / "Meta-Llama-3-8B.json")
    as_dir = load_model(str(HF / "Mixtral-8x7B-v0.1"))
    assert as_str == as_path and as_str.n_params == 8_030_261_248
    assert as_dir.n_params == 46_702_792_704
    assert resolve_model(HF / "gpt2.json")[1] is None


def _load_changed(tmp_path, name, **changes):
    data = json.loads((HF / name).read_text()) | changes
    file = tmp_path / "changed.json"
    file.write_text(json.dumps({k: v for k, v in data.items() if v is not ...}))  # ...: key removed
    return model_from_hf_config(file)


def _windows(spec):
    return spec.sliding_window, spec.full_attention_layers


def test_qwen2_sliding_window_only_when_enabled_and_from_max_window_layers_on(tmp_path):
    # transformers' Qwen2Config: layer i is windowed when use_sliding_window and i >= max_window_layers
    enabled = {"use_sliding_window": True, "sliding_window": 4096}
    assert _windows(_load_changed(tmp_path, "Qwen2.5-7B.json", **enabled, max_window_layers=20)) == (4096, 20)
    assert _windows(_load_changed(tmp_path, "Qwen2.5-7B.json", **enabled, max_window_layers=0)) == (4096, None)
    # Qwen2.5's max_window_layers 28 is all of its 28 layers: none keeps the window
    assert _windows(_load_changed(tmp_path, "Qwen2.5-7B.json", **enabled)) == (None, None)
    assert _windows(_load_changed(tmp_path, "Qwen2.5-7B.json", **enabled, max_window_layers=99)) == (None, None)
    assert _windows(_load_changed(tmp_path, "Qwen3-8B.json", **enabled, max_window_layers=30)) == (4096, 30)
    # the MoE variants: the window on every layer (their layer rule differs between versions)
    assert _windows(_load_changed(tmp_path, "Qwen3-30B-A3B.json", **enabled)) == (4096, None)
    assert _windows(_load_changed(tmp_path, "Qwen2-57B-A14B.json", **enabled)) == (4096, None)


def test_hf_config_reads_gemma_windows(tmp_path):
    # Gemma 2: even layers windowed, odd global (Gemma2Config's layer_types): 13 of 26 global
    gemma2 = model_from_hf_config(HF / "gemma-2-2b-it.json")
    assert _windows(gemma2) == (4096, 13) and gemma2.windowed_layer_share == 0.5
    assert gemma2.tied_embeddings and (gemma2.head_width, gemma2.kv_heads) == (256, 4)
    assert _windows(_load_changed(tmp_path, "gemma-2-2b-it.json", num_hidden_layers=27)) == (4096, 13)
    assert _windows(_load_changed(tmp_path, "gemma-2-2b-it.json", sliding_window=...)) == (4096, 13)  # the default
    assert _windows(_load_changed(tmp_path, "gemma-2-2b-it.json", sliding_window=None)) == (None, None)
    # Gemma 3: layer i global when (i + 1) % sliding_window_pattern == 0: layers 5, 11, 17, 23 of 26
    gemma3 = model_from_hf_config(HF / "gemma-3-1b-it.json")
    assert _windows(gemma3) == (512, 4) and gemma3.kv_heads == 1 and gemma3.tied_embeddings
    assert _windows(_load_changed(tmp_path, "gemma-3-1b-it.json", sliding_window_pattern=2)) == (512, 13)
    assert _windows(_load_changed(tmp_path, "gemma-3-1b-it.json", sliding_window_pattern=...)) == (512, 4)
    assert _windows(_load_changed(tmp_path, "gemma-3-1b-it.json", sliding_window_pattern=1)) == (None, None)
    with pytest.raises(TrainrigError, match="sliding_window_pattern = 0"):
        _load_changed(tmp_path, "gemma-3-1b-it.json", sliding_window_pattern=0)
    # the multimodal Gemma 3 is refused, pointing to its language model's config
    with pytest.raises(TrainrigError, match="text_config"):
        _load_changed(tmp_path, "gemma-3-1b-it.json", model_type="gemma3", text_config={"model_type": "gemma3_text"})
    assert _load_changed(tmp_path, "gemma-3-1b-it.json", model_type=...).n_params == gemma3.n_params  # by architecture


def test_hf_config_prefers_layer_types(tmp_path):
    three_full = ["sliding_attention"] * 23 + ["full_attention"] * 3
    assert _windows(_load_changed(tmp_path, "gemma-3-1b-it.json", layer_types=three_full)) == (512, 3)
    assert _windows(_load_changed(tmp_path, "gemma-2-2b-it.json", layer_types=three_full)) == (4096, 3)
    all_full = ["full_attention"] * 32
    assert _windows(_load_changed(tmp_path, "Mistral-7B-v0.1.json", layer_types=all_full)) == (None, None)
    windowed = {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 0}
    five_of_28 = three_full + ["full_attention"] * 2
    assert _windows(_load_changed(tmp_path, "Qwen2.5-7B.json", **windowed, layer_types=five_of_28)) == (4096, 5)
    # a list transformers would not write: the wrong length, or another kind of layer
    with pytest.raises(TrainrigError, match="lists 25 layer_types for its 26 layers"):
        _load_changed(tmp_path, "gemma-3-1b-it.json", layer_types=three_full[1:])
    for bad in (["chunked_attention"] * 26, "full_attention", [1] * 26):
        with pytest.raises(TrainrigError, match="layer_types that are not a list"):
            _load_changed(tmp_path, "gemma-3-1b-it.json", layer_types=bad)


def test_hf_config_of_gpt_oss(tmp_path):
    big = model_from_hf_config(HF / "gpt-oss-120b.json")
    assert (big.n_layers, big.hidden, big.n_heads, big.kv_heads, big.head_width) == (36, 2880, 64, 8, 64)
    assert big.vocab == 201088 and big.ffn_hidden == 2880
    assert (big.n_experts, big.top_k, big.expert_ffn, big.n_dense_layers) == (128, 4, 2880, 0)
    assert (big.bias, big.gated_mlp, big.tied_embeddings, big.norm) == ("all", True, False, "rmsnorm")
    assert _windows(big) == (128, 18)
    small = model_from_hf_config(HF / "gpt-oss-20b.json")
    assert (small.n_layers, small.n_experts, _windows(small)) == (24, 32, (128, 12))
    # sinks and router biases (n_layers x (n_heads + n_experts)) are all the model card's 20.91B has more
    assert small.n_params + 24 * (64 + 32) == 20_914_757_184 and round(small.n_params / 1e9, 2) == 20.91
    # without layer_types: GptOssConfig's default alternation; the older key names of the experts
    old = _load_changed(tmp_path, "gpt-oss-20b.json", layer_types=..., num_local_experts=..., num_experts=32,
                        num_experts_per_tok=..., experts_per_token=4)
    assert old.model_copy(update={"name": small.name}) == small
    by_architecture = _load_changed(tmp_path, "gpt-oss-20b.json", model_type=...)  # GptOssForCausalLM
    assert by_architecture.model_copy(update={"name": small.name}) == small


def test_qwen_moe_dense_layers(tmp_path):
    data = json.loads((HF / "Qwen3-30B-A3B.json").read_text())
    file = tmp_path / "sparse.json"
    file.write_text(json.dumps(data | {"decoder_sparse_step": 2, "mlp_only_layers": [0]}))
    spec = model_from_hf_config(file)
    # layers 0..47: MoE where (i+1) % 2 == 0 and i != 0, i.e. 24 MoE layers, 24 dense.
    assert spec.n_dense_layers == 24 and spec.n_moe_layers == 24


def test_llama_biases(tmp_path):
    data = json.loads((HF / "Meta-Llama-3-8B.json").read_text())
    for flags, bias in [
        ({}, "none"),
        ({"attention_bias": True}, "qkv"),
        ({"attention_bias": True, "mlp_bias": True}, "all"),
    ]:
        file = tmp_path / "biased.json"
        file.write_text(json.dumps(data | flags))
        assert model_from_hf_config(file).bias == bias


def test_every_supported_family_loads(tmp_path):
    base = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "ffn_dim": 128,
        "vocab_size": 100,
        "max_position_embeddings": 32,
        "n_positions": 32,
        "num_local_experts": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_routed_experts": 4,
        "kv_lora_rank": 32,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
        "hybrid_override_pattern": "M*",  # nemotron_h: a Mamba-2 layer and an attention layer
        "n_groups": 1,
    }
    for model_type in SUPPORTED_MODEL_TYPES:
        file = tmp_path / f"{model_type}.json"
        file.write_text(json.dumps(base | {"model_type": model_type}))
        spec = model_from_hf_config(file)
        assert isinstance(spec, ModelSpec) and spec.n_params > 0, model_type


# ---- configs that are not decoder-only language models -------------------------------------------


def _error(source) -> TrainrigError:
    with pytest.raises(TrainrigError) as info:
        load_model(source)
    assert info.value.field == "model"
    assert str(info.value).endswith(".")
    return info.value


def test_bert_is_refused():
    message = str(_error(HF / "bert-base-uncased.json"))
    assert "bert" in message and "encoder-only" in message and "llama" in message


def test_t5_is_refused():
    message = str(_error(HF / "t5-small.json"))
    assert "t5" in message and "encoder-decoder" in message


def test_malformed_json_is_refused():
    message = str(_error(str(HF / "malformed.json")))
    assert "not valid JSON" in message and "line" in message


def test_missing_file_is_refused(tmp_path):
    assert "no file" in str(_error(str(tmp_path / "nope.json")))
    assert "no file" in str(_error(tmp_path / "nope" / "config.json"))


def test_directory_without_config_is_refused(tmp_path):
    assert "config.json" in str(_error(tmp_path))
    assert "config.json" in str(_error(str(tmp_path)))


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ({"model_type": "vit", "hidden_size": 768}, "vision"),
        ({"model_type": "whisper", "is_encoder_decoder": True}, "encoder-decoder"),
        (
            {"model_type": "llama", "is_encoder_decoder": True, "num_hidden_layers": 2},
            "encoder-decoder",
        ),
        ({"model_type": "llava", "text_config": {"model_type": "llama"}}, "text_config"),
        ({"model_type": "mamba", "hidden_size": 768}, "mamba"),
        ({"hidden_size": 768}, "model_type"),
        (
            {
                "model_type": "llama",
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 100,
            },
            "model width",
        ),
        (
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 100,
            },
            "layer count",
        ),
        ({"model_type": "llama", "num_hidden_layers": "two", "hidden_size": 64}, "whole number"),
        (
            {
                "model_type": "llama",
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "num_attention_heads": 5,
                "intermediate_size": 128,
                "vocab_size": 100,
            },
            "head",
        ),
        ([1, 2, 3], "JSON list"),
    ],
)
def test_other_configs_are_refused(tmp_path, content, words):
    file = tmp_path / "config.json"
    file.write_text(json.dumps(content))
    assert words in str(_error(file))


def test_a_nemotron_h_config_reads_as_its_hybrid_pattern(tmp_path):
    # a config shaped like Nemotron-H 8B (hidden 4096, 128 Mamba-2 heads of 64, 8 groups of state 128,
    # 24 Mamba-2, 4 attention and 24 squared-ReLU MLP layers): its parameters counted by hand below
    pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    config = {"model_type": "nemotron_h", "num_hidden_layers": 52, "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 21504, "vocab_size": 131072,
              "hybrid_override_pattern": pattern, "mamba_num_heads": 128, "mamba_head_dim": 64,
              "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "chunk_size": 128}
    file = tmp_path / "config.json"
    file.write_text(json.dumps(config))
    spec = model_from_hf_config(file)
    assert (spec.n_mamba_layers, spec.n_attention_layers, spec.n_dense_mlp_layers) == (24, 4, 24)
    mixer = 4096 * (2 * 8192 + 2 * 8 * 128 + 128) + 8192 * 4096 + (8192 + 2048) * 5 + 3 * 128 + 8192
    attention = 4096 * 4096 * 2 + 2 * 4096 * 1024
    mlp = 2 * 4096 * 21504
    norms = 52 * 4096 + 4096
    assert spec.n_params == 24 * mixer + 4 * attention + 24 * mlp + norms + 2 * 131072 * 4096


# NeMo's NemotronHConfig8B / 47B / 56B (nemo/collections/llm/gpt/model/ssm.py): layers of each kind in
# hybrid_override_pattern, and the sizes NVIDIA quotes (Nemotron-H, arXiv:2504.03624)
@pytest.mark.parametrize(("name", "layers", "quoted"), [
    ("nemotron-h-8b", (24, 4, 24), 8e9), ("nemotron-h-47b", (45, 5, 48), 47e9), ("nemotron-h-56b", (54, 10, 54), 56e9),
])
def test_nemotron_h_presets_follow_nemos_patterns_and_round_to_their_names(name, layers, quoted):
    spec = preset(name).spec
    assert (spec.n_mamba_layers, spec.n_attention_layers, spec.n_dense_mlp_layers) == layers
    assert spec.mamba_heads * spec.mamba_head_dim == 2 * spec.hidden  # Megatron's d_inner = expand (2) × hidden
    assert abs(spec.n_params - quoted) <= 0.015 * quoted
