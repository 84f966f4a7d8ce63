"""What the app runs: model choice, text checks, one forward pass per input, a bounded trace cache.

No Gradio here (app.py wires it up). Every function returns plain data and user-facing notices as
sentences; tensors stay in the server-side cache, never in a browser session's state.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from analysis.layer_steps import step_count
from lang import Msg, Note
from model import PRESETS, TRAINED, Trace, Transformer, pick_device
from model.tokenizers import CharTokenizer
from serve.cpu import CpuShare, one_blas_thread, trace_bytes  # noqa: F401  (re-exported: engine.CpuShare)
from serve.lru import LockedLRU
from serve.memory import release_freed_memory, return_big_blocks
from shelf import (  # noqa: F401  (re-exported: the engine's names the app and tests use)
    BUNDLED,
    BUNDLED_LABEL,
    CUSTOM_PREFIX,
    LIVE_PREFIX,
    MAX_MODELS,
    InputError,
    LoadedModel,
    Shelf,
    allowed_checkpoints,
    is_live,
    registered_choices,
    split_snapshot,
)

MAX_CHARS = 20_000  # longer input is cut before tokenization: cheap, and 512 tokens fit easily
# The Masks view's second sentence: shorter than the default text in every tokenizer here, so the
# default batch is visibly padded ("time flies like an arrow" is 7 BERT tokens, this 4).
DEFAULT_SECOND = "Dogs bark."
MAX_NEW_TOKENS = 24  # a trained model's greedy continuation / translation, at most
# A language model's greedy continuation: 12 tokens, fewer for a long text, none where fewer than
# two fit: steps × text length stays within LM_POSITIONS, so what a continuation adds to a Run
# grows no faster than the text it continues.
LM_NEW_TOKENS, LM_MIN_NEW_TOKENS, LM_POSITIONS = 12, 2, 768
LM_MAX_TOKENS = 512  # a language model's text is cut here, as BERT's (its attention: L·H·T²)
CACHE_BYTES = 384 * 1024**2  # the trace cache's bound, and so the longest language-model text


def tokens_that_fit(config, budget: int) -> int:
    """The longest text whose trace, as a forward pass makes it, holds at most ``budget`` bytes.

    A trace holds float32 attention weights (L·H·T² cells), the residual stream ((L+1)·T·d) and
    a few embedding-sized fields (token, sum, the stack's output; ``Trace.nbytes``): counted here
    as 4·(L·H·T² + (L+6)·T·d) bytes, a little more than it holds, so the cut is never late (a
    Qwen2.5-0.5B shape at 512 tokens: 388.5 MiB counted, 387.0 measured, bench/bench_lm.py)."""
    a = config.n_layers * config.n_heads
    b = (config.n_layers + 6) * config.d_model
    cells = budget / 4
    return max(1, int((-b + math.sqrt(b * b + 4 * a * cells)) / (2 * a)))


FAMILY = {"encoder": "encoder", "decoder": "decoder", "encoder-decoder": "enc-dec"}
TASK_SHORT = {
    "dates": "dates in many formats → ISO 2026-11-22",
    "induction": "continues a repeated letter string (induction heads)",
    "roles": "who did what to whom (我喜欢你 ≠ 你喜欢我)",
}


def model_choices() -> list[tuple[str, str]]:
    """(label, id) pairs for the model dropdown; custom checkpoints come from a separate box."""
    choices = [(BUNDLED_LABEL, BUNDLED), *registered_choices()]
    for name, card in TRAINED.items():
        family = FAMILY[card["config"]["arch"]]
        choices.append((f"{name} — {family}, TRAINED: {TASK_SHORT.get(name, name)}", name))
    for name, cfg in PRESETS.items():
        choices.append((f"{name} — {FAMILY[cfg.arch]}, random weights (seed {cfg.seed})", name))
    return choices


def task_of(model_id) -> str:
    """The model a choice names, without its snapshot or owner: "dates@300" -> "dates", a model
    trained on a page ("page:induction:<secret>", serve.training) -> "induction"."""
    model_id = str(model_id)
    if model_id.startswith(LIVE_PREFIX):
        return model_id.removeprefix(LIVE_PREFIX).partition(":")[0]
    return model_id.partition("@")[0]


_SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text):
    """Text with lone UTF-16 surrogates replaced by U+FFFD: a browser can send half an emoji
    ("😀".slice(0, 1)), and neither the tokenizers nor UTF-8 (urlencode, JSON) accept one."""
    return _SURROGATE.sub("\ufffd", text) if isinstance(text, str) else text


try:  # On ZeroGPU Spaces only a function decorated with spaces.GPU may touch CUDA.
    import spaces  # type: ignore[import-not-found]

    gpu: Callable = spaces.GPU
except ImportError:  # anywhere else the decorator is not needed

    def gpu(fn: Callable) -> Callable:
        return fn


cpu_share = CpuShare()  # one per process: every forward pass the app runs goes through it


def n_params(net: torch.nn.Module) -> int:
    """A model's parameter count (counted once per model)."""
    if not hasattr(net, "_ta_params"):
        net._ta_params = sum(p.numel() for p in net.parameters())
    return net._ta_params


def positions_of(inputs: dict) -> int:
    """Token positions the forward pass computes (every batch item, source and target)."""
    ids = [inputs.get("input_ids"), inputs.get("tgt_ids")]
    return sum(int(t.numel()) for t in ids if t is not None)


@gpu
def run_trace(net: Transformer, inputs: dict) -> Trace:
    """The forward pass, and nothing else, on the model's device; returned on the CPU."""
    return net.trace(**inputs).cpu()


def is_device_failure(exc: BaseException) -> bool:
    """CUDA out of memory, or another error raised by the GPU rather than by the input."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(
        word in str(exc) for word in ("CUDA", "cuDNN", "CUBLAS", "device-side")
    )


def reads_as(net: Transformer, tokenizer=None) -> str:
    """How a model reads text: "chars" (our character tokenizers, the presets' and the trained
    models'), "lm" (a language model's tokenizer: a decoder's) or "bert" (WordPiece)."""
    tok = net.tokenizer if tokenizer is None else tokenizer
    if isinstance(tok, CharTokenizer):
        return "chars"
    return "lm" if net.config.arch == "decoder" else "bert"


def token_ids(tok, kind: str, text: str, decoder: bool) -> list[int]:
    """A text's token ids as the model reads them, uncut: BERT's [CLS] … [SEP], a language
    model's own specials with one start token in front, our models' characters (a decoder's
    after "<s>", as seed 002's "<start> I am fine")."""
    if kind != "chars":
        ids = tok(text, add_special_tokens=True, truncation=False)["input_ids"]
        if kind == "lm" and tok.bos_token_id is not None and ids[:1] != [tok.bos_token_id]:
            ids = [tok.bos_token_id, *ids]  # GPT-2's <|endoftext|>, as it was trained
        return list(ids)
    ids = tok.encode(text)
    return [tok.bos_token_id, *ids] if decoder else ids


def kind_of(loaded: LoadedModel) -> str:
    return "lm" if loaded.is_lm else "bert" if loaded.is_bert else "chars"


def text_ids(loaded: LoadedModel, text: str, decoder: bool) -> list[int]:
    """``token_ids`` for a model the shelf keeps."""
    return token_ids(loaded.tokenizer, kind_of(loaded), text, decoder)


def unknown_parts(tok, kind: str, text: str) -> tuple[list[str], int]:
    """The parts of ``text`` the model reads as its unknown token ([UNK]), in order, and how
    many tokens the text is: our tokenizers' characters outside their vocabulary (the induction
    model reads letters, digits and space), WordPiece's words it cannot spell. A language
    model's byte-level tokenizer reads every text: nothing."""
    unk = getattr(tok, "unk_token_id", None)
    if kind == "lm" or unk is None:
        return [], 0
    if kind == "chars":
        ids = tok.encode(text)
        return [c for c, i in zip(text, ids, strict=True) if i == unk], len(ids)
    found = tok(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
    ids, spans = found["input_ids"], found["offset_mapping"]
    return [text[a:b] for i, (a, b) in zip(ids, spans, strict=True) if i == unk], len(ids)


def mostly_unknown(parts: list[str], total: int) -> bool:
    """More than half of a text's tokens are [UNK]: its figures would show one token over and
    over (the bundled BERT reads 1,800 of the Chinese corpus sample's 2,783 tokens so)."""
    return bool(total) and 2 * len(parts) > total


def vocabulary_notices(loaded: LoadedModel, text: str) -> list[Msg]:
    """A sentence when the text holds what the model cannot read ([UNK]). When most of it: the
    figures show one unknown token over and over, which no one should read as the model reading
    the text. A trained model, whose output the page judges (the Output tab's ✓ and ✗, a date
    decoded), is warned about at its first unknown token: a few are enough for a wrong answer
    (the dates model reads 今天是2026年11月22号, 4 of 14 unknown, as 2020-12-13)."""
    parts, total = unknown_parts(loaded.tokenizer, kind_of(loaded), text)
    if mostly_unknown(parts, total):
        return [
            Msg(
                "Most of this text is outside this model's vocabulary: {n} of its {total} "
                "tokens are [UNK] ({parts}), one and the same token to the model; pick a model "
                "that reads this text.",
                n=len(parts),
                total=total,
                parts=named(parts),
            )
        ]
    if not parts or not loaded.trained:
        return []
    return [
        Msg(
            "This model does not know {n} of this text's {total} tokens ({parts}): it reads "
            "each as [UNK] and never saw them in training, so what it outputs for this text "
            "may be wrong.",
            n=len(parts),
            total=total,
            parts=named(parts),
        )
    ]


def named(parts: list[str], most: int = 6) -> str:
    """A few parts of a text for a sentence: “小”, “明” … (+4 more); each named once."""
    seen = list(dict.fromkeys(parts))
    shown = ", ".join(f"“{part}”" for part in seen[:most])
    return shown + (f" … (+{len(seen) - most})" if len(seen) > most else "")


def token_limit(config, kind: str, cache_bytes: int = CACHE_BYTES) -> int:
    """The most tokens of one text the page reads: the model's own maximum; a language model's
    at most LM_MAX_TOKENS, and only as many as a trace the cache can hold."""
    if kind == "lm":  # GPT-2 reads 1,024 tokens, Qwen2 32,768: the views are made for 512,
        # and a bigger model's trace must still fit the trace cache (Qwen2.5-0.5B: 509 tokens)
        return min(config.max_len, LM_MAX_TOKENS, tokens_that_fit(config, cache_bytes))
    return config.max_len


def cut_ids(ids: list[int], limit: int, kind: str) -> list[int]:
    """A text's ids cut to ``limit``, BERT's closing [SEP] kept."""
    if len(ids) <= limit:
        return ids
    return ids[: limit - 1] + [ids[-1]] if kind == "bert" else ids[:limit]


def encode(net: Transformer, *texts: str, tokenizer=None, target: str | None = None):
    """Model inputs for text exactly as the page makes them, for scripts: one text gives
    ``{"input_ids": [1, T], "attention_mask": [1, T]}``; two or more (a patching pair) give
    one such dict each, in order. A decoder's text starts with its start token (our "<s>", a
    language model's own), BERT's is [CLS] … [SEP]; a text is cut where the page cuts it (the
    page's notice says so). An encoder-decoder's decoder reads ``target`` (default: the text),
    one target shared by every text.

    ``net`` is a ``Transformer`` with its tokenizer (``net.tokenizer``, or ``tokenizer=``)."""
    if not texts:
        raise TypeError("encode() needs at least one text.")
    tok = net.tokenizer if tokenizer is None else tokenizer
    cfg = net.config
    kind = reads_as(net, tok)
    limit = token_limit(cfg, kind)

    def one(text: str, decoder: bool) -> torch.Tensor:
        return torch.tensor([cut_ids(token_ids(tok, kind, text, decoder), limit, kind)])

    found = []
    for text in texts:
        ids = one(text, cfg.arch == "decoder")
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if cfg.arch == "encoder-decoder":
            tgt = one(texts[0] if target is None else target, True)
            inputs.update(tgt_ids=tgt, tgt_attention_mask=torch.ones_like(tgt))
        found.append(inputs)
    return found[0] if len(found) == 1 else tuple(found)


@dataclass
class Analysis:
    """One analysed input: its trace (CPU), what was cut, and how long it took."""

    key: tuple
    model: LoadedModel
    trace: Trace
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # Decoder positions the user supplied (<s> and the typed text); the rest the model wrote
    # itself (a trained model's greedy continuation or translation). None: the user wrote all.
    typed: int | None = None
    text: str = ""  # the first text as the user typed it (cut as read), without a continuation

    @functools.cached_property
    def bounds(self) -> Bounds:
        """What a selection may name in this analysis, asked once (it is kept with the trace)."""
        from analysis.circuits import edge_count

        net = self.model.net
        return bounds_of(self.trace, EDGE_COUNTS.once(self.model.model_id, lambda: edge_count(net)))


@dataclass(frozen=True)
class Bounds:
    """What a selection may name in one trace: its stacks (data-flow order) and, per stack, the
    last layer, head, token (of the first text's queries) and step of the layer walk, and the
    most edges a circuit of the model keeps ("edges": all it has; absent where not known)."""

    stacks: tuple[str, ...]
    # stack -> {"layer", "head", "token", "step", "edges"} -> last index (or count)
    last: dict[str, dict[str, int]]

    def stack(self, asked) -> str:
        """The asked stack where this model has it, else its first."""
        return asked if asked in self.stacks else self.stacks[0]


def bounds_of(trace: Trace, edges: int | None = None) -> Bounds:
    """A trace's ``Bounds``: the config's layers and heads, the text's tokens, the walk's steps,
    and the model's ``edges`` where given (analysis.circuits.edge_count)."""
    cfg = trace.config
    last = {
        stack: {
            "layer": cfg.n_layers - 1,
            "head": cfg.n_heads - 1,
            "token": text_length(trace, stack) - 1,
            "step": step_count(cfg, stack) - 1,
            **({} if edges is None else {"edges": edges}),
        }
        for stack in trace.stacks
    }
    return Bounds(tuple(trace.stacks), last)


def text_length(trace: Trace, stack: str) -> int:
    """The real tokens of the stack's queries (the first text), at least 1."""
    mask = trace.attention_mask
    if stack != "encoder" and trace.tgt_attention_mask is not None:
        mask = trace.tgt_attention_mask
    return max(int(mask[0].sum()), 1)


# Each model's edges (analysis.circuits.edge_count: SmolLM2's 70,651 take 14 ms to count), by id.
EDGE_COUNTS: LockedLRU[str, int] = LockedLRU(256)

# A language model's greedy continuations, by model and ids (strings only, small).
LM_CONTINUATIONS: LockedLRU[tuple, str] = LockedLRU(256)


def lm_steps(n_tokens: int) -> int:
    """How many tokens a language model continues a text of ``n_tokens`` by (0: too long)."""
    steps = min(LM_NEW_TOKENS, LM_POSITIONS // max(1, n_tokens))
    return steps if steps >= LM_MIN_NEW_TOKENS else 0


def lm_continuation(analysis: Analysis, item: int = 0) -> str | None:
    """A language model's greedy continuation of one analysed text (``lm_steps`` tokens, cached):
    the text it would write next, its pieces read as the token table reads them (a piece that is
    not whole UTF-8 as "‹\\xA8›", not U+FFFD: model.pieces.readable_text); None for a text too
    long to continue within the budget."""
    loaded, trace = analysis.model, analysis.trace
    ids = trace.input_ids[item][trace.attention_mask[item].bool()].view(1, -1)  # (1, T)
    key = (loaded.model_id, tuple(ids[0].tolist()), trace.positions)
    found = LM_CONTINUATIONS.get(key)
    if found is not None:
        return found
    net = loaded.net
    room = max(0, min(lm_steps(ids.shape[1]), net.config.max_len - ids.shape[1]))
    if room == 0:
        return None
    with cpu_share(ids.numel() + room, n_params(net)):
        out = net.generate(ids.to(net.device), max_new_tokens=room, positions=trace.positions)
    words = loaded.tokenizer.text(out[0, ids.shape[1] :].tolist())
    return LM_CONTINUATIONS.put(key, words)


def cache_key(model_id: str, texts: list, targets: list | None, typed, positions: bool) -> tuple:
    """What an analysis is kept by: the model, the texts, the targets, where the typed text ends
    and whether the positional encoding is off."""
    key = (model_id, tuple(texts), tuple(targets) if targets else None)
    if typed is not None:  # "ab" + "cab…" and "abc" + "ab…" are one stream, typed apart
        key += (("typed", typed),)
    if not positions:
        key += ("no positional encoding",)
    return key


class TraceCache:
    """Bounded LRU of analyses, by entry count and by bytes held (thread-safe).

    Sizes are measured again at every put: a trace grows when a view first reads a field it
    computes on access (Q, K, V, scores; model/trace.py).

    Not a ``serve.lru.LockedLRU``: that one weighs a value once, when it is put, and a trace grows
    after it is put; here a put evicts the least recently used while the traces together hold
    more than ``max_bytes``, each measured anew, in the same step under the same lock as the
    insert.
    """

    def __init__(self, max_entries: int = 32, max_bytes: int = CACHE_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._items: OrderedDict[tuple, Analysis] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Analysis | None:
        with self._lock:
            analysis = self._items.get(key)
            if analysis is None:
                return None
            self._items.move_to_end(key)
            return analysis

    def put(self, analysis: Analysis) -> None:
        with self._lock:
            self._items[analysis.key] = analysis
            self._items.move_to_end(analysis.key)
            sizes = {key: item.trace.nbytes() for key, item in self._items.items()}
            held = sum(sizes.values())
            while len(self._items) > self.max_entries or (
                len(self._items) > 1 and held > self.max_bytes
            ):
                key, _ = self._items.popitem(last=False)
                held -= sizes[key]

    def nbytes(self) -> int:
        with self._lock:
            return sum(item.trace.nbytes() for item in self._items.values())

    def __len__(self) -> int:
        with self._lock:  # a put between its insert and its evictions must not be seen
            return len(self._items)


class Engine:
    """Checks and tokenizes text, runs one forward pass per input, caches traces; the models
    come from its shelf (shelf.py)."""

    def __init__(
        self,
        device: str | None = None,
        public: bool = False,
        allowed: tuple[str, ...] | None = None,
    ) -> None:
        """allowed: the checkpoints a public deployment opens (default: TA_MODELS)."""
        self.device = pick_device(device)
        return_big_blocks()  # before any worker thread allocates a trace
        one_blas_thread()
        self.cache = TraceCache()
        # A trained decoder's greedy output decides the trace's cache key, so it is asked for on
        # every redraw: keep the last few instead of decoding again (strings only, small).
        self._continuations: LockedLRU[tuple, tuple[str, str]] = LockedLRU(256)
        allowed = allowed_checkpoints() if allowed is None else tuple(allowed)
        self.shelf = Shelf(str(self.device), public, allowed, admit=lambda: cpu_share.load())

    @property
    def public(self) -> bool:
        return self.shelf.public

    @property
    def allowed(self) -> tuple[str, ...]:
        """The checkpoints a public deployment opens (TA_MODELS); any, when not public."""
        return self.shelf.allowed

    @property
    def bundled_error(self) -> str | None:
        return self.shelf.bundled_error

    @property
    def live(self) -> Callable[[str], LoadedModel | None] | None:
        """Finds a model trained on a page by its secret id (set by app.handlers)."""
        return self.shelf.live

    @live.setter
    def live(self, find: Callable[[str], LoadedModel | None] | None) -> None:
        self.shelf.live = find

    def warm_up(self) -> str | None:
        """Load the bundled BERT now (not on the first visitor's click); the reason if it fails."""
        with contextlib.suppress(InputError):
            self.model(BUNDLED)
        return self.bundled_error

    def model(self, model_id: str) -> LoadedModel:
        """The model for a dropdown id or "checkpoint:<folder or hub id>"; loaded once."""
        return self.shelf.model(model_id)

    # ---- text -> inputs -----------------------------------------------------------------------
    def encode(self, loaded: LoadedModel, texts: list[str], targets: list[str] | None):
        """Tokenize (cutting to the model's maximum), returning model inputs and notices."""
        cfg = loaded.net.config
        notices: list[str] = []
        kind = kind_of(loaded)
        limit = token_limit(cfg, kind, self.cache.max_bytes)

        def ids_of(text: str, decoder: bool) -> list[int]:
            ids = text_ids(loaded, text, decoder)
            if len(ids) > limit and limit < cfg.max_len:
                notices.append(
                    Msg(
                        "Text is {n:,} tokens; this app reads at most {limit:,} of a language "
                        "model's {most:,} — the rest was cut (its trace grows with the square "
                        "of the length).",
                        n=len(ids),
                        limit=limit,
                        most=cfg.max_len,
                    )
                )
            elif len(ids) > limit:
                notices.append(
                    Msg(
                        "Text is {n:,} tokens; this model reads at most {limit:,} — "
                        "the rest was cut (run it as a separate text to see it).",
                        n=len(ids),
                        limit=limit,
                    )
                )
            return cut_ids(ids, limit, kind)

        def batch(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
            width = max(len(s) for s in seqs)
            pad = cfg.pad_id
            ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], dtype=torch.long)
            mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
            return ids, mask

        if cfg.arch == "decoder":
            ids, mask = batch([ids_of(t, decoder=True) for t in texts])
            return {"input_ids": ids, "attention_mask": mask}, notices
        ids, mask = batch([ids_of(t, decoder=False) for t in texts])
        inputs = {"input_ids": ids, "attention_mask": mask}
        if cfg.arch == "encoder-decoder":
            tgt_ids, tgt_mask = batch([ids_of(t, decoder=True) for t in (targets or texts)])
            inputs.update(tgt_ids=tgt_ids, tgt_attention_mask=tgt_mask)
        return inputs, notices

    @staticmethod
    def clean(text: str | None, what: str = "Text") -> tuple[str, list[str]]:
        """Refuse empty text; cut absurdly long text before any tokenizer sees it."""
        text = text or ""
        if not text.strip():
            raise InputError(
                Msg("{what} is empty: type a sentence, or pick an example.", what=Msg(what))
            )
        notices = []
        if len(text) > MAX_CHARS:
            notices.append(
                Msg(
                    "{what} is {n:,} characters; only the first {limit:,} were read "
                    "(no model here reads more than 512 tokens).",
                    what=Msg(what),
                    n=len(text),
                    limit=MAX_CHARS,
                )
            )
            text = text[:MAX_CHARS]
        return text, notices

    # ---- decoding ---------------------------------------------------------------------------
    def continuation(self, loaded: LoadedModel, text: str, positions: bool) -> tuple[str, str]:
        """A trained model's greedy output for ``text`` and a sentence saying so (cached)."""
        key = (loaded.model_id, text, positions)
        found = self._continuations.get(key)
        if found is None:
            found = self._continuations.put(key, self._decode(loaded, text, positions))
        return found

    def _decode(self, loaded: LoadedModel, text: str, positions: bool) -> tuple[str, str]:
        """Greedy decoding for ``continuation``.

        Encoder-decoder: the translation, which becomes the decoder's input; decoder-only: the
        continuation, appended to the text. Under the causal mask, row t of the decoder (and
        cross) attention is then exactly the step that chose token t + 1.
        """
        net, tok = loaded.net, loaded.tokenizer
        ids = tok.encode(text[: net.config.max_len])
        if not ids:
            raise InputError(
                Msg("{what} is empty: type a sentence, or pick an example.", what=Msg("Text"))
            )
        if net.config.arch == "decoder":  # the decoder reads "<s> ..." (as in encode())
            ids = [tok.bos_token_id, *ids]
        limit = net.config.max_len - (0 if net.config.arch == "encoder-decoder" else len(ids))
        src = torch.tensor([ids[: net.config.max_len]], dtype=torch.long)
        with cpu_share(src.numel() + MAX_NEW_TOKENS, n_params(net)):
            out = net.generate(
                src, max_new_tokens=max(0, min(MAX_NEW_TOKENS, limit)), positions=positions
            )
        new = out[0].tolist()
        new = new[1:] if net.config.arch == "encoder-decoder" else new[len(ids) :]
        specials = set(tok.all_special_ids)
        ended = tok.eos_token_id in new
        new = (
            [i for i in new[: new.index(tok.eos_token_id)] if i not in specials]
            if ended
            else [i for i in new if i not in specials]
        )
        words = "".join(tok.convert_ids_to_tokens(new))
        if net.config.arch == "encoder-decoder":
            note = Note(
                "The model's greedy output is “{words}”: it is the decoder's input below, so "
                "row t of the decoder and cross attention is the step that wrote token t + 1.",
                words=words,
            )
        else:
            note = Note(
                "The model continued the text greedily with “{words}” (shown after it); row t "
                "of the attention is the step that wrote token t + 1.",
                words=words,
            )
        return words, note

    # ---- analysis ---------------------------------------------------------------------------
    @staticmethod
    def forward(loaded: LoadedModel, inputs: dict, notices: list) -> Trace:
        """The trace of ``inputs`` in the CPU's lane for its size; where the GPU fails it (out of
        memory, a lost device), on the CPU instead, said in ``notices``."""
        size = trace_bytes(loaded.net.config, inputs)
        small = loaded.net.config.vocab_size <= 4096 and not loaded.is_lm  # (LMs: Output tab)
        if loaded.net.lm_head is not None and small:
            inputs["with_logits"] = True  # small vocabularies only: a trained model's predictions
        try:
            with cpu_share(positions_of(inputs), n_params(loaded.net), size):
                return run_trace(loaded.net, inputs)
        except Exception as exc:
            if not is_device_failure(exc):
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            with cpu_share(positions_of(inputs), n_params(loaded.net), size):
                trace = loaded.on_cpu().trace(**inputs).cpu()
            notices.append(
                Msg(
                    "The GPU could not run this text ({kind}); it was analysed on the CPU instead.",
                    kind=type(exc).__name__,
                )
            )
            return trace

    def analyse(
        self,
        text: str,
        model_id: str,
        target: str | None = None,
        second: str | None = None,
        positions: bool = True,
    ) -> Analysis:
        """Trace one text (or [text, second] as a padded batch), cached by the whole input.

        target: the decoder's input for encoder-decoder models (the source text when empty; a
            trained model's own greedy output instead).
        second: when given, a second sentence padded into the same batch (the Masks view).
        positions: False runs the same weights without the positional-encoding term.
        """
        loaded = self.model(model_id)
        text, notices = self.clean(text)
        notices += vocabulary_notices(loaded, text)
        texts = [text]
        if second is not None:
            second, more = self.clean(second, "The second sentence")
            texts.append(second)
            notices += more
        targets, typed = None, None
        if (
            loaded.trained
            and loaded.net.config.has_decoder
            and second is None
            and not (target and target.strip())
        ):
            continued, note = self.continuation(loaded, text, positions)
            notices.append(note)
            if loaded.net.config.arch == "encoder-decoder":
                target, typed = continued, 1  # the decoder reads <s>, then its own output
            else:
                texts = [text + continued]
                typed = min(1 + len(loaded.tokenizer.encode(text)), loaded.net.config.max_len)
        if loaded.net.config.arch == "encoder-decoder":
            if target and target.strip():
                target, more = self.clean(target, "Target text")
                notices += more
            else:
                target = None
                notices.append(Note("No target text: the decoder reads the source text."))
            targets = [target or text] + ([second] if second is not None else [])
        key = cache_key(model_id, texts, targets, typed, positions)
        if not positions:
            notices.append(
                Note("Positional encoding is off: the model sees the tokens without order.")
            )
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        inputs, cut = self.encode(loaded, texts, targets)
        inputs["positions"] = positions
        start = time.perf_counter()
        trace = self.forward(loaded, inputs, cut)
        seconds = time.perf_counter() - start
        analysis = Analysis(key, loaded, trace, notices + cut, seconds, typed, text)
        self.cache.put(analysis)
        release_freed_memory()  # what the forward pass and any evicted trace freed
        return analysis
