"""The tensor table of a GGUF file, read without building its vocabulary.

gguf's ``GGUFReader`` turns every metadata value into numpy views, a 262,144-token vocabulary
three times over (its tokens, scores and types): seconds for Gemma 3's file. Preparing a model
needs only the tensor table that follows the metadata, so this walks the metadata without
keeping it (a string array is a run of lengths to step over) and reads the table: each tensor's
name, shape (in torch's order), quantization type and where its bytes lie. The byte counts
come from gguf's own table of block sizes (``GGML_QUANT_SIZES``), every type gguf knows.

The layout (GGUF versions 2 and 3): "GGUF", version u32, tensor count u64, metadata count u64;
each metadata entry a string key, a u32 type and its value; then each tensor's string name, its
dimension count u32, its dimensions u64 (fastest-moving first), its type u32 and its offset u64
from the start of the data, which begins at the next multiple of ``general.alignment`` (32).
A string is a u64 length and that many UTF-8 bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from math import prod

import numpy as np

# metadata value type -> struct format (fixed-size types); 8 = string, 9 = array
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class TableEntry:
    """One tensor of the file: where its bytes are and what they hold."""

    name: str
    shape: tuple[int, ...]  # torch's order (the file lists the fastest-moving dimension first)
    kind: int  # the ggml type (gguf's GGMLQuantizationType)
    start: int  # from the start of the file
    nbytes: int


@dataclass(frozen=True)
class GgufTable:
    path: str
    architecture: str
    tensors: tuple[TableEntry, ...]


class _Cursor:
    def __init__(self, blob: np.ndarray):
        self.blob, self.pos = blob, 0

    def take(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.blob, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def string(self) -> str:
        length = self.take("Q")
        self.pos += length
        return bytes(self.blob[self.pos - length : self.pos]).decode("utf-8")

    def value(self, kind: int, keep: bool):
        """One metadata value (kept only when asked: the two this reader needs)."""
        if kind in _FIXED:
            return self.take(_FIXED[kind])
        if kind == _STRING:
            if keep:
                return self.string()
            length = self.take("Q")
            self.pos += length
            return None
        if kind != _ARRAY:
            raise ValueError(f"metadata value of unknown type {kind}")
        inner, count = self.take("IQ")
        if inner in _FIXED:
            self.pos += count * struct.calcsize(_FIXED[inner])
        else:
            for _ in range(count):
                self.value(inner, keep=False)
        return None


def read_table(path: str) -> GgufTable:
    """The file's architecture and tensor table; ValueError when it is not a GGUF gguf reads."""
    blob = np.memmap(path, mode="r", dtype=np.uint8)
    if bytes(blob[:4]) != b"GGUF":
        raise ValueError("not a GGUF file")
    try:
        return _table(path, blob)
    except struct.error:
        raise ValueError("the file ends inside its header") from None


def _table(path: str, blob: np.ndarray) -> GgufTable:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    at = _Cursor(blob)
    at.pos = 4
    version, n_tensors, n_meta = at.take("IQQ")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version}")
    wanted = {"general.architecture": None, "general.alignment": 32}
    for _ in range(n_meta):
        key = at.string()
        value = at.value(at.take("I"), keep=key in wanted)
        if key in wanted:
            wanted[key] = value
    rows = []
    for _ in range(n_tensors):
        name = at.string()
        dims = at.take(f"{at.take('I')}Q")
        dims = (dims,) if isinstance(dims, int) else dims
        kind, offset = at.take("IQ")
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        rows.append((name, tuple(reversed(dims)), kind, offset, prod(dims) // block * size))
    align = wanted["general.alignment"]
    data = (at.pos + align - 1) // align * align
    tensors = tuple(TableEntry(n, s, k, data + o, b) for n, s, k, o, b in rows)
    if any(t.start + t.nbytes > blob.size for t in tensors):
        raise ValueError("the file ends before its last tensor")
    return GgufTable(path, wanted["general.architecture"], tensors)


def tensor_bytes(table: GgufTable, entry: TableEntry) -> np.ndarray:
    """One tensor's bytes, read-only, shaped as gguf's dequantization takes them: values in the
    tensor's shape, or rows of quantized blocks."""
    from gguf.constants import GGMLQuantizationType

    raw = np.memmap(table.path, mode="r", dtype=np.uint8)[entry.start : entry.start + entry.nbytes]
    plain = {GGMLQuantizationType.F32: np.float32, GGMLQuantizationType.F16: np.float16}
    if entry.kind in plain:
        return raw.view(plain[entry.kind]).reshape(entry.shape)
    return raw.reshape(*entry.shape[:-1], -1)
