"""The whole model: encoder-only, decoder-only or encoder-decoder, with trace()."""

from __future__ import annotations

import torch
from torch import nn

from model.attention import ABLATIONS, HeadAblation, KeyValues, head_masks
from model.config import TransformerConfig
from model.embeddings import TokenEmbedding, TransformerEmbedding
from model.generate import generate
from model.masks import (
    causal_mask,
    cross_mask,
    padding_mask,
    padding_mask_query_key,
    sliding_window_mask,
)
from model.norms import NORMS
from model.patch import Logits, Patch
from model.replay import Replay
from model.sites import Sites, prefix
from model.stacks import Decoder, Encoder, Pooler
from model.tokenizers import CharTokenizer
from model.trace import Trace

HeadMask = torch.Tensor | dict[str, torch.Tensor] | None


def _mask_or_ones(mask: torch.Tensor | None, ids: torch.Tensor) -> torch.Tensor:
    """A tokenizer's attention_mask on the ids' device; all ones (no padding) when omitted."""
    return torch.ones_like(ids) if mask is None else mask.to(ids.device)


def _hiding(mask: torch.Tensor | None) -> torch.Tensor | None:
    """The mask the layers apply: None when it hides nothing (one text, no padding), asked once
    per pass rather than in every layer."""
    return None if mask is None or bool(mask.all()) else mask


