"""How the server stays up for everyone: the guards that sit apart from the views.

- ``serve.cpu``: every forward pass's admission and CPU threads (two lanes under one bound).
- ``serve.turns``: one page's requests in order, and the caps per page and per client address.
- ``serve.unread``: one byte budget for results nobody reads, and no per-session copy of outputs
  (the two patches this app makes to Gradio's internals).
- ``serve.exports``: downloads in one folder bounded in bytes, written inside Gradio's file cache
  so that Gradio serves them without a copy of its own (docs/exports.md).
- ``serve.lru``: the least-recently-used map that worker threads share (module-level caches).
"""
