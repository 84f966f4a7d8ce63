"""Where the forward pass runs: CUDA when present, CPU otherwise, overridable."""

from __future__ import annotations

import os

import torch


def pick_device(preference: str | None = None) -> torch.device:
    """Resolve "auto" / None (then $TA_DEVICE, then CUDA if available), "cpu", "cuda" or "cuda:N".

    Raises ValueError with a sentence when CUDA is asked for but not available.
    """
    choice = (preference or os.environ.get("TA_DEVICE") or "auto").strip().lower()
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(choice)
    except RuntimeError as exc:
        raise ValueError(f"Unknown device {choice!r}: use 'auto', 'cpu' or 'cuda'.") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"Device {choice!r} was asked for, but this machine has no usable CUDA GPU."
        )
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"Device {choice!r} is not supported: use 'auto', 'cpu' or 'cuda'.")
    return device
