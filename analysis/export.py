"""Downloads: the head-statistics table as CSV, a whole Trace as an .npz with a JSON manifest.

The .npz is NumPy's own format (a zip of .npy files, ``numpy.load`` reads it without pickle),
one entry per tensor named "<field>/<stack>" ("attentions/encoder", "embeddings/encoder/token",
"input_ids"), plus "manifest.json": names, shapes, dtypes, the model's config, the tokens and
the caller's meta (text, the measured difference from Hugging Face's BertModel, ...).
Sizes for the bundled 6 x 12 BERT, one text of 128 tokens: 13.2 MB (float32), 6.6 MB with
half=True; at 512 tokens about 4.5x that (attention grows as T²). bench/bench_analysis.py
prints them.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import fields

import numpy as np
import pandas as pd
import torch

from model.trace import Trace

SKIPPED = ("config", "device", "tokens", "tgt_tokens", "_lazy", "_replay")  # manifest, or below


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as a formula


def spreadsheet_safe(text: str) -> str:
    """Text a spreadsheet shows as text: one starting like a formula gets a leading ``'``."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def stats_csv(df: pd.DataFrame, meta: dict | None = None) -> str:
    """A statistics table as CSV text (no index column, floats to 6 significant digits).

    ``meta`` ({"model": "bert", "text": ..., "date": ...}) adds one column per entry after the
    table's own, the same value on every row, so ``pandas.read_csv`` and a spreadsheet read it
    with no option and concatenated exports still say where each row came from. No text cell
    or header starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
    (``spreadsheet_safe``): a text like ``=HYPERLINK(...)`` stays text in Excel. Numbers are
    written as numbers.
    """
    df = df.copy()
    for name, value in (meta or {}).items():
        df[name] = "" if value is None else str(value)
    for name in df.columns:
        if not pd.api.types.is_numeric_dtype(df[name]):
            df[name] = df[name].map(lambda v: spreadsheet_safe(v) if isinstance(v, str) else v)
    df.columns = [spreadsheet_safe(str(name)) for name in df.columns]
    return df.to_csv(index=False, float_format="%.6g")


def _tensors(trace: Trace) -> dict[str, torch.Tensor]:
    """Every tensor of the trace by path name: "attentions/encoder", "embeddings/decoder/sum"."""
    found: dict[str, torch.Tensor] = {}

    def walk(name: str, value) -> None:
        if isinstance(value, torch.Tensor):
            found[name] = value
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{name}/{key}", inner)

    for f in fields(trace):
        if f.name == "outputs":  # Q, K, V and sublayer outputs, computed now if not yet
            for name, per_stack in trace.computed().items():
                walk(name, per_stack)
        if f.name not in SKIPPED:
            walk(f.name, getattr(trace, f.name))
    return found


def _jsonable(value):
    """Meta values as JSON: tensors and NumPy numbers become lists and Python numbers."""
    if isinstance(value, torch.Tensor | np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def trace_npz(
    trace: Trace, meta: dict | None = None, half: bool = False, compress: bool = False
) -> bytes:
    """Every tensor of a trace as an .npz, with a "manifest.json" entry.

    Args:
        trace: the Trace to export (any device; written as CPU arrays).
        meta: extra manifest entries from the caller (e.g. "text", "model", "hf_max_diff").
        half: store float tensors as float16 (half the size; ~3 significant digits).
        compress: deflate the entries (zlib level 1). Floats barely compress (-9 % on a 128-token
            BERT trace) and it costs about 1 s per 13 MB on this CPU, so it is off by default.
    Returns:
        The .npz bytes; ``numpy.load(io.BytesIO(data))["attentions/encoder"]`` reads a tensor and
        ``json.loads(numpy.load(...)["manifest.json"])`` the manifest.
    """
    tensors = _tensors(trace)
    buffer = io.BytesIO()
    entries = {}
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buffer, "w", method, compresslevel=1 if compress else None) as zf:
        for name, tensor in tensors.items():
            array = tensor.detach().cpu()
            if array.is_floating_point():
                array = array.to(torch.float16 if half else torch.float32)
            array = array.numpy()
            with zf.open(f"{name}.npy", "w", force_zip64=True) as out:
                np.lib.format.write_array(out, array, allow_pickle=False)
            entries[name] = {"shape": list(array.shape), "dtype": str(array.dtype)}
        manifest = {
            "format": "Transformer Anatomy trace, one .npy per tensor",
            "model": trace.config.name,
            "config": trace.config.to_dict(),
            "device": trace.device,
            "stacks": trace.stacks,
            "tokens": trace.tokens,
            "tgt_tokens": trace.tgt_tokens,
            "tensors": entries,
            **{  # the trace's plain settings: positions on/off, ablation mode, ...
                f.name: getattr(trace, f.name)
                for f in fields(trace)
                if isinstance(getattr(trace, f.name), bool | int | float | str)
                and f.name not in SKIPPED
            },
            "layout": "attentions, queries, keys, values: [B, L, H, T, ...]; hidden_states: "
            "[B, L+1, T, d_model]; masks: bool [B, T_q, T_k], True = may attend; 0-based.",
        }
        extra = _jsonable(meta or {})
        extra.pop("tensors", None)  # the entry list describes the file; the caller cannot change it
        manifest.update(extra)
        zf.writestr("manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1))
    return buffer.getvalue()
