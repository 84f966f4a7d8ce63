"""Language models: forward + full trace (ours) vs transformers' eager causal LM (issue 28).

Two checkpoints made here with seeded random weights (nothing is downloaded): a GPT-2-small shape
(12 layers, 12 heads, d_model 768, vocabulary 50,257) and a Qwen2.5-0.5B shape (24 layers, d_model
896, 14 query heads over 2 key/value heads, d_ff 4,864, vocabulary 151,936, tied head, RoPE θ 10⁶,
biases on W_Q, W_K, W_V), each built by transformers' own config and model classes and saved as
safetensors beside a small byte-level BPE trained in memory on assets/corpus/en.txt; and the
registry's real models (``--shape smollm2-135m`` or ``gemma-3-270m``: their real weights, from
the checkpoint folder model/registry.py prepares, which transformers opens too). Ours:
``model.load_lm(folder)`` and ``net.trace(ids)`` recording everything (attention weights,
hidden states, embeddings). Theirs: ``AutoModelForCausalLM`` with ``attn_implementation="eager"``
and ``output_attentions=True, output_hidden_states=True``. Runs are interleaved in pairs whose
order flips (ours, theirs, theirs, ours, ...); the figure is the ratio of the medians ("ratio"),
beside the median of each pair's own ratio ("pairs"), which a shared machine's drift moves less.
Budget: ratio <= 1.1.

Like for like, the comparison leaves out the LM head by default: the app's trace of a model
with a big vocabulary keeps no logits (engine.py asks for them only up to 4,096 tokens), so
theirs runs the causal LM's base model (``hf.base_model``). ``--head`` compares the whole causal LM
instead: ours ``trace(with_logits=True)`` against the causal LM's forward with every logit.

Memory (a fresh process holding our model only): the bytes of a trace of ``--memory-tokens``
random tokens as the trace cache counts them (``Trace.nbytes``, against engine.TraceCache's
budget), the same with every field computed on access, and the process's peak RSS during the
trace above its RSS before it.

Greedy continuation (``--continuation``): ``net.generate`` of ``--new-tokens`` tokens (32) after a
``--prompt``-token prompt (20 random tokens) with the key/value cache (model/generate.py) and
without it (``use_cache=False``: the whole text again every step), interleaved as above; the
ids of both are checked to be the same. Budget: cached ≤ 0.5 × uncached for the GPT-2-small
shape.

    .venv/bin/python bench/bench_lm.py [--shape gpt2|qwen05|smollm2-135m|gemma-3-270m] [--repeats 9]
        [--lengths 16,128,512]
        [--device cpu|cuda] [--head] [--threads N] [--memory-tokens 512]
        [--skip-memory | --memory-only]
    .venv/bin/python bench/bench_lm.py --continuation [--shape gpt2] [--repeats 7]
        [--prompt 20] [--new-tokens 32]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_forward import timed  # noqa: E402
from bench.shapes import cache_root  # noqa: E402
from model import load_lm  # noqa: E402
from model.registry import REGISTRY  # noqa: E402

# name -> (transformers config class, causal LM class, config arguments): published shapes.
SHAPES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {
        "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12}),
    "qwen05": ("Qwen2Config", "Qwen2ForCausalLM", {
        "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True, "use_sliding_window": False}),
}  # fmt: skip
SEED = 0
VERSION = "1"  # bump when what is written changes, so cached folders are made again
TOKENIZER_VOCAB = 2000  # the byte-level BPE's size: the ids drawn are real tokens
MiB = 1024**2


# ---- checkpoints ---------------------------------------------------------------------------------
def save_tokenizer(folder: Path) -> None:
    """A GPT-2-style byte-level BPE trained in memory on the repository's English corpus."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    lines = (ROOT / "assets" / "corpus" / "en.txt").read_text(encoding="utf-8").splitlines()
    bpe = ByteLevelBPETokenizer()
    end = "<|endoftext|>"
    bpe.train_from_iterator(lines, vocab_size=TOKENIZER_VOCAB, special_tokens=[end])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token=end, bos_token=end)
    tok.save_pretrained(str(folder))


def make_lm_checkpoint(name: str, root: Path | None = None) -> Path:
    """The folder of a ``name``-shaped causal LM ("gpt2" or "qwen05"), made once, then reused."""
    folder = (root or cache_root()) / f"lm-{name}-shape-seed{SEED}-v{VERSION}"
    if (folder / "model.safetensors").is_file():
        return folder
    import transformers

    config_class, model_class, kwargs = SHAPES[name]
    config = getattr(transformers, config_class)(**kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        hf = getattr(transformers, model_class)(config).eval()
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    hf.save_pretrained(str(partial), safe_serialization=True)
    del hf
    save_tokenizer(partial)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)  # whole or absent: a killed run leaves only a .partial folder
    return folder


