"""Downloads on disk (docs/exports.md): one folder inside Gradio's cache, bounded in bytes, oldest
removed first, safe from several threads; Gradio serves the files without a copy of its own, so
nothing else grows; names say what a file holds; the CSV says its model, text and date and no
cell of it is a spreadsheet formula."""

from __future__ import annotations

import csv
import io
import json
import re
import threading
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
import torch

import analysis
import app
from engine import Engine
from lang import message_of, speaking
from serve import exports
from serve.exports import Exports, TooLarge
from tests.inprocess import serve_demo
from tests.test_kept import Client
from ui import state as views
from ui.render import render

HOSTILE = '=HYPERLINK("http://example.invalid/?q="&A1, "click"), +1, -1, @SUM(A1)\n=1+1'


def files_under(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in folder.rglob("*") if p.is_file()}


# ---------------------------------------------------------------- the folder itself


def test_the_folder_stays_within_its_budget_and_the_oldest_go_first(tmp_path):
    folder = Exports(tmp_path, budget=10_000)
    paths = []
    for i in range(40):
        paths.append(folder.write(f"export_{i:02d}.bin", bytes([i]) * 1_500))
        assert sum(files_under(tmp_path).values()) <= 10_000
        assert folder.bytes_on_disk() == sum(files_under(tmp_path).values())
    kept = sorted(p.name for p in files_under(tmp_path))
    assert kept == [f"export_{i:02d}.bin" for i in range(34, 40)]  # six fit: the newest six
    assert Path(paths[-1]).read_bytes() == bytes([39]) * 1_500
    # A large export makes room by removing as many of the oldest as it needs, no more.
    folder.write("large.bin", b"x" * 7_000)
    kept = sorted(p.name for p in files_under(tmp_path))
    assert kept == ["export_38.bin", "export_39.bin", "large.bin"]


def test_the_folder_also_keeps_at_most_its_number_of_files(tmp_path):
    folder = Exports(tmp_path, budget=10**9, files=5)
    for i in range(12):
        folder.write(f"small_{i:02d}.csv", "a,b\n")
    assert sorted(p.name for p in files_under(tmp_path)) == [
        f"small_{i:02d}.csv" for i in range(7, 12)
    ]


def test_a_write_lists_the_folder_again_only_when_another_hand_changed_it(tmp_path, monkeypatch):
    """The folder is listed once and then kept by the writes themselves (a listing cost 15 ms a
    write with 200 exports); an entry removed or added by another hand is seen at the next write."""
    folder = Exports(tmp_path, budget=10_000)
    listed = []
    listing = Exports.listing
    monkeypatch.setattr(
        Exports, "listing", staticmethod(lambda root: listed.append(1) or listing(root))
    )
    first = folder.write("a.bin", b"a" * 4_000)
    for name in ("b.bin", "c.bin"):
        folder.write(name, b"b" * 2_000)
    assert len(listed) == 1
    import shutil
    import time

    time.sleep(0.01)  # a later tick of the folder's clock
    shutil.rmtree(Path(first).parent)  # Gradio's delete_cache, say
    folder.write("d.bin", b"d" * 5_000)  # 4,000 freed by the removal: nothing else goes
    assert len(listed) == 2
    assert sorted(p.name for p in files_under(tmp_path)) == ["b.bin", "c.bin", "d.bin"]
    time.sleep(0.01)
    (tmp_path / "stray.csv").write_bytes(b"s" * 2_000)  # a person's file counts too
    folder.write("e.bin", b"e" * 1_000)
    assert len(listed) == 3 and folder.bytes_on_disk() <= 10_000
    assert "b.bin" not in {p.name for p in files_under(tmp_path)}


def test_what_an_older_version_left_there_counts_and_goes_first(tmp_path):
    (tmp_path / "tmpold").mkdir()
    (tmp_path / "tmpold" / "trace_bert_20260101-000000.npz").write_bytes(b"o" * 6_000)
    (tmp_path / "stray.csv").write_bytes(b"s" * 3_000)
    folder = Exports(tmp_path, budget=10_000)
    folder.write("new.csv", b"n" * 2_000)  # 11,000 would not fit: the oldest entry goes
    assert folder.bytes_on_disk() <= 10_000
    assert not (tmp_path / "tmpold").exists() and (tmp_path / "stray.csv").exists()


