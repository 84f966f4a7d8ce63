"""How the heads connect: the pair of Which heads matter read as a circuit, for the model the page
has open. At once: attribution patching's grid (one backward pass) and the composition scores of
the weights. On demand, in the patching tab's queue: exact activation patching beside the
estimate, and the circuit (edge attribution with the page's steps, its strongest edges as a
graph, and how much of the answer they alone restore). What it measures and caches is in
ui/circuit_measures.py; this module builds and wires."""

from __future__ import annotations

import functools
import hashlib

import gradio as gr

from analysis.export import stats_csv
from lang import tr
from serve import exports
from ui import circuit_measures as cm
from ui.circuit_export import circuit_npz
from ui.fields import Whole, declared
from ui.i18n import t
from ui.pair_words import what_measured
from ui.patching_inputs import unknown_note
from ui.patching_measures import shipped
from ui.tabs.base import Attempt, Built, Slider, Tab, View, downloads, plot, tile_picker
from viz.circuit_graph import circuit_figure
from viz.circuits import (
    attribution_grid_figure,
    compare_figure,
    composition_figure,
    curve_figure,
    residual_grid_figure,
)
from viz.common import md_literal

CAPTION = (
    "**How the heads connect** (attribution patching: Nanda 2023, Syed et al. 2023; circuits: "
    "Hanna et al. 2024; composition: Elhage et al. 2021). The pair is the one of **Which heads "
    "matter**: the page's text is the clean run, that tab's corrupt text the other (pick a "
    "shipped pair there). Gradients averaged over a few runs from the corrupt text to the clean "
    "one (integrated gradients, EAP-IG) estimate every head's share at once; **Compare with "
    "exact patching** runs the patching tab's measure beside it. **Find the circuit** "
    "scores every edge (what one head, MLP or the embeddings write, as a later head's query, "
    "key or value or an MLP reads it) and keeps the strongest: its faithfulness is the share of "
    "the answer those edges alone restore."
)
RESIDUAL = (
    "**The residual stream, estimated** (`analysis.attribute_residual`): the clean run's "
    "gradient (one step) read at the stream entering each layer at each position — what "
    "patching that stream from the clean run would restore, to first order (**Which heads "
    "matter** measures it exactly, in its second grid). Here the estimate is rougher than for "
    "the heads: on GPT-2 small's indirect-object task attribution patching correlates about "
    "0.75 with exact patching on the residual stream, against about 0.98 on attention outputs "
    "(Nanda 2023; arXiv 2508.21258)."
)
LESSON = (
    "**The lesson:** the previous-token head L0H1 writes into the induction heads' keys: its "
    "strongest edge into a key is {edge} ({score:+.3f}), K-composition (Olsson et al. 2022)."
)
# The graph's and the curve's columns (scale 3 and 2) as parts of the tab's width on a wide page,
# as Chromium draws them at 1920 px (the row's gap taken from both): layout.meta.share, so the
# server lays each out for its own width (viz.screen.lay_out). A phone stacks the columns.
GRAPH_SCALE, CURVE_SCALE = 3, 2
GRAPH_SHARE, CURVE_SHARE = 0.6, 0.4

MAX_KEEP = 10_000  # the most edges a circuit keeps on the page (GPT-2 small has ~32,000)


