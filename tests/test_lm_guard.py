"""load_lm refuses what it cannot run faithfully with one sentence, before allocating the model."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import model.checkpoint
import model.checkpoint_guard
from model import (
    CheckpointError,
    ConfigRefused,
    SourceNotFound,
    TokenizerRefused,
    WeightsRefused,
    load_lm,
)
from model.lm_config import lm_config
from tests.test_lm import save_checkpoint, save_tokenizer


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("llama")
    save_checkpoint(folder, "llama")
    return folder


@pytest.fixture
def folder(llama_folder, tmp_path) -> Path:
    """A fresh copy of a good LLaMA checkpoint to spoil."""
    for path in llama_folder.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path


@pytest.fixture
def never_built(monkeypatch):
    """Fail the test if load_lm gets as far as allocating our model."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was allocated before the refusal")

    monkeypatch.setattr(model.checkpoint, "Transformer", refuse)


def edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def edit_weights(folder: Path, change) -> None:
    state = load_file(str(folder / "model.safetensors"))
    change(state)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def refusal(source, **kwargs) -> str:
    """The one sentence load_lm refuses with (no exception chained behind it)."""
    with pytest.raises(CheckpointError) as exc:
        load_lm(source, **kwargs)
    text = str(exc.value)
    assert "\n" not in text and text.endswith(".") and exc.value.__cause__ is None, text
    assert exc.value.__suppress_context__ or exc.value.__context__ is None
    return text


@pytest.mark.parametrize("model_type", ["bert", "t5", "gemma", "gemma2", None, 7], ids=str)
def test_other_model_types_are_refused_naming_the_supported_ones(folder, never_built, model_type):
    edit_config(folder, model_type=model_type)
    text = refusal(folder)
    assert "'gpt2', 'llama', 'qwen2', 'mistral', 'qwen3' or 'gemma3_text'" in text


CONFIG_REFUSALS = {
    "yarn rope": ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 5e5}}, "'yarn'"),
    "llama3 rope without factors": (
        {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5}},
        "sets factor to None",
    ),
    "rope_scaling (v4)": ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "linear"),
    # heads wider than d_model / n_heads are run (Qwen3, Gemma 3): this file's are not
    "head_dim": ({"head_dim": 16}, "has shape (16, 64) but its config implies (32, 64)"),
    "activation": ({"hidden_act": "gelu_fast"}, "gelu_fast"),
    "kv heads": ({"num_key_value_heads": 3}, "multiple of n_kv_heads"),
    "layers": ({"num_hidden_layers": 10**9}, "whole number from"),
    "width as text": ({"hidden_size": "64"}, "whole number from"),
    "eps": ({"rms_norm_eps": -1}, "between 0 and 1"),
    "tie as text": ({"tie_word_embeddings": "yes"}, "true or false"),
    "no vocab": ({"vocab_size": None}, "has no 'vocab_size'"),
}


@pytest.mark.parametrize("changes, fragment", CONFIG_REFUSALS.values(), ids=CONFIG_REFUSALS)
def test_configs_we_do_not_run_faithfully_are_refused(folder, never_built, changes, fragment):
    edit_config(folder, **changes)
    assert fragment in refusal(folder)


