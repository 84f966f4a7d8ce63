"""Heads: numbers for researchers — per-head statistics, rollout, ablation, one score taken apart.

Everything here is computed by analysis/ (pure functions over the trace); this module lays it out.
"""

from __future__ import annotations

import functools
import re
import time

import gradio as gr
import numpy as np
import pandas as pd
from gradio.data_classes import FileData

import analysis
import analysis.export
from analysis.corpus import MAX_SENTENCES
from analysis.head_stats import COLUMNS as STATS_COLUMNS
from analysis.head_stats import TABLE_COLUMNS
from analysis.patterns import COLUMNS as PATTERN_COLUMNS
from lang import ZH, message_of, tr
from model.attention import ABLATIONS
from model.hf_reference import HF_REFERENCE, hf_difference
from serve import exports
from ui.fields import Choice, Text, Whole, declared
from ui.i18n import empty_table, t
from ui.tabs.base import Built, Radio, Slider, Tab, View, plot, tile_picker
from viz.common import display_token, md_literal, stack_tokens
from viz.heads import (
    DISTANCE_QUERIES,
    FLOW_TOKENS,
    corpus_distance_figure,
    distance_figure,
    flow_figure,
    rollout_figure,
)

STATS_CAPTION = (
    "**Per-head statistics** (Clark et al. 2019, *What does BERT look at?*), averaged over the "
    "real query tokens of this text (padding excluded): **entropy** of each attention row (nats; "
    "low = focused), the weight on the **prev**ious (α(i, i−1)), **next** (α(i, i+1)) and the "
    "token **self**, on the **first** token (`[CLS]` / `<s>`), the **sink**: that first-token "
    "weight over the queries that could look elsewhere (the *attention sink* of language models, "
    "Xiao et al. 2023: idle heads park their weight on the first token; a causal first query "
    "sees only itself and is left out; for BERT it is the `[CLS]` column's share, = first), on "
    "**sep**arators (`[SEP]` / `</s>`), on **punct**uation, and the mean attention "
    "**distance** Σⱼ αᵢⱼ |i − j|. "
    "Conventions: **ours** averages prev and next over the n − 1 queries that have such a key, "
    "leaves the entropy unsmoothed and counts every punctuation mark; **Clark et al.** divide by "
    "n, smooth the entropy and count only “.” and “,” — their thresholds (prev/next > 0.5, punct "
    "> 0.6) read on theirs. Pattern columns (TransformerLens's head detector): "
    "**previous_token**, **duplicate_token**, **induction** = Σ(A∘P)/ΣA over the pattern P, and "
    "**prefix_matching** (Olsson et al. 2022), plus your own pattern. Sort a column from the ⋮ "
    "menu in its header; click a row to open that head in every view."
)
DISTANCE_CAPTION = (
    "**Heads by how alike they attend** (Clark et al. 2019): the Jensen–Shannon divergence "
    "between two heads' attention rows, averaged over the queries, for every pair of heads, laid "
    "out in 2-D by classical MDS — heads close together attend alike. Click a head to open it. "
    "Past {rows} tokens the average is over {rows} query rows, evenly spaced (the cost grows "
    "with the rows: every row of a 512-token text takes seconds), as the title says."
)
FLOW_CAPTION = (
    "**Attention flow** (Abnar & Zuidema 2020) into the chosen query position after the chosen "
    "layer: the maximum flow from each input token through the same graph as the rollout "
    "(½·mean of the heads + ½·I per layer), the row normalised to 1 — beside the rollout's row "
    "for the same token. Max-flow is costly: it is computed for texts of up to "
    "{limit} tokens."
)
ROLLOUT_CAPTION = (
    "**Attention rollout** (Abnar & Zuidema 2020): Ã = ½·mean over heads of A + ½·I, rows "
    "renormalised, multiplied through the layers (R_l = Ã_l R_{l−1}). It *assumes* information "
    "mixes only through attention and the residual, linearly — FFNs, LayerNorms and the values' "
    "sizes are ignored — so read it as a flow estimate, not a measurement."
)
ABLATION_CAPTION = (
    "**Head ablation** of the heads you list, or of every head of the chosen layer (on demand: "
    "one forward pass per head): each head's context z_h is removed before W_O "
    "(**zero**, Hugging Face's head_mask) or replaced by its mean over the text (**mean**), and "
    "the model runs again. **hidden_change** = mean ‖Δh‖/‖h‖ of the last stack's output; with "
    "an output head also **argmax_changed**, the share of predictions that changed, and **kl** = "
    "KL(p‖p_ablated). The **set** row removes all of them at once — compare it with the **sum of "
    "singles**: effects do not add up."
)
BREAKDOWN_CAPTION = (
    "**One score taken apart** for the chosen layer, head, query and key: q·k/√d_k (split into "
    "token and position parts where the model's input is linear in them), the mask, the softmax "
    "row, and the weighted sum of V — each step recomputed and checked against the trace."
)


