"""Preparing a registry model reads its GGUF once for its tensors (model/gguf_table.py) and names
them with one name table (model/registry.py): each part equals what gguf's and transformers'
own readers give, on a file written here and on SmolLM2's real file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.gguf_table import read_table, tensor_bytes


def gguf_readers_table(path) -> list[tuple]:
    """gguf's own reader: (name, torch-order shape, type, start, bytes) of each tensor."""
    from gguf import GGUFReader

    return [
        (
            t.name,
            tuple(int(n) for n in reversed(t.shape.tolist())),
            int(t.tensor_type),
            int(t.data_offset),
            int(t.n_bytes),
        )
        for t in GGUFReader(str(path)).tensors
    ]


def ours(path) -> list[tuple]:
    table = read_table(str(path))
    return [(t.name, t.shape, t.kind, t.start, t.nbytes) for t in table.tensors]


def write_file(path) -> dict[str, np.ndarray]:
    """A small GGUF with what real files hold: string, number and string-array metadata (a
    vocabulary), an odd alignment, plain and quantized tensors (Q5_0, Q4_K)."""
    from gguf import GGMLQuantizationType, GGUFWriter

    writer = GGUFWriter(str(path), "llama")
    writer.add_uint32("general.alignment", 64)
    writer.add_string("general.name", "tiny 小")
    writer.add_array("tokenizer.ggml.tokens", ["a", "bb", "我喜欢", ""] * 50)
    writer.add_array("tokenizer.ggml.scores", [0.5] * 200)
    writer.add_float32("llama.rope.freq_base", 10000.0)
    rng = np.random.default_rng(0)
    tensors = {
        "token_embd.weight": rng.standard_normal((7, 32), dtype=np.float32),
        "blk.0.attn_norm.weight": rng.standard_normal(32, dtype=np.float32),
        "blk.0.ffn_up.weight": rng.standard_normal((3, 32)).astype(np.float16),
        "blk.0.attn_q.weight": rng.integers(0, 255, (4, 22), dtype=np.uint8),  # 4 x 32, Q5_0
        "blk.0.attn_k.weight": rng.integers(0, 255, (2, 144), dtype=np.uint8),  # 2 x 256, Q4_K
    }
    kinds = {"blk.0.attn_q.weight": GGMLQuantizationType.Q5_0}
    kinds["blk.0.attn_k.weight"] = GGMLQuantizationType.Q4_K
    for name, data in tensors.items():
        writer.add_tensor(name, data, raw_dtype=kinds.get(name))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


def test_the_table_of_a_written_file_is_ggufs_own(tmp_path):
    from gguf import GGMLQuantizationType, GGUFReader, dequantize

    path = tmp_path / "tiny.gguf"
    tensors = write_file(path)
    assert ours(path) == gguf_readers_table(path)
    table = read_table(str(path))
    assert table.architecture == "llama"
    theirs = {t.name: t for t in GGUFReader(str(path)).tensors}
    for entry in table.tensors:
        kind = GGMLQuantizationType(entry.kind)
        mine = dequantize(tensor_bytes(table, entry), kind)
        np.testing.assert_array_equal(mine, dequantize(theirs[entry.name].data, kind))
        if kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            np.testing.assert_array_equal(mine, tensors[entry.name].astype(np.float32))


def test_a_cut_file_is_refused(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_file(path)
    data = path.read_bytes()
    for size, why in ((3, "not a GGUF"), (100, "inside its header"), (-10, "before its last")):
        (tmp_path / "cut.gguf").write_bytes(data[:size])
        with pytest.raises(ValueError, match=why):
            read_table(str(tmp_path / "cut.gguf"))
    (tmp_path / "other.gguf").write_bytes(b"GGML" + data[4:])
    with pytest.raises(ValueError, match="not a GGUF"):
        read_table(str(tmp_path / "other.gguf"))


@pytest.mark.parametrize("kind", ["llama", "gemma3_text"])
def test_one_name_table_names_every_tensor_as_transformers_does(kind):
    """transformers' get_gguf_hf_weights_map (a name table per submodule) and ours (one) give
    the same names for a small model of each family the registry ships."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    from model.registry import _hf_names

    config = {
        "model_type": kind,
        "num_hidden_layers": 3,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 300,
        "head_dim": 16,
    }
    arch = {"llama": "llama", "gemma3_text": "gemma3"}[kind]
    names, _ = _hf_names(arch, config)
    rest = {k: v for k, v in config.items() if k != "model_type"}
    with torch.device("meta"):
        hf = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **rest))
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=config)
    assert names == get_gguf_hf_weights_map(hf, processor)
    assert "blk.2.attn_q.weight" in names and "token_embd.weight" in names


@pytest.mark.slow
def test_smollm2s_table_is_ggufs_own():
    from model.registry import REGISTRY, gguf_file

    path = gguf_file(REGISTRY["smollm2-135m"])
    table = ours(path)
    assert table == gguf_readers_table(path)
    assert len(table) == 272


@pytest.mark.slow
def test_the_prepared_tokenizer_is_autotokenizers(tmp_path):
    """The tokenizer saved with a prepared model is the one AutoTokenizer makes of the GGUF."""
    from transformers import AutoTokenizer

    from model.registry import REGISTRY, _tokenizer, gguf_file

    path = gguf_file(REGISTRY["smollm2-135m"])
    ours_, auto = tmp_path / "ours", tmp_path / "auto"
    _tokenizer(path, "llama").save_pretrained(str(ours_))
    AutoTokenizer.from_pretrained(
        str(path.parent), gguf_file=path.name, local_files_only=True
    ).save_pretrained(str(auto))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (ours_ / name).read_bytes() == (auto / name).read_bytes(), name
