"""Attribution patching and edge attribution of our own one-stack pre-norm models — the shipped
induction model, seed 001's decoder and seed 004's encoder — equal the same sums done by hand.

The references are test_circuits.py's (forward hooks keep each activation, autograd gives ∂m/∂
each, the first layer's input is blended from the corrupt run's to the clean run's for each
step, a head's q / k / v input's gradient is its projection slice's gradient carried back through
the layer's norm), pointed at this repository's modules instead of transformers': no named site
is used, so the sites, their batched call and the graph's bookkeeping are what is checked.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import analysis
import engine
import model
from analysis.attribution_patching import attribute_heads, attribute_residual
from analysis.circuits import PAGE_STEPS, edge_attribution
from model import PRESETS, Transformer
from tests.test_circuits import Family, logit_diff_of, reference_edges, reference_nodes
from tests.test_patching import answer_pair

TOL = 1e-4  # of a share, as test_circuits.py
TOL_FLOAT64 = 1e-9  # the random presets run in float64 (an edge's score is a float64)
TOL_GRID = 1e-6  # their [L, H] and [L, T] grids come back as float32


class Ours(Family):
    """Where our Transformer keeps what the references read (one stack, pre-norm)."""

    def __init__(self, net, metric_of):
        cfg = net.config
        stack = net.decoder if cfg.arch == "decoder" else net.encoder
        self.gpt2 = False
        self.blocks = list(stack.layers)
        self.n_heads, self.n_kv = cfg.n_heads, cfg.kv_heads
        self.d_model, self.d_head = cfg.d_model, cfg.d_head
        self.final = getattr(stack, "final_norm", None)
        self.hf = lambda **inputs: SimpleNamespace(logits=net(**inputs))
        self.metric_of = metric_of

    def attn(self, layer):
        return self.blocks[layer].self_attn

    def o_proj(self, layer):
        return self.attn(layer).w_o

    def norms(self, layer):
        block = self.blocks[layer]
        mlp_norm = block.add_norm3 if hasattr(block, "add_norm3") else block.add_norm2
        return block.add_norm1.norm, mlp_norm.norm

    def mlp(self, layer):
        return self.blocks[layer].ffn

    def projections(self, layer):
        return {f"{kind}{layer}": getattr(self.attn(layer), f"w_{kind}") for kind in "qkv"}

    def final_keep(self):
        # without a final norm the logits read the last layer's output
        return (self.final, "in") if self.final else (self.blocks[-1], "out")

    def projection(self, layer, kind, index):
        cols = slice(index * self.d_head, (index + 1) * self.d_head)
        return f"{kind}{layer}", cols, getattr(self.attn(layer), f"w_{kind}")


def sharpened(name):
    """A preset in float64 with its matrices 6 × the init's: at N(0, 0.02) every pattern is
    nearly uniform and a pair's metric moves by rounding only (as test_circuits_encdec.py)."""
    torch.manual_seed(0)
    net = Transformer(PRESETS[name]).eval()
    with torch.no_grad():
        for p in net.parameters():
            if p.dim() == 2:
                p.mul_(6.0)
    return net.double()


@pytest.fixture(scope="module")
def induction():
    """The page's copy pair on the shipped induction model, measured as the page measures it."""
    net = model.load_trained("induction")
    clean, corrupt = engine.encode(net, "qzxwv qzxw", "bhmtk qzxw")
    pair = analysis.patch_pair(net, clean, corrupt, answer=net.tokenizer.char_to_id("v"))
    metric = analysis.logit_diff(pair.answer, pair.wrong)
    return net, clean, corrupt, metric, Ours(net, logit_diff_of(pair.answer, pair.wrong))


@pytest.fixture(scope="module")
def decoder():
    """seed 001's pre-norm decoder (sinusoidal positions, ReLU, a final norm), a word changed."""
    net = sharpened("seed001-decoder")
    clean, corrupt = engine.encode(net, "the cat sat on the mat", "the dog sat on the mat")
    answer, wrong = answer_pair(net, clean, corrupt)
    metric = analysis.logit_diff(answer, wrong)
    return net, clean, corrupt, metric, Ours(net, logit_diff_of(answer, wrong))


@pytest.fixture(scope="module")
def encoder():
    """seed 004's pre-norm encoder (learned positions, an embedding norm, no final norm, no
    head): the metric is the output's cosine to the clean run's at one position."""
    net = sharpened("seed004-encoder")
    clean, corrupt = engine.encode(net, "the cat sat on the mat", "the dog sat on the mat")
    position = 2
    metric = analysis.cosine_to(net.trace(**clean), position)
    with torch.no_grad():
        ref = net(**clean)[0, position]

    def cosine_of(out):
        return torch.nn.functional.cosine_similarity(out[0, position], ref, dim=-1)

    return net, clean, corrupt, metric, Ours(net, cosine_of)


def assert_edges_equal(case, steps, tol):
    net, clean, corrupt, metric, fam = case
    df = edge_attribution(net, clean, corrupt, metric, steps=steps)
    edges = list(zip(df["source"], df["target"], strict=True))
    ref = reference_edges(fam, clean, corrupt, fam.metric_of, edges, steps=steps)
    ours = df.set_index(["source", "target"])["score"]
    worst = max(abs(ours[edge] - value) for edge, value in ref.items())
    assert worst < tol, worst
    kinds = {t.rsplit(".", 1)[-1] if "." in t else t for t in df["target"]}
    assert {"q", "k", "v", "logits"} <= kinds and any(t.endswith("MLP") for t in kinds)
    assert max(abs(v) for v in ref.values()) > 1e-3  # numbers, not zeros, were compared
    return df, ref


def test_every_edge_of_the_induction_model_with_the_pages_steps(induction):
    df, ref = assert_edges_equal(induction, PAGE_STEPS, TOL)
    assert len(df) == 262
    assert abs(ref[("L0H1", "L1H0.k")] - 0.066) < 0.005  # the lesson, by the reference too


def test_every_edge_of_seed_001s_decoder(decoder):
    assert_edges_equal(decoder, 3, TOL_FLOAT64)


def test_every_edge_of_seed_004s_encoder(encoder):
    assert_edges_equal(encoder, 3, TOL_FLOAT64)


@pytest.mark.parametrize("name", ["induction", "decoder", "encoder"])
@pytest.mark.parametrize("steps", [1, 3])
def test_node_attributions_equal_hooks_and_autograd(name, steps, request):
    net, clean, corrupt, metric, fam = request.getfixturevalue(name)
    heads = attribute_heads(net, clean, corrupt, metric, steps=steps)
    resid = attribute_residual(net, clean, corrupt, metric, steps=steps)
    ref_heads, ref_resid = reference_nodes(fam, clean, corrupt, fam.metric_of, steps)
    tol = TOL if name == "induction" else TOL_GRID
    torch.testing.assert_close(heads.double(), ref_heads.double(), atol=tol, rtol=0)
    torch.testing.assert_close(resid.double(), ref_resid.double(), atol=tol, rtol=0)
    if not (name == "encoder" and steps == 1):  # a cosine at its clean maximum has no gradient
        assert ref_heads.abs().max() > 1e-3
