"""What Which heads matter measures, below its tab (ui/tabs/patching.py, which draws it, and How
the heads connect, ui/circuit_measures.py, which reads the same boxes): the shipped minimal pairs,
the page's run as patching reads it, the tab's boxes read and checked, the measure (once per pair
for the whole server: a pair being measured for another page is waited for, not measured twice)
and the pair's two runs, each kept within a byte bound.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

import analysis
from engine import BUNDLED, InputError, is_live
from lang import Msg, message_of
from serve.lru import LockedLRU
from train.progress import reached_lesson
from ui.patching_inputs import (
    check_lengths,
    check_readable,
    corrupt_inputs,
    position_of,
    read_position,
    stale_boxes,
    token_of,
)


@dataclass(frozen=True)
class Pair:
    """A shipped minimal pair: its model ("lm": any language model the page opens), the clean
    and corrupt texts, the answer and wrong tokens as text ("" = picked from the runs), the
    word read by an encoder, what it teaches and in which stack's heads. Every text is read by
    its model without [UNK] (tests/test_new_users_42.py)."""

    id: str
    label: str
    model: str
    clean: str
    corrupt: str
    answer: str = ""
    wrong: str = ""
    read: str = ""
    lesson: str = ""
    stack: str = ""  # the stack whose heads the lesson names ("" = the model's first)


PAIRS = (
    Pair(
        "trophy",
        "Winograd: the trophy … too big / too small",
        BUNDLED,
        "The trophy didn't fit in the suitcase because it was too big.",
        "The trophy didn't fit in the suitcase because it was too small.",
        read="it",
        lesson=(
            "Which heads carry “big” or “small” back to “it”? BERT has no answer head here: "
            "the measure is how close the final vector of “it” comes back to the clean run's."
        ),
    ),
    Pair(
        "animal",
        "Winograd: the animal … too tired / too wide",
        BUNDLED,
        "The animal didn't cross the street because it was too tired.",
        "The animal didn't cross the street because it was too wide.",
        read="it",
        lesson=(
            "“tired” makes “it” the animal, “wide” the street: which heads bring the difference "
            "to “it”, and in which layer does it arrive?"
        ),
    ),
    Pair(
        "dates-zh",
        "Dates in Chinese: 二〇二六年十一月二十二日 / 二十三日",
        "dates",
        "二〇二六年十一月二十二日",
        "二〇二六年十一月二十三日",
        stack="cross",
        lesson=(
            "The dates model reads Chinese dates: which cross-attention heads carry the day's "
            "二 or 三 to the last digit the decoder writes (“2” against “3”)? Two heads of "
            "layer 1 bring back most of it."
        ),
    ),
    Pair(
        "copy",
        "Copy: qzxwv qzxw → v",
        "induction",
        "qzxwv qzxw",
        "bhmtk qzxw",
        answer="v",
        lesson=(
            "The induction circuit: a previous-token head in layer 0 and induction heads in "
            "layer 1 restore the copy — the heads the Heads table's previous_token and "
            "induction columns name (Olsson et al. 2022)."
        ),
    ),
    # Measured on the registry's real models (tests/test_real_lm.py recomputes every number).
    Pair(
        "ioi-smollm2",
        "Indirect object: Mary and John … gave a drink to",
        "smollm2-135m",
        "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to",
        answer=" Mary",
        wrong=" John",
        lesson=(
            "Indirect-object identification, measured on this 4-bit SmolLM2-135M: it answers "
            "“ Mary” (0.92) on the clean text and “ John” (0.75) on the corrupt one, and one "
            "late head restores most of the answer: L23H3 58 %, then L29H1 27 % and L20H0 "
            "22 %. Its circuit (How the heads connect, 8 steps): the strongest edge out of a "
            "head is L23H3 → logits, and the 100 strongest of its 70,651 edges restore 49 % of "
            "the answer, the 1,000 strongest 91 %. In GPT-2 small, Wang et al. (2022) found name "
            "mover heads L9H9, L9H6 and L10H0: another model's heads, not these."
        ),
    ),
    Pair(
        "ioi-zh-gemma",
        "Indirect object in Chinese: 小明和小红……把饮料递给了小",
        "gemma-3-270m",
        "小明和小红去了商店，小明把饮料递给了小",
        "小明和小红去了商店，小红把饮料递给了小",
        answer="红",
        wrong="明",
        lesson=(
            "The indirect object in Chinese, measured on this Gemma 3 270M: after 递给了小 it "
            "writes 红 (0.98) on the clean text and 明 (0.83) on the corrupt one (小红 and 小明 "
            "are two tokens each, so the pair ends on 小). Three heads restore most of the "
            "answer: L11H3 45 %, L10H3 28 % and L15H2 23 %. Its circuit (How the heads connect, "
            "8 steps; each head's edge is its part of the norm Gemma applies after the "
            "attention): the strongest edge out of a head is L11H3 → logits, and the 100 "
            "strongest of its 5,644 edges restore 63 % of the answer, the 300 strongest 92 %, the "
            "1,000 strongest 85 %: more edges can restore less, when the edges added work against "
            "the answer."
        ),
    ),
    Pair(
        "ioi",
        "Indirect object: Mary and John … gave a drink to",
        "lm",
        "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to",
        answer=" Mary",
        wrong=" John",
        lesson=(
            "Indirect-object identification (Wang et al. 2022): in GPT-2 small, name mover "
            "heads in the late layers (L9H9, L9H6, L10H0) restore “Mary”; that is GPT-2's "
            "result, and this page measures which heads do it in the model you opened."
        ),
    ),
    Pair(
        "ioi-zh",
        "Indirect object in Chinese: 小明和小红……把书递给了",
        "lm",
        "小明和小红去了书店，小明把书递给了",
        "小明和小红去了书店，小红把书递给了",
        lesson=(
            "The indirect-object pair in Chinese, for a language model that reads Chinese (a "
            "checkpoint you open): the answer is the model's own top token for the clean text, "
            "and this page measures which heads restore it. Gemma 3 270M has a pair of its own, "
            "measured on it."
        ),
    ),
)
PAIRS_BY_ID = {pair.id: pair for pair in PAIRS}


def pairs_model(loaded) -> str:
    """The shipped model whose pairs this model reads: itself (a snapshot: its model); a model
    trained on the Train tab, its task's once it has reached its lesson on held-out data (a
    model short of it would only teach its mistakes); "" for none."""
    if is_live(loaded.model_id):
        card = getattr(loaded.net, "card", None) or {}
        return (loaded.trained or "") if reached_lesson(card) else ""
    return str(loaded.model_id).partition("@")[0]


def pairs_for(loaded) -> list[Pair]:
    """The shipped pairs this model reads: its own (a registry model's, measured on it; its
    task's, trained on the page), or the language models' for any other LM."""
    name = pairs_model(loaded)
    own = [p for p in PAIRS if name and p.model == name]
    if own or not loaded.is_lm:
        return own
    return [p for p in PAIRS if p.model == "lm"]


def shipped(loaded, clean: str, corrupt: str) -> Pair | None:
    """The shipped pair of this model whose texts these are; None for the user's own."""
    for pair in pairs_for(loaded):
        if pair.clean == clean and pair.corrupt == corrupt:
            return pair
    return None


def pair_bytes(result) -> int:
    """What a kept measure holds: its two runs' traces as they were put (they grow as a view
    replays a field, so the bound is the traces' size when measured) and its grids."""
    grids = (result.heads, result.positions, result.shift)
    return result.clean.nbytes() + result.corrupt.nbytes() + sum(g.nbytes for g in grids)


# key -> PairResult: a pair a class patches together is measured once; bounded by bytes too, a
# small share of a replica's memory beside the trace cache (docs/deploy.md)
MEASURED: LockedLRU = LockedLRU(8, max_bytes=64 * 2**20, weigh=pair_bytes)


def clean_inputs(found) -> dict:
    """The page's own run as patching reads it: the first text's ids as the user typed them (a
    trained decoder's greedy continuation cut off; an encoder-decoder's target kept whole)."""
    trace = found.trace
    cfg = trace.config
    ids, mask = trace.input_ids[:1], trace.attention_mask[:1]
    real = int(mask[0].sum())
    if cfg.arch == "decoder" and found.typed is not None:
        real = min(real, found.typed)
    inputs = {"input_ids": ids[:, :real].cpu(), "attention_mask": mask[:, :real].cpu()}
    if cfg.arch == "encoder-decoder":
        tgt_real = int(trace.tgt_attention_mask[0].sum())
        inputs["tgt_ids"] = trace.tgt_ids[:1, :tgt_real].cpu()
        inputs["tgt_attention_mask"] = trace.tgt_attention_mask[:1, :tgt_real].cpu()
    return inputs


@dataclass(frozen=True)
class Asked:
    """The tab's boxes read for the page's run, checked: the pair's inputs, the answer, wrong
    answer and position as far as the boxes say (None: the measure's default), the stack."""

    clean: dict
    corrupt: dict
    answer: int | None
    wrong: int | None
    position: int | None
    stack: str

    @property
    def key(self) -> tuple:
        """What a measure of this pair is kept by, server-wide (with the model's id)."""
        return (
            *(tuple(v.flatten().tolist()) for v in self.clean.values()),
            tuple(self.corrupt["input_ids"].flatten().tolist()),
            self.answer,
            self.wrong,
            self.position,
            self.stack,
        )


def asked(loaded, clean: dict, sel, text: str = "") -> Asked:
    """The tab's boxes for the page's run (``text``: as typed), as this tab and How the heads
    connect read them."""
    corrupt = corrupt_inputs(loaded, clean, sel.pair)
    check_lengths(loaded, clean, corrupt)
    check_readable(loaded, text, sel.pair, clean, corrupt)
    answer = token_of(loaded, sel.answer, "The answer")
    wrong = token_of(loaded, sel.wrong, "The wrong answer")
    position = position_of(sel.read_at)
    if stale_boxes(loaded, clean, sel.read_at):  # another text's measure: this pair's own
        answer = wrong = position = None
    pair = shipped(loaded, text, sel.pair)
    if position is None and pair is not None:  # a link to the pair reads where its lesson does
        position = read_position(loaded, pair.clean, pair.read)
    stacks = loaded.net.config.stacks
    stack = sel.stack if sel.stack in stacks else stacks[0]
    return Asked(clean, corrupt, answer, wrong, position, stack)


# Where the page's Patch reports how far its grids are (ui/events.py sets it for that event:
# Gradio's progress bar); None elsewhere. Called as (patched runs done, of how many).
PATCH_PROGRESS: ContextVar = ContextVar("patch_progress", default=None)


def measure(loaded, clean: dict, sel, text: str = "") -> analysis.patching.PairResult:
    """patch_pair for the page's run (``text``: as typed) and the tab's boxes, once per pair
    server-wide (a pair being measured for another page is waited for, not measured again)."""
    pair = asked(loaded, clean, sel, text)
    progress = PATCH_PROGRESS.get()

    def make():
        try:
            return analysis.patch_pair(
                loaded.net,
                clean,
                pair.corrupt,
                pair.answer,
                pair.wrong,
                pair.position,
                pair.stack,
                progress=progress,
            )
        except ValueError as exc:  # the texts give one answer: a sentence, not a failure
            raise InputError(Msg(message_of(exc))) from None

    return MEASURED.once((loaded.model_id, *pair.key), make)


# (model, ids of the inputs) -> their trace; bounded by bytes too, beside the engine's own cache
RUNS: LockedLRU = LockedLRU(16, max_bytes=64 * 2**20, weigh=lambda trace: trace.nbytes())


def pair_runs(loaded, found, sel):
    """The clean and corrupt runs of the pair (traces), for the chosen head on both texts: the
    page's own trace where it is the clean text's exactly (no padding, no continuation), else a
    forward pass of it; a forward pass of the corrupt text. Passes are cached."""
    import torch

    clean = clean_inputs(found)
    corrupt = corrupt_inputs(loaded, clean, sel.pair)
    own = found.trace
    same = own.input_ids.shape[0] == 1 and all(
        getattr(own, name) is not None and torch.equal(getattr(own, name).cpu(), value)
        for name, value in clean.items()
    )
    return (own if same else traced(loaded, clean)), traced(loaded, corrupt)


def traced(loaded, inputs: dict):
    """The model's trace of ``inputs``, one pass per inputs (RUNS)."""
    import torch

    key = (loaded.model_id, *(tuple(v.flatten().tolist()) for v in inputs.values()))
    found = RUNS.get(key)
    if found is None:
        with torch.no_grad():
            found = RUNS.put(key, loaded.net.trace(**inputs))
    return found
