"""What each tab shows for one analysis and selection: name -> figure / table / HTML (no Gradio).

app.py maps these names to components. Only the visible tab is rendered, so a full analysis sends
the browser one tab's figures, not seven.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from engine import Analysis
from viz import attention, embeddings, hidden, masks, model_info, tokens
from viz.bertviz_embed import bertviz_iframe
from viz.common import compact, fixed_margins

TABS = ("tokens", "embeddings", "attention", "masks", "hidden", "bertviz", "model")
TAB_LABELS = {
    "tokens": "Tokens",
    "embeddings": "Embeddings",
    "attention": "Attention",
    "masks": "Masks",
    "hidden": "Hidden states",
    "bertviz": "bertviz",
    "model": "Model",
}
OUTPUTS = {
    "tokens": ("token_chips", "shapes", "token_table"),
    "embeddings": ("embedding_plot", "position_table_plot", "position_curves_plot"),
    "attention": ("head_plot", "overview_plot", "compare_plot"),
    "masks": ("padding_mask_plot", "causal_mask_plot", "cross_mask_plot", "score_steps_plot"),
    "hidden": ("norms_heatmap", "norms_lines"),
    "bertviz": ("bertviz_html",),
    "model": ("architecture", "param_table", "config_table"),
}


@dataclass(frozen=True)
class Selection:
    """What the user picked in the view controls (all small values, safe to keep per session)."""

    stack: str = "encoder"
    layer: int = 0
    head: int = 0
    layer_a: int = 0
    head_a: int = 0
    layer_b: int = 0
    head_b: int = 1
    dims: str = "0, 1, 2, 3"
    bertviz_view: str = "head"

    def clamp(self, analysis: Analysis) -> Selection:
        """The same selection made valid for this model (layer, head and stack in range)."""
        cfg = analysis.trace.config
        stack = self.stack if self.stack in analysis.trace.stacks else analysis.trace.stacks[0]
        last_layer, last_head = cfg.n_layers - 1, cfg.n_heads - 1
        return Selection(
            stack=stack,
            layer=min(max(int(self.layer), 0), last_layer),
            head=min(max(int(self.head), 0), last_head),
            layer_a=min(max(int(self.layer_a), 0), last_layer),
            head_a=min(max(int(self.head_a), 0), last_head),
            layer_b=min(max(int(self.layer_b), 0), last_layer),
            head_b=min(max(int(self.head_b), 0), last_head),
            dims=self.dims,
            bertviz_view=self.bertviz_view if self.bertviz_view in ("head", "model") else "head",
        )


def parse_dims(text: str, d_model: int) -> tuple[tuple[int, ...], str | None]:
    """ "0, 1, 2, 3" -> (0, 1, 2, 3); a note when something was out of range or unreadable."""
    found = [int(x) for x in re.findall(r"\d+", text or "")][:8]
    dims = tuple(dict.fromkeys(d for d in found if d < d_model))
    if not dims:
        return (0, 1, 2, 3)[
            : min(4, d_model)
        ], f"Dimensions must be numbers from 0 to {d_model - 1}."
    if len(dims) < len(found):
        return dims, f"Dimensions above {d_model - 1} were left out."
    return dims, None


def failed_view(name: str, exc: Exception):
    """What a view shows when it raised: a sentence, so the other views keep working."""
    message = f"This view could not be drawn ({type(exc).__name__}: {exc})."
    if name.endswith("_plot") or name.startswith("norms"):
        import plotly.graph_objects as go

        fig = go.Figure()
        fig.add_annotation(
            text=message[:300], showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper"
        )
        fig.update_layout(
            height=160, xaxis_visible=False, yaxis_visible=False, template="plotly_white"
        )
        return fig
    if name.endswith("_table"):
        import pandas as pd

        return pd.DataFrame({"error": [message]})
    from viz.common import safe

    return f"<p class='ta-error'>{safe(message)}</p>"


def finish(value):
    """Figures leave with fixed margins (one layout pass) and compact JSON."""
    if hasattr(value, "layout"):
        value = compact(fixed_margins(value))
    return value


def run_id(key: tuple) -> str:
    """A short stable id of one analysed input; every output carries it, so a test (or a reader of
    the page) can tell a fresh figure from one left over from the previous run."""
    return hashlib.sha1(repr(key).encode("utf-8")).hexdigest()[:12]


def stamp(value, run: str):
    """Mark an output with its run id: figures in layout.meta, HTML with a hidden span."""
    if hasattr(value, "layout"):
        value.layout.meta = {**(value.layout.meta or {}), "run": run}
    elif isinstance(value, str) and value.lstrip().startswith("<"):
        value = f'<span class="ta-run" data-run="{run}" hidden></span>' + value
    return value


def padded_item(trace, stack: str) -> int:
    """The batch item whose mask hides most for this stack: the padded (shorter) text of the pair,
    so the score steps show the mask at work; the user's own text (0) when nothing is padded."""
    mask = trace.attention_mask if stack in ("encoder", "cross") else trace.tgt_attention_mask
    if mask is None:
        mask = trace.attention_mask
    lengths = mask.sum(dim=1).tolist()
    return min(range(len(lengths)), key=lambda i: (lengths[i], i)) if len(set(lengths)) > 1 else 0


