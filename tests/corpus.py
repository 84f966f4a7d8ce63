"""Hostile and awkward text for the browser tests (issue 4, item 1): what each case is, and what a
user must see for it with BERT's WordPiece and with a character-level preset."""

from __future__ import annotations

from dataclasses import dataclass

CUT_TOKENS = "this model reads at most 512 — the rest was cut"
CUT_CHARS = "Text is 100,000 characters; only the first"
BLANK = "Text is empty"

# Payloads that set window.__pwned if they ever run: a dialog is what the issue names, a global
# catches execution even where a dialog would be suppressed (a sandboxed frame without
# allow-modals).
IMG_PWNED = '<img src=x onerror="window.__pwned=1">'
SVG_PWNED = '"><svg onload="window.__pwned=1">'


@dataclass(frozen=True)
class Case:
    """One input, the notices #status must show, and chip texts that must appear (per tokenizer).

    bert_chips / char_chips: exact texts of some token chips (WordPiece / one chip per character);
    bert_notices / char_notices: substrings of #status.
    """

    id: str
    text: str
    bert_chips: tuple[str, ...] = ()
    char_chips: tuple[str, ...] = ()
    bert_notices: tuple[str, ...] = ()
    char_notices: tuple[str, ...] = ()
    hostile: bool = False  # markup that must stay text


BLANK_CASES = [
    Case("empty", ""),
    Case("whitespace", " \t\n\u00a0\u3000 \n  "),
]

CASES = [
    Case(
        "control_and_nul",
        "a\x00b\x01c\x07d\x1b[31m\x7fe\x08f\tg",
        char_chips=("U+0000", "U+0001", "U+0007", "U+001B", "U+007F", "U+0008", "⇥"),
    ),
    Case(
        "emoji_zwj_skin_tones",
        "coder 👩🏽‍💻 and family 👨‍👩‍👧‍👦 say 👍🏿",
        bert_chips=("[UNK]", "code", "family"),
        char_chips=("[UNK]", "c", "o"),
    ),
    Case(
        "combining_marks",
        "Z̴̡̪a̷l̸g̶o and cafe\u0301 and e\u0301",
        char_chips=("Z", "\u0301", "\u0334"),
    ),
    Case(
        "rtl_mixed",
        "Hello مرحبا بالعالم and שלום עולם, 123 end",
        bert_chips=("hello", "end"),
        char_chips=("م", "ש", "H"),
    ),
    Case(
        "cjk",
        "我喜欢你。日本語のテキストです。한국어 텍스트",
        bert_chips=("我", "日"),
        char_chips=("我", "。", "한", "テ"),
    ),
    Case(
        "script_alert",
        "<script>alert(1)</script>",
        bert_chips=("<", "script", ">", "alert"),
        char_chips=("<", "s", ">", "/"),
        hostile=True,
    ),
    Case(
        "img_onerror_alert",
        "<img src=x onerror=alert(1)>",
        bert_chips=("<", "=", ">"),
        char_chips=("<", "i", ">", "="),
        hostile=True,
    ),
    Case(
        "svg_onload_alert",
        '"><svg onload=alert(1)>',
        bert_chips=('"', "<", ">"),
        char_chips=('"', "<", ">"),
        hostile=True,
    ),
    Case(
        "img_onerror_pwned",
        IMG_PWNED,
        bert_chips=("<", '"', ">"),
        char_chips=("<", '"', ">"),
        hostile=True,
    ),
    Case(
        "svg_onload_pwned",
        SVG_PWNED,
        bert_chips=('"', "<", ">"),
        char_chips=('"', "<", ">"),
        hostile=True,
    ),
    Case(
        "word_of_5000_chars",
        "antidisestablishment" * 250,
        bert_chips=("[UNK]",),  # WordPiece gives up on words over 100 characters
        char_notices=("Text is 5,000 tokens; " + CUT_TOKENS,),
    ),
    Case(
        "over_512_tokens",
        "The quick brown fox jumps over the lazy dog. " * 80,
        bert_chips=("[CLS]", "quick", "[SEP]"),
        bert_notices=(CUT_TOKENS,),
        char_notices=("Text is 3,600 tokens; " + CUT_TOKENS,),
    ),
    Case(
        "chars_100000",
        ("Attention is all you need. " * 4000)[:100_000],
        bert_chips=("[CLS]", "attention", "[SEP]"),
        bert_notices=(CUT_CHARS, CUT_TOKENS),
        char_notices=(CUT_CHARS, CUT_TOKENS),
    ),
]