def test_qwen2_with_a_window_on_some_layers_only_is_refused():
    hf = {"model_type": "qwen2", "vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}
    hf |= {"num_hidden_layers": 2, "intermediate_size": 8, "sliding_window": 4}
    hf["layer_types"] = ["full_attention", "sliding_attention"]
    with pytest.raises(CheckpointError, match="some layers only"):
        lm_config(hf, "q")
    hf["layer_types"] = ["sliding_attention"] * 2
    assert lm_config(hf, "q").sliding_window == 4
    hf.pop("layer_types")  # transformers 4's way of saying it
    hf |= {"use_sliding_window": True, "max_window_layers": 1}
    with pytest.raises(CheckpointError, match="some layers only"):
        lm_config(hf, "q")
    hf["use_sliding_window"] = False
    assert lm_config(hf, "q").sliding_window is None


def test_llama3_scaling_is_read_from_transformers_4_configs_too():
    hf = {"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}
    hf |= {"num_hidden_layers": 1, "intermediate_size": 8, "rope_theta": 500000.0}
    hf["rope_scaling"] = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0}
    hf["rope_scaling"] |= {"high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    config = lm_config(hf, "llama-3.2")
    assert (config.rope_theta, config.rope_llama3) == (500000.0, (32.0, 1.0, 4.0, 8192))
    hf["rope_scaling"]["high_freq_factor"] = 0.5
    with pytest.raises(CheckpointError, match="high above low"):
        lm_config(hf, "llama-3.2")


def test_mistral_without_a_window_has_none():
    hf = {"model_type": "mistral", "vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}
    hf |= {"num_hidden_layers": 1, "intermediate_size": 8, "sliding_window": None}
    assert lm_config(hf, "m").sliding_window is None


def _retype(state):
    key = "model.layers.0.mlp.up_proj.weight"
    state[key] = state[key].to(torch.int8)


WEIGHT_REFUSALS = {
    "wrong shape": (
        lambda s: s.update({"model.norm.weight": torch.ones(65)}),
        "norm.weight has shape (65,) but its config implies (64,)",
    ),
    "missing": (lambda s: s.pop("model.layers.1.self_attn.k_proj.weight"), "missing 1 weights"),
    "unknown": (lambda s: s.update({"model.extra.weight": torch.ones(2)}), "does not know"),
    "int8": (_retype, "stored as I8"),
    "twice": (
        lambda s: s.update({"norm.weight": s["model.norm.weight"].clone()}),
        "twice",
    ),
}


@pytest.mark.parametrize("change, fragment", WEIGHT_REFUSALS.values(), ids=WEIGHT_REFUSALS)
def test_weights_that_do_not_fit_the_config_are_refused_from_the_header(
    folder, never_built, change, fragment
):
    edit_weights(folder, change)
    assert fragment in refusal(folder)


def test_a_model_larger_than_memory_is_refused_before_reading_weights(
    folder, never_built, monkeypatch
):
    monkeypatch.setattr(model.checkpoint_guard, "available_memory", lambda: 50_000)
    assert "of memory in float32; this machine has 50.0 kB available" in refusal(folder)
    monkeypatch.setattr(
        model.checkpoint_guard, "available_memory", lambda: None
    )  # unknown: max_bytes only
    assert "the limit is 1.0 kB" in refusal(folder, max_bytes=1000)


def test_the_memory_estimate_counts_float32_weights_and_one_conversion(llama_folder):
    net, _ = load_lm(llama_folder)
    shapes = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    largest = max(v.numel() for v in net.state_dict().values())
    assert model.checkpoint_guard.memory_needed(shapes) == 4 * (net.get_num_params() + largest)


def test_missing_weights_files_and_sharded_checkpoints_are_refused(folder, never_built):
    (folder / "model.safetensors").unlink()
    assert "has no model.safetensors or pytorch_model.bin" in refusal(folder)
    (folder / "model.safetensors.index.json").write_text("{}")
    assert "split into several weight files" in refusal(folder)


BIN_REFUSALS = {
    "not tensors": lambda path: torch.save({"a": 1}, path),
    "a list": lambda path: torch.save([torch.ones(1)], path),
    "legacy format": lambda path: torch.save(
        {"x": torch.ones(1)}, path, _use_new_zipfile_serialization=False
    ),
    "garbage": lambda path: path.write_bytes(b"\x00" * 100),
}


@pytest.mark.parametrize("write", BIN_REFUSALS.values(), ids=BIN_REFUSALS)
def test_unusable_bin_files_are_refused(folder, never_built, write):
    (folder / "model.safetensors").unlink()
    write(folder / "pytorch_model.bin")
    assert "pytorch_model.bin" in refusal(folder)


class _Exploit:
    """Unpickled, it creates a file: what a hostile pytorch_model.bin could do instead."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_pickle_that_runs_code_is_refused_and_runs_nothing(folder, never_built, tmp_path):
    import zipfile

    (folder / "model.safetensors").unlink()
    bin_path, marker = folder / "pytorch_model.bin", tmp_path / "pwned"
    with zipfile.ZipFile(bin_path, "w") as z:  # torch's zip layout
        z.writestr("archive/data.pkl", pickle.dumps({"w": _Exploit(marker)}, protocol=2))
        z.writestr("archive/version", "3\n")
    assert "could not be read safely" in refusal(folder)
    assert not marker.exists()
    torch.load(bin_path, weights_only=False)  # the file is a working exploit when trusted
    assert marker.exists()


def test_a_tokenizer_with_remote_code_never_runs_it(folder):
    marker = folder / "ran"
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    config["tokenizer_class"] = "EvilTokenizer"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    try:
        load_lm(folder)
    except CheckpointError as exc:
        assert "tokenizer could not be loaded" in str(exc)
    assert not marker.exists()


def test_a_tokenizer_past_the_embedding_table_is_refused(folder, never_built):
    edit_config(folder, vocab_size=200)  # the tokenizer has 300 tokens
    rows = ("embed_tokens.weight", "lm_head.weight")
    edit_weights(folder, lambda s: s.update({k: s[k][:200] for k in s if k.endswith(rows)}))
    assert "past the 200 rows of its embedding table" in refusal(folder)


def test_a_missing_tokenizer_is_refused(folder, never_built):
    (folder / "tokenizer.json").unlink()
    text = refusal(folder)
    assert "has no tokenizer.json, vocab.json and merges.txt, or tokenizer.model" in text


def test_config_json_problems_are_sentences(folder, never_built):
    (folder / "config.json").write_text("{not json")
    assert "is not valid JSON" in refusal(folder)
    (folder / "config.json").write_text("[]")
    assert "is not a JSON object" in refusal(folder)
    (folder / "config.json").unlink()
    assert "has no config.json" in refusal(folder)


def test_a_hub_id_offline_is_one_sentence(monkeypatch, tmp_path, never_built):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    text = refusal("openai-community/gpt2")
    assert "Hugging Face Hub is switched off (HF_HUB_OFFLINE)" in text
    assert not any(tmp_path.rglob("*.safetensors"))


@pytest.mark.parametrize("source", ["", "   ", "no/such/folder/here", "../" * 50 + "x"])
def test_nonsense_sources_are_one_sentence(source, never_built, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refusal(source)


def test_a_gpt2_checkpoint_keeps_its_own_sentences(tmp_path, never_built):
    save_tokenizer(tmp_path)
    config = {"model_type": "gpt2", "vocab_size": 320, "n_embd": 64, "n_layer": 1, "n_head": 4}
    (tmp_path / "config.json").write_text(json.dumps({**config, "add_cross_attention": True}))
    assert "has cross-attention" in refusal(tmp_path)
    config["scale_attn_by_inverse_layer_idx"] = True
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert "1/(layer + 1)" in refusal(tmp_path)


def _spoil_source(folder: Path) -> str:
    return str(folder / "no" / "such" / "folder")


def _spoil_config(folder: Path) -> str:
    edit_config(folder, rope_parameters={"rope_type": "yarn", "rope_theta": 5e5})
    return str(folder)


def _spoil_family(folder: Path) -> str:
    edit_config(folder, model_type="t5")
    return str(folder)


def _spoil_weights(folder: Path) -> str:
    edit_weights(folder, lambda s: s.update({"model.extra.weight": torch.ones(2)}))
    return str(folder)


def _spoil_tokenizer(folder: Path) -> str:
    (folder / "tokenizer.json").unlink()
    return str(folder)


# A refusal of each stage of the pipeline: (spoil a good folder -> source, its error type).
STAGE_REFUSALS = {
    "source": (_spoil_source, SourceNotFound),
    "config": (_spoil_config, ConfigRefused),
    "family": (_spoil_family, ConfigRefused),
    "weights": (_spoil_weights, WeightsRefused),
    "tokenizer": (_spoil_tokenizer, TokenizerRefused),
}
# Names a refusal quotes that stay as they are on a Chinese page.
KEPT_NAMES = {"rope_type", "default", "llama3", "model_type", "RoPE", "LLaMA", "GPT", "Qwen2"}
KEPT_NAMES |= {"Mistral", "gpt2", "llama", "qwen2", "mistral", "Hugging", "Face", "Hub", "id"}
KEPT_NAMES |= {"Qwen3", "Gemma"}  # model names stay as they are


@pytest.mark.parametrize("stage", STAGE_REFUSALS)
def test_a_refusal_names_its_stage_and_is_said_in_chinese_on_a_chinese_page(
    folder, never_built, stage
):
    """Each stage refuses with its own error type and a lang.Msg: English as before, and
    Chinese on a Chinese page, where only the names and values it quotes stay as they are."""
    from lang import Msg, message_of, speaking
    from tests.test_server_language import data_in, english_words

    spoil, kind = STAGE_REFUSALS[stage]
    with pytest.raises(kind) as exc:
        load_lm(spoil(folder))
    message = exc.value.args[0]
    assert isinstance(message, Msg) and message_of(exc.value) == str(exc.value)
    with speaking("zh-CN"):
        said = message_of(exc.value)
    assert re.search(r"[\u4e00-\u9fff]", said), said
    words = re.sub(r"[\w.]+\.(json|txt|model)\b", " ", said)  # file names stay as they are
    assert not english_words(words, data_in(message) | KEPT_NAMES), said


def test_a_hub_language_model_is_judged_before_its_weights_download(llama_folder, fake_hub):
    """The Hub path is BERT's: config.json, the safetensors header and the tokenizer's files are
    judged before model.safetensors is downloaded."""
    remote, downloaded = fake_hub
    remote.mkdir()
    for path in llama_folder.iterdir():
        (remote / path.name).write_bytes(path.read_bytes())
    edit_weights(remote, lambda s: s.update({"model.extra.weight": torch.ones(2)}))
    with pytest.raises(WeightsRefused, match="does not know"):
        load_lm("someone/tiny-llama")
    assert "model.safetensors" not in downloaded
    (remote / "model.safetensors").write_bytes((llama_folder / "model.safetensors").read_bytes())
    net, _ = load_lm("someone/tiny-llama")
    assert downloaded[-1] == "model.safetensors" and net.config.name == "someone/tiny-llama"
