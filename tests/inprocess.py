"""Launch a build_demo() app inside the test process (to inject faults), on a free loopback port."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.apphost import free_port


@contextlib.contextmanager
def serve_demo(demo) -> Iterator[str]:
    import app

    port = free_port()
    demo.launch(
        server_name="127.0.0.1",
        server_port=port,
        prevent_thread_lock=True,
        quiet=True,
        **app.LAUNCH_KWARGS,
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()
