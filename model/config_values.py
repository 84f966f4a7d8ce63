"""One value of an untrusted config.json, judged before it is trusted: each reader returns it (or
its default) or refuses with one sentence naming the file, the key and what it must be."""

from __future__ import annotations

from lang import Msg
from model.checkpoint_files import SHOWN, file_of, shown
from model.load_errors import ConfigRefused

CONFIG = "config.json"


def model_type_of(hf: dict, name: str, known: tuple[str, ...], said: str) -> str:
    """config.json's model_type when it is one of ``known``; else one sentence naming them."""
    model_type = hf.get("model_type")
    if model_type in known:
        return model_type
    kind = model_type[:SHOWN] if isinstance(model_type, str) and model_type else Msg("unknown")
    raise ConfigRefused(
        Msg(
            "{name} is a {kind} checkpoint; only {said} checkpoints (model_type {types}) can be "
            "loaded here.",
            name=name,
            kind=kind,
            said=said,
            types=one_of(known),
        )
    )


def one_of(names: tuple[str, ...]) -> str:
    """ "'gpt2', 'llama' or 'qwen2'", said in any language."""
    quoted = [repr(name) for name in names]
    if len(quoted) == 1:
        return quoted[0]
    return Msg("{names} or {last}", names=", ".join(quoted[:-1]), last=quoted[-1])


def whole_number(hf: dict, key: str, lowest: int, highest: int, default: int | None, what: str):
    """A whole number from ``lowest`` to ``highest``; ``default`` when absent (None: required)."""
    if key not in hf and default is not None:
        return default
    if key not in hf:
        raise ConfigRefused(Msg("{what} has no {key}.", what=what, key=repr(key)))
    value = hf[key]
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise ConfigRefused(
            Msg(
                "{what} sets {key} to {value}; it must be a whole number from {lowest:,} to "
                "{highest:,}.",
                what=what,
                key=key,
                value=shown(value),
                lowest=lowest,
                highest=highest,
            )
        )
    return value


def number(hf: dict, key: str, default: float | None, low: float, high: float, what: str):
    """A number strictly between ``low`` and ``high``."""
    value = hf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low < value < high:
        raise ConfigRefused(
            Msg(
                "{what} sets {key} to {value}; it must be a number between {low:g} and {high:g}.",
                what=what,
                key=key,
                value=shown(value),
                low=low,
                high=high,
            )
        )
    return float(value)


def text(hf: dict, key: str, default: str, what: str) -> str:
    """A string."""
    value = hf.get(key, default)
    if not isinstance(value, str):
        raise ConfigRefused(
            Msg(
                "{what} sets {key} to {value}; it must be a string.",
                what=what,
                key=key,
                value=shown(value),
            )
        )
    return value


def flag(hf: dict, key: str, default: bool, what: str) -> bool:
    """true or false (null: the default)."""
    value = hf.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigRefused(
            Msg(
                "{what} sets {key} to {value}; it must be true or false.",
                what=what,
                key=key,
                value=shown(value),
            )
        )
    return value


def activation(hf: dict, key: str, default: str, known: dict[str, str], name: str) -> str:
    """Our activation for config.json's name of it; one sentence for one we do not implement."""
    act = text(hf, key, default, file_of(name, CONFIG))
    if act not in known:
        raise ConfigRefused(
            Msg(
                "{name} uses the activation {act}, which is not implemented (only {known}).",
                name=name,
                act=shown(act),
                known=", ".join(known),
            )
        )
    return known[act]
