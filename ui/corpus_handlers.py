"""The Heads tab's corpus section (ui/tabs/heads.py ``build_corpus``; analysis/corpus.py): head
measures averaged over many sentences — pasted, uploaded (not in public mode) or a shipped
sample — for the page's last run model, and a deep link's ``corpus=en|zh`` measured after its
view opened. Handlers as in ui/handlers.py: ``(ask, *inputs) -> {output name: value}``."""

from __future__ import annotations

import functools
import hashlib
import time
from pathlib import Path

from analysis import corpus
from engine import (
    Engine,
    InputError,
    cpu_share,
    kind_of,
    mostly_unknown,
    n_params,
    unknown_parts,
    well_formed,
)
from lang import Msg, tr
from serve.lru import LockedLRU
from ui.handlers import Ask, Sessions, Views, capped
from ui.state import CORPORA
from viz.attention import stack_title
from viz.common import md_literal


class Corpus:
    """The corpus handlers, over the engine and the pages' sessions (the corpus each page
    measured, the one its link names); ``views`` gives the page's last run and its status line,
    whose link then names the sample. The last 8 corpora measured are kept, for every page
    (``corpus.corpus_key``: the model and its weights, the sentences, the options)."""

    def __init__(self, engine: Engine, sessions: Sessions, views: Views) -> None:
        self.engine, self.sessions, self.views = engine, sessions, views
        # corpus_key -> CorpusResult; its distances grow as (L·H)², so bounded by bytes too
        self.cache = LockedLRU(8, max_bytes=16 * 2**20, weigh=corpus_bytes)

    def run(self, ask: Ask, corpus_text, sample, upload) -> dict:
        """Head measures averaged over a corpus (pasted, uploaded or a shipped sample) for the
        page's last run model: the table of means and stds per head, its CSV and NPZ, the map of
        its mean head distances and one sentence; the status line's link then names a shipped
        sample (``corpus=en``)."""
        from ui.tabs.heads import corpus_outputs

        start = time.perf_counter()
        text, source = self.source(corpus_text, sample, upload)
        sentences = corpus_sentences(text)
        state = self.views.latest(ask)
        shipped = sample if sample in CORPORA and source == CORPUS_SAMPLES[sample] else ""
        loaded = self.engine.model(state.model)
        check_readable(loaded, sentences, shipped)
        net = loaded.net
        stack, note = corpus_stack(net.config.arch, ask.sel.stack)
        result, was_cached = self.measured(loaded, sentences, stack)
        said = measured_sentence(loaded, stack, result, source, time.perf_counter() - start)
        if was_cached:
            said += tr(" (from the cache)")
        if note:
            said += "  \n⚠️ " + tr(note)
        digest = hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()
        outputs = corpus_outputs(result, loaded.model_id, said, digest, net.config)
        self.sessions.of(ask.page).corpus = (state.model, shipped) if shipped else None
        try:  # the status line again, its link naming the sample (the run is in the cache)
            analysis = self.engine.analyse(
                state.text, state.model, state.target, positions=state.positions
            )
            outputs["status"] = self.views.status_of(analysis, state, page=ask.page)
        except Exception:  # the page shows no run this link could describe: left as it is
            pass
        return outputs

    def measured(self, loaded, sentences: list[str], stack: str) -> tuple:
        """(the corpus's head measures, whether they came from the cache), measured in a share
        of the cores sized by one batch's trace when not kept."""
        net = loaded.net
        key = corpus.corpus_key(net, sentences, stack, max_tokens=CORPUS_TOKENS)
        result = self.cache.get(key)
        if result is not None:
            return result, True
        tokenizer = loaded.tokenizer
        if net.device.type != "cpu":  # the model's own device: the batches go there too

            def tokenizer(*args, _tok=loaded.tokenizer, **kwargs):
                return _tok(*args, **kwargs).to(net.device)

        width = min(CORPUS_BATCH, len(sentences)) * CORPUS_TOKENS  # one batch's positions
        # about what one batch's trace holds: attention weights (L·H·T·T) and more, float32
        nbytes = 4 * width * net.config.n_layers * (net.config.n_heads * CORPUS_TOKENS * 3)
        with cpu_share(width, n_params(net), nbytes):
            result = corpus.corpus_stats(
                net,
                tokenizer,
                sentences,
                stack=stack,
                max_tokens=CORPUS_TOKENS,
                batch_size=CORPUS_BATCH,
            )
        return self.cache.put(key, result), False

    def link(self, ask: Ask) -> dict:
        """After a deep link's view opened: measure the shipped corpus the link names (nothing
        when it names none), and show it picked in the corpus section."""
        session = self.sessions.of(ask.page)
        sample, session.linked_corpus = session.linked_corpus, ""
        if sample not in CORPORA:
            return {}
        return {**self.run(ask, "", sample, None), "corpus_sample": sample}

    def source(self, corpus_text, sample, upload) -> tuple[str, str]:
        """The corpus's text and where it came from: an upload, else a sample, else the box."""
        if upload not in (None, "", []):
            if self.engine.public:
                raise InputError(
                    Msg(
                        "Uploads are closed on this public deployment: paste the sentences instead."
                    )
                )
            return read_upload(upload), "uploaded"
        if isinstance(sample, str) and sample in CORPUS_SAMPLES:
            path = CORPUS_DIR / f"{sample}.txt"
            return path.read_text(encoding="utf-8"), CORPUS_SAMPLES[sample]
        text, _ = capped(corpus_text, "The corpus", CORPUS_CHARS)
        return text, "pasted"