class Transformer(nn.Module):
    """The from-scratch Transformer of the seed tutorials, in any of the three families.

    Built in eval mode with seeded random weights (``config.seed``); ``load_bert`` fills it with a
    checkpoint's. The tokenizer (character-level unless given) turns ids back into token strings.
    """

    def __init__(self, config: TransformerConfig, tokenizer=None) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer if tokenizer is not None else CharTokenizer(config.max_len)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            # One token embedding for both stacks: source and target share a vocabulary, as in the
            # paper (§3.4) and seed 001 (one wte feeds encoder and decoder).
            self.embedding = TransformerEmbedding(
                config, TokenEmbedding(config.vocab_size, config.d_model)
            )
            self.encoder = Encoder(config) if config.has_encoder else None
            self.decoder = Decoder(config) if config.has_decoder else None
            self.lm_head = (
                nn.Linear(config.d_model, config.vocab_size, bias=config.lm_head_bias)
                if config.lm_head
                else None
            )
            if config.tie_lm_head:  # GPT-2: one matrix reads tokens in and writes logits out
                self.lm_head.weight = self.embedding.tok_emb.weight
            self.pooler = Pooler(config.d_model) if config.pooler else None
            self.token_classifier = (
                nn.Linear(config.d_model, len(config.token_labels)) if config.token_labels else None
            )
            self.apply(self._init_weights)
        self.eval()

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # seed 001's _init_weights: N(0, 0.02) for Linear and Embedding weights, zero biases.
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # ---- parameter counts (seed 001's get_num_params) -------------------------------------------
    def get_num_params(self, non_embedding: bool = False) -> int:
        """All parameters; with non_embedding=True, minus the token embedding table (seed 001)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.embedding.tok_emb.weight.numel()
        return n

    def param_counts(self) -> dict[str, int]:
        """Parameters per component, in data-flow order; the values sum to get_num_params()."""
        groups: dict[str, int] = {}

        def add(name: str, module: nn.Module | None) -> None:
            if module is not None:
                groups[name] = sum(p.numel() for p in module.parameters())

        emb = self.embedding
        add("token embedding", emb.tok_emb)
        add("position embedding", emb.pos_emb)  # 0 for sinusoidal: a buffer, not a parameter
        add("token-type embedding", emb.type_emb)
        add("embedding LayerNorm", emb.norm)
        for name, stack in (("encoder", self.encoder), ("decoder", self.decoder)):
            if stack is None:
                continue
            layers = list(stack.layers)
            add(f"{name} self-attention", nn.ModuleList(layer.self_attn for layer in layers))
            if name == "decoder" and layers[0].cross_attn is not None:
                add("decoder cross-attention", nn.ModuleList(layer.cross_attn for layer in layers))
            add(f"{name} FFN", nn.ModuleList(layer.ffn for layer in layers))
            norms = [m for layer in layers for m in layer.modules() if isinstance(m, NORMS)]
            kind = "RMSNorm" if self.config.norm_kind == "rms" else "LayerNorm"
            add(f"{name} Add & Norm {kind}s", nn.ModuleList(norms))
            add(f"{name} final {kind}", stack.final_norm)
        if not self.config.tie_lm_head:  # a tied head's matrix is the token embedding's
            add("LM head", self.lm_head)
        add("pooler", self.pooler)
        add("token classifier", self.token_classifier)
        return groups

    # ---- forward and trace -----------------------------------------------------------------------
    def _check_ids(self, ids: torch.Tensor, what: str) -> torch.Tensor:
        if ids.dim() != 2:
            raise ValueError(f"{what} must be [batch, tokens], got shape {tuple(ids.shape)}.")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(
                f"{what} has ids outside this model's vocabulary of {self.config.vocab_size}."
            )
        return ids.to(self.device)

    def _run(
        self,
        ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        tgt_ids: torch.Tensor | None,
        tgt_attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        padding: str,
        trace: bool = False,
        positions: bool = True,
        head_mask: HeadMask = None,
        ablation: str = "zero",
        patch: Patch | None = None,
        sites: Sites | None = None,
    ) -> dict:
        """One forward pass; returns every intermediate, keyed by stack.

        With trace=True, every layer writes its attention pattern straight into one
        [L, B, H, T_q, T_k] tensor per stack (run["slots"]), so nothing is copied afterwards.
        A patch (model/patch.py) replaces activations; without a trace the layers before its
        start are not run. Sites (model/sites.py) read, replace or differentiate named ones.
        """
        if padding not in ("keys", "query_and_key"):
            raise ValueError("padding must be 'keys' (variant b) or 'query_and_key' (variant a).")
        if ablation not in ABLATIONS:
            raise ValueError(f"ablation must be one of {ABLATIONS}, not {ablation!r}.")
        ids = self._check_ids(ids, "input_ids")
        src_mask = _mask_or_ones(attention_mask, ids)
        run: dict = {"ids": ids, "trace": trace, "padding": padding, "slots": {}}
        run.update(positions=bool(positions), ablation=ablation)
        run["head_mask"] = head_masks(self.config, head_mask)
        if patch is not None and patch.stack not in self._stacks():
            raise ValueError(f"Patch names {patch.stack!r}; this model's are {self._stacks()}.")
        run["patch"], run["sites"] = patch, sites
        for key in ("embeddings", "masks", "resid", "outputs"):
            run[key] = {}
        if self.config.arch == "decoder":  # the decoder reads the (only) text
            self._decode(run, ids, src_mask, memory=None, src_mask=None)
            return run
        if token_type_ids is not None:
            token_type_ids = token_type_ids.to(ids.device)
        memory = self._encode(run, ids, src_mask, token_type_ids)
        if self.config.arch == "encoder":
            return run
        if tgt_ids is None:
            raise ValueError("An encoder-decoder model needs target ids (tgt_ids) for its decoder.")
        tgt_ids = self._check_ids(tgt_ids, "tgt_ids")
        if tgt_ids.shape[0] != ids.shape[0]:
            raise ValueError("Source and target batches must have the same number of texts.")
        self._decode(run, tgt_ids, _mask_or_ones(tgt_attention_mask, tgt_ids), memory, src_mask)
        return run

    def _stacks(self) -> list[str]:
        """This model's attention stacks: "encoder", "decoder", "cross"."""
        cfg = self.config
        present = (cfg.has_encoder, cfg.has_decoder, cfg.arch == "encoder-decoder")
        return [s for s, here in zip(("encoder", "decoder", "cross"), present, strict=True) if here]

    def _slots(
        self, run: dict, name: str, t_k: int, ref: torch.Tensor, query_mask: torch.Tensor
    ) -> list:
        """Per-layer options of one attention stack: a view of one preallocated
        (L, B, H, T_q, T_k) pattern tensor when tracing (else "fused": the fused kernel), a
        HeadAblation where head_mask asks, the patch's z callable where it patches a head of
        this stack (model/patch.py)."""
        keep = run["head_mask"].get(name)
        patch = run["patch"]
        patch = patch if patch is not None and patch.stack == name and patch.z else None
        cfg = self.config
        # A pass that returns no weights computes the contexts by the fused kernel.
        slots: list[dict] = [{"fused": not run["trace"]} for _ in range(cfg.n_layers)]
        if run["trace"]:
            batch, t_q = query_mask.shape
            shape = (cfg.n_layers, batch, cfg.n_heads, t_q, t_k)  # (L, B, H, T_q, T_k)
            pattern = torch.empty(shape, dtype=ref.dtype, device=ref.device)
            run["slots"][name] = pattern
            for i, slot in enumerate(slots):
                slot["pattern"] = pattern[i]
        if keep is not None:
            for i, slot in enumerate(slots):
                slot["ablation"] = HeadAblation(keep[i], run["ablation"], query_mask)
        if patch is not None:
            for i, slot in enumerate(slots):
                slot["patch"] = patch.z_at(name, i)
        return slots

    def _resid_slots(self, run: dict, stream: str, layer_slots: list | None) -> list | None:
        """Layer slots with the patch's "resid_pre" callables for this stream (model/patch.py)."""
        patch = run["patch"]
        if patch is None or patch.stream != stream or not patch.resid_pre:
            return layer_slots
        layer_slots = layer_slots or [{} for _ in range(self.config.n_layers)]
        for i, slot in enumerate(layer_slots):
            slot["resid_pre"] = patch.resid_at(stream, i)
        return layer_slots

    def _site_slots(self, run: dict, stream: str, layer_slots: list | None) -> list | None:
        """Layer slots with the call's sites, each layer's named from its prefix: "blocks.{l}."
        for a model of one stack, "encoder.{l}." / "decoder.{l}." for an encoder-decoder."""
        sites = run["sites"]
        if sites is None:
            return layer_slots
        name = prefix(self.config, stream)
        layer_slots = layer_slots or [{} for _ in range(self.config.n_layers)]
        for i, slot in enumerate(layer_slots):
            slot["sites"] = sites.at(f"{name}.{i}.")
        return layer_slots

    @staticmethod
    def _start(run: dict, stream: str) -> int:
        """The first layer of a stream to run: a patch's start, when no trace wants the rest."""
        patch = run["patch"]
        if run["trace"] or patch is None or patch.stream != stream:
            return 0
        return patch.start

    @staticmethod
    def _padding(run: dict, q_mask: torch.Tensor, k_mask: torch.Tensor) -> torch.Tensor:
        """Seed 003's variant (b) (keys only, what BERT does) or (a) (queries and keys)."""
        if run["padding"] == "keys":
            return padding_mask(k_mask, q_mask.shape[1])  # (B, T_q, T_k)
        return padding_mask_query_key(q_mask, k_mask)

    def _encode(self, run, ids, src_mask, token_type_ids) -> torch.Tensor:
        x, parts = self.embedding(ids, token_type_ids, run["positions"])
        parts["output"] = x
        mask = self._padding(run, src_mask, src_mask)  # (B, T, T)
        slots = self._slots(run, "encoder", ids.shape[1], x, src_mask)
        layer_slots = [{"self": s} for s in slots] if slots else None
        layer_slots = self._resid_slots(run, "encoder", layer_slots)
        layer_slots = self._site_slots(run, "encoder", layer_slots)
        rotary = self.embedding.rotation(ids.shape[1], run["positions"])
        start = self._start(run, "encoder")
        memory, resid = self.encoder(x, _hiding(mask), layer_slots, rotary, start)
        run["embeddings"]["encoder"], run["masks"]["encoder"] = parts, mask
        run["resid"]["encoder"] = resid
        run["outputs"]["encoder"] = memory
        if self.pooler is not None:
            run["pooled"] = self.pooler(memory)
        return memory

    def _decode(self, run, dec_ids, dec_mask, memory, src_mask) -> None:
        y, parts = self.embedding(dec_ids, None, run["positions"])
        parts["output"] = y
        t_tgt = dec_ids.shape[1]
        self_mask = self._padding(run, dec_mask, dec_mask) & causal_mask(t_tgt, y.device)
        if self.config.sliding_window is not None:  # Mistral: the last sliding_window keys only
            self_mask = self_mask & sliding_window_mask(t_tgt, self.config.sliding_window, y.device)
        self_slots = self._slots(run, "decoder", t_tgt, y, dec_mask)
        cross_slots, memory_mask = None, None
        if memory is not None:
            # Target queries over source keys: padded source keys are hidden (cross_mask); in
            # variant (a) padded target queries are emptied too.
            memory_mask = (
                cross_mask(dec_mask, src_mask)
                if run["padding"] == "keys"
                else padding_mask_query_key(dec_mask, src_mask)
            )  # (B, T_tgt, T_src)
            cross_slots = self._slots(run, "cross", memory.shape[1], y, dec_mask)
            run["masks"]["cross"] = memory_mask
        layer_slots = None
        if self_slots is not None or cross_slots is not None:
            layer_slots = [
                {
                    "self": self_slots[i] if self_slots else None,
                    "cross": cross_slots[i] if cross_slots else None,
                }
                for i in range(self.config.n_layers)
            ]
        layer_slots = self._resid_slots(run, "decoder", layer_slots)
        layer_slots = self._site_slots(run, "decoder", layer_slots)
        rotary = self.embedding.rotation(t_tgt, run["positions"])
        start = self._start(run, "decoder")
        y, resid = self.decoder(
            y, _hiding(self_mask), memory, _hiding(memory_mask), layer_slots, rotary, start
        )
        run["embeddings"]["decoder"], run["masks"]["decoder"] = parts, self_mask
        run["resid"]["decoder"] = resid
        run["outputs"]["decoder"] = y
        run["dec_ids"], run["dec_mask"] = dec_ids, dec_mask

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        tgt_ids: torch.Tensor | None = None,
        tgt_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        positions: bool = True,
        head_mask: HeadMask = None,
        ablation: str = "zero",
        patch: Patch | None = None,
        sites: Sites | None = None,
    ) -> torch.Tensor:
        """Logits [B, T, vocab] with an LM head, per-token label logits [B, T, n_labels] with a
        token classifier, else the last hidden state [B, T, d_model]. Options as in trace();
        ``sites`` reads, replaces or differentiates named activations (model/sites.py)."""
        run = self._run(
            input_ids,
            attention_mask,
            tgt_ids,
            tgt_attention_mask,
            token_type_ids,
            "keys",
            positions=positions,
            head_mask=head_mask,
            ablation=ablation,
            patch=patch,
            sites=sites,
        )
        last = run["outputs"]["decoder" if self.config.has_decoder else "encoder"]
        if self.lm_head is not None:
            return self.lm_head(last)
        if self.token_classifier is not None:
            return self.token_classifier(last)
        return last

    def generate(
        self,
        src_ids: torch.Tensor,
        max_new_tokens: int = 16,
        attention_mask: torch.Tensor | None = None,
        return_trace: bool = False,
        use_cache: bool = True,
        **options,
    ):
        """Greedy decoding; see model.generate.generate for arguments and the returned ids."""
        return generate(
            self, src_ids, max_new_tokens, attention_mask, return_trace, use_cache, **options
        )

    def step(
        self,
        ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor,
        cache: list[KeyValues],
        positions: bool = True,
        head_mask: HeadMask = None,
    ) -> torch.Tensor:
        """A decoder-only model's pass over a text's new tokens, which attend to its earlier ones
        through ``cache`` (greedy continuation with a key/value cache, model/generate.py).

        Args:
            ids: [B, T_new] the new tokens; position_ids: [B, T_new] their positions.
            mask: bool [B, T_new, T_past + T_new], True = may attend (the cached keys first).
            cache: one KeyValues per layer, the caller's: each layer's attention reads the keys
                and values kept there and adds the new tokens' (empty at the first call).
            positions, head_mask: as in trace(); a removed head's context is zeroed.
        Returns:
            The decoder's output [B, T_new, d_model] (after its final norm), as forward() computes
            it for those tokens with the whole text before them.
        """
        if self.config.arch != "decoder":
            raise ValueError("step() continues a decoder-only model's text.")
        ids = self._check_ids(ids, "ids")
        x, _ = self.embedding(ids, None, positions, position_ids)
        keep = head_masks(self.config, head_mask).get("decoder")
        slots = []
        for i, kept in enumerate(cache):
            self_slot: dict = {"cache": kept, "fused": True}
            if keep is not None:
                self_slot["ablation"] = HeadAblation(keep[i], "zero")
            slots.append({"self": self_slot, "cross": None})
        rotary = self.embedding.rotation(ids.shape[1], positions, position_ids)
        y, _ = self.decoder(x, mask.to(x.device), None, None, slots, rotary)
        return y

    def replay(self) -> Replay:
        """This model's stacks as a Replay (model/replay.py): it recomputes a trace's internals."""
        stacks = {"encoder": self.encoder, "decoder": self.decoder}
        return Replay({k: v for k, v in stacks.items() if v is not None}, self.embedding.rotation)

    def trace(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        tgt_ids: torch.Tensor | None = None,
        tgt_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        padding: str = "keys",
        with_logits: bool = False,
        positions: bool = True,
        head_mask: HeadMask = None,
        ablation: str = "zero",
        patch: Patch | None = None,
    ) -> Trace:
        """Run once and return every intermediate in a new Trace (safe on a shared model).

        Args:
            input_ids: [B, T] source ids (the decoder's ids for a decoder-only model).
            attention_mask: [B, T] 1 = real token, 0 = padding; all ones when omitted.
            tgt_ids, tgt_attention_mask: [B, T_tgt] the decoder's input, for encoder-decoder models.
            token_type_ids: [B, T] BERT segment ids.
            padding: "keys" hides padded keys only (seed 003 variant b, what BERT does);
                "query_and_key" also empties padded query rows (variant a), for teaching.
            with_logits: also keep LM-head logits [B, T, vocab] (large for big vocabularies).
            positions: False runs the same weights without the positional-encoding term.
            head_mask: [L, H] for the first stack (encoder; decoder when decoder-only), or a dict
                {"encoder" | "decoder" | "cross": [L, H]}: 1 keeps a head, 0 removes its context
                z_h before the concat and W_O (HF's convention). Its weights are still reported.
            ablation: "zero" (HF's) or "mean": a removed head's context becomes its mean over the
                real query positions of the same text (mean-ablation).
            patch: activations from another run put in place of this run's, for each batch item
                its own (model/patch.py: a head's context z, the stream entering a layer).
        """
        if self.training:
            raise RuntimeError(
                "trace() shows the model as it predicts: call model.eval() first (dropout is on)."
            )
        with torch.no_grad():
            run = self._run(
                input_ids,
                attention_mask,
                tgt_ids,
                tgt_attention_mask,
                token_type_ids,
                padding,
                True,
                positions=positions,
                head_mask=head_mask,
                ablation=ablation,
                patch=patch,
            )
            trace = self._new_trace(
                run,
                attention_mask,
                positions=run["positions"],
                head_mask={k: v.cpu() for k, v in run["head_mask"].items()},
                ablation=run["ablation"],
            )
            if "dec_ids" in run and self.config.arch == "encoder-decoder":
                trace.tgt_ids, trace.tgt_attention_mask = run["dec_ids"], run["dec_mask"]
                trace.tgt_tokens = [
                    self.tokenizer.convert_ids_to_tokens(row) for row in run["dec_ids"].tolist()
                ]
            for stack, resid in run["resid"].items():
                trace.attentions[stack] = run["slots"][stack].transpose(0, 1)  # (B, L, H, T, T)
                trace.masks[stack] = run["masks"][stack]
                hidden = torch.stack(resid, dim=1)  # (B, L+1, T, d_model)
                trace.hidden_states[stack] = hidden
                # Without a final LayerNorm the output is the last hidden state: keep one copy.
                last = run["outputs"][stack]
                trace.outputs[stack] = hidden[:, -1] if last is resid[-1] else last
                parts = dict(run["embeddings"][stack])
                parts["output"] = hidden[:, 0]  # the same tensor as the first hidden state
                # Learned positions are a slice of the live parameter: the trace keeps its own copy.
                parts["position"] = parts["position"].detach().clone()
                trace.embeddings[stack] = parts
            if "cross" in run["masks"]:
                trace.attentions["cross"] = run["slots"]["cross"].transpose(0, 1)
                trace.masks["cross"] = run["masks"]["cross"]
            # Q, K, V and the sublayer outputs are recomputed on first access (model/replay.py).
            trace._replay = self.replay()
            self._read_out(trace, run, with_logits)
        return trace

    def _new_trace(self, run: dict, attention_mask: torch.Tensor | None, **fields) -> Trace:
        """A Trace of one run's ids, tokens, mask and pooler output; the caller adds the rest."""
        ids = run["ids"]
        return Trace(
            config=self.config,
            device=str(ids.device),
            tokens=[self.tokenizer.convert_ids_to_tokens(row) for row in ids.tolist()],
            input_ids=ids,
            attention_mask=_mask_or_ones(attention_mask, ids),
            pooled=run.get("pooled"),
            **fields,
        )

    def _read_out(self, trace: Trace, run: dict, with_logits: bool) -> None:
        """The heads on the last stack's output: LM-head logits when asked, label logits."""
        last = run["outputs"]["decoder" if self.config.has_decoder else "encoder"]
        if with_logits and self.lm_head is not None:
            trace.logits = self.lm_head(last)
        if self.token_classifier is not None:
            trace.label_logits = self.token_classifier(last)

    def patched(
        self,
        input_ids: torch.Tensor,
        patch: Patch | None,
        attention_mask: torch.Tensor | None = None,
        tgt_ids: torch.Tensor | None = None,
        tgt_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> Trace:
        """A run with activations patched (model/patch.py), its outputs only: a Trace holding
        ``outputs`` (each stack's output [B, T, d_model]), ``logits`` (LM head; a
        model.patch.Logits, unembedded where it is indexed), ``label_logits`` (token classifier)
        and ``pooled``; no attentions or hidden states. The layers before the patch's start are
        not run, which is what makes a grid of patched runs cheap."""
        if self.training:
            raise RuntimeError("patched() shows the model as it predicts: call model.eval() first.")
        inputs = (input_ids, attention_mask, tgt_ids, tgt_attention_mask, token_type_ids)
        with torch.no_grad():
            return self._outputs_only(inputs, patch, None)

    def run_with_sites(
        self,
        input_ids: torch.Tensor,
        sites: Sites,
        attention_mask: torch.Tensor | None = None,
        tgt_ids: torch.Tensor | None = None,
        tgt_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        patch: Patch | None = None,
    ) -> Trace:
        """A run that reads, replaces or differentiates named activations (model/sites.py),
        returning what patched() returns. Gradients are kept when ``sites.grad`` names a site
        (the logits' too: index them, then ``sites.gradients(metric)``); else none are."""
        if self.training:
            raise RuntimeError("run_with_sites() shows the model as it predicts: call eval().")
        inputs = (input_ids, attention_mask, tgt_ids, tgt_attention_mask, token_type_ids)
        with torch.set_grad_enabled(bool(sites.grad)):
            return self._outputs_only(inputs, patch, sites)

    def _outputs_only(self, inputs: tuple, patch: Patch | None, sites: Sites | None) -> Trace:
        """One run's outputs-only Trace (patched(), run_with_sites())."""
        run = self._run(*inputs, "keys", patch=patch, sites=sites)
        trace = self._new_trace(run, inputs[1], outputs=dict(run["outputs"]))
        self._read_out(trace, run, with_logits=False)
        if self.lm_head is not None:  # unembedded where the metric reads (model/patch.py)
            last = run["outputs"]["decoder" if self.config.has_decoder else "encoder"]
            trace.logits = Logits(last, self.lm_head, grad=sites is not None and bool(sites.grad))
        return trace
