"""Live training for visitors (issue 21): a server-wide bound on trainings, each owned by a page.

At most ``TA_MAX_TRAININGS`` models train at once (default 1: on two cores one training already
takes a core); later requests wait in line, first come first served, and are told their place in
a sentence. A job belongs to the page that started it: its progress and its weights are given to
that page id only, and it stops when the page asks or closes. A training runs in a process of its
own on one torch thread (train.process): in the server's process a class's requests starved it
of the interpreter lock, and it missed its lesson exactly while the class followed along. It
trains by steps, until its lesson, under a time cap (train.fit): a busy server trains the same
model, later, and the status line says how far it is from its lesson, and why if it missed it.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import train
from lang import Msg, message_of, tr
from model.trained import save_weights
from model.transformer import Transformer
from serve.turns import env_count
from shelf import LIVE_PREFIX
from train.live import LIVE, MAX_SECONDS, time_cap
from train.process import fit_in_process
from train.progress import Progress, not_reached, toward_lesson

MAX_TRAININGS = env_count("TA_MAX_TRAININGS", 1)
ABANDONED = 15.0  # s without a page's asking: the page was closed, its training stops
MAX_STEPS = 20_000  # the most steps a page may ask for (the time cap bounds them too)
KEPT = 64  # ended jobs kept (their pages may not have said goodbye); the oldest go first
WORKING = ("waiting", "running")
STATES = {  # what the status line says of a job that has reported
    "running": "The {name} model is training: step {step} of {steps}, {elapsed} s (at most "
    "{seconds}); {score}.",
    "done": "The {name} model is done: step {step} of {steps}, {elapsed} s; {score}.",
    "stopped": "The {name} model was stopped: step {step} of {steps}, {elapsed} s; {score}.",
}


@dataclass(eq=False)  # compared and hashed by identity: a page may own a job after another
class Job:
    """One page's training: waiting, running, then done, stopped or failed."""

    page: str
    name: str
    steps: int  # at most (train.fit)
    seconds: float  # the time cap
    seed: int
    positions: bool = True  # False: trained without positional encoding (train.fit)
    until_lesson: bool = True  # done once it reaches its lesson
    stop: threading.Event = field(default_factory=threading.Event)
    state: str = "waiting"  # "waiting" | "running" | "done" | "stopped" | "failed"
    progress: Progress | None = None
    net: Transformer | None = None
    error: Exception | None = None  # why it failed, said in the reader's language
    seen: float = field(default_factory=time.monotonic)  # the page last asked (touch)
    # The trained model's id in the other tabs ("page:<task>:<secret>"): unguessable, and new
    # for every training, so no trace cached for an earlier model of this page is ever reused.
    model_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.model_id = f"{LIVE_PREFIX}{self.name}:{secrets.token_urlsafe(12)}"


def bounded(name: str, steps, seconds) -> tuple[int, float]:
    """The steps and the time cap a page may ask for: the recipe's steps where none (or no
    number) is asked, at most MAX_STEPS; the cap for those steps where none is, at most
    MAX_SECONDS."""
    recipe = LIVE[name]
    steps = float(recipe.steps if steps is None else steps)
    steps = int(min(steps, MAX_STEPS)) if steps >= 1 else recipe.steps  # NaN, 0, -1: default
    cap = time_cap(recipe, steps)
    seconds = float(cap if seconds is None else seconds)
    return steps, min(seconds, MAX_SECONDS) if seconds > 0 else cap


