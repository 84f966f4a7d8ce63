"""The three tasks as a table: data, model and training recipe of each trained model (issue 7)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from train import dates, induction, roles
from train.loop import TrainSpec


@dataclass(frozen=True)
class Task:
    """A task module (tokenizer, config, batches, loss, evaluate) and how to train on it."""

    name: str
    description: str
    data: ModuleType
    spec: TrainSpec
    description_zh: str = ""  # the same in Chinese, for the page


# fmt: off
TASKS: dict[str, Task] = {
    "dates": Task(
        "dates",
        "Dates written in 8 Chinese and English formats -> ISO 8601 (2026-11-22); greedy decoding",
        dates,
        TrainSpec(steps=1500, batch_size=64, lr=2e-3, warmup=100, schedule="linear",
                  snapshots=(0, 100, 300, 600, 1500)),
        "用 8 种中英文格式书写的日期 -> ISO 8601（2026-11-22）；贪心解码",
    ),
    "induction": Task(
        "induction",
        "Any text typed twice (`<s> mississippi mississippi`): predict the next token of the "
        "second copy, which only copying from the first copy can do (induction); letters, "
        "digits, space",
        induction,
        TrainSpec(steps=5000, batch_size=64, lr=2e-3, warmup=100, schedule="linear",
                  snapshots=(0, 500, 1000, 2000, 5000)),
        "任意输入两遍的文本（`<s> mississippi mississippi`）：预测第二遍的下一个词元，"
        "只有从第一遍复制才能做到（归纳）；字母、数字、空格",
    ),
    "roles": Task(
        "roles",
        "Who did what to whom: tag each character of a Chinese or English SVO sentence as "
        "agent / action / patient / other",
        roles,
        TrainSpec(steps=300, batch_size=64, lr=2e-3, warmup=30, schedule="linear",
                  snapshots=(0, 25, 50, 100, 300)),
        "谁对谁做了什么：把中文或英文主谓宾句子的每个字符标为施事 / 动作 / 受事 / 其他",
    ),
}
# fmt: on
