"""Output: what the model predicts — greedy decoding step by step, or each token's role."""

from __future__ import annotations

import gradio as gr
import pandas as pd
import torch

import analysis
from engine import (
    LM_MIN_NEW_TOKENS,
    LM_POSITIONS,
    is_live,
    lm_continuation,
    lm_steps,
    vocabulary_notices,
)
from lang import tr
from model import TRAINED, predict_roles
from ui import i18n
from ui.tabs.base import Built, Tab, View, plot
from viz import attention, logit_lens
from viz.common import display_token, md_literal, visible_text
from viz.output_facts import LESSON, copy_note, opening_step, step_marks, trained_on

CAPTION = (
    "**What the model outputs.** A model with an LM head predicts the next token from each "
    "position: p(next) = softmax(h_t W_vocab). Greedy decoding (seed 000's inference loop) feeds "
    "the most likely token back in until it writes `</s>` or has written 24 tokens (a language "
    "model's continuation: 12 tokens, fewer for a long text). Under the causal mask, row t of "
    "the attention is exactly the step that chose token t + 1, so the map below shows where each "
    "step looked. A "
    "token tagger (the roles model) labels every token instead."
)


LENS_CAPTION = (
    "**Logit lens** (nostalgebraist 2020): what the residual stream would predict after each "
    "layer, read through the model's own final norm (LayerNorm; RMSNorm in a LLaMA-family "
    "model) and LM head — p = softmax(norm(h_l) W_vocab) for every layer l; the last row is the "
    "model's own output. Each cell shows the top "
    "prediction and its probability; the hover gives the rank of the text's real next token. "
    "For the induction model the right letter appears only after the induction heads' layer."
)


def build() -> Built:
    gr.Markdown(i18n.t(CAPTION), elem_classes="ta-caption")
    prediction = gr.Markdown(elem_id="prediction")
    table = gr.Dataframe(
        i18n.empty_table(no_steps), elem_id="steps-table", interactive=False, wrap=True
    )
    steps = plot("steps-plot")
    gr.Markdown(i18n.t(LENS_CAPTION), elem_classes="ta-caption")
    lens = plot("lens-plot")
    return Built(
        outputs={
            "prediction": prediction,
            "steps_table": table,
            "steps_plot": steps,
            "lens_plot": lens,
        }
    )


def no_steps() -> pd.DataFrame:
    """The steps table with no step (before a run, and for a model with no output here): its
    own headers, in the request's language, not Gradio's "1 | 2 | 3"."""
    names = ["step", "reads", "predicts", "✓/✗", "next in text", "p", "alternatives"]
    return pd.DataFrame(columns=[tr(name) if name not in ("p", "✓/✗") else name for name in names])


def steps_table(trace, stack: str, tokenizer, top: int = 3, typed: int | None = None, best=None):
    """One row per decoding step: what the step read, what it chose, how sure it was, and ✓/✗
    against the text's next token where the user supplied it (``typed`` positions: beyond them
    the model's own output follows, said so instead of checked against itself). ``best``: the
    top predictions (p, ids) [T, top] when the trace keeps no logits (a real vocabulary)."""
    tokens = trace.tokens_for(stack)[0][0]  # one text, no padding (the main analysis)
    if best is None:
        probs = torch.softmax(trace.logits[0].float(), dim=-1)  # (T, vocab)
        best = probs.topk(min(top, probs.shape[-1]), dim=-1)  # (T, top)
    best_p, best = best
    ids = trace.tgt_ids if trace.tgt_ids is not None else trace.input_ids  # (1, T)
    marks = step_marks(best[:, 0].tolist(), ids[0, : len(tokens)].tolist(), typed)
    known = len(tokens) if typed is None else typed
    opening = opening_step(trace.config.arch, tokens[1:])  # the lesson's step: ▶, scrolled to
    rows = []
    for t in range(len(tokens)):
        chosen = tokenizer.convert_ids_to_tokens(best[t].tolist())
        actual = display_token(tokens[t + 1]) if t + 1 < known else "—"  # the text's, only
        rows.append(
            {
                tr("step"): f"{LESSON} {t}" if t == opening else str(t),
                tr("reads"): display_token(tokens[t]),
                tr("predicts"): display_token(chosen[0]),
                "✓/✗": marks[t],  # beside the prediction: on a phone's first screen too
                tr("next in text"): actual,
                "p": round(float(best_p[t, 0]), 3),
                tr("alternatives"): ", ".join(
                    f"{display_token(c)} {float(p):.2f}"
                    for c, p in zip(chosen[1:], best_p[t, 1:], strict=True)
                ),
            }
        )
    return pd.DataFrame(rows)


def roles_markdown(answer: dict) -> str:
    parts = [f"**{tr(label)}**: {answer[label] or '—'}" for label in ("agent", "action", "patient")]
    return tr("Who did what to whom: ") + " · ".join(parts)