def render(
    tab: str,
    analysis: Analysis,
    sel: Selection,
    masks_batch: Analysis | None = None,
    only: set[str] | None = None,
) -> dict:
    """The outputs of one tab (or just those named in ``only``), keyed by output name.

    A view that raises is replaced by a sentence saying so; the other views are still drawn.
    """
    makers = _makers(tab, analysis, sel.clamp(analysis), masks_batch)
    run = run_id(analysis.key)
    out = {}
    for name, make in makers.items():
        if only is not None and name not in only:
            continue
        try:
            out[name] = stamp(finish(make()), run)
        except Exception as exc:  # one broken view must not take the others down
            out[name] = failed_view(name, exc)
    return out


def _makers(tab: str, analysis: Analysis, sel: Selection, masks_batch: Analysis | None) -> dict:
    trace, loaded = analysis.trace, analysis.model
    cfg = trace.config
    first_stack = "encoder" if cfg.has_encoder else "decoder"
    if tab == "tokens":
        special = set(getattr(loaded.tokenizer, "all_special_tokens", []))
        unk = getattr(loaded.tokenizer, "unk_token", "[UNK]")

        def chips() -> str:
            html = tokens.token_chips_html(
                trace.tokens[0], trace.input_ids[0].tolist(), special, unk
            )
            if trace.tgt_tokens is not None:
                html += "<p><b>Target (decoder input)</b></p>" + tokens.token_chips_html(
                    trace.tgt_tokens[0], trace.tgt_ids[0].tolist(), special, unk
                )
            return html

        return {
            "token_chips": chips,
            "shapes": lambda: tokens.shapes_markdown(trace),
            "token_table": lambda: tokens.tokens_table(
                trace.tokens[0], trace.input_ids[0].tolist(), special, unk
            ),
        }
    if tab == "embeddings":
        dims, _ = parse_dims(sel.dims, cfg.d_model)
        return {
            "embedding_plot": lambda: embeddings.embedding_figure(trace, first_stack),
            "position_table_plot": lambda: embeddings.position_table_figure(trace, first_stack),
            "position_curves_plot": lambda: embeddings.position_curves_figure(
                trace, first_stack, dims=dims
            ),
        }
    if tab == "attention":
        a, b = (sel.layer_a, sel.head_a), (sel.layer_b, sel.head_b)
        return {
            "head_plot": lambda: attention.head_figure(trace, sel.stack, sel.layer, sel.head),
            "overview_plot": lambda: attention.overview_figure(trace, sel.stack),
            "compare_plot": lambda: attention.compare_figure(trace, sel.stack, a, b),
        }
    if tab == "masks":
        batch = masks_batch.trace if masks_batch is not None else trace
        tokens_q = trace.tokens_for(sel.stack)[0][0]
        return {
            "padding_mask_plot": lambda: masks.padding_masks_figure(batch, first_stack),
            "causal_mask_plot": lambda: masks.causal_mask_figure(tokens_q, arch=cfg.arch),
            "cross_mask_plot": lambda: (
                masks.cross_mask_figure(batch) if "cross" in batch.stacks else None
            ),
            "score_steps_plot": lambda: masks.score_steps_figure(
                batch, sel.stack, sel.layer, sel.head, batch=padded_item(batch, sel.stack)
            ),
        }
    if tab == "hidden":
        stack = sel.stack if sel.stack in trace.hidden_states else first_stack
        return {
            "norms_heatmap": lambda: hidden.norms_heatmap(trace, stack),
            "norms_lines": lambda: hidden.norms_lines(trace, stack),
        }
    if tab == "bertviz":

        def bertviz_html() -> str:
            if sel.stack == "cross":
                return (
                    "<p>bertviz's head and model views draw self-attention over one token list; "
                    "pick the encoder or decoder stack to see them.</p>"
                )
            toks = trace.tokens_for(sel.stack)[0][0]
            weights = trace.attentions[sel.stack][0]  # (L, H, T, T)
            return bertviz_iframe(weights, toks, view=sel.bertviz_view, layer=sel.layer)

        return {"bertviz_html": bertviz_html}
    if tab == "model":
        net = loaded.net
        return {
            "architecture": lambda: model_info.architecture_markdown(
                cfg, trace.device, net.get_num_params()
            ),
            "param_table": lambda: model_info.param_table(net.param_counts()),
            "config_table": lambda: model_info.config_table(cfg),
        }
    raise ValueError(f"Unknown tab {tab!r}.")
