"""load_bert: local folders, strict explicit mapping, and one clear sentence for every refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from model import CheckpointError, load_bert
from model.bert import BERT, bert_config
from model.checkpoint import bert_wanted, judge_checkpoint
from model.checkpoint_files import TensorEntry
from model.checkpoint_guard import match_keys
from model.family import weight_map

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s"]


def make_tiny_bert(folder: Path, **config_changes) -> Path:
    """A small real BERT checkpoint written by transformers itself (random weights)."""
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        **config_changes,
    )
    torch.manual_seed(1)
    BertModel(config).save_pretrained(folder, safe_serialization=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return folder


@pytest.fixture
def tiny(tmp_path) -> Path:
    return make_tiny_bert(tmp_path / "tiny-bert")


@pytest.mark.parametrize("act", ["gelu", "relu", "gelu_new"])
def test_a_local_bert_folder_loads_and_matches_hf(tmp_path, act):
    from transformers import BertModel

    folder = make_tiny_bert(tmp_path / act, hidden_act=act)
    net, tok = load_bert(folder, device="cpu")
    assert net.config.d_model == 32 and net.config.n_layers == 2
    enc = tok(["the cat sat on the mats", "the cat"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    hf = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        ref = hf(**enc, output_attentions=True, output_hidden_states=True)
    for layer in range(2):
        torch.testing.assert_close(
            tr.attentions["encoder"][:, layer], ref.attentions[layer], atol=1e-5, rtol=0
        )
    torch.testing.assert_close(
        tr.hidden_states["encoder"], torch.stack(ref.hidden_states, 1), atol=1e-5, rtol=0
    )


def test_bundled_model_is_the_default_and_in_eval_mode(bert):
    net, tok = bert
    assert net.config.name == "all-MiniLM-L6-v2"
    assert not net.training
    assert (net.config.d_model, net.config.n_layers, net.config.n_heads) == (384, 6, 12)
    assert tok.model_max_length == 512


def test_checkpoint_with_bert_prefix_and_task_head_loads(tiny):
    state = load_file(tiny / "model.safetensors")
    prefixed = {f"bert.{k}": v for k, v in state.items()}
    prefixed["cls.predictions.bias"] = torch.zeros(len(VOCAB))
    save_file(prefixed, tiny / "model.safetensors")
    net, _ = load_bert(tiny, device="cpu")
    torch.testing.assert_close(
        net.embedding.tok_emb.weight, state["embeddings.word_embeddings.weight"]
    )


def test_mapping_is_explicit_and_unknown_keys_are_errors():
    hf = {"model_type": "bert", "vocab_size": len(VOCAB), "hidden_size": 32}
    hf |= {"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}
    config = bert_config(hf, "tiny", pooler=False)
    source = weight_map(config, BERT)["encoder.layers.1.self_attn.w_q.weight"]
    assert source.key == "encoder.layer.1.attention.self.query.weight"
    for unknown in (
        "encoder.layer.0.attention.self.rotary.weight",
        "encoder.layer.3.output.dense.weight",
    ):
        with pytest.raises(CheckpointError, match="does not know"):
            match_keys({unknown: TensorEntry("F32", (1,))}, config, BERT, "tiny")


def sentence(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_non_bert_checkpoint_is_refused(tiny):
    cfg = json.loads((tiny / "config.json").read_text())
    cfg["model_type"] = "gpt2"
    (tiny / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError) as exc:
        load_bert(tiny)
    assert "gpt2" in sentence(exc) and "only BERT" in sentence(exc)


def test_missing_weights_and_pickled_weights_are_refused(tiny):
    (tiny / "model.safetensors").rename(tiny / "pytorch_model.bin")
    with pytest.raises(CheckpointError) as exc:
        load_bert(tiny)
    assert "safetensors" in sentence(exc) and "pytorch_model.bin" in sentence(exc)


def test_missing_config_and_missing_vocab_are_refused(tiny):
    (tiny / "vocab.txt").unlink()
    with pytest.raises(CheckpointError, match="vocab.txt"):
        load_bert(tiny)
    (tiny / "config.json").unlink()
    with pytest.raises(CheckpointError, match="no config.json"):
        load_bert(tiny)


def test_shape_mismatch_is_refused(tiny):
    cfg = json.loads((tiny / "config.json").read_text())
    cfg["intermediate_size"] = 48
    (tiny / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError) as exc:
        load_bert(tiny)
    assert "shape" in sentence(exc)


def test_missing_weight_is_refused(tiny):
    state = load_file(tiny / "model.safetensors")
    del state["encoder.layer.1.output.dense.bias"]
    save_file(state, tiny / "model.safetensors")
    with pytest.raises(CheckpointError, match="missing 1 weights"):
        load_bert(tiny)


def test_corrupt_weights_file_and_size_cap_are_refused(tiny):
    with pytest.raises(CheckpointError, match="limit"):
        load_bert(tiny, max_bytes=1000)
    (tiny / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="could not be read"):
        load_bert(tiny)


def test_parameter_cap_is_refused_before_reading_weights(tiny):
    with pytest.raises(CheckpointError) as exc:
        load_bert(tiny, max_params=1000)
    assert "parameters; the limit is" in sentence(exc)


def test_a_transformers_checkpoint_passes_the_judge(tiny):
    judged = judge_checkpoint(tiny, "tiny", bert_wanted())
    assert judged.config.d_model == 32 and judged.config.pooler
    assert len(judged.file_keys) == 16 * 2 + 7


def test_a_file_or_a_missing_path_is_refused(tiny, tmp_path):
    with pytest.raises(CheckpointError, match="is a file"):
        load_bert(tiny / "config.json")
    with pytest.raises(CheckpointError, match="neither an existing folder"):
        load_bert(str(tmp_path / "no" / "such" / "folder"))


def test_relative_position_bert_is_refused(tmp_path):
    folder = make_tiny_bert(tmp_path / "rel", position_embedding_type="relative_key")
    with pytest.raises(CheckpointError, match="absolute"):
        load_bert(folder)


def test_hub_id_without_network_is_one_sentence(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CheckpointError) as exc:
        load_bert("google-bert/bert-base-uncased")
    assert "Could not fetch" in sentence(exc) and "network" in sentence(exc)
