"""The whole model: encoder-only, decoder-only or encoder-decoder, with trace()."""

from __future__ import annotations

import torch
from torch import nn

from model.attention import KeyValues, ablation_sites, head_masks
from model.call import Call, HeadMask
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
from model.sites import Intervention, Sites, SiteView, attn_site, prefix
from model.stacks import Decoder, Encoder, Pooler
from model.tokenizers import CharTokenizer
from model.trace import Trace


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
            # the Add & Norms' own norms (QK-norm's are counted with the attention)
            norms = [
                m
                for layer in layers
                for add_norm in (layer.add_norm1, getattr(layer, "add_norm2", None))
                + (getattr(layer, "add_norm3", None),)
                if add_norm is not None
                for m in add_norm.modules()
                if isinstance(m, NORMS)
            ]
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

    def _run(self, call: Call, trace: bool = False) -> dict:
        """One forward pass; returns every intermediate, keyed by stack.

        Everything the call does inside the layers goes through one Intervention of its named
        sites (model/sites.py): head masks and a patch as replacements, the caller's sites, and
        with trace=True a slot per layer for its attention pattern, views of one
        [L, B, H, T_q, T_k] tensor per stack (run["slots"]), so nothing is copied afterwards.
        A pass that shows no weights (no trace, not training) attends by the fused kernel.
        Without a trace the layers before a patch's start are not run.
        """
        cfg = self.config
        ids = self._check_ids(call.input_ids, "input_ids")
        src_mask = _mask_or_ones(call.attention_mask, ids)
        tgt_ids = None
        if cfg.arch == "encoder-decoder":
            if call.tgt_ids is None:
                raise ValueError(
                    "An encoder-decoder model needs target ids (tgt_ids) for its decoder."
                )
            tgt_ids = self._check_ids(call.tgt_ids, "tgt_ids")
            if tgt_ids.shape[0] != ids.shape[0]:
                raise ValueError("Source and target batches must have the same number of texts.")
        patch = call.patch
        if patch is not None and patch.stack not in cfg.stacks:
            raise ValueError(f"Patch names {patch.stack!r}; this model's are {list(cfg.stacks)}.")
        at = Intervention(call.sites, weights=trace or self.training)
        keep = head_masks(cfg, call.head_mask)
        queries = {"encoder": src_mask, "decoder": src_mask}
        if tgt_ids is not None:
            queries["decoder"] = _mask_or_ones(call.tgt_attention_mask, tgt_ids)
        for name, fn in ablation_sites(cfg, keep, call.ablation, queries).items():
            at.replace(name, fn)
        for name, fn in (patch.replacements(cfg) if patch is not None else {}).items():
            at.replace(name, fn)  # after a head mask at the same site
        run: dict = {"ids": ids, "call": call, "trace": trace, "sites": at, "slots": {}}
        run["head_mask"] = keep
        for key in ("embeddings", "masks", "resid", "outputs"):
            run[key] = {}
        if cfg.arch == "decoder":  # the decoder reads the (only) text
            self._decode(run, ids, src_mask, memory=None, src_mask=None)
            return run
        token_type_ids = call.token_type_ids
        if token_type_ids is not None:
            token_type_ids = token_type_ids.to(ids.device)
        memory = self._encode(run, ids, src_mask, token_type_ids)
        if cfg.arch == "encoder":
            return run
        self._decode(run, tgt_ids, queries["decoder"], memory, src_mask)
        return run

    def _pattern_slots(
        self, run: dict, stack: str, t_k: int, ref: torch.Tensor, query_mask: torch.Tensor
    ) -> None:
        """When tracing, one preallocated (L, B, H, T_q, T_k) pattern tensor for an attention
        stack, each layer's view of it the slot its "hook_pattern" is written into."""
        if not run["trace"]:
            return
        cfg = self.config
        batch, t_q = query_mask.shape
        shape = (cfg.n_layers, batch, cfg.n_heads, t_q, t_k)  # (L, B, H, T_q, T_k)
        pattern = torch.empty(shape, dtype=ref.dtype, device=ref.device)
        run["slots"][stack] = pattern
        for i in range(cfg.n_layers):
            run["sites"].slots[attn_site(cfg, stack, i, "hook_pattern")] = pattern[i]

    def _stack_sites(self, run: dict, stream: str) -> SiteView:
        """The call's sites under a stream's prefix ("blocks." or "encoder." / "decoder.")."""
        return run["sites"].at(prefix(self.config, stream) + ".")

    @staticmethod
    def _start(run: dict, stream: str) -> int:
        """The first layer of a stream to run: a patch's start, when no trace wants the rest."""
        patch = run["call"].patch
        if run["trace"] or patch is None or patch.stream != stream:
            return 0
        return patch.start

    @staticmethod
    def _padding(run: dict, q_mask: torch.Tensor, k_mask: torch.Tensor) -> torch.Tensor:
        """Seed 003's variant (b) (keys only, what BERT does) or (a) (queries and keys)."""
        if run["call"].padding == "keys":
            return padding_mask(k_mask, q_mask.shape[1])  # (B, T_q, T_k)
        return padding_mask_query_key(q_mask, k_mask)

    def _encode(self, run, ids, src_mask, token_type_ids) -> torch.Tensor:
        positions = run["call"].positions
        x, parts = self.embedding(ids, token_type_ids, positions)
        parts["output"] = x
        mask = self._padding(run, src_mask, src_mask)  # (B, T, T)
        self._pattern_slots(run, "encoder", ids.shape[1], x, src_mask)
        rotary = self.embedding.rotation(ids.shape[1], positions)
        sites, start = self._stack_sites(run, "encoder"), self._start(run, "encoder")
        memory, resid = self.encoder(x, _hiding(mask), sites, rotary, start)
        run["embeddings"]["encoder"], run["masks"]["encoder"] = parts, mask
        run["resid"]["encoder"] = resid
        run["outputs"]["encoder"] = memory
        if self.pooler is not None:
            run["pooled"] = self.pooler(memory)
        return memory

    def _decode(self, run, dec_ids, dec_mask, memory, src_mask) -> None:
        positions = run["call"].positions
        y, parts = self.embedding(dec_ids, None, positions)
        parts["output"] = y
        t_tgt = dec_ids.shape[1]
        self_mask = self._padding(run, dec_mask, dec_mask) & causal_mask(t_tgt, y.device)
        if self.config.sliding_window is not None and not self.config.layer_types:
            # Mistral: the last sliding_window keys only, in every layer (Gemma 3: the local
            # layers alone, model.layers.band)
            self_mask = self_mask & sliding_window_mask(t_tgt, self.config.sliding_window, y.device)
        self._pattern_slots(run, "decoder", t_tgt, y, dec_mask)
        memory_mask = None
        if memory is not None:
            # Target queries over source keys: padded source keys are hidden (cross_mask); in
            # variant (a) padded target queries are emptied too.
            memory_mask = (
                cross_mask(dec_mask, src_mask)
                if run["call"].padding == "keys"
                else padding_mask_query_key(dec_mask, src_mask)
            )  # (B, T_tgt, T_src)
            self._pattern_slots(run, "cross", memory.shape[1], y, dec_mask)
            run["masks"]["cross"] = memory_mask
        rotary = self.embedding.rotation(t_tgt, positions)
        sites, start = self._stack_sites(run, "decoder"), self._start(run, "decoder")
        y, resid = self.decoder(
            y, _hiding(self_mask), memory, _hiding(memory_mask), sites, rotary, start
        )
        run["embeddings"]["decoder"], run["masks"]["decoder"] = parts, self_mask
        run["resid"]["decoder"] = resid
        run["outputs"]["decoder"] = y
        run["dec_ids"], run["dec_mask"] = dec_ids, dec_mask

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **options
    ) -> torch.Tensor:
        """Logits [B, T, vocab] with an LM head, per-token label logits [B, T, n_labels] with a
        token classifier, else the last hidden state [B, T, d_model]. Options: the fields of
        model.call.Call (tgt_ids, head_mask, patch, sites, …), as in trace()."""
        run = self._run(Call(input_ids, attention_mask, **options))
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
            mask: bool [B, T_new, T_past + T_new], True = may attend (the cached keys first);
                with local layers (Gemma 3) {"full": mask, "local": mask within the window}.
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
        rotary = self.embedding.rotation(ids.shape[1], positions, position_ids)
        at = Intervention(weights=self.training)
        keep = head_masks(self.config, head_mask)
        for name, fn in ablation_sites(self.config, keep, "zero", {}).items():
            at.replace(name, fn)
        for i, kept in enumerate(cache):  # the keys and values so far, the new tokens' last
            for name, fn in kept.replacements(rotary is not None).items():
                at.replace(f"blocks.{i}.attn.{name}", fn)
        if isinstance(mask, dict):  # {"full": …, "local": …}: Gemma 3's two kinds of layer
            mask = {kind: m.to(x.device) for kind, m in mask.items()}
        else:
            mask = mask.to(x.device)
        y, _ = self.decoder(x, mask, None, None, at.at("blocks."), rotary)
        return y

    def replay(self) -> Replay:
        """This model's stacks as a Replay (model/replay.py): it recomputes a trace's internals."""
        stacks = {"encoder": self.encoder, "decoder": self.decoder}
        return Replay({k: v for k, v in stacks.items() if v is not None}, self.embedding.rotation)

    def trace(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        with_logits: bool = False,
        **options,
    ) -> Trace:
        """Run once and return every intermediate in a new Trace (safe on a shared model).

        Args:
            input_ids: [B, T] source ids (the decoder's ids for a decoder-only model).
            attention_mask: [B, T] 1 = real token, 0 = padding; all ones when omitted.
            with_logits: also keep LM-head logits [B, T, vocab] (large for big vocabularies).
            options: the other fields of model.call.Call: tgt_ids, tgt_attention_mask,
                token_type_ids, padding ("keys" | "query_and_key"), positions, head_mask,
                ablation ("zero" | "mean"), patch (model/patch.py).
        """
        if self.training:
            raise RuntimeError(
                "trace() shows the model as it predicts: call model.eval() first (dropout is on)."
            )
        call = Call(input_ids, attention_mask, **options)
        with torch.no_grad():
            run = self._run(call, trace=True)
            trace = self._new_trace(
                run,
                positions=call.positions,
                head_mask={k: v.cpu() for k, v in run["head_mask"].items()},
                ablation=call.ablation,
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

    def _new_trace(self, run: dict, **fields) -> Trace:
        """A Trace of one run's ids, tokens, mask and pooler output; the caller adds the rest."""
        ids = run["ids"]
        return Trace(
            config=self.config,
            device=str(ids.device),
            tokens=[self.tokenizer.convert_ids_to_tokens(row) for row in ids.tolist()],
            input_ids=ids,
            attention_mask=_mask_or_ones(run["call"].attention_mask, ids),
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
        **options,
    ) -> Trace:
        """A run with activations patched (model/patch.py), its outputs only: a Trace holding
        ``outputs`` (each stack's output [B, T, d_model]), ``logits`` (LM head; a
        model.patch.Logits, unembedded where it is indexed), ``label_logits`` (token classifier)
        and ``pooled``; no attentions or hidden states. The layers before the patch's start are
        not run, which is what makes a grid of patched runs cheap. Options as in trace()."""
        if self.training:
            raise RuntimeError("patched() shows the model as it predicts: call model.eval() first.")
        with torch.no_grad():
            return self._outputs_only(Call(input_ids, attention_mask, patch=patch, **options))

    def run_with_sites(
        self,
        input_ids: torch.Tensor,
        sites: Sites,
        attention_mask: torch.Tensor | None = None,
        **options,
    ) -> Trace:
        """A run that reads, replaces or differentiates named activations (model/sites.py),
        returning what patched() returns. Gradients are kept when ``sites.grad`` names a site
        (the logits' too: index them, then ``sites.gradients(metric)``); else none are."""
        if self.training:
            raise RuntimeError("run_with_sites() shows the model as it predicts: call eval().")
        with torch.set_grad_enabled(bool(sites.grad)):
            return self._outputs_only(Call(input_ids, attention_mask, sites=sites, **options))

    def _outputs_only(self, call: Call) -> Trace:
        """One run's outputs-only Trace (patched(), run_with_sites())."""
        run = self._run(call)
        trace = self._new_trace(run, outputs=dict(run["outputs"]))
        self._read_out(trace, run, with_logits=False)
        if self.lm_head is not None:  # unembedded where the metric reads (model/patch.py)
            last = run["outputs"]["decoder" if self.config.has_decoder else "encoder"]
            grad = call.sites is not None and bool(call.sites.grad)
            trace.logits = Logits(last, self.lm_head, grad=grad)
        return trace
