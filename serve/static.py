"""The page's unchanging files, served from memory and compressed once (a page open's cost).

Opening the page asks the server for about 90 files: the page itself (its HTML carries the
config of every component and the first view, ~430 kB) and Gradio's frontend chunks, styles and
theme. Gradio builds the page anew for every visitor and serves every chunk through its whole
middleware stack, compressing each one again for each visitor: about 100 core-ms of a page open's
~150 (bench/serving_cost.py). Every visitor gets the same bytes, so ``PageFiles`` keeps each
file's answer once, as Gradio gave it, in brotli, gzip and plain form, and answers the next
visitor from memory (bench/serving_cost.py: a page open 146 -> 22 core-ms).

What is kept, and when it is asked again:

- ``/assets/…`` (the frontend build: every name carries its content's hash) and ``/static/…``:
  kept for the server's life; ``/assets/`` is sent ``immutable``, so a returning browser does not
  even ask again.
- ``/theme.css`` (its link carries the theme's hash) and ``/``, the page: kept per address the
  browser used (the page's config names its own root URL), and only for a request carrying none
  of Gradio's own page parameters (``page``, ``deep_link``). The page is sent ``no-cache`` with an
  ETag: a browser asks again and gets a 304 while the server runs the same page.

Only complete 200 answers without a cookie are kept; anything else passes through untouched.

The kept page also names Gradio's Plotly chunk (``<link rel="modulepreload">``): Gradio asks for
it only when a figure first arrives, and a new visitor's first figure then waited for 4.6 MB of
JavaScript to be fetched, compiled and run (~0.75 s of the browser's main thread here). Named in
the page, it is fetched and compiled beside the frontend's own files; ``ta.warmPlotly``
(ui/js/core.js) runs it as soon as the page has opened.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import hashlib
import threading
from pathlib import Path
from urllib.parse import parse_qs

import brotli
import gradio

KEPT_PREFIXES = ("/assets/", "/static/")
PER_ADDRESS = ("/", "/theme.css")
ADDRESS_HEADERS = (b"host", b"x-forwarded-host", b"x-forwarded-proto")
GRADIO_PAGE_PARAMETERS = {"page", "deep_link"}
MAX_FILES = 512  # the frontend has ~300 files; a bound against invented /assets/ names
MAX_BYTES = 8 * 2**20  # the largest chunk is ~3 MB


@functools.cache
def plotly_chunk() -> str:
    """The file name of Gradio's Plotly chunk in its frontend build (``PlotlyPlot-<hash>.js``);
    "" where the build has no such one file (then nothing is preloaded)."""
    assets = Path(gradio.__file__).resolve().parent / "templates" / "frontend" / "assets"
    found = sorted(assets.glob("PlotlyPlot-*.js"))
    return found[0].name if len(found) == 1 else ""


def with_preload(page: bytes) -> bytes:
    """The page's HTML naming Gradio's Plotly chunk for the browser to fetch at once, by the
    same relative address Gradio's own files use (so one module, fetched once)."""
    name = plotly_chunk()
    if not name or b"</head>" not in page:
        return page
    link = f'<link rel="modulepreload" crossorigin href="./assets/{name}">'.encode()
    return page.replace(b"</head>", link + b"</head>", 1)


