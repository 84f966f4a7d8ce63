"""A from-scratch Transformer that returns a complete trace of its internals (see DESIGN.md)."""

from model.bert import BertLoadError, load_bert
from model.config import PRESETS, TransformerConfig
from model.device import pick_device
from model.tokenizers import CharTokenizer
from model.trace import Trace
from model.transformer import Transformer

__all__ = [
    "PRESETS",
    "BertLoadError",
    "CharTokenizer",
    "Trace",
    "Transformer",
    "TransformerConfig",
    "load_bert",
    "pick_device",
]
