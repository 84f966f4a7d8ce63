"""The engine behind the app: input checks, truncation notices, one pass per input, a cache."""

from __future__ import annotations

import pytest

import engine as engine_mod
from engine import BUNDLED, CUSTOM_PREFIX, MAX_CHARS, Engine, InputError, TraceCache
from tests.conftest import LONG_TEXT


@pytest.fixture(scope="module")
def eng():
    return Engine(device="cpu")


def test_one_forward_pass_per_input_then_the_cache(eng, monkeypatch):
    calls = []
    real = engine_mod.run_trace
    monkeypatch.setattr(
        engine_mod, "run_trace", lambda net, inputs: calls.append(1) or real(net, inputs)
    )
    a = eng.analyse("a sentence only this test uses", BUNDLED)
    b = eng.analyse("a sentence only this test uses", BUNDLED)
    assert a is b and len(calls) == 1
    eng.analyse("a sentence only this test uses", "seed002-encoder")
    assert len(calls) == 2  # another model is another input


def test_empty_and_whitespace_text_are_refused_with_a_sentence(eng):
    for text in ("", "   \n\t ", None):
        with pytest.raises(InputError, match="empty"):
            eng.analyse(text, BUNDLED)


def test_text_over_the_model_maximum_is_cut_with_a_notice(eng):
    a = eng.analyse(LONG_TEXT * 3, BUNDLED)
    assert a.trace.input_ids.shape[1] == 512
    assert a.trace.tokens[0][-1] == "[SEP]"  # BERT keeps its closing token
    assert any("at most 512" in n and "cut" in n for n in a.notices)


def test_absurdly_long_text_is_cut_before_tokenization(eng):
    a = eng.analyse("x" * (MAX_CHARS * 5), "seed002-encoder")
    assert any(f"{MAX_CHARS:,}" in n for n in a.notices)
    assert a.trace.input_ids.shape[1] == 512


def test_masks_batch_pads_the_shorter_sentence(eng):
    a = eng.analyse("time flies like an arrow", BUNDLED, second="I have a dog")
    mask = a.trace.attention_mask
    assert mask.shape[0] == 2 and mask[1].sum() < mask[0].sum()
    assert a.trace.tokens[1][-1] == "[PAD]"


def test_decoder_reads_a_start_token_and_enc_dec_defaults_its_target(eng):
    dec = eng.analyse("我喜欢你", "seed001-decoder")
    assert dec.trace.tokens[0] == ["<s>", "我", "喜", "欢", "你"]
    ed = eng.analyse("我喜欢你", "seed003-encdec")
    assert ed.trace.tgt_tokens[0] == ["<s>", "我", "喜", "欢", "你"]
    assert any("No target text" in n for n in ed.notices)
    ed2 = eng.analyse("我喜欢你", "seed003-encdec", target="I love you")
    assert ed2.trace.tgt_tokens[0][:3] == ["<s>", "I", " "]
    assert ed2.trace.attentions["cross"].shape[-2:] == (11, 4)


def test_unknown_model_and_bad_checkpoint_are_sentences(eng, tmp_path):
    with pytest.raises(InputError, match="Unknown model"):
        eng.analyse("hi", "gpt-17")
    with pytest.raises(InputError, match="neither an existing folder"):
        eng.analyse("hi", CUSTOM_PREFIX + str(tmp_path / "nothing-here"))


def test_public_mode_refuses_custom_checkpoints(tmp_path):
    with pytest.raises(InputError, match="disabled"):
        Engine(device="cpu", public=True).analyse("hi", CUSTOM_PREFIX + str(tmp_path))


def test_cache_is_bounded_by_entries_and_bytes(eng):
    cache = TraceCache(max_entries=3, max_bytes=10**12)
    analyses = [eng.analyse(f"sentence number {i}", "seed002-encoder") for i in range(5)]
    for a in analyses:
        cache.put(a)
    assert len(cache) == 3 and cache.get(analyses[0].key) is None
    assert cache.get(analyses[-1].key) is analyses[-1]
    small = TraceCache(max_entries=100, max_bytes=analyses[0].trace.nbytes() * 2)
    for a in analyses:
        small.put(a)
    assert len(small) <= 2 and small.nbytes() <= small.max_bytes