def role_makers(view: View) -> dict:
    """A token classifier (the roles model): each token's role, and where it looked."""
    sel, trace, net = view.sel, view.analysis.trace, view.analysis.model.net
    cfg = trace.config
    positions = getattr(trace, "positions", True)
    text = "".join(t for t in trace.tokens[0] if t not in net.tokenizer.all_special_tokens)
    answer = predict_roles(net, text, positions=positions)
    table = pd.DataFrame(
        {
            tr("position"): range(len(answer["tokens"])),
            tr("token"): [display_token(t) for t in answer["tokens"]],
            tr("role"): [tr(label) for label in answer["labels"]],
            "p": [round(p, 3) for p in answer["confidence"]],
        }
    )
    note = "" if positions else tr(" (positional encoding off: order is invisible to it)")
    layer, head = min(sel.layer, cfg.n_layers - 1), min(sel.head, cfg.n_heads - 1)

    def looked():
        fig = attention.head_figure(trace, "encoder", layer, head, scale=sel.scale)
        fig.layout.title.text = tr(
            "Where each token looked before being tagged — layer {layer}, head {head}",
            layer=layer,
            head=head,
        )
        return fig

    return {
        "prediction": lambda: "  \n".join([roles_markdown(answer) + note, *facts(view, "encoder")]),
        "steps_table": lambda: table,
        "steps_plot": looked,
        "lens_plot": lambda: None,  # a tagger: its classifier reads the last layer only
    }


def no_output_makers(net) -> dict:
    """A model with nothing to show here: say why."""
    why = (
        tr("This model has no LM head or classifier here")
        if net.lm_head is None
        else tr("This model's vocabulary is too large to keep its predictions for every token")
    )
    return {
        "prediction": lambda: tr(
            "{why}: pick a trained model (dates, induction, roles) to see "
            "what a Transformer outputs.",
            why=why,
        ),
        "steps_table": no_steps,
        "steps_plot": lambda: None,
        "lens_plot": lambda: None,
    }


def facts(view: View, stack: str) -> list[str]:
    """What a trained model was trained on (not said of a snapshot, which trained less), for
    a trained decoder where its text's copies lie (viz.output_facts), and first, beside the
    output it concerns, that the text holds tokens the model does not know."""
    loaded, trace = view.analysis.model, view.analysis.trace
    said = ["⚠️ " + md_literal(tr(n)) for n in vocabulary_notices(loaded, view.analysis.text)]
    if loaded.trained is not None and loaded.model_id == loaded.trained:
        said.append(trained_on(TRAINED[loaded.trained]))  # shipped text: Markdown on purpose
    elif loaded.trained is not None and is_live(loaded.model_id):
        said.append(trained_on(loaded.net.card))  # trained on this page (train.fit's card)
    if stack == "decoder" and loaded.trained is not None:
        tokens = trace.tokens_for(stack)[0][0][1:]  # without <s>
        said.append(copy_note(tokens))  # our words and step numbers
    typed = view.analysis.typed
    if typed is not None and stack == "cross":
        said.append(
            tr(
                "The decoder reads its own translation, so no step is checked (✓/✗) against "
                "it: type the right answer as the target text to check every step."
            )
        )
    elif typed is not None and typed < len(trace.tokens_for(stack)[0][0]):
        said.append(
            tr(
                "From step {step} on, the next token is the model's own continuation: nothing "
                "you typed says what comes there, so those steps carry no ✓/✗.",
                step=typed - 1,
            )
        )
    return said


def outline_row(fig, row: int, rows: int) -> None:
    """Outline the lesson's step, its attention row, on a decoding map of ``rows`` steps (not on
    a long text's pooled map, whose rows are no longer single steps)."""
    cells = fig.data[0]
    if len(cells.y) != rows or not 0 <= row < rows:
        return
    fig.add_shape(
        type="rect",
        x0=-0.5,
        x1=len(cells.x) - 0.5,
        y0=row - 0.5,
        y1=row + 0.5,
        line={"color": "#d62728", "width": 2},
    )


