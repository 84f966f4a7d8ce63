"""viz.output_facts: what the Output tab says about a trained model's steps."""

from __future__ import annotations

import pytest

from lang import speaking
from model import TRAINED
from viz.output_facts import copies, copy_note, opening_step, step_marks, trained_on


def test_trained_on_is_one_sentence_from_the_card():
    said = trained_on(TRAINED["induction"])
    assert said.startswith(
        "Trained from scratch on any text typed twice (`<s> mississippi"
    ) and said.endswith(".")
    assert f"{TRAINED['induction']['steps']:,} steps" in said
    assert "on dates written in 8 Chinese and English formats" in trained_on(TRAINED["dates"])


def test_each_step_is_checked_against_the_next_token():
    assert step_marks([5, 7, 9, 4], [1, 5, 8, 9]) == ["✓", "✗", "✓", ""]


@pytest.mark.parametrize(
    ("text", "found", "opens"),
    [("mississippi mississippi", (12, 11), 13), ("abcabd abcabd", (7, 6), 8),
     ("qzvkdmqzv", (6, 3), 7), ("the cat sat the cat sat s", (12, 12), 13),
     ("hello hello hello hello", (6, 17), 7), ("abcdefg", None, 0)],
)  # fmt: skip
def test_the_second_copy_is_found_and_the_view_opens_there(text, found, opens):
    assert copies(list(text)) == found
    assert opening_step("decoder", list(text)) == opens


def test_the_first_copy_is_said_to_be_unpredictable():
    note = copy_note(list("hello hello"))
    assert note.startswith("Steps 0–5 predict the first copy") and "From step 7 on" in note
    assert "Nothing in this text repeats" in copy_note(list("abc"))


def test_dates_open_at_the_first_output_digit():
    assert opening_step("encoder-decoder", list("2026-11-22")) == 0


def test_the_sentences_speak_chinese_on_a_chinese_page():
    with speaking("zh-CN"):
        said = trained_on(TRAINED["induction"])
        note = copy_note(list("hello hello"))
    assert "任意输入两遍的文本" in said and "5,000" in said
    assert note.startswith("第 0–5 步预测第一遍") and "从第 7 步起" in note