def build() -> Built:
    gr.Markdown(t(CAPTION), elem_classes="ta-caption")
    said = gr.Markdown(elem_id="circuit-said")
    opener = gr.Button(
        t("Change the pair on Which heads matter"), size="sm", elem_id="circuit-pair"
    )
    opener.click(fn=None, js="() => ta.openTab('patching')")
    attr_said = gr.Markdown(elem_id="circuit-attr-said")
    attr_plot = plot("circuit-attr-plot")
    gr.Markdown(t(RESIDUAL), elem_classes="ta-caption")
    resid_plot = plot("circuit-resid-plot")
    with gr.Row():
        compare = gr.Button(
            t("Compare with exact patching"), size="sm", elem_id="circuit-compare-run"
        )
        find = gr.Button(t("Find the circuit"), variant="primary", size="sm", elem_id="circuit-run")
    compare_said = gr.Markdown(elem_id="circuit-compare-said")
    compare_plot = plot("circuit-compare-plot")
    keep = Slider(  # its maximum: the model's edges, set by each run (Whole("edges") below)
        0,
        500,
        value=0,
        step=1,
        label=t("Edges kept (0: the smallest circuit measured that restores 80 % of the answer)"),
        elem_id="keep",
    )
    edges_said = gr.Markdown(elem_id="circuit-edges-said")
    with gr.Row():
        with gr.Column(scale=GRAPH_SCALE):
            graph_plot = plot("circuit-graph-plot")
            picker = tile_picker("circuit-pick", "circuit")  # a clicked head opens it (circuits.js)
        with gr.Column(scale=CURVE_SCALE):
            curve_plot = plot("circuit-curve-plot")
    comp_plot = plot("circuit-comp-plot")
    csv, npz = downloads(
        (t("Circuit edges (CSV)"), "circuit-csv"),
        (t("Edges, grid, composition and curve (NPZ)"), "circuit-npz"),
    )
    return Built(
        outputs={
            "circuit_said": said,
            "circuit_attr_said": attr_said,
            "circuit_attr_plot": attr_plot,
            "circuit_resid_plot": resid_plot,
            "circuit_compare_said": compare_said,
            "circuit_compare_plot": compare_plot,
            "circuit_edges_said": edges_said,
            "circuit_graph_plot": graph_plot,
            "circuit_curve_plot": curve_plot,
            "circuit_comp_plot": comp_plot,
            "circuit_csv": csv,
            "circuit_npz": npz,
        },
        controls={"keep": keep},
        picks=[picker],
        actions={"compare": compare, "circuit": find},
    )


def lesson_edge(loaded, found, sel, edges) -> tuple[str, str, float] | None:
    """The induction lesson's edge, where the page measured it: the copy pair on its model, and
    the strongest key edge out of layer 0 is the previous-token head's (source, target, score)."""
    pair = shipped(loaded, found.text, sel.pair)
    if pair is None or pair.id != "copy":
        return None
    keys = edges[edges["source"].str.startswith("L0H") & edges["target"].str.endswith(".k")]
    if keys.empty:
        return None
    top = keys.loc[keys["score"].abs().idxmax()]
    if top["source"] != "L0H1" or top["score"] <= 0:
        return None
    return str(top["source"]), str(top["target"]), float(top["score"])


def lesson(loaded, found, sel, edges) -> str:
    """The induction lesson in words, where the page measured it ("" elsewhere)."""
    found_edge = lesson_edge(loaded, found, sel, edges)
    if found_edge is None:
        return ""
    source, target, score = found_edge
    return "  \n" + tr(LESSON, edge=f"{source} → {target}", score=score)


class Measured:
    """What the tab's outputs share in one draw: the page's pair read as Which heads matter reads
    it (or why not), and, made once each when an output asks, the comparison with exact
    patching and the circuit."""

    def __init__(self, view: View) -> None:
        self.view, self.found, self.sel = view, view.analysis, view.sel
        self.loaded = self.found.model
        self.cfg = self.loaded.net.config
        self.attempt = Attempt(lambda: cm.spec_of(self.loaded, self.found, self.sel))
        self.with_spec = self.attempt.drawn  # a maker drawing from the pair, or nothing

    def spec(self) -> tuple:
        """(the pair, None) or (None, why not)."""
        return self.attempt.outcome

    @functools.cached_property
    def compared(self):
        pair, _ = self.spec()
        return None if pair is None else cm.comparison(self.loaded, self.found, self.sel, pair)

    @functools.cached_property
    def circuit(self):
        pair, problem = self.spec()
        if pair is None:
            return problem
        # the button draws the CSV and measures the edges (its queue); the slider does not
        pressed = "circuit_csv" in self.view.drawing
        return cm.circuit_view(self.loaded, pair, self.sel.keep, pressed=pressed)

    def lesson(self):
        """The lesson's edge in the circuit drawn, or None."""
        result = self.circuit
        if isinstance(result, str):
            return None
        return lesson_edge(self.loaded, self.found, self.sel, result[0])

    def agreement(self, pair) -> str:
        """The sentence over the first grid; Compare measures exact patching first, so that
        the agreement it measured is said there in the same answer."""
        if "circuit_compare_plot" in self.view.drawing:
            _ = self.compared
        agreed = cm.agreement(self.loaded, self.found, self.sel, pair)
        return agreement_sentence(agreed, self.loaded)