def corpus_bytes(result) -> int:
    """What a kept corpus measure holds: its table of means and stds, its mean distances."""
    distances = result.distances
    table = int(result.stats.memory_usage(deep=True).sum())
    return table + (0 if distances is None else distances.nelement() * distances.element_size())


def measured_sentence(loaded, stack: str, result, source: str, seconds: float) -> str:
    """The corpus section's sentence: the model, the stack, how many sentences, from where."""
    return tr(
        "**{label}** · {stack}: {n} sentences ({source}), each cut at {tokens} tokens, "
        "measured in {seconds:.1f} s",
        label=md_literal(tr(loaded.label) if isinstance(loaded.label, Msg) else loaded.label),
        stack=stack_title(stack),
        n=result.sentences,
        source=tr(source),
        tokens=CORPUS_TOKENS,
        seconds=seconds,
    )


CORPUS_TOKENS = 32  # each sentence cut at this many tokens (special tokens included)
CORPUS_BATCH = 50
CORPUS_DIR = Path(__file__).resolve().parents[1] / "assets" / "corpus"
# The shipped samples, assets/corpus/<id>.txt (ui.state.CORPORA: the ones a link may name).
CORPUS_SAMPLES = dict(zip(CORPORA, ("the English sample", "the Chinese sample"), strict=True))
# Read at most this much of a pasted or uploaded corpus: every line at its longest, and a margin.
CORPUS_CHARS = corpus.MAX_SENTENCES * (corpus.MAX_CHARS + 2)


def check_readable(loaded, sentences: list[str], sample: str) -> None:
    """Refuse a corpus the model reads mostly as its unknown token: every head would be
    measured on [UNK] over and over (the bundled BERT and the Chinese sample). The page's
    model is kept, as the corpus link's is: its table opens heads of that model."""
    parts, total = [], 0
    for sentence_ in sentences:
        found, n = unknown_parts(loaded.tokenizer, kind_of(loaded), sentence_)
        parts += found
        total += n
    if not mostly_unknown(parts, total):
        return
    label = loaded.label if isinstance(loaded.label, Msg) else md_literal(loaded.label)
    if sample:
        raise InputError(
            Msg(
                "{model} reads {n:,} of the {total:,} tokens of {sample} as [UNK], one and the "
                "same token to it: run a model that reads every one of its characters ({models}, "
                "random weights), then measure it again.",
                model=label,
                n=len(parts),
                total=total,
                sample=Msg(CORPUS_SAMPLES[sample]),
                models=" … ".join(dict.fromkeys(readers(sample)[:1] + readers(sample)[-1:])),
            )
        )
    raise InputError(
        Msg(
            "{model} reads {n:,} of this corpus's {total:,} tokens as [UNK], one and the same "
            "token to it: run a model that reads these sentences, then measure them again.",
            model=label,
            n=len(parts),
            total=total,
        )
    )


