"""A live training in a process of its own, so that a class's Runs do not starve it.

In the app's process a training shares one interpreter lock with every visitor's request: while
30 students ran every 3 s, an induction training there made 862 steps in its 75 s (2,906 on a
quiet server) and ended at 28 %, below its lesson. In a process of its own it runs Python at the
same time as the server does. It runs at nice 10, so a visitor's forward pass (two torch threads
that wait for each other) gets its cores at once and the training takes every gap between them:
at nice 0 the views beside a training took 2.2-2.4x their quiet time at 512 tokens (budget 1.5x);
at nice 10 the induction lesson beside 30 students still came within 1.6x its quiet time.

``fit_in_process`` has ``train.fit``'s signature and answer: it starts a fresh interpreter
(``python -m train.process``: forking a server that holds threads is unsafe, and
multiprocessing's spawn would import the app's main module again), trains there on one torch
thread, passes every ``Progress`` back to ``on_progress`` in the caller's thread over a socket
pair, tells the child to stop when ``stop`` is set or ``on_progress`` returns False, and returns
the trained model (pickled, as are the reports).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from lang import Msg

NICE = 10  # the training process's niceness: a visitor's pass first, the training in the gaps
POLL = 0.2  # seconds between looks at ``stop`` while waiting for the child's next message
START = 120.0  # seconds a fresh interpreter may take to import torch and report under load
ROOT = Path(__file__).resolve().parents[1]
ENDED = "The training process ended before its model was sent."


def _send(conn: Connection, kind: str, value=None) -> None:
    """Plain pickle: torch's own reductions for multiprocessing would share tensors through
    file descriptors, which only its own process machinery can hand over."""
    conn.send_bytes(pickle.dumps((kind, value)))


def _recv(conn: Connection):
    return pickle.loads(conn.recv_bytes())


def fit_in_process(
    name: str,
    seconds: float | None = None,
    seed: int = 0,
    on_progress: Callable | None = None,
    *,
    stop: threading.Event | None = None,
    positions: bool = True,
    steps: int | None = None,
    until_lesson: bool = True,
):
    """``train.fit`` run in a process of its own (see the module doc); the same answer."""
    ours, theirs = socket.socketpair()
    asked = {"seconds": seconds, "seed": int(seed), "positions": positions, "steps": steps}
    args = [name, json.dumps({**asked, "until_lesson": until_lesson})]  # train.fit's keywords
    child = subprocess.Popen(
        [sys.executable, "-m", "train.process", str(theirs.fileno()), *args],
        cwd=ROOT,
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
    )
    theirs.close()  # the child's end: ours reads EOF once the child has gone
    conn = Connection(ours.detach())
    try:
        return _relay(conn, child, on_progress, stop)
    finally:
        with contextlib.suppress(OSError):
            _send(conn, "stop")
        conn.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _relay(conn: Connection, child: subprocess.Popen, on_progress, stop):
    """Hand the child's reports to ``on_progress`` until it sends the model."""
    started, waited, asked_to_stop = False, 0.0, False
    while True:
        if stop is not None and stop.is_set() and not asked_to_stop:
            _send(conn, "stop")  # it stops at its next step and still sends its model
            asked_to_stop = True
        if not conn.poll(POLL):
            waited += POLL
            if child.poll() is not None and not conn.poll(0):
                raise RuntimeError(Msg(ENDED))
            if not started and waited > START:
                raise RuntimeError(Msg("The training process did not start in time."))
            continue
        try:
            kind, value = _recv(conn)
        except EOFError:
            raise RuntimeError(Msg(ENDED)) from None
        if kind == "started":
            started = True
        elif kind == "progress":
            if on_progress is not None and on_progress(value) is False and not asked_to_stop:
                _send(conn, "stop")
                asked_to_stop = True
        elif kind == "failed":
            raise value
        elif kind == "done":
            return value


def _child(fd: int, name: str, asked: dict) -> None:
    """The training process: train.fit on one thread, each report and the model sent back."""
    import torch

    import train

    conn = Connection(fd)
    torch.set_num_threads(1)
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
    stopped = threading.Event()
    _send(conn, "started")

    def report(progress) -> bool:
        _send(conn, "progress", progress)
        while conn.poll(0):
            if _recv(conn)[0] == "stop":
                stopped.set()
        return not stopped.is_set()

    try:
        net = train.fit(name, on_progress=report, stop=stopped, **asked)
    except Exception as exc:  # said in the parent, in its reader's language (a Msg pickles)
        try:
            _send(conn, "failed", exc)
        except Exception:  # an exception that does not pickle: its words
            _send(conn, "failed", RuntimeError(str(exc)))
    else:
        _send(conn, "done", net)
    finally:
        conn.close()


if __name__ == "__main__":
    fd, task, asked_json = sys.argv[1:4]
    _child(int(fd), task, json.loads(asked_json))
