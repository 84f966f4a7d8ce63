"""Training for the shipped models: `python -m train dates|induction|roles` rewrites assets/trained.

Seeded and single-threaded, so a run reproduces its card's numbers (wall time aside).
"""

from train.run import reproduce
from train.tasks import TASKS

__all__ = ["TASKS", "reproduce"]