class Kept:
    """One answer, in every encoding a browser may ask for."""

    def __init__(self, headers: list[tuple[bytes, bytes]], body: bytes, immutable: bool) -> None:
        skip = {b"content-length", b"content-encoding", b"etag", b"cache-control", b"vary"}
        self.headers = [(k, v) for k, v in headers if k.lower() not in skip]
        self.etag = b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'
        self.cache = b"public, max-age=31536000, immutable" if immutable else b"no-cache"
        self.bodies = {b"identity": body}
        if len(body) >= 400:  # Gradio's own threshold for compressing
            # The frontend's files are a fixed set, compressed once for the server's life: hard.
            # The page is kept per address a request names (its Host header), which anyone can
            # vary: as Gradio itself compresses it (brotli 4), so a new address costs no more.
            quality, level = (8, 9) if immutable else (4, 6)
            self.bodies[b"br"] = brotli.compress(body, quality=quality)
            self.bodies[b"gzip"] = gzip.compress(body, compresslevel=level, mtime=0)

    def encoding_for(self, accept: bytes) -> bytes:
        wanted = {part.split(b";")[0].strip() for part in accept.lower().split(b",")}
        for encoding in (b"br", b"gzip"):
            if encoding in wanted and encoding in self.bodies:
                return encoding
        return b"identity"

    async def send(self, scope, send) -> None:
        request = dict(scope["headers"])
        encoding = self.encoding_for(request.get(b"accept-encoding", b""))
        body = self.bodies[encoding]
        headers = [
            *self.headers,
            (b"etag", self.etag),
            (b"cache-control", self.cache),
            (b"vary", b"accept-encoding"),
        ]
        if request.get(b"if-none-match") == self.etag:
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if encoding != b"identity":
            headers.append((b"content-encoding", encoding))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )


def key_of(scope) -> tuple | None:
    """What identifies a keepable answer, or None when this request is not one."""
    if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
        return None
    path = scope["path"][len(scope.get("root_path", "")) :] or "/"
    headers = dict(scope["headers"])
    if b"range" in headers:
        return None
    if path.startswith(KEPT_PREFIXES) and ".." not in path:
        return (path,)
    if path in PER_ADDRESS:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if path == "/" and GRADIO_PAGE_PARAMETERS & set(query):
            return None
        version = query.get("v", [""])[0] if path == "/theme.css" else ""
        address = tuple(headers.get(h, b"") for h in ADDRESS_HEADERS)
        return (path, version, scope.get("scheme"), scope.get("root_path", ""), *address)
    return None


class PageFiles:
    """ASGI middleware, outermost: keeps and serves the page's unchanging answers (module doc)."""

    def __init__(self, app) -> None:
        self.app = app
        self.kept: dict[tuple, Kept] = {}
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send) -> None:
        key = key_of(scope)
        if key is None:
            return await self.app(scope, receive, send)
        kept = self.kept.get(key)
        if kept is None:
            kept = await self.fetch(scope, receive, send, key)
            if kept is None:
                return None  # answered as Gradio answered it
        await kept.send(scope, send)

    async def fetch(self, scope, receive, send, key: tuple) -> Kept | None:
        """Ask Gradio for the plain answer; keep it if it may be kept, else pass it on."""
        plain = dict(scope, method="GET")
        plain["headers"] = [
            (k, v) for k, v in scope["headers"] if k not in (b"accept-encoding", b"if-none-match")
        ]
        start, parts = {}, []

        async def collect(message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))

        await self.app(plain, receive, collect)
        body, headers = b"".join(parts), list(start.get("headers", []))
        keepable = (
            start.get("status") == 200
            and not any(k.lower() == b"set-cookie" for k, _ in headers)
            and len(body) <= MAX_BYTES
        )
        if not keepable:
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return None
        immutable = key[0].startswith("/assets/")
        if key[0] == "/":
            body = with_preload(body)
        kept = await asyncio.to_thread(Kept, headers, body, immutable)  # compressed once
        with self.lock:
            if len(self.kept) >= MAX_FILES:
                self.kept.pop(next(iter(self.kept)))
            self.kept[key] = kept
        return kept


def keep_page_files() -> None:
    """Every Gradio app made from now on serves its unchanging files through ``PageFiles``."""
    from gradio.routes import App

    create_app = App.create_app
    if getattr(create_app, "keeps_page_files", False):
        return

    def create_app_keeping(*args, **kwargs):
        app = create_app(*args, **kwargs)
        app.add_middleware(PageFiles)  # added last = outermost: before CORS and compression
        return app

    create_app_keeping.keeps_page_files = True
    App.create_app = staticmethod(create_app_keeping)
