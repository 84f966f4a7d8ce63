"""A BERT checkpoint from the Hugging Face Hub, judged before its weights are downloaded.

config.json is fetched (after a HEAD request says it is small) and judged; the weights' safetensors
header is fetched by two HTTP range requests and judged; the tokenizer files are fetched and judged;
only then is model.safetensors downloaded. huggingface_hub's ``get_safetensors_metadata`` does the
same range requests but reads headers up to 25 MB and, without model.safetensors, every shard of a
sharded repo: we keep our own 1 MB header cap and single-file rule.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from lang import Msg
from model.checkpoint_files import (
    BertLoadError,
    file_of,
    header_length,
    parse_header,
    read_json_object,
    too_large,
)
from model.checkpoint_guard import (
    CONFIG,
    CONFIG_LIMIT,
    NO_FILE,
    TOKENIZER_LIMITS,
    WEIGHTS,
    check_budget,
    check_config,
    check_tokenizer_files,
    check_weights,
    config_params,
)

TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def _size(repo_id: str, filename: str) -> int | None:
    """A hub file's size in bytes (a HEAD request), None when the repo has no such file."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import RemoteEntryNotFoundError

    try:
        size = get_hf_file_metadata(hf_hub_url(repo_id, filename)).size
    except RemoteEntryNotFoundError:
        return None
    if size is None:
        raise BertLoadError(
            Msg(
                "The Hub did not say how large {what} is; try again.",
                what=file_of(repo_id, filename),
            )
        )
    return size


def _bytes(repo_id: str, filename: str, start: int, stop: int) -> bytes:
    """Bytes [start, stop) of a hub file, by one HTTP range request."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    response = get_session().get(
        hf_hub_url(repo_id, filename),
        headers={**build_hf_headers(), "range": f"bytes={start}-{stop - 1}"},
        timeout=10,
    )
    hf_raise_for_status(response)
    return response.content[: stop - start]


def _download(repo_id: str, filename: str, cached_only: bool = False) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo_id, filename, local_files_only=cached_only))


def _cached(repo_id: str) -> Path | None:
    """The cached snapshot when config and weights are on disk already (judged there, locally)."""
    try:
        folder = _download(repo_id, CONFIG, cached_only=True).parent
        _download(repo_id, WEIGHTS, cached_only=True)
    except Exception:  # not cached: ask the network
        return None
    for name in TOKENIZER_FILES:
        with contextlib.suppress(Exception):
            _download(repo_id, name, cached_only=True)
    return folder


def _judge_remote(repo_id: str, max_bytes: int, max_params: int) -> Path:
    """Fetch and judge config.json, the weights' header and the tokenizer; then the weights."""
    size = _size(repo_id, CONFIG)
    if size is None:
        raise BertLoadError(Msg(NO_FILE, name=repo_id, file=CONFIG))
    if size > CONFIG_LIMIT:
        raise BertLoadError(too_large(file_of(repo_id, CONFIG), size, CONFIG_LIMIT))
    folder = _download(repo_id, CONFIG).parent
    hf = read_json_object(folder / CONFIG, file_of(repo_id, CONFIG), CONFIG_LIMIT)
    sizes = check_config(hf, repo_id)
    check_budget(config_params(sizes), repo_id, max_params, max_bytes)
    what = file_of(repo_id, WEIGHTS)
    size = _size(repo_id, WEIGHTS)
    if size is None:
        raise BertLoadError(
            Msg(
                "{name} has no {file}; only safetensors weights are loaded (no pickled .bin).",
                name=repo_id,
                file=WEIGHTS,
            )
        )
    if size > max_bytes:
        raise BertLoadError(too_large(what, size, max_bytes))
    n = header_length(_bytes(repo_id, WEIGHTS, 0, 8), size, what)
    header = parse_header(_bytes(repo_id, WEIGHTS, 8, 8 + n), size - 8 - n, what)
    check_weights(header, sizes, repo_id, max_params, max_bytes)
    for name in TOKENIZER_FILES:  # optional files; the tokenizer check says what is missing
        size = _size(repo_id, name)
        if size is not None and size > TOKENIZER_LIMITS[name]:
            raise BertLoadError(too_large(file_of(repo_id, name), size, TOKENIZER_LIMITS[name]))
        if size is not None:
            _download(repo_id, name)
    check_tokenizer_files(folder, repo_id, sizes["vocab_size"])
    _download(repo_id, WEIGHTS)
    return folder


def hub_folder(repo_id: str, max_bytes: int, max_params: int) -> Path:
    """A hub checkpoint's local folder, judged before its weights are downloaded."""
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        raise BertLoadError(
            Msg("Loading from the Hugging Face Hub needs huggingface_hub.")
        ) from None
    cached = _cached(repo_id)
    if cached is not None:
        return cached
    try:
        return _judge_remote(repo_id, max_bytes, max_params)
    except BertLoadError:
        raise
    except Exception as exc:  # network, 404, auth: one sentence, no traceback
        raise BertLoadError(
            Msg(
                "Could not fetch {repo} from the Hugging Face Hub ({kind}); check the id and the "
                "network, or give a local folder.",
                repo=repr(repo_id),
                kind=type(exc).__name__,
            )
        ) from None
