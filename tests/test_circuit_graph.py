"""How the heads connect's graph as data (viz/circuit_graph.py, viz/circuit_layout.py), in both
of its layouts — the wide one and a phone's (``layout.meta.narrow``, taken as viz.screen takes
it): every edge runs from its writer's node to an arrowhead on its reader's rim; an edge into a
head passes through its input's letter (q, k, v), one per input; no edge passes over a node, a
letter or the end nodes' words but its own, measured here in px at each layout's least scale by
a distance of our own; the sign and the lesson's edge are in the legend, the lesson's edge drawn
over the others, opaque and at least 4 px; a phone's nodes are 32 px (a finger's target); a deep
model's graph draws the nodes its strongest edges touch and its title counts the rest.

Issue 52's class (1280 × 720 and 390 × 844): edges had no direction, q/k/v were told by colour
alone, the sign was unexplained, labels lay under edges, the lesson's key edge was 1.2 px and a
phone's nodes 16 px. Issue 51: SmolLM2-135M's graph (70,651 edges) drew 270 heads' names over
each other."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import analysis
import engine
import model
from analysis.circuits import PAGE_STEPS
from lang import speaking
from viz import circuit_graph, circuit_layout
from viz.circuit_layout import NARROW, WIDE, reach, target_node
from viz.measure import text_px
from viz.panels import narrow
from viz.screen import Screen, lay_out

COPY = ("qzxwv qzxw", "bhmtk qzxw")
LESSON = ("L0H1", "L1H0.k")


def ranked(edges: pd.DataFrame) -> pd.DataFrame:
    order = edges["score"].abs().sort_values(ascending=False, kind="stable").index
    return edges.loc[order].reset_index(drop=True)


@pytest.fixture(scope="module")
def induction():
    """The induction model's config and the copy pair's edges, strongest first."""
    net = model.load_trained("induction")
    clean, corrupt = engine.encode(net, *COPY)
    pair = analysis.patch_pair(net, clean, corrupt, answer=net.tokenizer.char_to_id("v"))
    metric = analysis.logit_diff(pair.answer, pair.wrong)
    return net.config, ranked(analysis.edge_attribution(net, clean, corrupt, metric, PAGE_STEPS))


@pytest.fixture(scope="module")
def encdec():
    """Seed 001's pre-norm encoder-decoder and its pair's edges (both stacks, the memory)."""
    net = engine.Engine().model("seed001-prenorm").net
    clean, corrupt = engine.encode(net, "the cat sat down", "the dog sat down")
    found = analysis.patch_pair(net, clean, corrupt)
    metric = analysis.logit_diff(found.answer, found.wrong, found.position)
    return net.config, ranked(analysis.edge_attribution(net, clean, corrupt, metric, PAGE_STEPS))


class Deep:
    """SmolLM2-135M's shape: 30 layers of 9 heads in 3 key/value groups, one stack."""

    n_layers, n_heads, kv_heads, arch = 30, 9, 3, "decoder"


def deep_edges() -> pd.DataFrame:
    """Edges of SmolLM2's kinds over many layers (as its ioi pair's strongest: a group's value,
    heads into logits, MLPs into MLPs), strongest first."""
    rows = [("embed", "L0MLP", 0.95), ("L23H3", "logits", 0.51), ("L0MLP", "L23KV1.v", 0.31),
            ("L29H1", "logits", 0.27), ("L20H0", "L20MLP", -0.2), ("L20H0", "L23H0.q", 0.13),
            ("L21MLP", "L23KV1.v", 0.11), ("L0MLP", "L17H4.q", 0.1), ("L17MLP", "L20KV0.v", 0.08),
            ("L0MLP", "L24KV1.k", -0.055)]  # fmt: skip
    rows += [(f"L{layer}MLP", "logits", 0.05 - 0.001 * layer) for layer in range(1, 29, 2)]
    rows += [(f"L{layer}H{layer % 9}", f"L{layer + 3}H2.q", 0.02) for layer in range(2, 26, 3)]
    return pd.DataFrame(rows, columns=["source", "target", "score"])