class Trainings:
    """Every page's training job, at most ``limit`` running at once, the rest in line."""

    def __init__(self, limit: int = MAX_TRAININGS, fit: Callable[..., Transformer] | None = None):
        self.limit = max(1, limit)
        self._fit = fit or fit_in_process
        self._jobs: dict[str, Job] = {}  # page id -> its (latest) job
        self._line: list[Job] = []  # waiting jobs, first come first
        self._running: set[Job] = set()  # the jobs training now
        self._lock = threading.Lock()

    def start(
        self,
        page: str,
        name: str,
        steps: int | None = None,
        seed: int = 0,
        positions: bool = True,
        *,
        seconds: float | None = None,
        until_lesson: bool = True,
    ) -> str:
        """Start (or queue) a training of `steps` (the recipe's by default) for `page`, replacing
        the page's earlier job; a sentence. ``positions=False`` trains it without positional
        encoding; ``seconds`` caps its time (train.live.time_cap by default)."""
        if name not in train.TASKS:
            tasks = ", ".join(sorted(train.TASKS))
            raise ValueError(Msg("There is no task {name} to train; the tasks are {tasks}.",
                                 name=repr(name), tasks=tasks))  # fmt: skip
        self.close(page)
        steps, seconds = bounded(name, steps, seconds)
        job = Job(page, name, steps, seconds, int(seed), positions is not False, until_lesson)
        with self._lock:
            self._forget_ended()
            self._jobs[page] = job
            self._line.append(job)
            self._launch()
        return self.status(page)

    def _forget_ended(self) -> None:
        """Keep at most KEPT ended jobs, dropping the oldest (under the lock)."""
        ended = [page for page, job in self._jobs.items() if job.state not in WORKING]
        for page in ended[: max(0, len(ended) - KEPT + 1)]:
            del self._jobs[page]

    def _launch(self) -> None:
        """Start waiting jobs while there is room (under the lock)."""
        while self._line and len(self._running) < self.limit:
            job = self._line.pop(0)
            job.state = "running"
            self._running.add(job)
            threading.Thread(target=self._run, args=(job,), daemon=True, name="training").start()

    def _run(self, job: Job) -> None:
        def keep(progress: Progress) -> bool:
            job.progress = progress
            if time.monotonic() - job.seen > ABANDONED:  # the page closed: nobody watches
                job.stop.set()
            return not job.stop.is_set()

        try:
            job.net = self._fit(
                job.name,
                job.seconds,
                job.seed,
                keep,
                stop=job.stop,
                positions=job.positions,
                steps=job.steps,
                until_lesson=job.until_lesson,
            )
            job.state = "stopped" if job.stop.is_set() else "done"
        except Exception as exc:  # a failed training must free its place for the next in line
            job.state, job.error = "failed", exc
        finally:
            with self._lock:
                self._running.discard(job)
                self._launch()

    def place(self, page: str) -> int | None:
        """0 while the page's job trains, k when k jobs are ahead of it in line, else None."""
        with self._lock:
            job = self._jobs.get(page)
            if job is None or job.state != "waiting":
                return 0 if job is not None and job.state == "running" else None
            return next(i for i, j in enumerate(self._line) if j is job) + 1

    def status(self, page: str) -> str:
        """Where the page's training stands, as one sentence in the page's language."""
        job = self._jobs.get(page)
        if job is None:
            return tr("No training has been started on this page.")
        place = self.place(page)
        if job.state == "waiting":
            if not place or place == 1:
                return tr(
                    "Your training of {name} waits its turn: first in line; this server trains "
                    "at most {limit} at once.",
                    name=job.name,
                    limit=self.limit,
                )
            return tr(
                "Your training of {name} waits its turn: {ahead} waiting ahead of it; this "
                "server trains at most {limit} at once.",
                name=job.name,
                ahead=place - 1,
                limit=self.limit,
            )
        if job.state == "failed":
            why = message_of(job.error)
            return tr("The training of {name} failed: {error}", name=job.name, error=why)
        p = job.progress
        if p is None:
            if job.state == "running":
                return tr("The {name} model starts to train.", name=job.name)
            return tr("The training of {name} was stopped before it started.", name=job.name)
        fields = {"name": job.name, "step": f"{p.step:,}", "steps": f"{job.steps:,}"}
        fields.update(elapsed=f"{p.elapsed:.0f}", seconds=f"{job.seconds:.0f}")
        said = tr(STATES[job.state], score=toward_lesson(p), **fields)
        missed = not_reached(p) if job.state in ("done", "stopped") and p.done else ""
        return f"{said} {missed}" if missed else said  # before "use this model"

    def touch(self, page: str) -> None:
        """The page still watches its job (its timer asks every second): a job whose page has
        not asked for ABANDONED seconds was closed, and stops."""
        job = self._jobs.get(page)
        if job is not None:
            job.seen = time.monotonic()

    def working(self, page: str) -> bool:
        """Whether the page's job still waits or trains."""
        job = self._jobs.get(page)
        return job is not None and job.state in WORKING

    def progress(self, page: str) -> Progress | None:
        job = self._jobs.get(page)
        return job.progress if job is not None else None

    def model(self, page: str) -> Transformer | None:
        """The page's own trained model once its training has ended; None for any other page."""
        job = self._jobs.get(page)
        return job.net if job is not None and job.state in ("done", "stopped") else None

    def model_id(self, page: str) -> str | None:
        """The id under which the page's trained model opens in the other tabs; None before its
        training has ended (or for any other page)."""
        job = self._jobs.get(page)
        return job.model_id if self.model(page) is not None else None

    def by_id(self, model_id: str) -> Job | None:
        """The ended job whose trained model has this id (the id is the page's secret)."""
        with self._lock:
            jobs = list(self._jobs.values())
        ended = [job for job in jobs if job.net is not None and job.state in ("done", "stopped")]
        return next((job for job in ended if job.model_id == model_id), None)

    def stop(self, page: str) -> None:
        """Stop the page's training (a waiting one leaves the line); what it learned is kept."""
        with self._lock:
            job = self._jobs.get(page)
            if job is None:
                return
            job.stop.set()
            if job.state == "waiting":
                self._line.remove(job)
                job.state = "stopped"

    def close(self, page: str) -> None:
        """The page has closed (or starts anew): stop its training and forget its weights."""
        self.stop(page)
        with self._lock:
            self._jobs.pop(page, None)

    def save(self, page: str, folder: Path) -> tuple[Path, Path]:
        """The page's model as float16 safetensors and its card as JSON, for download."""
        net = self.model(page)
        if net is None:
            raise ValueError(Msg("This page has no trained model to save yet."))
        folder = Path(folder)
        weights = folder / f"{net.card['name']}.safetensors"
        save_weights(net, weights)
        card = {**net.card, "weights_dtype": "float16"}
        path = folder / f"{net.card['name']}.card.json"
        path.write_text(json.dumps(card, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return weights, path
