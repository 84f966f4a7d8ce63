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

# The selection controls after the five run inputs, at their defaults:
# stack, layer, head, layer_a, head_a, layer_b, head_b, dims, bertviz_view.
SELECTION = ("encoder", 0, 0, 0, 0, 0, 1, "0, 1, 2, 3", "head")
SECOND = "I have a dog."
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
    job = client.submit(text, model_id, "", target, second, *SELECTION, api_name="/run")
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


def test_run_is_the_only_public_endpoint(client):
    api = client.view_api(return_format="dict", print_info=False)
    assert list(api["named_endpoints"]) == ["/run"]
    assert api["unnamed_endpoints"] == {}
    labels = [p["label"] for p in api["named_endpoints"]["/run"]["parameters"]]
    assert labels[:2] == ["Text", "Model"]
    assert len(labels) == 5 + len(SELECTION)


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