def pair_sentence(m: Measured) -> str:
    """The pair the tab reads and its measure, with a warning for unknown tokens; or why none."""
    pair, problem = m.spec()
    if pair is None:
        return "⚠️ " + md_literal(problem)
    note = unknown_note(m.loaded, m.found.text, m.sel.pair)  # [UNK] in the pair: say so
    return tr(
        "**The pair:** “{clean}” against “{corrupt}”; **{what}**.",
        clean=md_literal(m.found.text),
        corrupt=md_literal(m.sel.pair),
        what=md_literal(what_measured(m.loaded, pair)),
    ) + ("  \n⚠️ " + md_literal(tr(note)) if note else "")


def grid_makers(m: Measured) -> dict:
    """What the tab draws as it opens: the pair, the two attribution grids with the agreement
    over the first, the composition scores."""
    loaded, cfg = m.loaded, m.cfg
    return {
        "circuit_said": lambda: pair_sentence(m),
        "circuit_attr_said": m.with_spec(m.agreement),
        "circuit_attr_plot": m.with_spec(
            lambda p: attribution_grid_figure(
                cm.attribution_grid(loaded, p),
                cfg,
                p.stack,
                what_measured(loaded, p),
                steps=cm.PAGE_STEPS,
            )
        ),
        "circuit_resid_plot": m.with_spec(
            lambda p: residual_grid_figure(
                cm.residual_grid(loaded, p),
                *cm.pair_tokens(loaded, p),
                p.stack,
                what_measured(loaded, p),
            )
        ),
        "circuit_comp_plot": m.with_spec(
            lambda p: composition_figure(cm.composition(loaded, p.stack), cfg, p.stack)
        ),
    }


def demand_makers(m: Measured) -> dict:
    """What the buttons draw: the comparison with exact patching, the circuit (its sentence,
    graph and curve) and its downloads."""
    loaded = m.loaded
    return {
        "circuit_compare_said": lambda: compare_sentence(m.compared),
        "circuit_compare_plot": lambda: compare_view(m.compared, m.cfg),
        "circuit_edges_said": lambda: edges_sentence(m.circuit, loaded, m.found, m.sel),
        "circuit_graph_plot": lambda: graph_view(m.circuit, m.cfg, m.lesson()),
        "circuit_curve_plot": lambda: curve_view(m.circuit),
        "circuit_csv": lambda: circuit_download("csv", loaded, m.spec()[0], m.circuit),
        "circuit_npz": lambda: circuit_download("npz", loaded, m.spec()[0], m.circuit),
    }


def makers(view: View) -> dict:
    m = Measured(view)
    return {**grid_makers(m), **demand_makers(m)}


def compare_view(result, cfg):
    """Attribution (the page's steps and one) against exact patching as a scatter, when both
    were measured."""
    if result is None or isinstance(result, str):
        return None
    one, exact, r_one, r_ig, integrated = result
    return compare_figure(integrated, exact, cfg, r_ig, (one, r_one), cm.PAGE_STEPS)


