"""Downloads in one folder bounded in bytes, inside Gradio's own file cache (docs/exports.md).

Gradio serves a returned file by copying it into its cache (``GRADIO_TEMP_DIR``, by default
``<tmp>/gradio``) unless the file is already there: ``Block.move_resource_to_block_cache`` skips
the copy for a path inside ``Block.GRADIO_CACHE``, which ``gradio.utils.get_upload_folder()``
names, and the ``/file=`` route serves that folder. So the exports are written in
``<Gradio's cache>/transformer-anatomy-exports/`` and nothing else: one file on disk per export,
and the folder holds at most ``EXPORT_BYTES`` (env ``TA_EXPORT_BYTES``) and ``EXPORT_FILES``
files, oldest removed first. An export larger than the whole budget is refused with a sentence.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from gradio.utils import get_upload_folder

from lang import Msg
from shelf import CUSTOM_PREFIX, LIVE_PREFIX, InputError

FOLDER = "transformer-anatomy-exports"  # inside Gradio's cache folder
MIB = 2**20
STAMPED = re.compile(r"\d{20}-")  # an export's folder: when it was written, in ns


def budget_from_env(default: int = 512 * MIB) -> int:
    """``TA_EXPORT_BYTES`` (a whole number of bytes) or the default; a bad value stops the start."""
    value = os.environ.get("TA_EXPORT_BYTES", "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise ValueError(f"TA_EXPORT_BYTES must be a whole number of bytes, not {value!r}")
    return int(value)


EXPORT_BYTES = budget_from_env()  # every export on disk together
EXPORT_FILES = 200  # and at most this many (a CSV is a few kB: the folder stays quick to list)
TOO_LARGE = (
    "This export is {size} MB, more than the {budget} MB this server keeps for downloads; "
    "try a shorter text or a smaller model."
)


class TooLarge(InputError):
    """One export larger than the whole budget (said to the user in their language)."""


class Exports:
    """One folder of downloads, bounded in bytes and in files; safe from several threads."""

    def __init__(
        self, root: str | Path | None = None, budget: int | None = None, files: int | None = None
    ) -> None:
        self._root = Path(root) if root is not None else None
        self.budget = EXPORT_BYTES if budget is None else budget
        self.files = EXPORT_FILES if files is None else files
        self._lock = threading.Lock()
        self._last = 0  # the newest folder's stamp: each new one is later, even within a tick
        # The folder's listing as of its last change: read again only when the folder's own
        # mtime says an entry came or went by another hand (Gradio's delete_cache, a person).
        # Listed afresh on every write it cost 15 ms with 200 exports kept: on every Heads tab
        # switch, which writes the head table's CSV.
        self._known: list[tuple[int, Path, int]] = []
        self._known_at: tuple[Path, int] | None = None  # (folder, its mtime when listed)

    @property
    def root(self) -> Path:
        """The folder; by default inside Gradio's cache as it is named now (GRADIO_TEMP_DIR)."""
        return self._root if self._root is not None else Path(get_upload_folder()) / FOLDER

    def write(self, name: str, data: bytes | str) -> str:
        """Write one download as ``<root>/<fresh folder>/<name>``; returns its path.

        The oldest exports are removed first until this one fits; one larger than the whole
        budget raises TooLarge and removes nothing.
        """
        blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(blob) > self.budget:
            raise TooLarge(
                Msg(
                    TOO_LARGE,
                    size=f"{len(blob) / MIB:,.1f}",
                    budget=f"{self.budget / MIB:,.1f}",
                )
            )
        with self._lock:  # the listing, the removals and the write: one export at a time
            root = self.root
            root.mkdir(parents=True, exist_ok=True)
            kept = self._listing(root)
            total = sum(size for _, _, size in kept)
            while kept and (total + len(blob) > self.budget or len(kept) + 1 > self.files):
                _, oldest, size = kept.pop(0)
                remove(oldest)
                total -= size
            self._last = max(time.time_ns(), self._last + 1)
            folder = Path(tempfile.mkdtemp(prefix=f"{self._last:020d}-", dir=root))
            path = folder / safe_name(name)
            path.write_bytes(blob)
            kept.append((self._last, folder, len(blob)))
            self._known, self._known_at = kept, (root, root.stat().st_mtime_ns)
        return str(path)

    def _listing(self, root: Path) -> list[tuple[int, Path, int]]:
        """``listing(root)``, kept from the last write while the folder's mtime is unchanged."""
        if self._known_at != (root, root.stat().st_mtime_ns):
            self._known = self.listing(root)
        return list(self._known)

    @staticmethod
    def listing(root: Path) -> list[tuple[int, Path, int]]:
        """(written at, ns since 1970; entry; bytes) of every entry of ``root``, oldest first.

        An export's folder is named by when it was written (``<20 digits>-``): a file system's
        clock ticks too coarsely to order exports written within a few milliseconds. Anything
        else found there (left by an older version, a person) is dated by its files' mtime.
        """
        found = []
        for entry in root.iterdir():
            try:
                if entry.is_dir() and not entry.is_symlink():
                    files = [p.stat() for p in entry.rglob("*") if p.is_file()]
                    stamp = max((s.st_mtime_ns for s in files), default=entry.stat().st_mtime_ns)
                    if STAMPED.match(entry.name):
                        stamp = int(entry.name[:20])
                    found.append((stamp, entry, sum(s.st_size for s in files)))
                else:
                    stat = entry.lstat()
                    found.append((stat.st_mtime_ns, entry, stat.st_size))
            except FileNotFoundError:  # removed meanwhile (Gradio's delete_cache, a person)
                continue
        return sorted(found, key=lambda item: (item[0], item[1].name))

    def bytes_on_disk(self) -> int:
        root = self.root
        return sum(size for _, _, size in self.listing(root)) if root.exists() else 0


def remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def safe_name(name: str) -> str:
    """A file name of letters, digits, ``.``, ``_`` and ``-`` (no folders, no leading dot)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(str(name)).name).lstrip(".-")
    return name[:120] or "export"


def model_part(model_id: str) -> str:
    """The model as a name part: "bert", "dates-300", "all-MiniLM-L6-v2" (a checkpoint's last
    path part), "induction-trained-here" (a model trained on a page: its secret id stays out)."""
    if str(model_id).startswith(LIVE_PREFIX):
        return model_part(str(model_id).split(":")[1]) + "-trained-here"
    name = str(model_id).removeprefix(CUSTOM_PREFIX).rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip(".-")[:40] or "model"


def input_hash(key: tuple) -> str:
    """8 hex digits of SHA-256 over what was analysed, the model left out (it is named
    separately): the text(s), the target, whether positions were off (``Analysis.key[1:]``)."""
    text = json.dumps(list(key[1:]), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def stats_name(model_id: str, stack: str, key: tuple) -> str:
    """``head_stats_<model>_<stack>_<hash>.csv``: every layer's rows, so no layer in the name."""
    return f"head_stats_{model_part(model_id)}_{safe_name(stack)}_{input_hash(key)}.csv"


def trace_name(model_id: str, key: tuple) -> str:
    """``trace_<model>_<hash>.npz``: every stack of one analysed input."""
    return f"trace_{model_part(model_id)}_{input_hash(key)}.npz"


EXPORTS = Exports()  # the server's one folder