def both(fig) -> dict[str, dict]:
    """The figure's wide layout and its phone's, as plain JSON (the phone's as viz.screen takes
    it, without the rest of a page's layout)."""
    wide = json.loads(fig.to_json())
    phone = json.loads(json.dumps(wide))
    narrow(phone["data"], phone["layout"], phone["layout"]["meta"]["narrow"])
    return {"wide": wide, "phone": phone}


ROOMS = {"wide": WIDE, "phone": NARROW}


def edges_of(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if "edge" in (t.get("meta") or {}) and t.get("visible", True)]


def places_of(fig: dict) -> dict[str, tuple[float, float]]:
    nodes = fig["data"][-1]
    return {
        n: (x, y)
        for n, x, y in zip(nodes["customdata"], nodes["x"], nodes["y"], strict=True)
        if x is not None
    }


def letters_of(fig: dict) -> dict[tuple[str, str], dict]:
    return {
        tuple(a["meta"]["input"]): a
        for a in fig["layout"]["annotations"]
        if "input" in (a.get("meta") or {})
    }


def distance(p, a, b) -> float:
    """px from point p to segment ab."""
    (px, py), (ax, ay), (bx, by) = p, a, b
    dx, dy = bx - ax, by - ay
    t = 0.0 if dx == dy == 0 else max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy)
                                              / (dx * dx + dy * dy)))  # fmt: skip
    return math.hypot(px - ax - t * dx, py - ay - t * dy)


def segment_hits_box(a, b, box) -> bool:
    """Whether segment ab passes through the box (left, bottom, right, top), sampled 1 px."""
    steps = max(1, math.ceil(math.hypot(b[0] - a[0], b[1] - a[1])))
    for k in range(steps + 1):
        x, y = a[0] + (b[0] - a[0]) * k / steps, a[1] + (b[1] - a[1]) * k / steps
        if box[0] < x < box[2] and box[1] < y < box[3]:
            return True
    return False


def crossings(fig: dict, room) -> list[str]:
    """Everything an edge passes over that is not its own, in px at the room's least scale:
    another node's marker, another input's letter, an end node's words."""
    px = lambda p: (p[0] * room.sx, p[1] * room.sy)  # noqa: E731
    places = places_of(fig)
    letters = letters_of(fig)
    half_w, half_h = 0.35 * room.letter + 2, 0.65 * room.letter + 1  # a bold letter's box
    words = []
    for note in fig["layout"]["annotations"]:
        if note.get("xshift") is None and note.get("yshift") is None:
            continue  # a letter or a stack's name
        w, h = text_px(note["text"], room.letter), 1.3 * room.letter
        x, y = px((note["x"], note["y"]))
        x += note.get("xshift", 0) - {"right": w, "left": 0, "center": w / 2}[note["xanchor"]]
        y += note.get("yshift", 0) - {"top": h, "bottom": 0, "middle": h / 2}[note["yanchor"]]
        words.append((note["text"], (x, y, x + w, y + h)))
    found = []
    for edge in edges_of(fig):
        source, target = edge["meta"]["edge"]
        node, kind = edge["meta"]["node"], edge["meta"]["kind"]
        points = [px(p) for p in zip(edge["x"], edge["y"], strict=True)]
        segments = list(zip(points, points[1:], strict=False))
        for name, place in places.items():
            if name in (source, node):
                continue
            if min(distance(px(place), a, b) for a, b in segments) < reach(name, room.node):
                found.append(f"{source} → {target} over node {name}")
        for key, note in letters.items():
            x, y = px((note["x"], note["y"]))
            box = (x - half_w, y - half_h, x + half_w, y + half_h)
            if key != (node, kind) and any(segment_hits_box(a, b, box) for a, b in segments):
                found.append(f"{source} → {target} over letter {key}")
        for text, box in words:
            if any(segment_hits_box(a, b, box) for a, b in segments):
                found.append(f"{source} → {target} over {text!r}")
    return found