# Nanda 2023's agreement of one-step attribution with exact patching: GPT-2 small's, on its
# indirect-object task; said as that model's, beside this pair's own.
PUBLISHED = (
    "The 0.98 often quoted is GPT-2 small's, on its indirect-object task (attention outputs; "
    "0.75 for the residual stream; Nanda 2023): that model's and task's, not this pair's."
)


def agreement_sentence(agreed, loaded) -> str:
    """This pair's agreement of the grid below with exact patching (Pearson r over the heads,
    with the page's steps and with one), or why it is not measured yet; the published number
    beside, as its own model's."""
    if agreed is None:
        cfg = loaded.net.config
        said = tr(
            "**This pair's agreement with exact patching** is not measured yet: exact patching "
            "runs the model once per head ({n} heads here) and per layer and position, seconds "
            "of CPU on this model. **Compare with exact patching** measures it and says it under "
            "its button; a pair measured on **Which heads matter** first has it said here.",
            n=cfg.n_layers * cfg.n_heads,
        )
    else:
        r_ig, r_one, n = agreed
        said = tr(
            "**This pair's agreement with exact patching** (Which heads matter's grid): Pearson "
            "r = **{r_ig:.2f}** over the {n} heads for the grid below ({steps} "
            "integrated-gradient steps); **{r_one:.2f}** with one step (the clean run's "
            "gradient alone).",
            r_ig=r_ig,
            r_one=r_one,
            n=n,
            steps=cm.PAGE_STEPS,
        )
    return said + " " + tr(PUBLISHED)


def graph_view(result, cfg, drawn_lesson=None):
    """The circuit kept, drawn as a graph of its strongest edges (and the lesson's edge, where
    the circuit keeps it: ``drawn_lesson``, (source, target, score)), when it was measured."""
    if isinstance(result, str):
        return None
    edges, shown, _, keep = result
    kept = shown.edges.iloc[: cm.SHOWN_EDGES]
    named = None
    if drawn_lesson is not None:
        source, target, _ = drawn_lesson
        rows = shown.edges[(shown.edges["source"] == source) & (shown.edges["target"] == target)]
        if len(rows):  # the circuit keeps it: drawn, if further down than the graph's 60
            kept = kept if rows.index[0] in kept.index else kept.loc[[*kept.index, rows.index[0]]]
            named = (source, target)
    return circuit_figure(
        kept,
        cfg,
        shown.faithfulness,
        len(edges),
        share=GRAPH_SHARE,
        n_kept=len(shown.edges),
        lesson=named,
    )


def curve_view(result):
    """Faithfulness over circuit sizes, when it was measured."""
    if isinstance(result, str):
        return None
    return curve_figure(result[2], result[3], share=CURVE_SHARE)


def compare_sentence(result) -> str:
    """What the comparison of attribution with exact patching found, or why there is none."""
    if result is None or isinstance(result, str):
        return "" if result is None else "⚠️ " + md_literal(result)
    return tr(
        "Attribution against exact patching on this pair: Pearson r = **{r_ig:.2f}** over the "
        "heads with {steps} integrated-gradient steps, **{r:.2f}** with one step. "
        "Published: 0.98 for attention outputs on GPT-2 small's indirect-object task, 0.75 "
        "for the residual stream (Nanda 2023; arXiv 2508.21258): that model's, not this one's.",
        r=result[2],
        steps=cm.PAGE_STEPS,
        r_ig=result[3],
    )


# Faithfulness is a ratio, not a share bounded by 0 and 1 (docs/research.md): said beside a
# value outside them, where a reader would take it for an error.
FAITHFULNESS_OUTSIDE = (
    "Faithfulness can pass 100 % or fall below 0, and can drop as edges are added: an edge left "
    "out carries the corrupt run, and edges that pushed toward the corrupt answer, once left "
    "out, let the kept ones restore more than the whole model does (and kept ones of opposite "
    "signs undo each other)."
)