def test_traces_in_the_cache_are_on_the_cpu(eng):
    a = eng.analyse("where does it live", BUNDLED)
    assert a.trace.attentions["encoder"].device.type == "cpu"


def test_loaded_models_are_bounded_and_the_bundled_bert_stays():
    eng = Engine(device="cpu")
    eng.warm_up()
    for name in ("seed000-tiny", "seed001-decoder", "seed002-encoder", "seed003-encdec"):
        eng.model(name)
    assert BUNDLED in eng.shelf._models
    assert len(eng.shelf._models) == 1 + engine_mod.MAX_MODELS
    assert "seed000-tiny" not in eng.shelf._models  # the least recently used went first


def test_a_slow_model_load_does_not_block_requests_for_loaded_models(monkeypatch):
    import threading
    import time

    eng = Engine(device="cpu")
    eng.warm_up()
    started, release = threading.Event(), threading.Event()
    real_load = eng.shelf._load

    def slow_load(model_id):
        if model_id == "seed002-encoder":
            started.set()
            release.wait(10)
        return real_load(model_id)

    monkeypatch.setattr(eng.shelf, "_load", slow_load)
    loader = threading.Thread(target=eng.model, args=("seed002-encoder",))
    loader.start()
    assert started.wait(10)
    t0 = time.perf_counter()
    eng.analyse("the bundled model answers meanwhile", BUNDLED)
    assert time.perf_counter() - t0 < 5
    release.set()
    loader.join(10)
    assert "seed002-encoder" in eng.shelf._models


def test_a_trained_decoders_output_is_decoded_once_per_text():
    """Tab switches and slider moves ask for the same analysis again: no second decoding."""
    eng = Engine(device="cpu")
    loaded = eng.model("dates")
    calls = []
    real = loaded.net.generate
    loaded.net.generate = lambda *a, **k: calls.append(1) or real(*a, **k)
    first = eng.analyse("Nov 22, 2026", "dates")
    again = eng.analyse("Nov 22, 2026", "dates")
    assert again is first and len(calls) == 1
    assert first.trace.tgt_tokens[0][1:] == list("2026-11-22")


def test_small_inputs_run_on_one_thread_and_large_ones_share_the_cores():
    """Two passes at once (or a pass beside other work) must not oversubscribe the cores:
    PyTorch's spinning OpenMP threads make a small pass ten times slower then."""
    import threading

    import torch

    share = engine_mod.CpuShare(cores=4)
    before = torch.get_num_threads()
    with share(9) as threads:
        assert threads == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with share(512) as alone:
        assert alone == 4
        held, seen = [], []

        def second_pass():  # another request's thread: it gets its share, not all the cores
            held.append(share(512))
            seen.append(held[0].__enter__())

        worker = threading.Thread(target=second_pass)
        worker.start()
        worker.join()
        assert seen == [2] and share.running == 2
    assert share.running == 1
    held[0].__exit__(None, None, None)  # here, not in its thread: restores that thread's count
    assert share.running == 0
    torch.set_num_threads(before)


def test_every_forward_pass_of_a_request_goes_through_the_cpu_share(eng, monkeypatch):
    threads = []
    real = engine_mod.run_trace

    def spy(net, inputs):
        threads.append(torch.get_num_threads())
        return real(net, inputs)

    import torch

    monkeypatch.setattr(engine_mod, "run_trace", spy)
    monkeypatch.setattr(engine_mod, "cpu_share", engine_mod.CpuShare(cores=2))
    eng.analyse("a short text for the thread test", BUNDLED)
    eng.analyse(" ".join(["long"] * 100) + " thread test", BUNDLED)
    assert threads == [1, 2]


def started(entered: list, n: int) -> None:
    """Wait (at most 2 s) until n of the threads have entered their pass."""
    import time

    deadline = time.monotonic() + 2
    while len(entered) < n and time.monotonic() < deadline:
        time.sleep(0.02)


