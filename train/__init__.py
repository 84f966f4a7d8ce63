"""Training for the shipped models: `python -m train dates|induction|roles` rewrites assets/trained;
`train.fit(name, seconds)` trains one live, reporting its progress.

Seeded and single-threaded, so a run reproduces its card's numbers (wall time aside).
"""

from train.fit import fit
from train.progress import Progress
from train.run import reproduce
from train.tasks import TASKS

__all__ = ["TASKS", "Progress", "fit", "reproduce"]
