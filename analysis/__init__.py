"""Numbers over a Trace: head statistics, norms, rollout, ablation, score breakdown, export.

Pure functions (no Gradio, no Plotly), each citing the paper it follows; layers and heads are
0-based everywhere. Measures that need weights (W_O, W_Q, W_K) take the model as ``net``.
"""

from analysis.ablation import ablation_effects
from analysis.breakdown import score_breakdown
from analysis.export import stats_csv, trace_npz
from analysis.head_stats import head_stats
from analysis.logit_lens import logit_lens
from analysis.norms import norm_attention, norm_attention_summed, transformed_values
from analysis.rollout import rollout

__all__ = [
    "ablation_effects",
    "head_stats",
    "logit_lens",
    "norm_attention",
    "norm_attention_summed",
    "rollout",
    "score_breakdown",
    "stats_csv",
    "trace_npz",
    "transformed_values",
]
