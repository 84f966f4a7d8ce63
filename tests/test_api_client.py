"""The public API as a script sees it: gradio_client against `python app.py` on 127.0.0.1.

The Run button is the one public endpoint, "/run". Its gr.State inputs are filled in by the client;
its return value skips gr.State and layout outputs, so results are looked up by elem_id.
"""

from __future__ import annotations

import pytest
from gradio_client import Client
from gradio_client.utils import SKIP_COMPONENTS

from tests.apphost import serve_app

pytestmark = pytest.mark.slow

# The selection controls after the five run inputs (ui.state.SELECTION_FIELDS: the shared
# fields, then each tab's own in page order), at their defaults but the fixed colour scale:
# stack, layer, head, dims, layer_a, head_a, layer_b, head_b, scale, measure, units, token,
# step, ablation, query, key.
SELECTION = (
    "encoder",
    0,
    0,
    "0, 1, 2, 3",
    0,
    0,
    0,
    1,
    "fixed",
    "weights",
    "tokens",
    0,
    0,
    "zero",
    0,
    0,
)
SECOND = "I have a dog."
PICKER = ("final", True)  # training snapshot (trained models only), positional encoding on
REQUEST_TIMEOUT = 120  # seconds; one request on the 2-core CI machine takes well under one


def connect(url: str) -> Client:
    """A fresh client: one new Gradio session."""
    return Client(url, verbose=False, analytics_enabled=False, download_files=False)


def returned_elem_ids(client: Client, api_name: str = "/run") -> list[str | None]:
    """The elem_id of each value the client returns, in order (State and layout dropped)."""
    config = client.config
    dep = next(d for d in config["dependencies"] if d.get("api_name") == api_name.lstrip("/"))
    components = {c["id"]: c for c in config["components"]}
    ids = []
    for component_id in dep["outputs"]:
        component = components[component_id]
        if component.get("skip_api", component["type"] in SKIP_COMPONENTS):
            continue
        ids.append(component.get("props", {}).get("elem_id"))
    return ids


def run(
    client: Client, text: str, model_id: str = "bert", target: str = "", second: str = SECOND
) -> dict[str, object]:
    """One Run click through the API; returns {elem_id: value}."""
    job = client.submit(text, model_id, "", target, second, *PICKER, *SELECTION, api_name="/run")
    values = job.result(timeout=REQUEST_TIMEOUT)
    return dict(zip(returned_elem_ids(client), values, strict=True))


def table_column(value: object, column: str) -> list:
    """One column of a gr.Dataframe value as the API returns it ({"headers", "data"})."""
    assert isinstance(value, dict) and "headers" in value, f"not a table: {value!r:.200}"
    index = value["headers"].index(column)
    return [row[index] for row in value["data"]]


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


@pytest.fixture
def client(app_url):
    c = connect(app_url)
    yield c
    c.close()


def test_run_and_patch_are_the_only_public_endpoints(client):
    api = client.view_api(return_format="dict", print_info=False)
    assert list(api["named_endpoints"]) == ["/run", "/patch"]  # /patch: Which heads matter
    assert api["unnamed_endpoints"] == {}
    params = api["named_endpoints"]["/run"]["parameters"]
    labels = [p["label"] for p in params]
    assert labels[:2] == ["Text", "Model"]
    names = [p["parameter_name"] for p in params]
    import app

    assert names == app.API_NAMES  # "tab": which tab to draw (a page's browser says its own)
    tab = next(p for p in params if p["parameter_name"] == "tab")
    assert tab["parameter_default"] == "tokens"
    assert names[:7] == ["text", "model", "checkpoint", "target", "second", "snapshot", "positions"]
    assert names[-1] == "page" and "layer" in names and "head_b" in names
    # The page's language: a named parameter, English by default, labelled in English.
    lang = next(p for p in params if p["parameter_name"] == "lang")
    assert lang["parameter_default"] == "en" and lang["label"] == "Language"
    assert all("__i18n__" not in str(p["label"]) for p in params)
    # Named and defaulted: a script can send just the text.
    assert all(p["parameter_has_default"] for p in params), [
        p["parameter_name"] for p in params if not p["parameter_has_default"]
    ]


def test_a_script_can_call_run_with_named_parameters_only(client):
    values = client.predict(text="dogs bark", layer=1, api_name="/run")
    out = dict(zip(returned_elem_ids(client), values, strict=True))
    assert "4 tokens" in out["status"]


def test_a_script_can_ask_for_chinese(client):
    values = client.predict(text="dogs bark", lang="zh-CN", api_name="/run")
    out = dict(zip(returned_elem_ids(client), values, strict=True))
    assert "4 个词元" in out["status"] and "tokens ·" not in out["status"]
    assert "lang=zh-CN" in out["status"]  # the link to this view opens in Chinese too
    assert out["token-table"]["headers"] == ["位置", "词元", "id", "类别"]
    english = client.predict(text="dogs bark", api_name="/run")  # the default is still English
    assert "4 tokens" in dict(zip(returned_elem_ids(client), english, strict=True))["status"]


def test_bert_run_returns_status_and_token_table(client):
    out = run(client, "time flies like an arrow")
    assert "7 tokens" in out["status"]
    assert "BERT" in out["status"]
    tokens = table_column(out["token-table"], "token")
    assert tokens == ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]
    assert table_column(out["token-table"], "id")[0] == 101  # [CLS] in bert-base-uncased's vocab


@pytest.mark.parametrize(
    ("model_id", "target"), [("seed002-encoder", ""), ("seed003-encdec", "I love you")]
)
def test_a_preset_runs_through_the_api(client, model_id, target):
    out = run(client, "我喜欢你", model_id, target=target)
    assert model_id in out["status"]
    assert "4 tokens" in out["status"]
    assert table_column(out["token-table"], "token") == ["我", "喜", "欢", "你"]


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_text_gets_a_sentence_not_an_exception(client, text):
    out = run(client, text)
    assert "Text is empty" in out["status"]
    assert "Traceback" not in out["status"]


def test_bad_api_values_get_one_sentence_and_the_next_request_works(client):
    huge = "word " * 40_000  # 200,000 characters: cut before it is stored
    out = run(client, huge)
    assert "only the first 20,000 were read" in out["status"]
    job = client.submit(
        "hello", None, "", "", SECOND, *PICKER, *SELECTION, api_name="/run"
    )  # model None
    values = dict(zip(returned_elem_ids(client), job.result(timeout=REQUEST_TIMEOUT), strict=True))
    assert "Model must be one of the listed model names" in values["status"]
    nan_selection = (
        "encoder",
        None,
        1e300,
        -5,
        0,
        0,
        1,
        "9" * 5000,
        "head",
        "fixed",
        "x",
        "y",
    )  # NaN → null
    job = client.submit("hello", "bert", "", "", SECOND, *PICKER, *nan_selection, api_name="/run")
    values = dict(zip(returned_elem_ids(client), job.result(timeout=REQUEST_TIMEOUT), strict=True))
    assert "3 tokens" in values["status"]
    assert "3 tokens" in run(client, "hello")["status"]


def test_uploads_are_refused_beyond_a_token_size(app_url):
    """The app has no file input: /gradio_api/upload takes nothing of any size."""
    import urllib.error
    import urllib.request
    import uuid

    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="a.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + b"x" * 100_000
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{app_url}gradio_api/upload",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code in (400, 413)