@functools.cache
def readers(sample: str) -> tuple[str, ...]:
    """The model list's presets that read a shipped sample (one token per character of the
    Basic Multilingual Plane); the trained models read only their tasks' characters and BERT
    only its WordPiece vocabulary (tests/test_new_users_42.py checks every model)."""
    from model import PRESETS
    from model.tokenizers import CharTokenizer

    tok, text = CharTokenizer(), (CORPUS_DIR / f"{sample}.txt").read_text(encoding="utf-8")
    reads = not mostly_unknown(*unknown_parts(tok, "chars", text))
    return tuple(PRESETS) if reads else ()


def corpus_sentences(text: str) -> list[str]:
    """One sentence a line; too many, too long or none: one sentence in the page's language."""
    sentences = [line.strip() for line in text.splitlines() if line.strip()]
    if not sentences:
        raise InputError(
            Msg("The corpus is empty: write one sentence a line, upload a .txt, or pick a sample.")
        )
    if len(sentences) > corpus.MAX_SENTENCES:
        raise InputError(
            Msg(
                "The corpus has {n} sentences; at most {limit} are measured at once: remove "
                "some lines.",
                n=len(sentences),
                limit=corpus.MAX_SENTENCES,
            )
        )
    for number, sentence_ in enumerate(sentences, start=1):
        if len(sentence_) > corpus.MAX_CHARS:
            raise InputError(
                Msg(
                    "Sentence {number} has {n:,} characters; a sentence may have at most "
                    "{limit}: split it over several lines.",
                    number=number,
                    n=len(sentence_),
                    limit=corpus.MAX_CHARS,
                )
            )
    return corpus.parse_corpus(text)


def corpus_stack(arch: str, chosen) -> tuple[str, str]:
    """The self-attention stack a corpus is measured on, and why when not the chosen one: a
    decoder's own, else the encoder's (an encoder-decoder's decoder needs a target per
    sentence, and cross-attention is no head of one stack)."""
    if arch == "decoder":
        return "decoder", ""
    if arch not in ("encoder", "encoder-decoder"):
        raise InputError(Msg("This model has no self-attention stack to measure over a corpus."))
    if chosen in ("decoder", "cross"):
        return "encoder", (
            "Over a corpus the encoder's self-attention is measured (the decoder would need a "
            "target for every sentence)."
        )
    return "encoder", ""


def read_upload(upload) -> str:
    """An uploaded .txt's text (UTF-8), at most CORPUS_CHARS of it; a sentence for anything else."""
    path = upload[0] if isinstance(upload, list) and upload else upload
    path = getattr(path, "path", path)
    if not isinstance(path, str) or not path.lower().endswith(".txt"):
        raise InputError(Msg("Upload a .txt file: one sentence a line."))
    try:
        with open(path, "rb") as handle:
            data = handle.read(4 * CORPUS_CHARS + 1)
    except OSError:
        raise InputError(Msg("The uploaded file could not be read: upload it again.")) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(Msg("The uploaded file is not UTF-8 text.")) from None
    if len(data) > 4 * CORPUS_CHARS or len(text) > CORPUS_CHARS:
        raise InputError(
            Msg(
                "The uploaded file is longer than {limit:,} characters: a corpus is at most "
                "{n} sentences.",
                limit=CORPUS_CHARS,
                n=corpus.MAX_SENTENCES,
            )
        )
    return well_formed(text)