def test_every_edge_ends_in_an_arrowhead_on_its_readers_rim(induction):
    config, edges = induction
    fig = circuit_graph.circuit_figure(edges.iloc[:30], config, 0.98, len(edges), lesson=LESSON)
    for size, drawn in both(fig).items():
        room, places = ROOMS[size], places_of(drawn)
        lines = edges_of(drawn)
        assert len(lines) == 30, size
        for edge in lines:
            source, target = edge["meta"]["edge"]
            node = target_node(target, config)[0]
            assert (edge["x"][0], edge["y"][0]) == pytest.approx(places[source], abs=1e-3)
            assert (edge["x"][-1], edge["y"][-1]) == pytest.approx(places[node], abs=1e-3)
            marker = edge["marker"]  # one arrowhead, on the last point, along the last segment
            assert marker["symbol"] == "arrow" and marker["angleref"] == "previous"
            assert marker["size"][-1] == room.arrow and not any(marker["size"][:-1])
            # its tip on the reader's rim: a circle's radius, a square's edge (up to √2 · ½)
            assert room.node / 2 < marker["standoff"] <= reach(node, room.node) + 1
            assert edge["line"]["backoff"] == 0 and edge["line"]["width"] >= 2.5


def test_every_input_an_edge_enters_is_named_where_its_edges_meet(induction, encdec):
    for config, edges in (induction, encdec):
        fig = circuit_graph.circuit_figure(edges.iloc[:60], config, 0.9, len(edges))
        for size, drawn in both(fig).items():
            letters = letters_of(drawn)
            entered = set()
            for edge in edges_of(drawn):
                node, kind = edge["meta"]["node"], edge["meta"]["kind"]
                if kind not in ("q", "k", "v"):
                    continue
                entered.add((node, kind))
                note = letters[node, kind]  # its letter, in its colour, where its edges meet
                assert note["text"] == f"<b>{kind}</b>", size
                assert note["font"]["color"] == circuit_graph.KIND_COLOURS[kind]
                assert (edge["x"][-2], edge["y"][-2]) == pytest.approx((note["x"], note["y"]))
            assert set(letters) == entered and entered, size  # one letter per input, each used


def test_no_edge_passes_over_a_node_a_letter_or_words_but_its_own(induction, encdec):
    """A line under a node reads as an edge into it (L0H1's node over embeddings → L1H0.v
    reads as a path through L0H1); a letter or a word under a line is hidden by it."""
    for config, edges, n in ((*induction, 60), (*encdec, 60), (Deep, deep_edges(), 60)):
        fig = circuit_graph.circuit_figure(edges.iloc[:n], config, 0.9, 70_651, lesson=None)
        for size, drawn in both(fig).items():
            assert not crossings(drawn, ROOMS[size]), (config, size, crossings(drawn, ROOMS[size]))


def test_the_legend_says_the_sign_and_the_lessons_edge_stands_over_the_others(induction):
    config, edges = induction
    fig = circuit_graph.circuit_figure(edges.iloc[:30], config, 0.98, len(edges), lesson=LESSON)
    for drawn in both(fig).values():
        legend = {t["name"]: t for t in drawn["data"] if t.get("showlegend")}
        dotted = legend["dotted: negative (toward the corrupt answer)"]
        assert dotted["line"]["dash"] == "dot" and dotted.get("visible", True)
        for edge in edges_of(drawn):
            score = float(edge["hovertemplate"].split(": ")[1].split("<")[0])
            assert edge["line"]["dash"] == ("dot" if score < 0 else "solid")
        lines = [t for t in drawn["data"] if (t.get("meta") or {}).get("edge") or
                 (t.get("meta") or {}).get("casing")]  # fmt: skip
        key, casing = lines[-1], lines[-2]  # last of the edges, over a white casing
        assert tuple(key["meta"]["edge"]) == LESSON and casing["meta"]["casing"]
        assert key["line"]["width"] >= 4.0 and key["opacity"] == 1.0
        assert key["line"]["color"] == circuit_graph.KIND_COLOURS["k"] == "#d62728"
        assert casing["line"] == {"color": "white", "width": key["line"]["width"] + 4,
                                  "backoff": 0}  # fmt: skip
        assert legend["the lesson: L0H1 → L1H0.k"]["line"]["width"] >= 4.0
    with speaking("zh-CN"):
        zh = json.loads(circuit_graph.circuit_figure(edges.iloc[:30], config, 0.98, len(edges),
                                                     lesson=LESSON).to_json())  # fmt: skip
    names = [t["name"] for t in zh["data"] if t.get("showlegend")]
    assert any(n.startswith("虚线") for n in names) and "这一课：L0H1 → L1H0.k" in names


