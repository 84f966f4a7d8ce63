"""Read an untrusted checkpoint's files without trusting them: stat first, cap, then parse.

A file is stat-ed before it is opened, so a device, a pipe or a loop of links is never read; JSON
is capped in size before it is parsed, and deep nesting is one sentence, not a RecursionError. A
safetensors file is described by its header alone: an 8-byte little-endian length, then JSON giving
each tensor's dtype, shape and byte offsets (https://huggingface.co/docs/safetensors). Nothing of
the tensor data is read here.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from lang import Msg
from model.load_errors import CheckpointError

MB = 1_000_000
HEADER_LIMIT = 1 * MB  # about 100 bytes per tensor: BERT-large's header is 40 kB
MAX_TENSORS = 4096  # BERT-large has 390 tensors, an 80-layer LLaMA 723; a 128-layer BERT 2,060
SHOWN = 60  # characters of a user's value quoted back in a message
# Sentences said in several places (lang.Msg patterns; ui/zh_CN.json has their Chinese).
UNREADABLE = "{what} cannot be read (permission denied)."
CANNOT_READ = "{what} cannot be read ({reason})."
NOT_UTF8 = "{what} is not UTF-8 text."
NOT_SAFETENSORS = "{what} could not be read: it is not a safetensors file, or is cut short."
# Bytes per element of each safetensors dtype.
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}  # fmt: skip


def size_text(n_bytes: float) -> str:
    """Bytes for people: '1.3 GB', '25.0 MB', '612 bytes'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:,.1f} {unit}"
    return f"{n_bytes:,.0f} bytes"


def file_of(name: str, file: str) -> Msg:
    """ "bert-base's config.json": a file of the checkpoint named ``name``, said in any language."""
    return Msg("{name}'s {file}", name=name, file=file)


def too_large(what: str, size: float, limit: float) -> Msg:
    """ "{what} is 3.1 GB; the limit is 2.1 GB." """
    return Msg(
        "{what} is {size}; the limit is {limit}.",
        what=what,
        size=size_text(size),
        limit=size_text(limit),
    )


def system_says(exc: OSError) -> str:
    """The operating system's words for an error ("No such file or directory"), as it says them."""
    return os.strerror(exc.errno or 0)


def shown(value: object, limit: int = SHOWN) -> str:
    """A user's value quoted back, cut to `limit` characters so a message stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- files and JSON ------------------------------------------------------------------------------
def regular_file(path: Path, what: str, limit: int) -> int | None:
    """The size of a regular file of at most `limit` bytes; None when absent; else one sentence."""
    try:
        info = path.stat()  # follows links: a link to a regular file is fine (the Hub cache)
    except FileNotFoundError:
        if path.is_symlink():
            raise CheckpointError(
                Msg("{what} is a symbolic link to a file that does not exist.", what=what)
            ) from None
        return None
    except PermissionError:
        raise CheckpointError(Msg(UNREADABLE, what=what)) from None
    except OSError as exc:  # ELOOP, ENAMETOOLONG...
        raise CheckpointError(
            Msg("{what} cannot be opened ({reason}).", what=what, reason=system_says(exc))
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(
            Msg(
                "{what} is not a regular file (a folder, device or pipe); give a real file.",
                what=what,
            )
        )
    if info.st_size > limit:
        raise CheckpointError(too_large(what, info.st_size, limit))
    return info.st_size


def read_capped(path: Path, what: str, limit: int) -> bytes:
    """At most `limit` bytes of a regular file (files in /proc claim size 0, so count again)."""
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise CheckpointError(Msg(CANNOT_READ, what=what, reason=system_says(exc))) from None
    if len(data) > limit:
        raise CheckpointError(
            Msg("{what} is larger than {limit}, the limit.", what=what, limit=size_text(limit))
        )
    return data


def parse_json(data: bytes, what: str) -> object:
    """JSON from bytes; deep nesting, bad UTF-8 and overlong numbers each give one sentence."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(Msg(NOT_UTF8, what=what)) from None
    except RecursionError:
        raise CheckpointError(
            Msg("{what} is nested too deeply to be read; it is not a config.", what=what)
        ) from None
    except ValueError:  # JSONDecodeError, or an integer of more than 4,300 digits
        raise CheckpointError(Msg("{what} is not valid JSON.", what=what)) from None