CORPUS_CAPTION = (
    "**Over a corpus** (Clark et al. 2019 average over 1,000 segments): paste up to {n} "
    "sentences, one a line, upload a .txt or pick a shipped sample, and press **Run corpus**. "
    "Every sentence runs through the model of the last run (cut at 32 tokens); each measure of "
    "the table above and the norms (Kobayashi et al. 2020) are taken per sentence, then "
    "summarised per head: **_mean** and **_std** over the sentences; click a row to open that "
    "head. Below the table, the heads' map by how alike they attend, from the Jensen–Shannon "
    "distances averaged over the sentences (also in the NPZ); click a head to open it. A corpus "
    "is measured once per model; asking again answers from the cache. A link may name a "
    "shipped sample (corpus=en or zh): opening it measures that sample."
)

CONVENTIONS = ("ours", "clark")  # head statistics: ours, or Clark et al.'s notebook (analysis)
# Ablation, the score breakdown's query and key (clamped to the text by the view that reads
# them), heads ablated together ("0:2, 3:5"; empty: the chosen layer's), the head statistics'
# conventions and a pattern column of the head table ("first", …).
FIELDS = {
    "ablation": declared("zero", Choice(ABLATIONS)),
    "query": declared(0, Whole()),
    "key": declared(0, Whole()),
    "heads_set": declared("", Text(400)),
    "convention": declared("ours", Choice(CONVENTIONS)),
    "pattern": declared("", Text(80)),
}


def table_controls() -> tuple[Radio, gr.Textbox]:
    """The head table's conventions switch and the user's own pattern column."""
    with gr.Row():
        convention = Radio(
            [
                (t("ours (n − 1, unsmoothed, every punctuation mark)"), "ours"),
                (t("Clark et al.'s (n, smoothed, “.” and “,”)"), "clark"),
            ],
            value="ours",
            label=t("Conventions"),
            elem_id="convention",
            scale=2,
        )
        pattern = gr.Textbox(
            "",
            label=t("Your own pattern column: first, self, same word, previous or next"),
            placeholder=t("first"),
            max_lines=1,
            elem_id="pattern",
            scale=1,
        )
    return convention, pattern


# Before anything is drawn a table shows its own headers, not Gradio's "1 | 2 | 3" (the columns
# every model has; the rest come with the first draw).
def empty_stats() -> pd.DataFrame:
    """The head table with no rows: the statistics' and the patterns' columns."""
    names = [*TABLE_COLUMNS, *PATTERN_COLUMNS[2:]]
    return shown_columns(pd.DataFrame(columns=names))


def empty_ablation() -> pd.DataFrame:
    """The ablation table with no rows (argmax_changed and kl come with a model's output head)."""
    return shown_columns(pd.DataFrame(columns=["kind", "layer", "head", "hidden_change"]))


def empty_corpus() -> pd.DataFrame:
    """The corpus table with no rows: mean and std of the head table's measures (the norms come
    with the first corpus, where the model allows them)."""
    measures = [*STATS_COLUMNS[2:], *PATTERN_COLUMNS[2:]]
    names = ["layer", "head", *(f"{m}_{s}" for m in measures for s in ("mean", "std"))]
    return corpus_columns(pd.DataFrame(columns=names))