def test_a_phones_nodes_are_touch_targets_named_inside_and_its_graph_flows_down(induction):
    config, edges = induction
    fig = circuit_graph.circuit_figure(edges.iloc[:30], config, 0.98, len(edges), lesson=LESSON)
    drawn = both(fig)
    for size, least in (("wide", 40), ("phone", 32)):
        nodes = drawn[size]["data"][-1]
        assert min(nodes["marker"]["size"]) >= least >= 32  # every node, touched or not
        i = nodes["customdata"].index("L1H0")
        assert nodes["text"][i] == "L1<br>H0" and nodes["textposition"] == "middle center"
        assert nodes["text"][nodes["customdata"].index("L0MLP")] == "L0<br>MLP"
    wide, phone = places_of(drawn["wide"]), places_of(drawn["phone"])
    assert wide["embed"][0] < wide["L1H0"][0] < wide["logits"][0]  # left to right
    assert phone["embed"][1] > phone["L1H0"][1] > phone["logits"][1]  # top to bottom
    # every node of the model, each at least a node apart from the next at its least scale
    for size, room in ROOMS.items():
        at = [(x * room.sx, y * room.sy) for x, y in places_of(drawn[size]).values()]
        closest = min(math.dist(a, b) for i, a in enumerate(at) for b in at[i + 1 :])
        assert closest >= room.node + 4, size


def test_the_phone_layout_is_taken_below_the_wide_width_and_never_presented(induction):
    config, edges = induction
    fig = circuit_graph.circuit_figure(edges.iloc[:30], config, 0.98, len(edges), share=0.6)
    below = fig.layout.meta["narrow"]["below"]
    across = fig.layout.xaxis.range[1] - fig.layout.xaxis.range[0]
    assert below == math.ceil(across * WIDE.sx + 20)

    def laid(screen):
        return lay_out(json.loads(fig.to_json()), screen)["layout"]

    page = laid(Screen(1240, 1280, 720))  # the graph's column: 744 px, the wide layout
    assert list(page["xaxis"]["range"]) == list(fig.layout.xaxis.range)
    assert "narrow" not in page["meta"]  # the page never reads it: not sent
    phone = laid(Screen(358, 390, 844))
    assert phone["yaxis"]["range"][1] - phone["yaxis"]["range"][0] > 10  # flowing down
    assert phone["meta"]["slide"]["layout"]["yaxis"]["range"] == phone["yaxis"]["range"]
    presented = laid(Screen.parse("800x1280x720xp"))  # 480 px: narrower, but on a projector
    assert list(presented["xaxis"]["range"]) == list(fig.layout.xaxis.range)


def test_a_deep_models_graph_draws_the_nodes_its_strongest_edges_touch():
    """SmolLM2's shape: each layout draws as many of the strongest edges as its scale holds
    (only the nodes they touch, each named inside a node of full size, q/k/v kept), and its
    title counts them of all; the wide one within 1,100 px at 40 px a unit, a phone's 300 px."""
    edges = deep_edges()
    fig = circuit_graph.circuit_figure(edges, Deep, 0.9, 70_651, n_kept=500)
    for size, drawn in both(fig).items():
        room, lines = ROOMS[size], edges_of(drawn)
        touched = set()
        for edge in lines:
            touched |= {edge["meta"]["edge"][0], edge["meta"]["node"]}
        shown = set(places_of(drawn)) - {"embed", "logits"}
        assert shown == touched - {"embed", "logits"}, size  # only the nodes the edges touch
        assert (
            [tuple(e["meta"]["edge"]) for e in lines]
            == [  # the strongest, in order
                tuple(r) for r in edges[["source", "target"]].values[: len(lines)]
            ]
        )
        title = drawn["layout"]["title"]["text"]
        assert f"The circuit of 500 edges (of 70651): its {len(lines)} strongest drawn" in title
        across = drawn["layout"]["xaxis"]["range"]
        assert across[1] - across[0] <= (27 if size == "wide" else 7.5), size
        assert set(drawn["data"][-1]["marker"]["size"]) == {room.node} and letters_of(drawn)
        # as many as fit: one more edge's nodes would not
        tight = circuit_layout.compact(room, circuit_graph.COMPACT_SPAN)
        more = circuit_layout.plan(Deep, edges.iloc[: len(lines) + 1], tight, compact=True)
        assert len(lines) >= 6 and not more.fits(circuit_graph.COMPACT_FLOW), (size, len(lines))
    assert len(edges_of(both(fig)["wide"])) > len(edges_of(both(fig)["phone"]))