# ---- timing --------------------------------------------------------------------------------------
def checkpoint_of(shape: str) -> Path:
    """A made shape's folder, or a registry model's real weights ("smollm2-135m",
    "gemma-3-270m"): the checkpoint folder model/registry.py prepares from its GGUF, which both
    our loader and transformers' open."""
    if shape in REGISTRY:
        from model.checkpoint import lm_wanted
        from model.registry import prepared_folder

        return prepared_folder(shape, lm_wanted())[0]
    return make_lm_checkpoint(shape)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def compare(args, folder: Path, device: torch.device) -> None:
    """Interleaved runs of ours and theirs at each length; medians and their ratio."""
    from transformers import AutoModelForCausalLM

    net, tok = load_lm(folder, device=str(device))
    hf = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    hf = hf.to(device).eval()
    theirs_model = hf if args.head else hf.base_model  # no LM head (module doc)
    cfg = net.config
    print(
        f"shape {args.shape}: {cfg.n_layers} layers x {cfg.n_heads} heads ({cfg.kv_heads} kv), "
        f"d_model {cfg.d_model}, vocab {cfg.vocab_size}; "
        f"{'with' if args.head else 'without'} the LM head"
    )
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {device}")
    print(f"load average at start: {load_average()}")
    print(f"{'tokens':>6} {'ours ms':>10} {'theirs ms':>10} {'ratio':>6} {'pairs':>6}")
    generator = torch.Generator().manual_seed(SEED)
    for n in (int(x) for x in args.lengths.split(",")):
        ids = torch.randint(0, len(tok), (1, n), generator=generator).to(device)

        def ours(ids=ids):
            net.trace(ids, with_logits=args.head)

        def theirs(ids=ids):
            with torch.no_grad():
                theirs_model(input_ids=ids, output_attentions=True, output_hidden_states=True)

        for _ in range(2 if n >= 512 else 3):  # warm-up
            ours()
            theirs()
        a, b = [], []
        for i in range(args.repeats):  # the order flips every pair: neither always goes first
            if i % 2:
                b.append(timed(theirs, sync))
                a.append(timed(ours, sync))
            else:
                a.append(timed(ours, sync))
                b.append(timed(theirs, sync))
        ma, mb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
        pairs = statistics.median(x / y for x, y in zip(a, b, strict=True))
        print(f"{n:>6} {ma:>10.1f} {mb:>10.1f} {ma / mb:>6.2f} {pairs:>6.2f}", flush=True)
    print(f"load average at end: {load_average()}")


def continuation(args, folder: Path, device: torch.device) -> None:
    """Greedy continuation with and without the key/value cache, interleaved; medians."""
    net, tok = load_lm(folder, device=str(device))
    cfg = net.config
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    generator = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, len(tok), (1, args.prompt), generator=generator).to(device)
    new = args.new_tokens
    print(
        f"shape {args.shape}: {cfg.n_layers} layers x {cfg.n_heads} heads ({cfg.kv_heads} kv), "
        f"d_model {cfg.d_model}, vocab {cfg.vocab_size}; {args.prompt}-token prompt, "
        f"{new} new tokens"
    )
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {device}")
    print(f"load average at start: {load_average()}")
    made = {}

    def cached():
        made["cached"] = net.generate(ids, max_new_tokens=new)

    def whole():
        made["whole"] = net.generate(ids, max_new_tokens=new, use_cache=False)

    for _ in range(2):  # warm-up
        cached()
        whole()
    a, b = [], []
    for i in range(args.repeats):  # the order flips every pair
        if i % 2:
            b.append(timed(whole, sync))
            a.append(timed(cached, sync))
        else:
            a.append(timed(cached, sync))
            b.append(timed(whole, sync))
    same = torch.equal(made["cached"], made["whole"])
    added = made["cached"].shape[1] - args.prompt
    ma, mb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
    pairs = statistics.median(x / y for x, y in zip(a, b, strict=True))
    print(f"{'':>10} {'median ms':>10} {'min':>8} {'max':>8} {'per token':>10}")
    for name, times in (("cached", a), ("uncached", b)):
        ms = [t * 1e3 for t in times]
        line = f"{statistics.median(ms):>10.1f} {min(ms):>8.1f} {max(ms):>8.1f}"
        print(f"{name:>10} {line} {statistics.median(ms) / added:>10.2f}")
    print(f"ratio {ma / mb:.2f} (pairs {pairs:.2f}); {added} tokens added; same ids: {same}")
    print(f"load average at end: {load_average()}")
    if not same:
        raise SystemExit("the cached continuation's ids differ from the uncached one's")