def ablation_controls() -> tuple[Radio, gr.Textbox, gr.Button]:
    """How heads are removed (zero or mean), which heads, and the button that runs it."""
    mode = Radio(
        [(t("zero"), "zero"), (t("mean"), "mean")],
        value="zero",
        label=t("Ablation"),
        elem_id="ablation",
    )
    with gr.Row():
        heads_set = gr.Textbox(
            "",
            label=t("Heads to remove (layer:head, …); empty = every head of the chosen layer"),
            placeholder="0:2, 1:5, 3:0",
            max_lines=1,
            elem_id="heads-set",
            scale=3,
        )
        ablate = gr.Button(t("Ablate"), size="sm", elem_id="ablate", scale=1)
    return mode, heads_set, ablate


def build() -> Built:
    gr.Markdown(t(STATS_CAPTION), elem_classes="ta-caption")
    convention, pattern = table_controls()
    stats = gr.Dataframe(
        empty_table(empty_stats), elem_id="head-stats", interactive=False, max_height=420
    )
    with gr.Row():
        csv = gr.DownloadButton(t("Head statistics (CSV)"), elem_id="stats-csv", size="sm")
        export = gr.Button(t("Export the whole trace (NPZ + JSON manifest)"), size="sm")
    npz = gr.File(label=t("Trace export"), elem_id="trace-npz", visible=False)
    gr.Markdown(t(DISTANCE_CAPTION.format(rows=DISTANCE_QUERIES)), elem_classes="ta-caption")
    distance_plot = plot("distance-plot")
    picker = tile_picker("distance-pick", "distance")  # a clicked head opens it
    gr.Markdown(t(ROLLOUT_CAPTION), elem_classes="ta-caption")
    rollout_plot = plot("rollout-plot")
    gr.Markdown(t(FLOW_CAPTION.format(limit=FLOW_TOKENS)), elem_classes="ta-caption")
    flow_plot = plot("flow-plot")
    gr.Markdown(t(ABLATION_CAPTION), elem_classes="ta-caption")
    mode, heads_set, ablate = ablation_controls()
    ablation = gr.Dataframe(
        empty_table(empty_ablation), elem_id="ablation-table", interactive=False
    )
    gr.Markdown(t(BREAKDOWN_CAPTION), elem_classes="ta-caption")
    with gr.Row():
        query = Slider(0, 511, value=0, step=1, label=t("Query position"), elem_id="query")
        key = Slider(0, 511, value=0, step=1, label=t("Key position"), elem_id="key")
    breakdown = gr.Markdown(elem_id="breakdown")
    corpus = build_corpus()
    return Built(
        outputs={
            "head_stats_table": stats,
            "stats_csv": csv,
            "trace_npz": npz,
            "distance_plot": distance_plot,
            "rollout_plot": rollout_plot,
            "flow_plot": flow_plot,
            "ablation_table": ablation,
            "breakdown": breakdown,
            **corpus.outputs,
        },
        inputs=corpus.inputs,
        controls={
            "ablation": mode,
            "query": query,
            "key": key,
            "heads_set": heads_set,
            "convention": convention,
            "pattern": pattern,
        },
        picks=[picker, *corpus.picks],
        row_picks=[stats, *corpus.row_picks],
        actions={"export": export, "ablate": ablate},
    )


