"""The CPU's share of each forward pass: two lanes under one bound (light and heavy passes).

A guard that keeps the server responsive, apart from the views: every forward pass, model load
and big drawing the app runs is admitted here and given its share of the CPU threads.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque

import torch
from threadpoolctl import threadpool_limits

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
SMALL_INPUT = 64  # token positions in a batch below which one forward pass takes milliseconds
# A "light" pass: parameters × token positions up to the bundled BERT (22.7M) at ~176 positions
# (tens of milliseconds on two cores); anything bigger, and every model load, is "heavy".
LIGHT_WORK = 4_000_000_000
HEAVY_AT_ONCE = 2  # heavy passes, loads or big draws at once (two 111M-preset passes: 2.3 GB)
# ... and the bytes their traces may hold together while they run (estimated, trace_bytes): a
# second heavy pass starts only if both fit (two BERT-large 512-token passes do not: 4 users on
# it peaked at 3.2 GB with two at once), and one always may when none runs.
HEAVY_BYTES = 640 * 1024**2
LIGHT_AT_ONCE = 2


def one_blas_thread() -> None:
    """numpy's BLAS (OpenBLAS) on one thread, for the whole process.

    The views' small numpy linear algebra (the heads' MDS map: a 72 × 72 eigen-decomposition)
    runs between PyTorch calls; OpenBLAS's own threads and PyTorch's OpenMP threads then spin
    waiting for each other, and a 0.3 ms decomposition cost 7-150 ms of CPU (the Heads tab's
    switch, in process: 209 -> 45 core-ms with this; bench/serving_cost.py, with the figure
    changes of the same day: 108 -> 42). No view's numpy work is big enough to gain from a
    second thread.
    """
    threadpool_limits(1, user_api="blas")


class CpuShare:
    """Admits every forward pass (and model load) the app runs, and gives it its share of the CPU.

    Two lanes under one bound: at most HEAVY_AT_ONCE heavy passes or loads whose estimated
    traces fit in HEAVY_BYTES together (one always may run alone), admitted first come, first
    served; and beside them at most LIGHT_AT_ONCE light ones, so a short text on the bundled BERT
    never queues behind 512-token passes of a big model or a slow checkpoint load (Gradio's own
    queue is first in, first out). A thread already inside a pass (a view that ablates heads,
    say) is not admitted again.

    Threads: PyTorch's OpenMP threads spin while they wait for each other; when more threads want
    the CPU than there are cores (two passes at once, or the server sharing its cores with other
    work), a 9-token pass goes from 14 ms to 155 ms (2 cores, 4 busy processes beside it; 60 ms
    with one thread). So a small input always runs on one thread, and a large one on its share of
    the cores among the passes running now. The setting is per thread (OpenMP): each request's
    worker thread sets its own and restores it afterwards.
    """

    def __init__(
        self,
        cores: int = CORES,
        heavy: int = HEAVY_AT_ONCE,
        light: int = LIGHT_AT_ONCE,
        heavy_bytes: int = HEAVY_BYTES,
    ) -> None:
        self.cores = max(1, cores)
        self.running = 0
        self._lock = threading.Lock()
        self._limits = {"heavy": heavy, "light": light}
        self.heavy_bytes = heavy_bytes
        self._in_lane = {"heavy": 0, "light": 0}
        self._reserved = 0  # estimated bytes of the heavy passes running now
        self._heavy_waiting: deque = deque()  # first come, first admitted (no big pass starves)
        self._lane_free = threading.Condition()
        self._inside = threading.local()

    @staticmethod
    def lane(positions: int, params: int = 0) -> str:
        return "light" if positions * max(params, 1) <= LIGHT_WORK else "heavy"

    def threads_for(self, positions: int) -> int:
        if positions < SMALL_INPUT:
            return 1
        return max(1, self.cores // max(1, self.running))

    def _fits(self, lane: str, nbytes: int) -> bool:
        if self._in_lane[lane] >= self._limits[lane]:
            return False
        if lane == "light" or self._in_lane[lane] == 0:
            return True
        return self._reserved + nbytes <= self.heavy_bytes

    @contextlib.contextmanager
    def _admitted(self, lane: str, nbytes: int = 0):
        if getattr(self._inside, "depth", 0):  # already inside a pass: no second admission
            self._inside.depth += 1
            try:
                yield False
            finally:
                self._inside.depth -= 1
            return
        nbytes = nbytes if lane == "heavy" else 0
        with self._lane_free:
            if lane == "heavy":
                ticket = object()
                self._heavy_waiting.append(ticket)
                self._lane_free.wait_for(
                    lambda: self._heavy_waiting[0] is ticket and self._fits(lane, nbytes)
                )
                self._heavy_waiting.popleft()
                self._lane_free.notify_all()  # the next in line may fit beside this one
            else:
                self._lane_free.wait_for(lambda: self._fits(lane, nbytes))
            self._in_lane[lane] += 1
            self._reserved += nbytes
        self._inside.depth = 1
        try:
            yield True
        finally:
            self._inside.depth = 0
            with self._lane_free:
                self._in_lane[lane] -= 1
                self._reserved -= nbytes
                self._lane_free.notify_all()

    @contextlib.contextmanager
    def __call__(self, positions: int, params: int = 0, nbytes: int = 0):
        """One pass over ``positions`` token positions of a model with ``params`` parameters,
        whose trace holds about ``nbytes``; yields the number of threads it runs on."""
        with self._admitted(self.lane(positions, params), nbytes) as first:
            if not first:
                yield torch.get_num_threads()
                return
            with self._lock:
                self.running += 1
                threads = self.threads_for(positions)
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                yield threads
            finally:
                torch.set_num_threads(before)
                with self._lock:
                    self.running -= 1

    def load(self, nbytes: int = 0):
        """A model load: memory like a heavy pass, so it takes a heavy slot."""
        return self._admitted("heavy", nbytes)


def trace_bytes(config, inputs: dict) -> int:
    """About what a forward pass's trace will hold: attention weights and hidden states (float32),
    before any field computed on access."""
    batch, src = inputs["input_ids"].shape
    tgt = inputs["tgt_ids"].shape[1] if inputs.get("tgt_ids") is not None else 0
    layers, heads, width = config.n_layers, config.n_heads, config.d_model
    cells = layers * heads * src * src + 3 * (layers + 1) * src * width
    if tgt:  # the decoder's self-attention and cross-attention, and its residual stream
        cells += layers * heads * (tgt * tgt + tgt * src) + 3 * (layers + 1) * tgt * width
    return 4 * batch * cells
