"""How the heads connect's NPZ: the edges, the attribution grids, the composition scores and the
faithfulness curve of one pair, one .npy per array with a "manifest.json" naming the method, its
papers and the measure (analysis/export.py's convention, as the patching tab's NPZ)."""

from __future__ import annotations

import numpy as np

from analysis.circuits import PAGE_STEPS
from analysis.export import _jsonable, _npz

PAPERS = {
    "attribution": "Nanda 2023, Attribution Patching; Syed et al. 2023 (EAP)",
    "edges": "Syed et al. 2023 (EAP); Hanna et al. 2024, Have Faith in Faithfulness (EAP-IG)",
    "faithfulness": "Hanna et al. 2024: every edge not kept carries the corrupt run",
    "composition": "Elhage et al. 2021, A Mathematical Framework for Transformer Circuits",
}


def circuit_npz(edges, grids: dict, composition: dict, points, spec, circuit, meta: dict) -> bytes:
    """``edges`` ranked (source, target, score), ``grids`` {"attribution": attribute_heads'
    [L, H] with one step, "attribution_ig": with the page's steps, "attribution_residual":
    attribute_residual's [L, T] with one step},
    ``composition`` {"q", "k", "v": [L, H, L, H]}, ``points`` [(edges kept, faithfulness)],
    ``spec`` the pair (ui.circuit_measures.PairSpec), ``circuit`` one analysis.circuit (its
    m_clean, m_corrupt)."""
    arrays = {
        "edges/source": np.array(edges["source"].tolist(), dtype=str),
        "edges/target": np.array(edges["target"].tolist(), dtype=str),
        "edges/score": edges["score"].to_numpy(dtype=np.float64),
        **{name: np.asarray(grid, dtype=np.float32) for name, grid in grids.items()},
        "curve/edges_kept": np.array([n for n, _ in points], dtype=np.int64),
        "curve/faithfulness": np.array([share for _, share in points], dtype=np.float64),
        "input_ids/clean": spec.clean["input_ids"][0].numpy(),
        "input_ids/corrupt": spec.corrupt["input_ids"][0].numpy(),
    }
    if "tgt_ids" in spec.clean:  # an encoder-decoder's decoder text, one for both runs
        arrays["tgt_ids/clean"] = spec.clean["tgt_ids"][0].numpy()
        arrays["tgt_ids/corrupt"] = spec.corrupt["tgt_ids"][0].numpy()
    for kind, scores in composition.items():
        arrays[f"composition/{kind}"] = np.asarray(scores, dtype=np.float32)
    manifest = {
        "format": "Transformer Anatomy circuits, one .npy per array",
        "papers": PAPERS,
        "metric": spec.metric,
        "answer": spec.answer,
        "wrong": spec.wrong,
        "position": spec.position,
        "stack": spec.stack,
        "steps": {"attribution": 1, "attribution_ig": PAGE_STEPS, "edges": PAGE_STEPS},
        "m_clean": circuit.m_clean,
        "m_corrupt": circuit.m_corrupt,
    }
    extra = _jsonable(meta or {})
    extra.pop("arrays", None)
    return _npz(arrays, {**manifest, **extra})