def build_corpus() -> Built:
    """The corpus section: sentences pasted, uploaded (not in public mode: ui/layout.py hides
    the upload) or a shipped sample, and per head the mean and std of every measure over them."""
    gr.Markdown(t(CORPUS_CAPTION.format(n=MAX_SENTENCES)), elem_classes="ta-caption")
    with gr.Row():
        text = gr.Textbox(
            "",
            label=t("Corpus: one sentence a line"),
            placeholder="The cat sat on the mat.\nA dog barked at the cat.",
            lines=6,
            max_lines=12,
            elem_id="corpus-text",
            scale=3,
        )
        with gr.Column(scale=1):
            sample = Radio(
                [
                    (t("none (the box)"), "none"),
                    (t("English sample"), "en"),
                    (t("中文 sample"), "zh"),
                ],
                value="none",
                label=t("Or a shipped sample"),
                elem_id="corpus-sample",
            )
            upload = CorpusFile.made(
                label=t("Or upload a .txt (one sentence a line)"),
                file_types=[".txt"],
                height=120,
                elem_id="corpus-upload",
            )
    run = gr.Button(t("Run corpus"), variant="primary", size="sm", elem_id="corpus-run")
    said = gr.Markdown(elem_id="corpus-said")
    table = gr.Dataframe(
        empty_table(empty_corpus), elem_id="corpus-table", interactive=False, max_height=420
    )
    with gr.Row():
        csv = gr.DownloadButton(t("Corpus statistics (CSV)"), elem_id="corpus-csv", size="sm")
        npz = gr.DownloadButton(
            t("Corpus measures with the head distances (NPZ)"), elem_id="corpus-npz", size="sm"
        )
    distance_plot = plot("corpus-distance-plot")
    return Built(
        outputs={
            "corpus_said": said,
            "corpus_table": table,
            "corpus_csv": csv,
            "corpus_npz": npz,
            "corpus_distance_plot": distance_plot,
        },
        inputs={
            "corpus_text": text,
            "corpus_sample": sample,
            "corpus_upload": upload,
            "corpus_run": run,
        },
        # a clicked head of the corpus's map opens it
        picks=[tile_picker("corpus-distance-pick", "corpus-distance")],
        row_picks=[table],  # a clicked row opens its head, as the one-text table's does
    )


class CorpusFile(gr.File):
    """The corpus upload: a file's path, or None for any value a crafted client sends.

    Gradio validates an input against the component's data model before ``preprocess`` and
    answers a value that is no file with a bare "Error" and a server traceback; here the
    validation happens in ``preprocess`` (its files still pass Gradio's own upload-folder check
    first), and anything else is None, which the handler answers with a sentence.
    """

    file_model = FileData  # one file (file_count="single"); Gradio's own model is dropped:

    @classmethod
    def made(cls, **kwargs) -> CorpusFile:
        # (no __init__ here: Gradio reads a component's properties from its __init__'s signature)
        upload = cls(file_count="single", **kwargs)
        upload.data_model = None
        return upload

    def get_block_name(self) -> str:
        return "file"  # the page draws Gradio's own File

    def api_info(self) -> dict:
        schema = self.file_model.model_json_schema()
        schema["additional_description"] = schema.pop("description", None)
        return schema

    def preprocess(self, payload):
        try:
            checked = self.file_model.model_validate(payload, context={"validate_meta": True})
            return super().preprocess(checked)
        except Exception:
            return None


def corpus_outputs(result, model_id: str, said: str, digest: str, config) -> dict:
    """The corpus's table (layer, head, then mean and std of every measure; its headers in the
    request's language), its CSV and NPZ (English names), the map of its mean head distances,
    the sentence saying what was computed. ``config``: the model's (layers and heads)."""
    meta = {"model": model_id, "stack": result.options.get("stack"), "corpus sha256": digest}
    meta["max_tokens"] = result.options.get("max_tokens")
    meta["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    name = (
        f"corpus_{exports.model_part(model_id)}_"
        f"{exports.safe_name(str(meta['stack']))}_{digest[:12]}"
    )
    csv = exports.EXPORTS.write(f"{name}.csv", analysis.export.corpus_csv(result, meta))
    npz = exports.EXPORTS.write(f"{name}.npz", analysis.export.corpus_npz(result, meta))
    return {
        "corpus_said": said,
        "corpus_table": corpus_columns(result.stats.round(3)),
        "corpus_csv": csv,
        "corpus_npz": npz,
        "corpus_distance_plot": corpus_distance_figure(result, config.n_layers, config.n_heads),
    }


