"""The rules a selection field follows, which every tab declares its own fields with.

A selection field is one small value the user picks in the view controls (a layer, a head, the
Embeddings tab's dimensions, …). ``declared(default, rule)`` makes one; the rule makes any value
valid: clamping a selection to a trace (``Whole`` within the trace's ``engine.Bounds``), reading
a link's parameter and deciding whether a link writes it. Fields every view reads (the stack,
layer and head) are declared in ui/state.py; a tab's own in its ``Tab``
(``fields``); ``ui.state.Selection`` is made of all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lang import tr


def as_int(value) -> int:
    """An integer from a slider or a link; 0 for anything that is not a finite number."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    if number != number or number in (float("inf"), float("-inf")):  # NaN, ±inf
        return 0
    return int(number)


@dataclass(frozen=True)
class Whole:
    """A whole number from 0: up to the last the trace allows (``bound``: "layer", "head",
    "token" or "step" of the chosen stack, or the model's "edges") and to ``most``; a link
    carries up to ``digits`` digits and writes it always, or (``always`` False) only when it is
    not the default."""

    bound: str | None = None
    most: int | None = None
    digits: int = 4
    always: bool = True

    def valid(self, value, default, last: dict[str, int]):
        number = max(as_int(value), 0)
        top = self.top(last)
        return number if top is None else min(number, top)

    def top(self, last: dict[str, int]) -> int | None:
        """The largest value allowed: the trace's bound (where it is known) within ``most``."""
        bounds = [last.get(self.bound) if self.bound else None, self.most]
        known = [n for n in bounds if n is not None]
        return min(known) if known else None

    def from_link(self, name: str, raw: str, invalid: list[str]):
        if re.fullmatch(rf"\d{{1,{self.digits}}}", raw.strip()):
            number = int(raw)
            return number if self.most is None else min(number, self.most)
        invalid.append(tr("{name}={value} is not a whole number", name=name, value=repr(raw[:20])))
        return None


@dataclass(frozen=True)
class Choice:
    """One of ``choices``; anything else is the default (a link's is refused with a sentence)."""

    choices: tuple[str, ...]
    always: bool = False

    def valid(self, value, default, last: dict[str, int]):
        return value if value in self.choices else default

    def from_link(self, name: str, raw: str, invalid: list[str]):
        if raw in self.choices:
            return raw
        invalid.append(
            tr(
                "{name}={value} is not {allowed}",
                name=name,
                value=repr(raw[:20]),
                allowed=tr(" or ").join(self.choices),
            )
        )
        return None


@dataclass(frozen=True)
class Text:
    """Free text, cut at ``limit`` characters (``linked``: at most this many go into a link)."""

    limit: int
    linked: int | None = None
    always: bool = False

    def valid(self, value, default, last: dict[str, int]):
        return str(value or "")[: self.limit]

    def from_link(self, name: str, raw: str, invalid: list[str]):
        return raw[: self.limit]


def declared(default, rule) -> Any:
    """A Selection field: its default and the rule that makes any value valid (clamping, a
    link's parameter, whether a link writes it)."""
    return field(default=default, metadata={"rule": rule})


LAYER, HEAD = Whole("layer"), Whole("head")