def edges_sentence(result, loaded, found, sel) -> str:
    """How many edges the circuit keeps and what they restore, with its lesson; or why none."""
    if isinstance(result, str):
        return "⚠️ " + md_literal(result)
    edges, shown, _, keep = result
    said = (
        "**{n} edges** kept of {total}: they alone restore **{share:.0%}** of the answer "
        "(faithfulness {value:.3f}; {steps} integrated-gradient steps)."
    )
    if keep == 1:
        said = (
            "**1 edge** kept of {total}: it alone restores **{share:.0%}** of the answer "
            "(faithfulness {value:.3f}; {steps} integrated-gradient steps)."
        )
    text = tr(
        said,
        n=keep,
        total=len(edges),
        share=shown.faithfulness,
        value=shown.faithfulness,
        steps=cm.PAGE_STEPS,
    )
    if shown.faithfulness > 1 or shown.faithfulness < 0:
        text += " " + tr(FAITHFULNESS_OUTSIDE)
    return text + lesson(loaded, found, sel, edges)


def circuit_download(kind: str, loaded, pair, result):
    """The edges as CSV, or everything measured as NPZ (ui/circuit_export.py)."""
    if isinstance(result, str):
        return None
    edges, shown, points, _ = result
    model = exports.model_part(loaded.model_id)
    meta = {"model": model, "measure": what_measured(loaded, pair)}
    if kind == "csv":
        data = stats_csv(edges, {**meta, "steps": cm.PAGE_STEPS})
    else:
        grids = {
            "attribution": cm.attribution_grid(loaded, pair, 1),
            "attribution_ig": cm.attribution_grid(loaded, pair),
            "attribution_residual": cm.residual_grid(loaded, pair),
        }
        composition = cm.composition(loaded, pair.stack)
        data = circuit_npz(edges, grids, composition, points, pair, shown, meta)
    digest = hashlib.sha256(repr(pair.key).encode()).hexdigest()[:10]
    return exports.EXPORTS.write(f"circuit_{model}_{digest}.{kind}", data)


TAB = Tab(
    "circuits",
    "How the heads connect",
    build,
    makers,
    # the edges the circuit keeps (0: the smallest circuit measured that restores 80 %)
    # (its slider ends at the model's edges: ui.handlers.selector_updates)
    fields={"keep": declared(0, Whole("edges", most=MAX_KEEP, digits=5, always=False))},
    depends={
        "circuit_said": ("stack",),
        # Compare measures exact patching: the agreement over the first grid is said at once
        "circuit_attr_said": ("stack", "compare"),
        "circuit_attr_plot": ("stack",),
        "circuit_resid_plot": ("stack",),
        "circuit_compare_said": ("compare",),
        "circuit_compare_plot": ("compare",),
        "circuit_edges_said": ("circuit", "keep"),
        "circuit_graph_plot": ("circuit", "keep"),
        "circuit_curve_plot": ("circuit", "keep"),
        "circuit_comp_plot": ("stack",),
        "circuit_csv": ("circuit",),
        "circuit_npz": ("circuit",),
    },
    lazy=(
        "circuit_compare_said",
        "circuit_compare_plot",
        "circuit_edges_said",
        "circuit_graph_plot",
        "circuit_curve_plot",
        "circuit_csv",
        "circuit_npz",
    ),
    own_queue=("compare", "circuit"),
    linked="circuit",  # a link naming a pair finds its circuit once the view is open
    # the pair's boxes are Which heads matter's: a head opened on the Attention tab (a click
    # on the graph) leaves the circuit found, shown, when the page comes back
    reads=("stack", "keep", "pair", "answer", "wrong", "read_at"),
    # the agreement over the first grid reads exact patching, measured on Which heads matter,
    # by Compare or by another page: the tab shows whether it was (ui/circuit_measures.py)
    measured=cm.exact_at_hand,
)
