"""Exports read back exactly: stats CSV through pandas, the trace .npz through numpy (no pickle)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest
import torch

import analysis
import analysis.export
from model import PRESETS, Transformer
from tests.conftest import LONG_TEXT


def test_stats_csv_reads_back_as_the_same_table(bert):
    net, tok = bert
    tr = net.trace(tok(["time flies like an arrow"], return_tensors="pt")["input_ids"])
    df = analysis.head_stats(tr)
    text = analysis.stats_csv(df)
    assert text.splitlines()[0] == "layer,head,entropy,prev,next,self,first,sep,punct,distance"
    back = pd.read_csv(io.StringIO(text))
    assert back[["layer", "head"]].equals(df[["layer", "head"]])
    assert np.allclose(back.drop(columns=["layer", "head"]), df.drop(columns=["layer", "head"]))


def test_stats_csv_meta_columns_read_back_and_no_text_cell_starts_like_a_formula(bert):
    net, tok = bert
    tr = net.trace(tok(["time flies like an arrow"], return_tensors="pt")["input_ids"])
    df = analysis.head_stats(tr)
    text = '=HYPERLINK("http://example.invalid", "click"), then\n@SUM(A1)'
    meta = {"model": "-bert", "text": text, "target": None, "date": "2026-11-26T05:00:00Z"}
    out = analysis.stats_csv(df, meta)
    assert out.splitlines()[0].endswith(",distance,model,text,target,date")
    back = pd.read_csv(io.StringIO(out))
    assert back["text"][0] == "'" + text and back["model"][0] == "'-bert"  # one ' in front
    assert back["target"].isna().all() and back["date"][0] == "2026-11-26T05:00:00Z"
    assert np.allclose(back["entropy"], df["entropy"])  # numbers stay numbers
    cells = [cell for row in csv.reader(io.StringIO(out)) for cell in row]
    assert not [c for c in cells if c[:1] in "=+-@\t\r" and c[:1] and not c[1:2].isdigit()]
    assert analysis.stats_csv(df.rename(columns={"head": "@head"})).startswith("layer,'@head,")


def test_stats_csv_writes_what_pandas_writes(bert):
    """The CSV is written with the csv module; pandas' own writer of the same safe table (floats
    "%.6g", no index) is the reference, on a real head table and on awkward cells."""

    safe = analysis.export.spreadsheet_safe

    def by_pandas(df: pd.DataFrame, meta: dict) -> str:
        df = df.copy()
        for name, value in meta.items():
            df[name] = "" if value is None else str(value)
        for name in df.columns:
            if not pd.api.types.is_numeric_dtype(df[name]):
                df[name] = df[name].map(lambda v: safe(v) if isinstance(v, str) else v)
        df.columns = [safe(str(name)) for name in df.columns]
        return df.to_csv(index=False, float_format="%.6g")

    net, tok = bert
    table = analysis.head_table(net.trace(tok(["the cat sat"], return_tensors="pt")["input_ids"]))
    awkward = pd.DataFrame(
        {
            "-x": [1.0, np.nan, 1e-9, 123456789.0],
            "label": ["a, b", 'a "quote"', "=SUM(A1)", None],
            "flag": [True, False, True, False],
            "count": pd.array([1, None, 3, 4], dtype="Int64"),
            "mixed": [0.1, "line\nbreak", None, 2],
        }
    )
    meta = {"model": "bert", "text": 'a, "b"\n c', "target": None, "custom": "=x"}
    for df in (table, table.iloc[:0], awkward):
        for extra in ({}, meta):
            assert analysis.stats_csv(df, extra) == by_pandas(df, extra)


def test_nan_cells_of_cross_stats_survive_the_csv():
    net = Transformer(PRESETS["seed000-tiny"])
    ids = net.tokenizer(["hi"])["input_ids"]
    df = analysis.head_stats(net.trace(ids, tgt_ids=ids), "cross")
    back = pd.read_csv(io.StringIO(analysis.stats_csv(df)))
    assert back["prev"].isna().all() and back["entropy"].notna().all()


def test_trace_npz_holds_every_tensor_and_a_manifest(bert):
    net, tok = bert
    enc = tok(["A Titan RTX has 24GB of VRAM", "I have a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    data = analysis.trace_npz(tr, {"text": "A Titan RTX...", "hf_max_diff": 2.4e-6}, compress=True)
    npz = np.load(io.BytesIO(data), allow_pickle=False)
    manifest = json.loads(npz["manifest.json"])
    assert manifest["text"] == "A Titan RTX..." and manifest["hf_max_diff"] == 2.4e-6
    assert manifest["model"] == net.config.name and manifest["config"]["n_heads"] == 12
    assert manifest["tokens"] == tr.tokens
    names = set(manifest["tensors"])
    for name in ("attentions/encoder", "hidden_states/encoder", "queries/encoder", "masks/encoder"):
        assert name in names
    assert "embeddings/encoder/token" in names and "input_ids" in names
    assert names == {n for n in npz.files if n != "manifest.json"}
    torch.testing.assert_close(
        torch.from_numpy(npz["attentions/encoder"]), tr.attentions["encoder"], atol=0, rtol=0
    )
    assert npz["masks/encoder"].dtype == np.bool_ and npz["input_ids"].dtype == np.int64
    for name, entry in manifest["tensors"].items():
        assert list(npz[name].shape) == entry["shape"] and str(npz[name].dtype) == entry["dtype"]


def test_half_precision_halves_a_128_token_bert_trace(bert):
    net, tok = bert
    enc = tok([LONG_TEXT], truncation=True, max_length=128, return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    full, half = analysis.trace_npz(tr, {}), analysis.trace_npz(tr, {}, half=True)
    # Every field whole, computed ones included. (In memory a trace is smaller than its arrays:
    # the stack output and the embedding output are views of the hidden states, counted once
    # by nbytes(), and the mask is a broadcast.)
    npz = np.load(io.BytesIO(full))
    raw = sum(npz[name].nbytes for name in npz.files if name != "manifest.json")
    assert tr.nbytes() < raw
    assert len(full) < raw + 20_000 and len(half) < 0.6 * len(full)  # headers and manifest
    assert len(full) < 14e6  # documented: 13.2 MB, 6.6 MB in float16
    assert len(analysis.trace_npz(tr, {}, compress=True)) < len(full)
    back = np.load(io.BytesIO(half))["attentions/encoder"]
    assert back.dtype == np.float16
    assert np.abs(back.astype(np.float32) - tr.attentions["encoder"].numpy()).max() < 1e-3


def test_meta_cannot_replace_the_tensor_list(bert):
    net, tok = bert
    tr = net.trace(tok(["hi"], return_tensors="pt")["input_ids"])
    data = analysis.trace_npz(tr, {"tensors": "nope", "numbers": np.arange(3)})
    manifest = json.loads(np.load(io.BytesIO(data))["manifest.json"])
    assert isinstance(manifest["tensors"], dict) and manifest["numbers"] == [0, 1, 2]


@pytest.mark.parametrize("preset", ["seed000-tiny", "seed001-decoder"])
def test_every_architecture_exports(preset):
    net = Transformer(PRESETS[preset])
    ids = net.tokenizer(["hello"])["input_ids"]
    options = {"tgt_ids": ids} if net.config.arch == "encoder-decoder" else {}
    tr = net.trace(ids, with_logits=True, **options)
    npz = np.load(io.BytesIO(analysis.trace_npz(tr, {"text": "hello"})))
    for stack in tr.stacks:
        assert f"attentions/{stack}" in npz.files
    assert "logits" in npz.files


def test_trace_npz_adds_every_stacks_measures_and_says_what_it_left_out():
    net = Transformer(PRESETS["seed000-tiny"])
    ids = net.tokenizer(["the cat sat on the mat"])["input_ids"]
    tr = net.trace(ids, tgt_ids=ids)
    plain = np.load(io.BytesIO(analysis.trace_npz(tr, {})))
    assert not [n for n in plain.files if n.startswith("measures/")]
    assert "measures" not in json.loads(plain["manifest.json"])
    data = analysis.trace_npz(tr, {"measures": "nope"}, measures=True, net=net)
    npz = np.load(io.BytesIO(data), allow_pickle=False)
    manifest = json.loads(npz["manifest.json"])
    for stack in ("encoder", "decoder"):
        for name in ("mixing_ratio", "norm_attention_block", "attention_flow", "word_attention"):
            assert f"measures/{stack}/{name}" in npz.files
    cross = {n for n in npz.files if n.startswith("measures/cross/")}
    assert "measures/cross/head_distances" in cross and "measures/cross/rollout" not in cross
    ratio = analysis.mixing_ratio(tr, "decoder", net)[0].numpy()
    assert np.array_equal(npz["measures/decoder/mixing_ratio"], ratio)
    assert isinstance(manifest["measures"], dict)  # meta cannot replace it
    assert set(manifest["measures"]) == {n for n in npz.files if n.startswith("measures/")}
    # a flow limit below the text's length: the flow is left out and the notes say so
    arrays, notes = analysis.export.measure_arrays(tr, "encoder", flow_max_tokens=2, net=net)
    assert "attention_flow" not in arrays and "up to 2" in notes["attention_flow"]
