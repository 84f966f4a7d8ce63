"""Numbers over a Trace: head statistics, norms, rollout, ablation, score breakdown, export, and
the research measures of docs/research.md (attention flow, head patterns, word attention, head
distances, attention-block norms; analysis.corpus averages them over a corpus).

Pure functions (no Gradio, no Plotly), each citing the paper it follows; layers and heads are
0-based everywhere. Measures that need weights (W_O, W_Q, W_K) take the model as ``net``.
"""

from analysis.ablation import ablation_effects
from analysis.attribution import direct_logit_attribution
from analysis.attribution_patching import attribute_all, attribute_heads, attribute_residual
from analysis.block import attention_block, mixing_ratio, norm_attention_block
from analysis.breakdown import score_breakdown
from analysis.circuits import (
    circuit,
    composition_scores,
    edge_attribution,
    node_edges,
    prune_edges,
)
from analysis.distances import head_distances, mds_2d
from analysis.export import head_table, measures_npz, stats_csv, trace_npz
from analysis.faithfulness import faithfulness_curve, mib_scores
from analysis.flow import attention_flow, attention_flow_row
from analysis.graph_json import graph_json, read_graph_json
from analysis.head_stats import attention_sink, head_stats
from analysis.layer_steps import layer_steps
from analysis.logit_lens import logit_lens, logit_lens_top
from analysis.norms import norm_attention, norm_attention_summed, transformed_values
from analysis.patching import (
    attention_shift,
    cosine_to,
    logit_diff,
    patch_heads,
    patch_pair,
    patch_residual,
)
from analysis.patterns import head_patterns, pattern_mask
from analysis.rollout import rollout
from analysis.words import word_attention

__all__ = [
    "ablation_effects",
    "attention_block",
    "attention_shift",
    "attention_sink",
    "attribute_all",
    "attribute_heads",
    "attribute_residual",
    "attention_flow",
    "attention_flow_row",
    "circuit",
    "composition_scores",
    "cosine_to",
    "direct_logit_attribution",
    "edge_attribution",
    "faithfulness_curve",
    "graph_json",
    "head_distances",
    "head_patterns",
    "head_stats",
    "head_table",
    "layer_steps",
    "logit_diff",
    "logit_lens",
    "logit_lens_top",
    "mds_2d",
    "measures_npz",
    "mib_scores",
    "node_edges",
    "mixing_ratio",
    "norm_attention",
    "norm_attention_block",
    "norm_attention_summed",
    "patch_heads",
    "patch_pair",
    "patch_residual",
    "pattern_mask",
    "prune_edges",
    "read_graph_json",
    "rollout",
    "score_breakdown",
    "stats_csv",
    "trace_npz",
    "transformed_values",
    "word_attention",
]
