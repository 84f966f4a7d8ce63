"""What the Output tab says about a trained model's steps, as pure functions (no Gradio).

What the model was trained on (from its card), a ✓ or ✗ for every step whose next token the text
already holds, where a repeated text's copies lie (the first copy cannot be predicted, the second
can be copied), and which step the view should open at.
"""

from __future__ import annotations

from lang import LOCALE, tr
from train.progress import below_lesson

RIGHT, WRONG = "✓", "✗"
LESSON = "▶"  # the step the Output tab opens at (its table row and its attention row)
MIN_COPY = 2  # a repeat shorter than this is chance, not a copy


def trained_on(card: dict) -> str:
    """One sentence from a trained model's card: its task, steps and training time."""
    task = card.get("task_zh") if LOCALE.get() == "zh-CN" else None
    if not task:
        task = card["task"].rstrip(".")
        task = task[:1].lower() + task[1:]  # "Dates written …" inside the sentence
    said = tr(
        "Trained from scratch on {task}, for {steps} steps ({seconds} s on one CPU thread); "
        "data made by our own code, nothing downloaded.",
        task=task,
        steps=f"{card['steps']:,}",
        seconds=f"{card['wall_time_s']:.0f}",
    )
    positions = card.get("train", {}).get("positions") is not False
    if not positions:  # a live run with the switch off
        said += " " + tr(
            "Its positional encoding was off while it trained: it never saw word order."
        )
    scores = card.get("scores") or {}
    if below_lesson(scores.get("held_out"), scores.get("lesson"), positions):
        said += " " + tr(
            "⚠️ It has not reached its lesson: {score} on held-out data, of the {lesson} the "
            "lesson needs. Expect mistakes where the lesson needs it right (Which heads matter "
            "offers none of the lesson's pairs for it); train it again on the Train tab.",
            score=f"{scores['held_out']:.0%}",
            lesson=f"{scores['lesson']:.0%}",
        )
    return said


def step_marks(predicted: list[int], stream: list[int], typed: int | None = None) -> list[str]:
    """Per step t: ✓ when its top prediction is token t + 1 of the stream, ✗ when not, "" where
    nothing the user supplied follows it to check against: the last step, and the steps whose
    next token the model wrote itself (from position ``typed`` on: it would be ✓ by
    construction)."""
    known = len(stream) if typed is None else min(typed, len(stream))
    marks = [RIGHT if predicted[t] == stream[t + 1] else WRONG for t in range(known - 1)]
    return marks + [""] * (len(predicted) - len(marks))


def copies(tokens: list[str]) -> tuple[int, int] | None:
    """(start, n): from `start` on, n tokens repeat the text's first n (tokens without <s>; the
    repeat may overlap its source, as in a continuation that keeps copying), the start with the
    longest repeat, the earliest of equals; None when nothing of MIN_COPY tokens repeats."""
    best = (0, 0)
    for start in range(1, len(tokens)):
        n = 0
        while start + n < len(tokens) and tokens[start + n] == tokens[n]:
            n += 1
        if n > best[1]:
            best = (start, n)
    return best if best[1] >= MIN_COPY else None


def copy_note(tokens: list[str]) -> str:
    """A sentence on a decoder's text (tokens without <s>): which steps no model can predict (all
    before the copy, the first copy and whatever follows it) and which ones copying can (step t
    reads token t and predicts token t + 1, with <s> at 0)."""
    found = copies(tokens)
    if found is None:
        return tr(
            "Nothing in this text repeats, so no step can copy: type something twice "
            "(`hello hello`) to see the model copy."
        )
    start, _ = found
    return tr(
        "Steps 0–{last} predict the first copy: nothing before it says what comes next, so no "
        "model can predict it (✗ there is expected). From step {start} on, each step can copy "
        "what followed the same token in the first copy (induction).",
        last=start - 1,
        start=start + 1,
    )


def opening_step(arch: str, tokens: list[str]) -> int:
    """The step a view opens at: a decoder's step that reads the second copy's first token and
    predicts its second (tokens without <s>); an encoder-decoder's step 0, which writes the first
    digit (dates); else 0."""
    if arch != "decoder":
        return 0
    found = copies(tokens)
    return found[0] + 1 if found is not None else 0
