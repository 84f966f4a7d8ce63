"""Train: a task trained from scratch on this page, live — our own model and loop (train.fit).

It trains by steps, at most the Steps asked, and stops once it reaches its lesson (train.live):
by seconds, a busy server's student got a model below its lesson. The page starts a job
(serve.training: a bounded number at once server-wide, the rest told their place in line); a
timer asks every second how it stands (how far from its lesson, too) and redraws the loss curve
and the chosen head on the probe text (viz.training). The weights belong to the page that
trained them: only its id reaches them, it can download them or open them in every other tab
("use this model", under a secret model id; marked where it has not reached its lesson), and a
page that stops asking (closed) stops its training. The wiring is ui/events.py's
``wire_training``; the handlers are ui/training_handlers.py's ``Training``.
"""

from __future__ import annotations

import json

import gradio as gr

from train.live import LIVE
from ui.i18n import t
from ui.tabs.base import Built, Radio, Slider, Tab, View, plot

CAPTION = (
    "**Train a model yourself**, from scratch, with this app's own Transformer and training loop: "
    "pick a task, press **Train**, and watch the loss fall, the held-out score rise to its "
    "lesson (training stops there, or after its Steps) and one "
    "head's attention on a probe text take shape (the induction head forming, the dates model's "
    "cross-attention lining up with the digits; the roles model with the positional encoding off, "
    "blind to order, stalling where 我喜欢你 and 你喜欢我 differ). **Stop** keeps what it "
    "learned. The weights are "
    "this page's alone: download them as safetensors with their card, or press **Use this model "
    "in every tab** (it joins this page's model list and opens on the Output tab)."
)
TASKS = [
    ("roles: who did what to whom (encoder, ~10 s)", "roles"),
    ("induction: copy a repeated string (decoder, ~1 min)", "induction"),
    ("dates: many formats → ISO (encoder-decoder, ~2 min)", "dates"),
]
MOST_STEPS = 6000  # the slider's end: twice the longest task's own steps


def steps_follow(task, steps) -> None:
    """Each task starts at its own steps, which reach its lesson (train.live): a run by seconds
    gave a busy server's student a model below its lesson. In the browser alone."""
    defaults = json.dumps({name: recipe.steps for name, recipe in LIVE.items()})
    task.change(fn=None, js=f"(task) => ({defaults})[task]", inputs=[task], outputs=[steps])


def build() -> Built:
    gr.Markdown(t(CAPTION), elem_classes="ta-caption")
    with gr.Row():
        task = Radio(
            [(t(label), value) for label, value in TASKS],
            value="roles",
            label=t("Task"),
            elem_id="train-task",
            scale=3,
        )
        steps = Slider(
            50,
            MOST_STEPS,
            value=LIVE["roles"].steps,
            step=50,
            label=t("Steps"),
            info=t("at most: it stops once it reaches its lesson"),
            elem_id="train-steps",
        )
        positions = gr.Checkbox(
            True,
            label=t("Positional encoding"),
            info=t("Off: trained blind to order (roles: 我喜欢你 = 你喜欢我)"),
            elem_id="train-positions",
        )
    steps_follow(task, steps)
    with gr.Row(elem_id="train-actions"):  # two a row on a phone (assets/app.css)
        start = gr.Button(t("Train"), variant="primary", elem_id="train-start")
        stop = gr.Button(t("Stop"), elem_id="train-stop")
        save = gr.Button(t("Download the weights and card"), elem_id="train-save")
        use = gr.Button(
            t("Use this model in every tab"), variant="primary", visible=False, elem_id="train-use"
        )
    status = gr.Markdown(elem_id="train-status")
    figure = plot("train-plot")
    weights = gr.File(
        label=t("Trained weights (safetensors) and card (JSON)"),
        file_count="multiple",
        visible=False,
        elem_id="train-weights",
    )
    timer = gr.Timer(1.0, active=False)
    return Built(
        outputs={
            "train_status": status,
            "train_plot": figure,
            "train_weights": weights,
            "train_use": use,
        },
        inputs={
            "train_task": task,
            "train_steps": steps,
            "train_positions": positions,
            "train_start": start,
            "train_stop": stop,
            "train_save": save,
            "train_timer": timer,
        },
    )


def makers(view: View) -> dict:
    return {}  # drawn by the training's own events, never from the text's analysis


TAB = Tab("train", "Train", build, makers, depends={})
