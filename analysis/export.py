"""Downloads: the head-statistics table as CSV, a whole Trace as an .npz with a JSON manifest,
and issue 22's measures (one text, or a corpus) as an .npz whose manifest names their papers.

The .npz is NumPy's own format (a zip of .npy files, ``numpy.load`` reads it without pickle),
one entry per tensor named "<field>/<stack>" ("attentions/encoder", "embeddings/encoder/token",
"input_ids"), plus "manifest.json": names, shapes, dtypes, the model's config, the tokens and
the caller's meta (text, the measured difference from Hugging Face's BertModel, ...).
Sizes for the bundled 6 x 12 BERT, one text of 128 tokens: 13.2 MB (float32), 6.6 MB with
half=True; at 512 tokens about 4.5x that (attention grows as T²). bench/bench_analysis.py
prints them.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from dataclasses import fields

import numpy as np
import pandas as pd
import torch

from analysis.block import attention_block
from analysis.distances import head_distances, mds_2d, query_rows
from analysis.flow import attention_flow
from analysis.head_stats import attention_sink, head_stats
from analysis.patterns import COLUMNS as PATTERN_COLUMNS
from analysis.patterns import head_patterns
from analysis.rollout import rollout
from analysis.tokens import real_tokens
from analysis.words import word_attention
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
    # Written with the csv module, as pandas' to_csv(index=False, float_format="%.6g") writes
    # it: a fifth of its time, and the Heads tab writes one on every switch to it.
    meta = meta or {}
    extra = ["" if value is None else spreadsheet_safe(str(value)) for value in meta.values()]
    columns = [df.iloc[:, i] for i in range(df.shape[1])]
    floats = [pd.api.types.is_float_dtype(column) for column in columns]
    values = [column.tolist() for column in columns]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(spreadsheet_safe(str(name)) for name in [*df.columns, *meta])
    for row in zip(*values, strict=True):
        writer.writerow([*map(_csv_cell, row, floats), *extra])
    return out.getvalue()


def _csv_cell(value, is_float: bool):
    """One cell as pandas writes it: floats "%.6g", missing values empty, text spreadsheet-safe."""
    if isinstance(value, str):
        return spreadsheet_safe(value)
    if pd.isna(value):  # None, NaN, pd.NA
        return ""
    return f"{value:.6g}" if is_float else value


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
    trace: Trace,
    meta: dict | None = None,
    half: bool = False,
    compress: bool = False,
    measures: bool = False,
    net=None,
    distance_queries: int | None = None,
) -> bytes:
    """Every tensor of a trace as an .npz, with a "manifest.json" entry.

    Args:
        trace: the Trace to export (any device; written as CPU arrays).
        meta: extra manifest entries from the caller (e.g. "text", "model", "hf_max_diff").
        half: store float tensors as float16 (half the size; ~3 significant digits).
        compress: deflate the entries (zlib level 1). Floats barely compress (-9 % on a 128-token
            BERT trace) and it costs about 1 s per 13 MB on this CPU, so it is off by default.
        measures: add the research measures of the first text, every stack, as
            "measures/<stack>/<name>" (trace_measures; each named with its paper and convention
            in the manifest's "measures"). ``net`` gives the LayerNorm weights of the attention
            block (Kobayashi et al. 2021) when the trace no longer reaches its model.
        distance_queries: the head distances over at most this many query rows, evenly spaced
            (analysis.distances.query_rows; said in "measures_notes"); None: every row.
    Returns:
        The .npz bytes; ``numpy.load(io.BytesIO(data))["attentions/encoder"]`` reads a tensor and
        ``json.loads(numpy.load(...)["manifest.json"])`` the manifest.
    """
    tensors = _tensors(trace)
    arrays, described, notes = (
        trace_measures(trace, net=net, distance_queries=distance_queries)
        if measures
        else ({}, {}, {})
    )
    tensors.update({name: torch.tensor(array) for name, array in arrays.items()})
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
            **({"measures": described, "measures_notes": notes} if measures else {}),
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
        for key in ("tensors", "measures", "measures_notes"):  # they describe the file: the
            extra.pop(key, None)  # caller cannot change them
        manifest.update(extra)
        zf.writestr("manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1))
    return buffer.getvalue()


# The measures of issue 22, each with the paper it follows and the convention it uses: the
# manifest of measures_npz and corpus_npz repeats these, so a file says what its numbers mean.
CONVENTIONS = {
    "head_stats": (
        "Clark et al. 2019, What does BERT look at?",
        "means over real query tokens; prev/next over queries that have the neighbour; entropy "
        "in nats unsmoothed; punct = any Unicode punctuation (convention='clark': the notebook's)",
    ),
    "head_patterns": (
        "TransformerLens head_detector; Olsson et al. 2022 (prefix_matching)",
        "error_measure 'mul' = sum(A*P)/sum(A), exclude_bos and exclude_current_token False, "
        "lower-triangular patterns; prefix_matching averaged over queries with an earlier "
        "occurrence",
    ),
    "rollout": (
        "Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers",
        "0.5*mean_h(A) + 0.5*I, rows renormalised, multiplied through layers; [L, T, T]",
    ),
    "attention_flow": (
        "Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers",
        "max-flow on rollout's graph from each token after the last layer to each input token, "
        "rows divided by their sum (compute_flows); [T, T]",
    ),
    "head_distances": (
        "Clark et al. 2019, What does BERT look at? (head_distances.py)",
        "JS divergence (not its square root) in nats of rows smoothed 0.999*p + 0.001/n, "
        "averaged over real query rows (theirs: summed); [L*H, L*H], index layer*H + head",
    ),
    "mds_2d": ("Torgerson 1952, classical MDS", "of head_distances; [L*H, 2]"),
    "norm_attention_block": (
        "Kobayashi et al. 2021, Incorporating Residual and Normalization Layers",
        "AttnResLn-N: norm of LN's share of sum_h alpha f_h(x_j) + delta_ij x_i (b_O and LN's "
        "beta left out, as their code does); [L, T, T]",
    ),
    "mixing_ratio": (
        "Kobayashi et al. 2021, Incorporating Residual and Normalization Layers",
        "AttnResLn-N mixing ratio |mix| / (|mix| + |keep|), mean over real tokens; [L]",
    ),
    "word_attention": (
        "Clark et al. 2019, What does BERT look at? (bpe_utils.get_word_word_attention)",
        "attention to a word = sum over its pieces, from a word = mean of its pieces' rows; "
        "special tokens are words of their own; over the item's real tokens; [L, H, W, W], the "
        "words in the manifest",
    ),
    "norm": (
        "Kobayashi et al. 2020, Attention is not only a weight",
        "sum_j |alpha_ij f_h(x_j)| per head, mean over real queries; norm_share = its share "
        "of the layer's heads",
    ),
}


def head_table(
    trace: Trace, stack: str = "encoder", item: int = 0, convention: str = "ours", custom=None
) -> pd.DataFrame:
    """head_stats, the attention sink after "first", and (self-attention stacks)
    head_patterns of one item, one row per head."""
    table = head_stats(trace, stack, item, convention=convention)
    table.insert(
        list(table.columns).index("first") + 1,
        "sink",
        attention_sink(trace, stack, item).flatten().numpy(),
    )
    if stack != "cross":
        patterns = head_patterns(trace, stack, item, custom=custom)
        table = table.merge(patterns, on=["layer", "head"])
    return table


def _npz(arrays: dict[str, np.ndarray], manifest: dict) -> bytes:
    """Arrays as .npy entries of a zip, with "manifest.json" (their shapes and dtypes added)."""
    buffer = io.BytesIO()
    entries = {}
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        for name, array in arrays.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as out:
                np.lib.format.write_array(out, array, allow_pickle=False)
            entries[name] = {"shape": list(array.shape), "dtype": str(array.dtype)}
        manifest = {**manifest, "arrays": entries}
        zf.writestr("manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1))
    return buffer.getvalue()


def _measures_manifest(names) -> dict:
    return {n: {"paper": CONVENTIONS[n][0], "convention": CONVENTIONS[n][1]} for n in names}


FLOW_MAX_TOKENS = 64  # attention_flow: T max-flows; left out of an export above this many tokens


def measure_arrays(
    trace: Trace,
    stack: str = "encoder",
    item: int = 0,
    flow_max_tokens: int = FLOW_MAX_TOKENS,
    net=None,
    distance_queries: int | None = None,
) -> tuple[dict[str, np.ndarray], dict]:
    """Issue 22's measures of one item and stack: (arrays by name, notes for the manifest).

    Arrays: "head_table/<column>" [L, H] (head_table), "head_distances", "mds_2d", and for
    self-attention stacks "rollout", "attention_flow" (left out above ``flow_max_tokens`` real
    tokens: seconds per row), "word_attention" and, for a model the trace can still reach (or
    ``net``), "norm_attention_block" and "mixing_ratio". Positions are the item's own (padding
    included, its rows 0); word_attention is over its real tokens. Notes: what was left out and
    why, the words of word_attention.
    """
    table = head_table(trace, stack, item)
    shape = (trace.config.n_layers, trace.config.n_heads)
    arrays = {f"head_table/{c}": table[c].to_numpy().reshape(shape) for c in table.columns[2:]}
    distances = head_distances(trace, stack, item, distance_queries)
    arrays["head_distances"] = distances.numpy()
    arrays["mds_2d"] = mds_2d(distances).numpy()
    notes: dict = {}
    rows = int(real_tokens(trace, stack)[0][item].sum())  # the real query rows
    used = len(query_rows(rows, distance_queries))
    if used < rows:
        notes["head_distances"] = f"averaged over {used} of {rows} query rows, evenly spaced"
    if stack == "cross":
        return arrays, notes
    arrays["rollout"] = rollout(trace, stack)[item].cpu().float().numpy()
    n = int(real_tokens(trace, stack)[0][item].sum())
    if n <= flow_max_tokens:
        arrays["attention_flow"] = attention_flow(trace, stack, item).float().numpy()
    else:
        notes["attention_flow"] = (
            f"left out: {n} tokens, computed for up to {flow_max_tokens} (one max-flow a token)"
        )
    tokens = trace.tokens_for(stack)[0][item][:n]
    words, by_word = word_attention(trace.attentions[stack][item : item + 1, ..., :n, :n], tokens)
    arrays["word_attention"] = by_word[0].cpu().float().numpy()  # (L, H, W, W)
    notes["words"] = words
    if net is not None or trace._replay is not None:
        block, ratio = attention_block(trace, stack, net)
        arrays["norm_attention_block"] = block[item].numpy()
        arrays["mixing_ratio"] = ratio[item].numpy()
    else:
        notes["norm_attention_block"] = "left out: the trace no longer reaches its model"
    return arrays, notes


def _measured(names) -> list[str]:
    """The CONVENTIONS entries that describe these array names (head_table/* -> two entries)."""
    found = [n for n in names if "/" not in n]
    if any(n.startswith("head_table/") for n in names):
        found = ["head_stats", "head_patterns", *found]
    return found


def trace_measures(
    trace: Trace,
    item: int = 0,
    flow_max_tokens: int = FLOW_MAX_TOKENS,
    net=None,
    distance_queries: int | None = None,
) -> tuple[dict[str, np.ndarray], dict, dict]:
    """Every stack's measures of one item for trace_npz: ({"measures/<stack>/<name>": array},
    {entry name: {"paper", "convention"}}, {stack: notes})."""
    arrays, described, notes = {}, {}, {}
    for stack in trace.stacks:
        found, notes[stack] = measure_arrays(
            trace, stack, item, flow_max_tokens, net, distance_queries
        )
        for name, array in found.items():
            arrays[f"measures/{stack}/{name}"] = array
            key = name.split("/")[0]
            if key == "head_table":  # a column of head_stats or of head_patterns
                key = "head_patterns" if name[11:] in PATTERN_COLUMNS else "head_stats"
            described[f"measures/{stack}/{name}"] = _measures_manifest([key])[key]
    for stack in notes:
        notes[stack]["item"] = item
    return arrays, described, notes


def measures_npz(
    trace: Trace,
    stack: str = "encoder",
    item: int = 0,
    meta: dict | None = None,
    flow_max_tokens: int = FLOW_MAX_TOKENS,
    net=None,
) -> bytes:
    """Issue 22's measures of one item as an .npz with a manifest naming each one's paper
    (measure_arrays: its entries, and what is left out when)."""
    arrays, notes = measure_arrays(trace, stack, item, flow_max_tokens, net)
    manifest = {
        "format": "Transformer Anatomy measures, one .npy per array",
        "model": trace.config.name,
        "stack": stack,
        "item": item,
        "tokens": trace.tokens_for(stack)[0][item],
        "measures": _measures_manifest(dict.fromkeys(_measured(arrays))),
        "notes": notes,
        "layout": "0-based layers and heads; head index in head_distances = layer*H + head",
    }
    extra = _jsonable(meta or {})
    extra.pop("arrays", None)
    return _npz(arrays, {**manifest, **extra})


def corpus_csv(result, meta: dict | None = None) -> str:
    """A CorpusResult's per-head table (means and stds over sentences) as stats_csv text."""
    return stats_csv(result.stats, {"sentences": result.sentences, **(meta or {})})


def corpus_npz(result, meta: dict | None = None) -> bytes:
    """A CorpusResult as an .npz: "stats/<column>" [L, H] and "head_distances", with manifest."""
    stats = result.stats
    n_layers, n_heads = int(stats["layer"].max()) + 1, int(stats["head"].max()) + 1
    shape = (n_layers, n_heads)
    arrays = {f"stats/{c}": stats[c].to_numpy().reshape(shape) for c in stats.columns[2:]}  # (L, H)
    names = ["head_stats", "head_patterns", "norm"]
    if result.distances is not None:
        arrays["head_distances"] = result.distances.numpy()
        names.append("head_distances")
    manifest = {
        "format": "Transformer Anatomy corpus measures, one .npy per array",
        "sentences": result.sentences,
        "options": _jsonable(result.options),
        "aggregation": "mean and sample std (ddof 1) over sentences, NaN skipped",
        "measures": _measures_manifest(names),
    }
    extra = _jsonable(meta or {})
    extra.pop("arrays", None)
    return _npz(arrays, {**manifest, **extra})


PATCHING_METHOD = (
    "activation patching, denoising: one activation of the clean run put into the corrupt run "
    "(TransformerLens's patching convention); share restored = (m_patched - m_corrupt) / "
    "(m_clean - m_corrupt): 0 = nothing restored, 1 = the clean metric whole"
)
PATCHING_PAPERS = (
    "Meng et al. 2022 (causal tracing); Wang et al. 2022 (Interpretability in the Wild); "
    "Heimersheim & Nanda 2024 (How to use and interpret activation patching); direct logit "
    "attribution: Elhage et al. 2021"
)


def _patching_summary(result) -> dict:
    return {
        "method": PATCHING_METHOD,
        "papers": PATCHING_PAPERS,
        "metric": result.metric,
        "m_clean": result.m_clean,
        "m_corrupt": result.m_corrupt,
        "position": result.position,
        "answer_id": result.answer,
        "wrong_id": result.wrong,
        "heads_of": result.stack,
        "stream": result.stream,
    }


def patching_csv(result, meta: dict | None = None) -> str:
    """analysis.patch_pair's numbers as one long table (stats_csv text): one row per head of
    each grid ("heads" shares restored, "attention_shift", "attribution" in logits with the MLPs
    as head -1) and per layer and position ("positions", with both texts' tokens there); the
    method, the metric on both texts and ``meta`` in columns on every row."""
    rows = []
    n_layers, n_heads = result.heads.shape
    for name, grid in (("heads", result.heads), ("attention_shift", result.shift)):
        rows += [
            (name, layer, head, None, "", "", float(grid[layer, head]))
            for layer in range(n_layers)
            for head in range(n_heads)
        ]
    clean = result.clean.tokens_for(result.stream)[0][0]
    corrupt = result.corrupt.tokens_for(result.stream)[0][0]
    rows += [
        ("positions", layer, None, t, clean[t], corrupt[t], float(result.positions[layer, t]))
        for layer in range(result.positions.shape[0])
        for t in range(result.positions.shape[1])
    ]
    if result.attribution is not None:
        heads, mlp = result.attribution["heads"], result.attribution["mlp"]
        rows += [
            ("attribution", layer, head, None, "", "", float(heads[layer, head]))
            for layer in range(n_layers)
            for head in range(n_heads)
        ]
        rows += [
            ("attribution", layer, -1, None, "", "", float(mlp[layer])) for layer in range(n_layers)
        ]
    columns = ["grid", "layer", "head", "position", "clean_token", "corrupt_token", "value"]
    df = pd.DataFrame(rows, columns=columns).astype({"position": "Int64", "head": "Int64"})
    return stats_csv(df, {**_patching_summary(result), **(meta or {})})


def patching_npz(result, meta: dict | None = None) -> bytes:
    """analysis.patch_pair's numbers as an .npz: "heads" [L, H], "positions" [L, T],
    "attention_shift" [L, H], "attribution/<term>" (decoders), both runs' input ids and their
    attention for the patched heads' stack ("attentions/clean", "attentions/corrupt"
    [L, H, T, T]); the manifest names the method, its papers, the metric and both texts' tokens."""
    arrays = {
        "heads": result.heads.numpy(),
        "positions": result.positions.numpy(),
        "attention_shift": result.shift.numpy(),
        "input_ids/clean": result.clean.input_ids[0].cpu().numpy(),
        "input_ids/corrupt": result.corrupt.input_ids[0].cpu().numpy(),
        "attentions/clean": result.clean.attentions[result.stack][0].float().cpu().numpy(),
        "attentions/corrupt": result.corrupt.attentions[result.stack][0].float().cpu().numpy(),
    }
    for name, value in (result.attribution or {}).items():
        arrays[f"attribution/{name}"] = value.numpy()
    manifest = {
        "format": "Transformer Anatomy activation patching, one .npy per array",
        **_patching_summary(result),
        "tokens": {
            "clean": result.clean.tokens_for(result.stream)[0][0],
            "corrupt": result.corrupt.tokens_for(result.stream)[0][0],
        },
        "config": result.clean.config.to_dict(),
    }
    extra = _jsonable(meta or {})
    extra.pop("arrays", None)
    return _npz(arrays, {**manifest, **extra})