# ---- memory --------------------------------------------------------------------------------------
def rss_field(name: str) -> int:
    """VmRSS or VmHWM (peak RSS) of this process, bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(name)


def reset_peak_rss() -> bool:
    """Linux resets VmHWM to the current RSS when "5" is written to clear_refs (since 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory(args, folder: Path, device: torch.device) -> None:
    """A trace of --memory-tokens tokens: its bytes against the trace cache's, and peak RSS."""
    from engine import TraceCache
    from serve.cpu import trace_bytes
    from serve.memory import return_big_blocks

    return_big_blocks()  # as the app's engine: big tensors are their own mappings
    net, tok = load_lm(folder, device=str(device))
    n = args.memory_tokens
    ids = torch.randint(0, len(tok), (1, n), generator=torch.Generator().manual_seed(SEED))
    budget = TraceCache().max_bytes
    estimate = trace_bytes(net.config, {"input_ids": ids})
    before = rss_field("VmRSS")
    exact_peak = reset_peak_rss()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        held = torch.cuda.memory_allocated(device)  # the weights
    start = time.perf_counter()
    trace = net.trace(ids.to(device)).cpu()  # what engine.run_trace hands the cache
    seconds = time.perf_counter() - start
    made = trace.nbytes()
    peak = rss_field("VmHWM")
    print(f"{args.shape} at {n} tokens on {device}: trace made in {seconds:.2f} s")
    print(f"  trace cache budget      {budget / MiB:8.1f} MiB (engine.TraceCache().max_bytes)")
    print(f"  estimate (trace_bytes)  {estimate / MiB:8.1f} MiB")
    print(f"  trace as made (nbytes)  {made / MiB:8.1f} MiB: {made / budget:.2f} of the budget")
    parts = {}
    for name, field in (("attentions", trace.attentions), ("hidden_states", trace.hidden_states)):
        parts[name] = sum(t.untyped_storage().nbytes() for t in field.values())
        print(f"    {name:<21} {parts[name] / MiB:8.1f} MiB")
    # Attention weights grow as T², the rest as T: the longest text whose trace fits the budget.
    square, linear = parts["attentions"] / n**2, (made - parts["attentions"]) / n
    longest = int((-linear + (linear**2 + 4 * square * budget) ** 0.5) / (2 * square))
    print(f"  longest text that fits  {longest:8d} tokens")
    print(f"  RSS before the trace    {before / MiB:8.1f} MiB")
    what = "peak RSS during it" if exact_peak else "peak RSS of the process (incl. load)"
    print(f"  {what:<23} {peak / MiB:8.1f} MiB (+{(peak - before) / MiB:.1f})")
    if device.type == "cuda":
        top = torch.cuda.max_memory_allocated(device)
        print(f"  CUDA peak allocated     {top / MiB:8.1f} MiB (+{(top - held) / MiB:.1f})")
    start = time.perf_counter()
    trace.computed()  # every field a view may compute on access: Q, K, V, sublayer outputs
    seconds = time.perf_counter() - start
    full = trace.nbytes()
    print(f"  with every computed field {full / MiB:6.1f} MiB ({seconds:.2f} s to compute)")
    print(f"  peak RSS after computing {rss_field('VmHWM') / MiB:7.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="qwen05", choices=[*SHAPES, *REGISTRY])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--lengths", default="16,128,512")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--head", action="store_true", help="compare with the LM head's logits")
    parser.add_argument("--memory-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's own)")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--continuation", action="store_true", help="greedy continuation timed")
    parser.add_argument("--prompt", type=int, default=20, help="prompt tokens (--continuation)")
    parser.add_argument("--new-tokens", type=int, default=32, help="new tokens (--continuation)")
    args = parser.parse_args()

    from transformers.utils import logging

    logging.disable_progress_bar()  # the loaders' bars would bury the table
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    folder = checkpoint_of(args.shape)
    print(f"checkpoint {folder}")
    if args.memory_only:
        memory(args, folder, device)
        return
    if args.continuation:
        continuation(args, folder, device)
        return
    compare(args, folder, device)
    if not args.skip_memory:  # in a fresh process: only our model, no transformers' one
        command = [sys.executable, __file__, "--memory-only", "--shape", args.shape]
        command += ["--device", args.device, "--memory-tokens", str(args.memory_tokens)]
        command += ["--threads", str(args.threads)]
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
