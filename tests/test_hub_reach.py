"""A Hub id with no network behind it gets its sentence within seconds (model/checkpoint_hub.py):
huggingface_hub's own retries kept it waiting 24 s; with HF_HUB_OFFLINE set, at once."""

from __future__ import annotations

import socket
import time

import huggingface_hub.constants
import pytest

import shelf
from model import checkpoint_hub as hub
from model import load_bert, load_lm
from model.load_errors import SourceNotFound


@pytest.fixture
def hanging_network(monkeypatch):
    """A network where every connection (its name lookup included) hangs."""
    for name in hub.PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)

    def hang(address, timeout=None, *args, **kwargs):  # as long as the caller allows
        time.sleep(min(30.0, timeout or 30.0))
        raise OSError("timed out")

    monkeypatch.setattr(socket, "create_connection", hang)


@pytest.mark.parametrize("load", [load_lm, load_bert])
def test_an_unreachable_hub_id_gets_its_sentence_within_seconds(hanging_network, load):
    start = time.monotonic()
    with pytest.raises(SourceNotFound, match="Could not reach the Hugging Face Hub within 2.5 s"):
        load("someone/a-model")
    assert time.monotonic() - start < hub.REACH_SECONDS + 1.5


def test_the_page_reading_a_hub_ids_type_does_not_wait_for_the_network(hanging_network):
    start = time.monotonic()
    assert shelf.model_type_of("someone/a-model") is None  # the loader says why, at once
    assert time.monotonic() - start < hub.REACH_SECONDS + 1.0


def test_offline_the_hub_is_not_asked_at_all(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("asked"))
    start = time.monotonic()
    assert hub.hub_reachable() is False
    with pytest.raises(SourceNotFound, match="HF_HUB_OFFLINE"):
        load_lm("someone/a-model")
    assert time.monotonic() - start < 1.0


def test_behind_a_proxy_the_host_is_not_probed_directly(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("probed"))
    assert hub.hub_reachable() is True