def test_edges_and_letters_keep_their_kind_names_for_the_hover(induction):
    config, edges = induction
    fig = json.loads(circuit_graph.circuit_figure(edges.iloc[:10], config, 0.9, 262).to_json())
    for edge in edges_of(fig):
        source, target = edge["meta"]["edge"]
        named = circuit_layout.hover_name
        assert edge["hovertemplate"].startswith(f"{named(source)} → {named(target)}: ")


def test_presented_at_720p_the_nodes_and_their_names_grow_with_the_rooms_text(induction):
    """Issue 52: presented at 1280 × 720 the nodes' names were the page's 13 px (the room's
    other texts 18): the room grows the nodes and their names by its text over theirs, as far
    as its px a unit exceed the least the lines were routed at; each arrowhead's tip moves out
    to its grown reader's rim and the end nodes' words out beside them; the page keeps its own
    sizes, and a figure that declares no growth gets none."""
    config, edges = induction
    fig = circuit_graph.circuit_figure(
        edges.iloc[:26], config, 0.85, len(edges), share=0.6, lesson=LESSON
    )
    laid = lay_out(json.loads(fig.to_json()), Screen.parse("740x1280x720xp"))
    room = laid["layout"]["meta"]["present"]
    big, grown, data = room["layout"], room["traces"], laid["data"]
    nodes = len(data) - 1
    assert data[nodes]["textfont"]["size"] == WIDE.text  # the page's
    text = grown[str(nodes)]["textfont"]["size"]
    assert text >= 720 / 45, text
    factor = text / WIDE.text
    across = (big["width"] - 32) / (big["xaxis"]["range"][1] - big["xaxis"]["range"][0])
    assert factor <= across / WIDE.sx  # never more than the room's scale across
    assert grown[str(nodes)]["marker"]["size"] == pytest.approx(
        [s * factor for s in data[nodes]["marker"]["size"]], abs=0.06
    )
    arrows = [i for i, t in enumerate(data) if "edge" in (t.get("meta") or {})
              and t.get("visible", True) is not False]  # fmt: skip
    assert len(arrows) == 26 and all(str(i) in grown for i in arrows)
    for i in arrows:
        page, room_marker = data[i]["marker"], grown[str(i)]["marker"]
        assert room_marker["standoff"] == pytest.approx(
            (page["standoff"] - 1) * factor + 1, abs=0.06
        )
    page_words = [a for a in fig.to_plotly_json()["layout"]["annotations"] if a.get("xshift")]
    room_words = [a for a in big["annotations"] if a.get("xshift")]
    assert [a["xshift"] for a in room_words] == pytest.approx(
        [a["xshift"] * factor for a in page_words], abs=0.06
    )
    assert all(a["font"]["size"] >= 720 / 45 for a in big["annotations"])
    # the deck's offline slide draws its room's nodes too (ui.deck.as_slide)
    from ui.deck import as_slide

    slide = as_slide(laid)["data"][nodes]
    assert slide["textfont"]["size"] > WIDE.text
    assert slide["textfont"] == laid["layout"]["meta"]["slide"]["traces"][str(nodes)]["textfont"]
    # Compare's figure declares none: drawn with the page's traces
    plain = {"data": [{"type": "scatter", "x": [0], "y": [0], "marker": {"size": [8]}}],
             "layout": {"xaxis": {"range": [0, 1]}, "yaxis": {"range": [0, 1]}}}  # fmt: skip
    assert (
        "traces" not in lay_out(plain, Screen.parse("740x1280x720xp"))["layout"]["meta"]["present"]
    )
