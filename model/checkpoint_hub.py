"""A checkpoint from the Hugging Face Hub, judged before its weights are downloaded.

config.json is fetched (after a HEAD request says it is small) and judged; the weights' safetensors
header is fetched by two HTTP range requests and judged; the tokenizer files are fetched and judged;
only then is model.safetensors downloaded (never a pickled .bin from the Hub). huggingface_hub's
``get_safetensors_metadata`` does the same range requests but reads headers up to 25 MB and, without
model.safetensors, every shard of a sharded repo: we keep our own 1 MB header cap and single-file
rule.

Before asking the network at all, ``hub_reachable`` opens one TCP connection to the Hub's host,
capped at REACH_SECONDS whatever the name lookup does: with no network, huggingface_hub's own
retries kept a typed Hub id waiting 24 s for its sentence.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

from lang import Msg
from model.checkpoint_files import file_of, header_length, parse_header, read_json_object, too_large
from model.checkpoint_guard import (
    CONFIG,
    CONFIG_LIMIT,
    NO_FILE,
    WEIGHTS,
    Wanted,
    judge_config,
    match_keys,
)
from model.load_errors import (
    CheckpointError,
    ConfigRefused,
    SourceNotFound,
    TokenizerRefused,
    WeightsRefused,
    refused_as,
)
from model.tokenizer_guard import check_tokenizer_files


def _size(repo_id: str, filename: str) -> int | None:
    """A hub file's size in bytes (a HEAD request), None when the repo has no such file."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import RemoteEntryNotFoundError

    try:
        size = get_hf_file_metadata(hf_hub_url(repo_id, filename)).size
    except RemoteEntryNotFoundError:
        return None
    if size is None:
        raise SourceNotFound(
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
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    if cached_only:  # the cache alone, no request (hf_hub_download's headers may ask the Hub)
        found = try_to_load_from_cache(repo_id, filename)
        if not isinstance(found, str):
            raise FileNotFoundError(filename)
        return Path(found)
    return Path(hf_hub_download(repo_id, filename))


def _cached(repo_id: str, tokenizer_files) -> Path | None:
    """The cached snapshot when config and weights are on disk already (judged there, locally)."""
    try:
        folder = _download(repo_id, CONFIG, cached_only=True).parent
        _download(repo_id, WEIGHTS, cached_only=True)
    except Exception:  # not cached: ask the network
        return None
    for name in tokenizer_files:
        with contextlib.suppress(Exception):
            _download(repo_id, name, cached_only=True)
    return folder


def _judge_remote(repo_id: str, wanted: Wanted) -> Path:
    """Fetch and judge config.json, the weights' header and the tokenizer; then the weights."""
    with refused_as(ConfigRefused):
        size = _size(repo_id, CONFIG)
        if size is None:
            raise SourceNotFound(Msg(NO_FILE, name=repo_id, file=CONFIG))
        if size > CONFIG_LIMIT:
            raise ConfigRefused(too_large(file_of(repo_id, CONFIG), size, CONFIG_LIMIT))
        folder = _download(repo_id, CONFIG).parent
        hf = read_json_object(folder / CONFIG, file_of(repo_id, CONFIG), CONFIG_LIMIT)
        family, config = judge_config(hf, repo_id, wanted)
    with refused_as(WeightsRefused):
        what = file_of(repo_id, WEIGHTS)
        size = _size(repo_id, WEIGHTS)
        if size is None:
            raise WeightsRefused(
                Msg(
                    "{name} has no {file}; only safetensors weights are loaded (no pickled .bin).",
                    name=repo_id,
                    file=WEIGHTS,
                )
            )
        if wanted.max_bytes is not None and size > wanted.max_bytes:
            raise WeightsRefused(too_large(what, size, wanted.max_bytes))
        n = header_length(_bytes(repo_id, WEIGHTS, 0, 8), size, what)
        header = parse_header(_bytes(repo_id, WEIGHTS, 8, 8 + n), size - 8 - n, what)
        config = family.fit(config, {family.hf_name(key) for key in header})
        match_keys(header, config, family, repo_id)
    with refused_as(TokenizerRefused):
        limits = family.tokenizer.limits
        for name, limit in limits.items():  # optional files; the check says what is missing
            size = _size(repo_id, name)
            if size is not None and size > limit:
                raise TokenizerRefused(too_large(file_of(repo_id, name), size, limit))
            if size is not None:
                _download(repo_id, name)
        check_tokenizer_files(folder, repo_id, family.tokenizer, config.vocab_size)
    _download(repo_id, WEIGHTS)
    return folder


def _tokenizer_files(wanted: Wanted) -> list[str]:
    """Every tokenizer file any of the wanted families may bring (their config is not read yet)."""
    files = (file for family in wanted.families.values() for file in family.tokenizer.limits)
    return list(dict.fromkeys(files))


def _offline() -> bool:
    from huggingface_hub import constants

    return constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")


REACH_SECONDS = 2.5  # the longest a Hub id waits to learn that the Hub cannot be reached
PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def hub_reachable(seconds: float = REACH_SECONDS) -> bool:
    """Whether the Hub's host takes a TCP connection within ``seconds`` (its name looked up
    too, on a thread that is not waited for beyond that). False at once when HF_HUB_OFFLINE is
    set; True without asking behind a proxy (the host is reached through it)."""
    from huggingface_hub import constants

    if _offline():
        return False
    if any(os.environ.get(name) for name in PROXIES):
        return True
    url = urlsplit(constants.ENDPOINT)
    address = (url.hostname or "", url.port or (443 if url.scheme == "https" else 80))
    answered: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection(address, timeout=seconds).close()
            answered.append(True)
        except (OSError, ValueError):
            answered.append(False)

    thread = threading.Thread(target=probe, daemon=True, name="hub-probe")
    thread.start()
    thread.join(seconds)
    return bool(answered and answered[0])


def _unreachable(repo_id: str) -> SourceNotFound:
    if _offline():
        return SourceNotFound(
            Msg(
                "Could not fetch {repo}: {repo} is no folder here, and the Hugging Face Hub "
                "is switched off (HF_HUB_OFFLINE), so there is no network to it; give the "
                "folder that holds config.json and the weights.",
                repo=repr(repo_id),
            )
        )
    return SourceNotFound(
        Msg(
            "Could not reach the Hugging Face Hub within {seconds:g} s to fetch {repo}: {repo} "
            "is no folder here; check the network, or give the folder that holds config.json "
            "and the weights.",
            seconds=REACH_SECONDS,
            repo=repr(repo_id),
        )
    )


def hub_folder(repo_id: str, wanted: Wanted) -> Path:
    """A hub checkpoint's local folder, judged before its weights are downloaded."""
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        raise SourceNotFound(
            Msg("Loading from the Hugging Face Hub needs huggingface_hub.")
        ) from None
    cached = _cached(repo_id, _tokenizer_files(wanted))
    if cached is not None:
        return cached
    if not hub_reachable():
        raise _unreachable(repo_id)
    try:
        return _judge_remote(repo_id, wanted)
    except CheckpointError:
        raise
    except Exception as exc:  # offline, network, 404, auth: one sentence, no traceback
        if _offline():
            raise _unreachable(repo_id) from None
        raise SourceNotFound(
            Msg(
                "Could not fetch {repo} from the Hugging Face Hub ({kind}); check the id and the "
                "network, or give a local folder.",
                repo=repr(repo_id),
                kind=type(exc).__name__,
            )
        ) from None
