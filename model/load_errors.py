"""Why a checkpoint was not loaded: one error type per stage of the loading pipeline.

Every refusal is one sentence a user can act on, a ``lang.Msg`` (English as ``str(exc)``; the app
says it again in the reader's language through ``lang.message_of``). The file readers
(model/checkpoint_files.py) raise the plain ``CheckpointError``; the stage they ran in names it
(``refused_as``), so a caller can tell a missing folder from a refused config.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class CheckpointError(ValueError):
    """A checkpoint could not be loaded; the message is one sentence (a ``lang.Msg``)."""


class SourceNotFound(CheckpointError):
    """The source is no folder or Hub checkpoint that can be had."""


class ConfigRefused(CheckpointError):
    """config.json is unreadable, of another family, or asks for what our model does not run."""


class WeightsRefused(CheckpointError):
    """The weights file is missing or unreadable, or its tensors do not fit the config."""


class TokenizerRefused(CheckpointError):
    """The tokenizer's files are missing or unsafe, or its ids reach past the embedding table."""


# The names of before: every refusal is one of these (tests and notebooks still catch them).
BertLoadError = LMLoadError = CheckpointError


@contextlib.contextmanager
def refused_as(kind: type[CheckpointError]) -> Iterator[None]:
    """Inside the block, a plain CheckpointError (a file reader's) becomes a ``kind``."""
    try:
        yield
    except CheckpointError as exc:
        if type(exc) is not CheckpointError:
            raise
        raise kind(*exc.args) from None