def corpus_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The corpus table with its headers in the request's language, each measure named as the
    one-text table names it: "entropy_mean" is 熵（均值） in Chinese (the CSV keeps the English)."""

    def header(name: str) -> str:
        measure, _, summary = name.rpartition("_")
        if summary == "mean":
            return tr("{measure}_mean", measure=tr(measure))
        if summary == "std":
            return tr("{measure}_std", measure=tr(measure))
        return tr(name)

    return df.rename(columns={name: header(name) for name in df.columns})


# The patterns the box names (analysis.pattern_mask reads more); a Chinese page names them in
# Chinese, and either name works on either page.
PATTERN_NAMES = ("first", "self", "same word", "previous", "next")


def pattern_name(pattern: str) -> str:
    """The box's pattern as analysis.pattern_mask reads it: "前一个" -> "previous"."""
    said = "".join(str(pattern).split())
    return next((name for name in PATTERN_NAMES if ZH.get(name) == said), str(pattern))


def pattern_of(trace, stack: str, pattern: str):
    """The user's pattern as a mask over this text's tokens; None when there is none. Raises
    ValueError with the sentence the page shows when the pattern is not one it knows."""
    if not str(pattern or "").strip() or stack == "cross":
        return None
    q_tok, _ = stack_tokens(trace, stack)
    try:
        return analysis.pattern_mask(q_tok, pattern_name(pattern))
    except ValueError:
        raise ValueError(
            tr(
                "there is no attention pattern called {name}; write first, self, same word, "
                "previous or next",
                name=repr(str(pattern)[:40]),
            )
        ) from None


def head_stats(trace, stack: str, convention: str, pattern: str) -> tuple[pd.DataFrame, str]:
    """The head table and, when the user's pattern is not one the page knows, the sentence
    saying so ("" otherwise): the rest of the table is drawn all the same."""
    try:
        mask, problem = pattern_of(trace, stack, pattern), ""
    except ValueError as exc:
        mask, problem = None, str(exc)
    return analysis.head_table(trace, stack, convention=convention, custom=mask), problem


def shown_stats(df: pd.DataFrame, problem: str = "") -> pd.DataFrame:
    """The head table as the page shows it (rounded, headers in the request's language); a
    pattern that could not be read gets its column all the same, empty, its header the
    sentence saying what was wrong."""
    shown = shown_columns(df.round(3))
    if problem:
        shown[f"{tr('custom')}: {problem}"] = ""
    return shown


def model_inputs(trace) -> dict:
    inputs = {"input_ids": trace.input_ids, "attention_mask": trace.attention_mask}
    if trace.tgt_ids is not None:
        inputs.update(tgt_ids=trace.tgt_ids, tgt_attention_mask=trace.tgt_attention_mask)
    return inputs


