"""viz.model_info: architecture summary, parameter table, config table."""

from __future__ import annotations

import re

import pytest

from lang import speaking
from model import PRESETS, Transformer
from viz.model_info import CAPTIONS, architecture_markdown, config_table, param_table


def test_bert_summary_names_everything(bert):
    net, _ = bert
    text = architecture_markdown(net.config, "cpu", net.get_num_params())
    for part in (
        "encoder-only",
        "post-norm",
        "learned position embeddings",
        "GELU",
        "6 encoder layers",
        "h = 12",
        "d_model** = 384",
        "d_ff** = 1536",
        "d_head** = d_model / h = 32",
        "22,713,216",
        "all-MiniLM-L6-v2",
        "**Ran on:** CPU",
    ):
        assert part in text, part


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_summarises(name):
    cfg = PRESETS[name]
    text = architecture_markdown(cfg, "cuda:0", 1234)
    assert "CUDA" in text and cfg.source.split(":")[0] in text
    assert ("pre-norm" if cfg.norm == "pre" else "post-norm") in text
    assert ("sinusoidal" if cfg.positions == "sinusoidal" else "learned") in text
    if cfg.arch == "encoder-decoder":
        assert f"{cfg.n_layers} encoder + {cfg.n_layers} decoder layers" in text


def test_user_text_in_the_summary_is_escaped():
    cfg = PRESETS["seed002-encoder"].replace(name="<script>x</script>", source="<img src=x>")
    text = architecture_markdown(cfg, "cpu", 1)
    assert "<script>" not in text and "<img" not in text and "&lt;script&gt;" in text


def test_param_table_shares_and_total(bert):
    net, _ = bert
    counts = net.param_counts()
    df = param_table(counts)
    assert list(df.columns) == ["component", "parameters", "share %"]
    assert df["component"].tolist() == [*counts, "total"]
    assert df["parameters"].iloc[-1] == net.get_num_params() == sum(counts.values())
    assert abs(df["share %"].iloc[:-1].sum() - 100.0) < 0.5
    assert df.loc[df["component"] == "token embedding", "share %"].item() == pytest.approx(51.6)


def test_param_table_of_a_sinusoidal_model_lists_the_free_buffer():
    df = param_table(Transformer(PRESETS["seed002-encoder"]).param_counts())
    assert df.loc[df["component"] == "position embedding", "parameters"].item() == 0


@pytest.mark.parametrize("preset", ["seed003-encdec", "seed004-encoder"])
def test_param_table_in_chinese_names_every_component_in_chinese(bert, preset):
    """A Chinese page's table says every component in Chinese (layer-norm and FFN names kept),
    with the same numbers as the English one."""
    for net in (bert[0], Transformer(PRESETS[preset])):
        english = param_table(net.param_counts())
        with speaking("zh-CN"):
            chinese = param_table(net.param_counts())
        assert list(chinese.columns) == ["组件", "参数量", "占比 %"], list(chinese.columns)
        names = chinese["组件"].tolist()
        assert all(re.search(r"[\u4e00-\u9fff]", name) for name in names), names
        assert len(set(names)) == len(names)
        assert (chinese.iloc[:, 1:].to_numpy() == english.iloc[:, 1:].to_numpy()).all()


def test_config_table_lists_every_field():
    cfg = PRESETS["seed003-encdec"]
    df = config_table(cfg)
    assert list(df.columns) == ["field", "value", "meaning"]
    fields = df["field"].tolist()
    assert set(cfg.to_dict()) | {"d_head"} == set(fields)
    assert fields.index("d_head") == fields.index("n_heads") + 1
    assert df.set_index("field").loc["d_head", "value"] == "16"
    assert all(isinstance(v, str) for v in df["value"])
    assert df["meaning"].str.len().gt(5).all()  # every field is said in words too
    with speaking("zh-CN"):  # the code names stay, beside a Chinese gloss
        chinese = config_table(cfg)
    assert chinese.iloc[:, 0].tolist() == fields
    assert all(re.search(r"[\u4e00-\u9fff]", said) for said in chinese.iloc[:, 2]), chinese


def test_captions_present():
    assert set(CAPTIONS) == {"architecture", "params", "config"}
    assert all(len(c) > 20 and "$" not in c for c in CAPTIONS.values())