def read_json_object(path: Path, what: str, limit: int) -> dict:
    """A capped, regular JSON file that must hold an object."""
    obj = parse_json(read_capped(path, what, limit), what)
    if not isinstance(obj, dict):
        raise CheckpointError(Msg("{what} is not a JSON object.", what=what))
    return obj


# ---- safetensors header --------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorEntry:
    """One tensor as its safetensors header describes it (nothing of its data is read)."""

    dtype: str
    shape: tuple[int, ...]


def header_length(first8: bytes, file_size: int, what: str) -> int:
    """The JSON header's length from the first 8 bytes; refuses a cut or oversized header."""
    n = int.from_bytes(first8, "little") if len(first8) == 8 else file_size
    if len(first8) < 8 or 8 + n > file_size:
        raise CheckpointError(Msg(NOT_SAFETENSORS, what=what))
    if n > HEADER_LIMIT:
        raise CheckpointError(
            Msg(
                "{what} has a {size} header; a model's is under 0.1 MB and the limit is {limit}.",
                what=what,
                size=size_text(n),
                limit=size_text(HEADER_LIMIT),
            )
        )
    return n


def parse_header(raw: bytes, data_len: int, what: str) -> dict[str, TensorEntry]:
    """Every tensor of a safetensors JSON header, checked for sense against the data size."""
    header = parse_json(raw, Msg("{what}'s header", what=what))
    if not isinstance(header, dict):
        raise CheckpointError(
            Msg("{what} could not be read: its header is not a JSON object.", what=what)
        )
    header.pop("__metadata__", None)
    if len(header) > MAX_TENSORS:
        raise CheckpointError(
            Msg(
                "{what} holds {n:,} tensors; a model has a few hundred (at most {limit:,} are "
                "read).",
                what=what,
                n=len(header),
                limit=MAX_TENSORS,
            )
        )
    entries = {}
    for key, info in header.items():
        entries[key] = _entry(key, info, data_len, what)
    return entries


def _entry(key: str, info: object, data_len: int, what: str) -> TensorEntry:
    bad = Msg("{what} could not be read: the header entry for {key}", what=what, key=shown(key))
    if not isinstance(info, dict):
        raise CheckpointError(Msg("{bad} is not an object.", bad=bad))
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise CheckpointError(
            Msg("{bad} has the unknown dtype {dtype}.", bad=bad, dtype=shown(dtype))
        )
    if not isinstance(shape, list) or len(shape) > 8 or not all(_count(x) for x in shape):
        raise CheckpointError(Msg("{bad} has no valid shape.", bad=bad))
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_count(x) for x in offsets):
        raise CheckpointError(Msg("{bad} has no valid data_offsets.", bad=bad))
    begin, end = offsets
    if not begin <= end <= data_len or end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
        raise CheckpointError(
            Msg("{bad} disagrees with its shape or lies outside the file.", bad=bad)
        )
    return TensorEntry(dtype, tuple(shape))


def _count(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def read_header(path: Path, what: str, max_bytes: int) -> dict[str, TensorEntry]:
    """The tensors a local safetensors file declares, read from its header alone."""
    size = regular_file(path, what, max_bytes)
    if size is None:
        raise CheckpointError(Msg("{what} does not exist.", what=what))
    try:
        with path.open("rb") as f:
            n = header_length(f.read(8), size, what)
            raw = f.read(n)
    except OSError as exc:
        raise CheckpointError(Msg(CANNOT_READ, what=what, reason=system_says(exc))) from None
    if len(raw) != n:
        raise CheckpointError(Msg(NOT_SAFETENSORS, what=what))
    return parse_header(raw, size - 8 - n, what)


def count_lines(path: Path, what: str, stop_after: int) -> int:
    """Lines of a text file as the WordPiece loader counts them, reading no further than needed."""
    n = 0
    try:
        with path.open(encoding="utf-8") as f:  # universal newlines, as the loader reads it
            for n, _ in enumerate(f, start=1):
                if n > stop_after:
                    break
    except UnicodeDecodeError:
        raise CheckpointError(Msg(NOT_UTF8, what=what)) from None
    except OSError as exc:
        raise CheckpointError(Msg(CANNOT_READ, what=what, reason=system_says(exc))) from None
    return n