def chosen_heads(text: str, layer: int, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """ "0:2, 3:5" -> [(0, 2), (3, 5)]; empty -> every head of ``layer``; one sentence if wrong."""
    if not str(text or "").strip():
        return [(layer, h) for h in range(n_heads)]
    pairs = re.findall(r"(\d{1,4})\s*[:/.,]\s*(\d{1,4})", str(text))
    rest = re.sub(r"\d{1,4}\s*[:/.,]\s*\d{1,4}", "", str(text))
    if not pairs or re.sub(r"[\s,;]", "", rest):
        raise ValueError(
            tr(
                "write the heads as layer:head pairs, e.g. 0:2, 1:5 (not {text})",
                text=repr(text[:40]),
            )
        )
    heads = list(dict.fromkeys((int(a), int(b)) for a, b in pairs))
    wrong = [f"{a}:{b}" for a, b in heads if a >= n_layers or b >= n_heads]
    if wrong:
        raise ValueError(
            tr(
                "{wrong} is not a head here: layers 0–{last_layer}, heads 0–{last_head}",
                wrong=", ".join(wrong[:4]),
                last_layer=n_layers - 1,
                last_head=n_heads - 1,
            )
        )
    if len(heads) > 2 * n_heads:  # one forward pass each: keep the view within its budget
        raise ValueError(tr("choose at most {n} heads (one forward pass each)", n=2 * n_heads))
    return heads


def ablation_table(net, trace, stack: str, heads: list[tuple[int, int]], mode: str) -> pd.DataFrame:
    # One forward pass per head, inside the drawing's own admission (app.App.draw, CpuShare).
    df = analysis.ablation_effects(net, model_inputs(trace), stack, heads, mode).round(4)
    df["kind"] = [tr(kind) for kind in df["kind"]]
    return shown_columns(df)


def shown_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The table with its headers in the request's language (the CSV keeps the English names)."""
    return df.rename(columns={name: tr(name) for name in df.columns})


def split_reason(split: dict) -> str:
    """Why the token/position split holds ("x = token + position …"), in the request's language."""
    parts = [p for p in split.get("parts", []) if p != "bias"]
    reason, english = split.get("reason", ""), "x = " + " + ".join(parts)
    if not reason.startswith(english):
        return tr(reason)
    through = reason.removeprefix(english)
    return "x = " + " + ".join(tr(p) for p in parts) + (tr(through) if through else "")


def split_rows(split: dict, f) -> list[str]:
    """The score's token / position split as table rows (none when the breakdown has none)."""
    if split.get("available"):
        by_part: dict[str, float] = {}
        for term in split["terms"]:
            name = f"{tr(term['query_part'])}·{tr(term['key_part'])}"
            by_part[name] = term["value"]
        terms = ", ".join(f"{k} {v:+.3f}" for k, v in by_part.items() if abs(v) > 5e-4)
        split_name = tr("split ({reason})", reason=md_literal(split_reason(split)))
        return [
            f"| {split_name}: {terms} | {tr('sum')} {f(split['sum'])} | "
            f"Δ {split['difference']:.1e} |"
        ]
    if split:
        reason = md_literal(tr(split.get("reason", "")))
        not_exact = tr("not exact here: {reason}", reason=reason)
        return [f"| {tr('token / position split')} | {not_exact} | |"]
    return []


def breakdown_markdown(net, trace, stack: str, layer: int, head: int, query: int, key: int) -> str:
    """The score of one query/key pair taken apart, every step checked against the trace."""
    q_tok, k_tok = stack_tokens(trace, stack)
    query, key = min(query, len(q_tok) - 1), min(key, len(k_tok) - 1)
    b = analysis.score_breakdown(trace, stack, layer, head, query, key, net=net)

    def f(x) -> str:
        return "−∞" if x == float("-inf") else f"{x:.4f}"

    def cell(token: str) -> str:
        return md_literal(display_token(token))

    heading = tr(
        "**Layer {layer}, head {head}: query {query} “{q}” → key {key} “{k}”** (d_k = {d_k})",
        layer=layer,
        head=head,
        query=query,
        q=cell(q_tok[query]),
        key=key,
        k=cell(k_tok[key]),
        d_k=b["d_k"],
    )
    lines = [
        heading,
        "",
        "| {} | {} | {} |".format(tr("step"), tr("value"), tr("checked against the trace")),
        "|---|---|---|",
        f"| q·k | {f(b['dot'])} | |",
        f"| {tr('score = q·k / √d_k')} | {f(b['score'])} | {f(b['score_trace'])} "
        f"(Δ {b['score_difference']:.1e}) |",
    ]
    lines += split_rows(b.get("split") or {}, f)
    mask = tr("may attend") if b["mask"] else tr("hidden")
    context_name = tr(", the head's context")
    lines += [
        f"| {tr('mask')} | "
        + tr("{mask}: adds {value}", mask=mask, value=f(b["mask_value"]))
        + " | |",
        f"| {tr('α = exp(score − row max) / Σ')} | {f(b['weight_recomputed'])} | {f(b['weight'])} "
        + tr(
            "(Δ {difference:.1e}); the row sums to {row_sum:.6f}",
            difference=b["weight_difference"],
            row_sum=b["row_sum"],
        )
        + " |",
        f"| ‖α · v_key‖ | {float(np.linalg.norm(b['weighted_value'])):.4f} | |",
        f"| ‖Σⱼ αᵢⱼ vⱼ‖{context_name} | {float(np.linalg.norm(b['context'])):.4f} | |",
    ]
    check = b.get("context_check") or {}
    if check.get("available"):
        lines.append(
            f"| Σ_h context_h W_O^h + b_O | {tr('the attention output')} | "
            f"Δ {check['difference']:.1e} |"
        )
    return "\n".join(lines)


def makers(view: View) -> dict:
    analysis_, sel = view.analysis, view.sel
    trace, net = analysis_.trace, analysis_.model.net
    stack = sel.stack
    layer, head = sel.layer, sel.head
    model_id, key = analysis_.model.model_id, analysis_.key

    @functools.cache
    def stats() -> tuple[pd.DataFrame, str]:  # computed once for the table and the CSV
        return head_stats(trace, stack, sel.convention, sel.pattern)

    def npz() -> str:
        meta = {"model": analysis_.model.label, "text": trace.tokens[0], "stack": stack}
        if analysis_.model.model_id == "bert":
            meta.update(hf_max_diff=hf_difference(trace), hf_reference=HF_REFERENCE)
        try:  # docs/exports.md: one folder in Gradio's cache, bounded in bytes
            data = analysis.trace_npz(  # + every measure, the distances as on the map
                trace, meta, measures=True, net=net, distance_queries=DISTANCE_QUERIES
            )
            path = exports.EXPORTS.write(exports.trace_name(model_id, key), data)
        except exports.TooLarge as exc:  # the sentence in place of the file
            return gr.update(value=None, visible=True, label=message_of(exc))
        return gr.update(value=path, visible=True, label=t("Trace export"))

    def stats_csv() -> str:
        meta = {"model": model_id, "text": key[1][0], "target": (key[2] or [None])[0]}
        meta["conventions"] = sel.convention
        table, problem = stats()
        if sel.pattern:
            meta["custom pattern"] = sel.pattern
        if problem:
            meta["custom pattern"] += f" (no column: {problem})"
        meta["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        csv_text = analysis.stats_csv(table, meta)
        return exports.EXPORTS.write(exports.stats_name(model_id, stack, key), csv_text)

    def rollout():
        if stack == "cross":
            return None
        return rollout_figure(trace, stack, layer)

    return {
        "head_stats_table": lambda: shown_stats(*stats()),
        "stats_csv": stats_csv,
        "trace_npz": npz,
        "rollout_plot": rollout,
        "distance_plot": lambda: distance_figure(trace, stack),
        "flow_plot": lambda: (
            None if stack == "cross" else flow_figure(trace, stack, layer, sel.query)
        ),
        "ablation_table": lambda: ablation_table(
            net,
            trace,
            stack,
            chosen_heads(sel.heads_set, layer, trace.config.n_layers, trace.config.n_heads),
            sel.ablation,
        ),
        "breakdown": lambda: breakdown_markdown(net, trace, stack, layer, head, sel.query, sel.key),
    }


TAB = Tab(
    "heads",
    "Heads",
    build,
    makers,
    fields=FIELDS,
    depends={
        "head_stats_table": ("stack", "convention", "pattern"),
        "stats_csv": ("stack", "convention", "pattern"),
        "distance_plot": ("stack",),
        "flow_plot": ("stack", "layer", "query"),
        "trace_npz": ("export",),  # only when its button is clicked: every field of the trace
        "rollout_plot": ("stack", "layer"),
        # One forward pass per head: on demand, seconds at a long text.
        "ablation_table": ("ablate",),
        "breakdown": ("stack", "layer", "head", "query", "key"),
    },
    lazy=("trace_npz", "ablation_table"),
    cleared={"ablation_table": empty_ablation},
)
