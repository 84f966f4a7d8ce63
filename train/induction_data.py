"""The induction task's texts: a copy of 3-20 characters, a gap, the same copy again.

The gap is mostly one space ("hello hello"), often nothing ("abcabc"), sometimes more spaces or a
stray symbol ("ab x ab"), so the model copies whatever sits between the copies.

Half the copies are random strings drawn with repeats (spaces included), half are word-like:
syllables or words drawn from a small pool with repeats ("sissimi", "tam tok tam"), so the same
token often follows the same context and only a longer run tells the copies' places apart.
Words are made up from syllables here: no probe text is put in on purpose.
"""

from __future__ import annotations

import random
import string

MIN_LEN, MAX_LEN = 3, 20  # length of one copy
MAX_GAP = 3  # characters between the copies
LETTERS = string.ascii_lowercase
SYMBOLS = string.ascii_lowercase + string.digits
VOWELS = "aeiou"
CONSONANTS = "".join(c for c in LETTERS if c not in VOWELS)


def gap(rng: random.Random) -> str:
    """What separates the two copies: "" 30 %, " " 50 %, two or three spaces or " x " 20 %."""
    draw = rng.random()
    if draw < 0.3:
        return ""
    if draw < 0.8:
        return " "
    return rng.choice(("  ", "   ", f" {rng.choice(SYMBOLS)} "))


def random_text(
    rng: random.Random, low: int = MIN_LEN, high: int = MAX_LEN, sep: str | None = None
) -> str:
    """copy + gap + copy, the copy drawn with repeats from letters, digits and spaces."""
    n = rng.randint(low, high)
    space = rng.choice((0.0, 0.1, 0.2))  # how often a space
    pool = rng.choice((SYMBOLS, LETTERS, LETTERS[: rng.randint(2, 8)]))  # few symbols: many repeats
    half = "".join(" " if rng.random() < space else rng.choice(pool) for _ in range(n))
    return half + (gap(rng) if sep is None else sep) + half


def syllable(rng: random.Random) -> str:
    return rng.choice(("", *CONSONANTS)) + rng.choice(VOWELS) + rng.choice(("", "", *CONSONANTS))


def word_text(rng: random.Random, low: int = MIN_LEN, high: int = MAX_LEN) -> str:
    """copy + gap + copy, the copy words of syllables drawn with repeats from a pool of 2-4."""
    n = rng.randint(low, high)
    syllables = [syllable(rng) for _ in range(rng.randint(2, 4))]
    letters = rng.choice((1, 2, 3, 4))  # letters of a doubled consonant ("ss") or none
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(3)]
    half = ""
    while len(half) < n:
        if rng.random() < 0.5:
            part = rng.choice(words)  # a word again: "the cat sat the cat"
        else:
            part = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 5)))
        if letters == 1 and len(part) > 2:
            k = rng.randrange(len(part))
            part = part[:k] + part[k] + part[k:]
        half += part + " "
    half = half[:n].strip() or rng.choice(LETTERS)
    return half + gap(rng) + half


def example(rng: random.Random) -> str:
    """One training text: half random strings, half word-like."""
    return random_text(rng) if rng.random() < 0.5 else word_text(rng)
