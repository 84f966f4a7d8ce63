"""A from-scratch Transformer that returns a complete trace of its internals.

How it fits into the app: docs/architecture.md.
"""

from model.attention import HeadAblation
from model.checkpoint import load_bert, load_lm
from model.config import PRESETS, TransformerConfig
from model.device import pick_device
from model.load_errors import (
    BertLoadError,
    CheckpointError,
    ConfigRefused,
    LMLoadError,
    SourceNotFound,
    TokenizerRefused,
    WeightsRefused,
)
from model.tokenizers import CharTokenizer, VocabTokenizer
from model.trace import Trace
from model.trained import TRAINED, load_trained, predict_roles
from model.transformer import Transformer

__all__ = [
    "PRESETS",
    "TRAINED",
    "BertLoadError",
    "CharTokenizer",
    "CheckpointError",
    "ConfigRefused",
    "HeadAblation",
    "LMLoadError",
    "SourceNotFound",
    "TokenizerRefused",
    "Trace",
    "Transformer",
    "TransformerConfig",
    "VocabTokenizer",
    "WeightsRefused",
    "load_bert",
    "load_lm",
    "load_trained",
    "pick_device",
    "predict_roles",
]