def decoding_makers(view: View) -> dict:
    """A decoder or an encoder-decoder: greedy decoding step by step beside the attention map."""
    sel, trace, net = view.sel, view.analysis.trace, view.analysis.model.net
    cfg = trace.config
    stack = "cross" if cfg.arch == "encoder-decoder" else "decoder"
    layer, head = min(sel.layer, cfg.n_layers - 1), min(sel.head, cfg.n_heads - 1)
    typed = view.analysis.typed

    def steps_plot():
        fig = attention.head_figure(trace, stack, layer, head, scale=sel.scale)
        outline_row(fig, lesson, len(steps))
        fig.layout.title.text = tr(
            "Decoding step by step — layer {layer}, head {head}: row t is the step that wrote "
            "token t + 1 ({stack})",
            layer=layer,
            head=head,
            stack=attention.stack_title(stack),
        )
        return fig

    what = (
        "Greedy translation, one row per step (layer and head above choose the attention map)."
        if cfg.arch == "encoder-decoder"
        else "Greedy continuation, one row per step "
        "(layer and head above choose the attention map)."
    )

    def lens_plot():  # the decoder's stream (the dates model's decoder too), layer by layer
        probs = analysis.logit_lens(net, trace, "decoder")
        return logit_lens.figure_for(probs, trace, net.tokenizer, "decoder", typed=typed)

    steps = trace.tokens_for(stack)[0][0]  # the decoder's tokens, <s> first: one step each
    lesson = opening_step(cfg.arch, steps[1:])
    # the step the table scrolls to (ui/js/lesson.js reads it; the table marks it ▶)
    marker = f'<span class="ta-lesson ta-lesson-{lesson}"></span>'
    return {
        "prediction": lambda: " ".join([tr(what), *facts(view, stack)]) + marker,
        "steps_table": lambda: steps_table(trace, stack, net.tokenizer, typed=typed),
        "steps_plot": steps_plot,
        "lens_plot": lens_plot,
    }


LENS_POSITIONS = 64  # a language model's logit lens reads at most the last 64 positions
# ... and at most this many multiply-adds (GPT-2's 13 rows × 64 positions × 768 × 50,257): each
# cell is a d_model × V product, so Gemma 3's 262,144-word vocabulary reads its last 10.
LENS_MACS = 3.2e10


def lens_positions(config) -> int:
    """How many of a text's last positions the logit lens reads for this model."""
    per_position = (config.n_layers + 1) * config.d_model * config.vocab_size
    return max(1, min(LENS_POSITIONS, int(LENS_MACS // per_position)))


def lm_makers(view: View) -> dict:
    """A real language model (GPT-2, LLaMA, …): next-token top 5 at every position, its greedy
    continuation, and the logit lens through its own final norm, from the trace's residual
    stream (its vocabulary is too large to keep the logits of every token)."""
    sel, trace, net = view.sel, view.analysis.trace, view.analysis.model.net
    cfg = trace.config
    layer, head = min(sel.layer, cfg.n_layers - 1), min(sel.head, cfg.n_heads - 1)
    answers = logit_lens.lens_answers(trace, "decoder")

    def prediction():
        words = lm_continuation(view.analysis)
        said = tr(
            "Next-token predictions at every position (the top 5), read from the model's own "
            "final norm and LM head."
        )
        if words is None:  # every step would read the whole long text again
            said += " " + tr(
                "A greedy continuation is written for texts of up to {n} tokens (each new token "
                "reads the whole text again).",
                n=LM_POSITIONS // LM_MIN_NEW_TOKENS,
            )
        else:
            said += " " + tr(
                "Greedy continuation of the text (at most {n} tokens, or until its end token): "
                "“{words}”",
                n=min(lm_steps(len(answers)), cfg.max_len - len(answers)),  # lm_continuation's
                words=md_literal(visible_text(words)),
            )
        return (
            said
            + "  \n"
            + tr("Row t of the attention below is the step that predicts token t + 1.")
        )

    def table():
        top = analysis.logit_lens_top(net, trace, "decoder", answers=answers, top=5, rows="last")
        return steps_table(
            trace, "decoder", net.tokenizer, best=(top["top_p"][0], top["top_id"][0])
        )

    def steps_plot():
        fig = attention.head_figure(trace, "decoder", layer, head, scale=sel.scale)
        fig.layout.title.text = tr(
            "Next-token prediction — layer {layer}, head {head}: row t predicts token t + 1",
            layer=layer,
            head=head,
        )
        return fig

    def lens_plot():  # a long text's last positions: each cell is a d_model × V product
        first = max(0, len(answers) - lens_positions(cfg))
        top = analysis.logit_lens_top(net, trace, "decoder", answers=answers, top=1, first=first)
        return logit_lens.top_figure(top, trace, net.tokenizer, "decoder", first=first)

    return {
        "prediction": prediction,
        "steps_table": table,
        "steps_plot": steps_plot,
        "lens_plot": lens_plot,
    }


def makers(view: View) -> dict:
    trace = view.analysis.trace
    if getattr(trace.config, "token_labels", None):
        return role_makers(view)
    if view.analysis.model.is_lm:
        return lm_makers(view)
    if trace.logits is None:
        return no_output_makers(view.analysis.model.net)
    return decoding_makers(view)


TAB = Tab(
    "output",
    "Output",
    build,
    makers,
    depends={
        "prediction": (),
        "steps_table": (),
        "steps_plot": ("layer", "head", "scale"),
        "lens_plot": (),
    },
)