def test_light_passes_have_their_own_lane_beside_heavy_ones():
    """Two heavy passes (or loads) at once fill their lane; a short text still runs at once, and a
    third heavy pass waits for a heavy slot (the memory bound)."""
    import threading

    share = engine_mod.CpuShare(cores=2, heavy=2, light=2)
    big = (1024, 111_000_000)  # 512-token source and target on the 111M preset
    assert share.lane(*big) == "heavy" and share.lane(12, 22_700_000) == "light"
    release, entered = threading.Event(), []

    def heavy(tag):
        with share(*big):
            entered.append(tag)
            release.wait(10)

    def load():
        with share.load():
            entered.append("load")
            release.wait(10)

    workers = [threading.Thread(target=heavy, args=("a",)), threading.Thread(target=load)]
    for w in workers:
        w.start()
    started(entered, 2)
    assert sorted(entered) == ["a", "load"]
    third = threading.Thread(target=heavy, args=("c",))
    third.start()
    with share(12, 22_700_000) as threads:  # the light lane is free: no wait
        assert threads == 1
    third.join(0.3)
    assert third.is_alive() and "c" not in entered  # waits for a heavy slot
    release.set()
    for w in [*workers, third]:
        w.join(10)
    assert "c" in entered and share.running == 0


def test_a_pass_inside_a_pass_is_not_admitted_twice():
    share = engine_mod.CpuShare(cores=2, heavy=1, light=1)
    with share(1024, 10**9), share(1024, 10**9):  # would deadlock if admitted again
        assert share.running == 1
    assert share.running == 0


def test_heavy_passes_run_together_only_if_their_traces_fit():
    """Two BERT-large-sized 512-token passes would hold ~1.1 GB at once: the second waits; two
    smaller heavy passes run together; one pass larger than the budget still runs alone."""
    import threading

    share = engine_mod.CpuShare(cores=2, heavy=2, light=2, heavy_bytes=640 * 2**20)
    big, large = (512, 335_000_000), 560 * 10**6
    release, entered = threading.Event(), []

    def heavy(tag, nbytes):
        with share(*big, nbytes):
            entered.append(tag)
            release.wait(10)

    first = threading.Thread(target=heavy, args=("first", large))
    first.start()
    second = threading.Thread(target=heavy, args=("second", large))
    started(entered, 1)
    second.start()
    second.join(0.3)
    assert entered == ["first"] and second.is_alive()  # waits: both would not fit
    release.set()
    first.join(10)
    second.join(10)
    assert entered == ["first", "second"]
    release.clear()
    entered.clear()
    pair = [threading.Thread(target=heavy, args=(t, 200 * 10**6)) for t in ("a", "b")]
    for t in pair:
        t.start()
    started(entered, 2)
    assert sorted(entered) == ["a", "b"]  # 400 MB together fit
    release.set()
    for t in pair:
        t.join(10)


def test_the_engine_estimates_a_traces_size_before_the_pass(eng):
    import torch

    analysis = eng.analyse(" ".join(["word"] * 200), BUNDLED)
    ids = analysis.trace.input_ids
    estimate = engine_mod.trace_bytes(analysis.model.net.config, {"input_ids": ids})
    assert 0.8 * analysis.trace.nbytes() <= estimate <= 1.6 * analysis.trace.nbytes()
    assert torch.is_tensor(ids)


def test_a_big_heavy_pass_is_not_overtaken_by_later_small_ones():
    """Heavy passes are admitted in arrival order: a BERT-large-sized pass waiting for memory is
    not starved by smaller heavy passes that keep arriving and would fit."""
    import threading

    share = engine_mod.CpuShare(cores=2, heavy=2, light=2, heavy_bytes=640 * 2**20)
    release, entered = threading.Event(), []

    def heavy(tag, nbytes):
        with share(512, 335_000_000, nbytes):
            entered.append(tag)
            release.wait(10)

    small = threading.Thread(target=heavy, args=("small", 200 * 10**6))
    small.start()
    started(entered, 1)
    big = threading.Thread(target=heavy, args=("big", 560 * 10**6))
    big.start()
    threading.Event().wait(0.1)
    later = threading.Thread(target=heavy, args=("later small", 200 * 10**6))
    later.start()
    later.join(0.3)
    assert entered == ["small"]  # "later small" would fit beside "small" but "big" came first
    release.set()
    for t in (small, big, later):
        t.join(10)
    assert entered == ["small", "big", "later small"]