def test_an_export_larger_than_the_budget_is_refused_with_a_sentence(tmp_path):
    folder = Exports(tmp_path, budget=2 * 2**20)
    kept = folder.write("kept.csv", b"k" * 1_000)
    with pytest.raises(TooLarge) as refused:
        folder.write("trace_large.npz", b"x" * (3 * 2**20))
    assert str(refused.value) == (
        "This export is 3.0 MB, more than the 2.0 MB this server keeps for downloads; "
        "try a shorter text or a smaller model."
    )
    assert Path(kept).exists() and len(files_under(tmp_path)) == 1  # nothing was removed
    with speaking("zh-CN"):
        said = message_of(refused.value)
    assert "3.0 MB" in said and "2.0 MB" in said and "导出" in said
    assert isinstance(refused.value, app.InputError)  # the status line says it as it is


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TA_EXPORT_BYTES", "1048576")
    assert exports.budget_from_env() == 2**20
    monkeypatch.setenv("TA_EXPORT_BYTES", "")
    assert exports.budget_from_env() == 512 * 2**20
    monkeypatch.setenv("TA_EXPORT_BYTES", "512MB")
    with pytest.raises(ValueError, match="whole number of bytes"):
        exports.budget_from_env()


def test_exports_from_many_threads_at_once_stay_within_the_budget(tmp_path):
    budget = 40_000
    folder = Exports(tmp_path, budget=budget)
    written: list[tuple[str, bytes]] = []
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def export(worker: int) -> None:
        try:
            for i in range(25):
                data = bytes([worker]) * (1_000 + 331 * ((worker * 7 + i) % 23))
                written.append((folder.write(f"w{worker}_{i}.bin", data), data))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def watch() -> None:  # what is on disk at any moment, outside the lock
        while not done.is_set():
            seen.append(sum(size for _, _, size in Exports.listing(tmp_path)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    workers = [threading.Thread(target=export, args=(w,)) for w in range(8)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(60)
    done.set()
    watcher.join(10)
    assert not errors, errors
    assert len(written) == 200 and len({path for path, _ in written}) == 200
    assert max(seen) <= budget and sum(files_under(tmp_path).values()) <= budget
    for path, data in written:  # whatever is still there is whole
        if Path(path).exists():
            assert Path(path).read_bytes() == data


# ---------------------------------------------------------------- names and the CSV


def test_names_say_what_a_file_holds():
    key = ("bert", ("time flies like an arrow",), None)
    name = exports.stats_name("bert", "encoder", key)
    assert re.fullmatch(r"head_stats_bert_encoder_[0-9a-f]{8}\.csv", name)
    assert re.fullmatch(r"trace_bert_[0-9a-f]{8}\.npz", exports.trace_name("bert", key))
    assert name[-12:-4] == exports.trace_name("bert", key)[-12:-4]  # the same input, one hash
    other = ("bert", ("time flies like a banana",), None)
    no_positions = (*key, "no positional encoding")
    hashes = {exports.input_hash(k) for k in (key, other, no_positions)}
    assert len(hashes) == 3  # another text, or the same one without positions: another name
    assert exports.model_part("checkpoint:/data/models/all_MiniLM-L6 v2/") == "all-MiniLM-L6-v2"
    assert exports.model_part("dates@300") == "dates-300"
    assert exports.model_part("checkpoint:../..") == "model"
    assert exports.safe_name("../../etc/passwd") == "passwd"
    assert exports.safe_name(".hidden csv") == "hidden-csv"


@pytest.fixture
def heads_export(tmp_path, monkeypatch):
    """The heads tab's downloads for a text, written into a folder of the test's own."""
    monkeypatch.setattr(exports, "EXPORTS", Exports(tmp_path, budget=10 * 2**20))
    engine = Engine(device="cpu")

    def export(text: str, only: str = "stats_csv", model: str = "bert"):
        drawn = engine.analyse(text, model)
        return drawn, render("heads", drawn, views.Selection(), only={only})[only]

    return export


def test_the_head_statistics_csv_is_named_and_says_its_model_text_and_date(heads_export):
    drawn, path = heads_export("time flies like an arrow")
    name = Path(path).name
    assert name == f"head_stats_bert_encoder_{exports.input_hash(drawn.key)}.csv"
    df = pd.read_csv(path)  # no option needed
    assert list(df.columns[:2]) == ["layer", "head"]
    assert list(df.columns[-5:]) == ["model", "text", "target", "conventions", "date"]
    assert set(df["conventions"]) == {"ours"}  # the head statistics' conventions (or "clark")
    assert len(df) == 6 * 12 and set(df["layer"]) == set(range(6))  # every layer's rows
    assert set(df["model"]) == {"bert"} and set(df["text"]) == {"time flies like an arrow"}
    assert df["target"].isna().all()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", df["date"][0])
    assert df["entropy"].dtype == float  # the numbers are still numbers


def test_no_cell_of_the_csv_is_a_spreadsheet_formula(heads_export):
    drawn, path = heads_export(HOSTILE)
    rows = list(csv.reader(io.StringIO(Path(path).read_text(encoding="utf-8"))))
    cells = [cell for row in rows for cell in row]
    assert "'" + drawn.key[1][0] in cells  # the text, quoted in CSV, one ' in front

    def is_number(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    formulas = [c for c in cells if c[:1] in ("=", "+", "-", "@") and not is_number(c)]
    assert not formulas, formulas
    back = pd.read_csv(path)
    assert back["text"][0] == "'" + drawn.key[1][0]  # kept whole, one quote in front
    direct = analysis.stats_csv(
        pd.DataFrame({"@head": [1], "note": ["-x"]}), {"model": "+m", "text": "\t=1"}
    )
    assert direct.splitlines() == ["'@head,note,model,text", "1,'-x,'+m,'\t=1"]


def test_a_trace_export_too_large_for_the_budget_says_so_in_place_of_the_file(
    heads_export, monkeypatch
):
    monkeypatch.setattr(exports.EXPORTS, "budget", 1_000)  # smaller than any trace
    _, update = heads_export("dogs bark", only="trace_npz", model="seed000-tiny")
    assert update["value"] is None and update["visible"]
    assert update["label"].startswith("This export is ")
    assert not files_under(exports.EXPORTS.root)


# ---------------------------------------------------------------- through the running app


def file_values(message: dict) -> list[dict]:
    """Every file a completed event's outputs carry ({"path", "url", "orig_name", ...})."""
    found = []

    def walk(value) -> None:
        if isinstance(value, dict):
            if "path" in value and "url" in value:
                found.append(value)
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(message["output"])
    return found


@pytest.mark.slow
def test_fifty_exports_through_the_app_leave_no_copy_in_gradios_cache(tmp_path, monkeypatch):
    cache = tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))  # Gradio's cache, the test's own
    budget = 800_000  # one short text's trace (0.6 MB) and a few CSVs (8 kB each)
    monkeypatch.setattr(exports, "EXPORTS", Exports(budget=budget))
    folder = cache / exports.FOLDER
    demo = app.build_demo(public=False)
    with serve_demo(demo) as url:
        client = Client(url, "exports")
        client.on_tab(demo, "heads")
        config = httpx.get(url + "config").json()
        elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
        export_dep = next(  # the "Export the whole trace" button: the status line, the file
            d
            for d in config["dependencies"]
            if [elem[o] for o in d["outputs"]] == ["status", "trace-npz"]
        )
        data = [None] * len(export_dep["inputs"])  # the event's tail: the visible tab says Heads
        data[[elem[i] for i in export_dep["inputs"]].index("tab-box")] = "heads"
        returned, on_disk = [], []
        for i in range(50):
            if i in (20, 40):  # a whole trace now and then (each Run also writes a CSV)
                body = {
                    "data": data,
                    "fn_index": export_dep["id"],
                    "session_hash": client.session,
                }
                httpx.post(url + "gradio_api/queue/join", json=body).raise_for_status()
            else:
                client.join(text=f"dogs bark, take {i}")
            ((_, message),) = client.results(1)
            assert message["success"], json.dumps(message)[:500]
            (value,) = file_values(message)
            returned.append(value)
            on_disk.append(files_under(cache))
        newest = httpx.get(returned[-1]["url"])
    names = [Path(v["path"]).name for v in returned]
    assert sum(n.startswith("trace_bert_") and n.endswith(".npz") for n in names) == 2
    assert sum(n.startswith("head_stats_bert_encoder_") for n in names) == 48
    for value in returned:  # handed to Gradio where it is: in the export folder, not a copy
        assert Path(value["path"]).parent.parent == folder, value["path"]
        assert value["orig_name"] == Path(value["path"]).name
    for files in on_disk:  # and nothing else in Gradio's cache, at any point
        assert all(folder in path.parents for path in files), sorted(map(str, files))[:5]
        assert sum(files.values()) <= budget
    assert 5 < len(on_disk[-1]) < 40  # bounded: the oldest were removed
    assert not Path(returned[0]["path"]).exists() and Path(returned[-1]["path"]).exists()
    assert newest.status_code == 200
    assert newest.content == Path(returned[-1]["path"]).read_bytes()  # served from there


def test_the_pages_trace_export_holds_every_research_measure_named_with_its_paper(heads_export):
    """The Heads tab's "Export the whole trace": beside the trace, every measure of the text as
    the analysis functions compute it, each named in the manifest with its paper and convention."""
    drawn, update = heads_export("the cat sat on the mat, the cat sat.", only="trace_npz")
    npz = np.load(update["value"], allow_pickle=False)
    manifest = json.loads(npz["manifest.json"])
    trace, net = drawn.trace, drawn.model.net
    n_layers, n_heads, t = 6, 12, len(trace.tokens[0])

    def got(name: str) -> torch.Tensor:
        return torch.from_numpy(npz[f"measures/encoder/{name}"]).float()

    def near(name: str, expected, shape, atol=1e-6) -> None:
        assert tuple(npz[f"measures/encoder/{name}"].shape) == shape, name
        if isinstance(expected, torch.Tensor):
            expected = expected.numpy()
        expected = torch.from_numpy(np.array(expected, dtype=np.float32))
        torch.testing.assert_close(got(name), expected, atol=atol, rtol=0)

    table = analysis.head_table(trace, "encoder")
    for column in ("previous_token", "duplicate_token", "induction", "prefix_matching", "entropy"):
        near(f"head_table/{column}", table[column].to_numpy().reshape(6, 12), (n_layers, n_heads))
    near("head_distances", analysis.head_distances(trace, "encoder"), (72, 72))
    near("rollout", analysis.rollout(trace, "encoder")[0], (n_layers, t, t))
    near("attention_flow", analysis.attention_flow(trace, "encoder"), (t, t))
    block = analysis.norm_attention_block(trace, "encoder", net)[0]
    near("norm_attention_block", block, (n_layers, t, t), atol=1e-5)
    near("mixing_ratio", analysis.mixing_ratio(trace, "encoder", net)[0], (n_layers,))
    words, by_word = analysis.word_attention(trace.attentions["encoder"], trace.tokens[0])
    near("word_attention", by_word[0], (n_layers, n_heads, len(words), len(words)))
    assert manifest["measures_notes"]["encoder"]["words"] == words
    assert torch.equal(torch.from_numpy(npz["attentions/encoder"]), trace.attentions["encoder"])
    measured = {n for n in npz.files if n.startswith("measures/")}
    assert set(manifest["measures"]) == measured  # every measure named, nothing else
    assert measured <= set(manifest["tensors"])  # and listed with its shape and dtype
    papers = {name: entry["paper"] for name, entry in manifest["measures"].items()}
    assert papers["measures/encoder/mixing_ratio"].startswith("Kobayashi et al. 2021")
    assert papers["measures/encoder/attention_flow"].startswith("Abnar & Zuidema 2020")
    assert papers["measures/encoder/head_table/induction"].startswith("TransformerLens")
    assert papers["measures/encoder/head_table/entropy"].startswith("Clark et al. 2019")
    assert papers["measures/encoder/word_attention"].startswith("Clark et al. 2019")
    assert all(entry["convention"] for entry in manifest["measures"].values())
