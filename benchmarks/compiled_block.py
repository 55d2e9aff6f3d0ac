"""Our ops inside a compiled model, against torch.compile's own fusion of the eager ops.

    python benchmarks/compiled_block.py OUT_DIR [--quick]

The block is the seam of a transformer layer: ``x + gelu(linear(layer_norm(x)))``, bf16, a square
weight. Four ways of running it, timed side by side (``harness.bench.timing``: device time with
L2 flushed, and per-call wall time with the host included), forward and forward+backward:

* ``ours-compiled``: ``torch.compile`` (Inductor, default mode) of the block written with our ops
  (``kernels.layer_norm``, ``kernels.linear_act``): Dynamo records them as custom ops
  (kernels/_ops.py) and Inductor generates the residual add around them;
* ``eager-compiled``: ``torch.compile`` of the block written with ``F.layer_norm``, ``F.linear``,
  ``F.gelu``: Inductor's own fusion (a Triton LayerNorm, cuBLAS with a fused epilogue kernel);
* ``ours-eager`` and ``eager-eager``: the same blocks uncompiled.

Then CUDA graphs, the standard way to take the host out of a call: each block (forward only)
captured once and replayed, ours against eager's, and the same for LayerNorm alone, per replay.

Writes OUT_DIR/compiled_block.json (every sample, medians, the ratio of each line against the
compiled eager block, paired by repetition, with its 95% sign-test interval and its reading:
faster, tie or slower: ``harness.regression.speedup``) and
prints a table.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn.functional as F

from harness.bench.timing import TIMING_METHOD, WALL_TIMING_METHOD, TimingPlan, median, time_interleaved, time_wall
from harness.io import atomic_write_text
from harness.regression import speedup

SHAPES = ((2048, 1024), (8192, 4096))  # (tokens, hidden)
QUICK_SHAPES = ((2048, 1024),)
DTYPE = torch.bfloat16


def ours_block(x, norm_w, norm_b, weight, bias):
    from kernels.layer_norm import layer_norm
    from kernels.linear_act import linear_act
    return x + linear_act(layer_norm(x, norm_w, norm_b, 1e-5), weight, bias, "gelu")


def eager_block(x, norm_w, norm_b, weight, bias):
    return x + F.gelu(F.linear(F.layer_norm(x, x.shape[-1:], norm_w, norm_b, 1e-5), weight, bias))


def _inputs(tokens: int, hidden: int, device, sets: int, grad: bool):
    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, device=device) * scale).to(DTYPE)

    params = [rand(hidden) + 1, rand(hidden), rand(hidden, hidden, scale=hidden ** -0.5), rand(hidden)]
    params = [p.requires_grad_(grad) for p in params]
    xs = [rand(tokens, hidden).requires_grad_(grad) for _ in range(sets)]
    gs = [rand(tokens, hidden) for _ in range(sets)]
    return xs, gs, params


def _calls(tokens: int, hidden: int, device, pass_: str, plan: TimingPlan) -> dict:
    grad = pass_ == "forward_backward"
    xs, gs, params = _inputs(tokens, hidden, device, plan.input_sets, grad)
    blocks = {
        "ours-compiled": torch.compile(ours_block, fullgraph=True),
        "eager-compiled": torch.compile(eager_block, fullgraph=True),
        "ours-eager": ours_block,
        "eager-eager": eager_block,
    }
    calls = {}
    for name, block in blocks.items():
        if grad:
            def call(i, block=block):
                block(xs[i], *params).backward(gs[i])
        else:
            def call(i, block=block):
                with torch.no_grad():
                    return block(xs[i], *params)
        calls[name] = call
    return calls


def _graphed(fn, args) -> callable:
    """fn(*args) captured in a CUDA graph (warmed up on a side stream first); returns a replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        fn(*args)
    return lambda i: graph.replay()


def _graph_calls(tokens: int, hidden: int, device, plan: TimingPlan) -> dict:
    from kernels.layer_norm import layer_norm
    xs, _, params = _inputs(tokens, hidden, device, 1, grad=False)
    x = xs[0]
    norm = (x, params[0], params[1])
    return {
        "ours-block-graph": _graphed(ours_block, (x, *params)),
        "eager-block-graph": _graphed(eager_block, (x, *params)),
        "ours-layer_norm-graph": _graphed(lambda x, w, b: layer_norm(x, w, b, 1e-5), norm),
        "eager-layer_norm-graph": _graphed(lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5), norm),
    }


def _records(samples: dict, figure: str, shape, pass_: str, reference: str) -> list[dict]:
    out = []
    for name, times in samples.items():
        ratio, low, high, reading = (speedup(times, samples[reference], paired=True) if name != reference
                                     else (1.0, 1.0, 1.0, "tie"))
        out.append({
            "tokens": shape[0], "hidden": shape[1], "dtype": str(DTYPE).removeprefix("torch."), "pass": pass_,
            "implementation": name, "figure": figure, "reference": reference,
            "timing": TIMING_METHOD if figure == "device" else WALL_TIMING_METHOD,
            "median_ms": median(times), "samples_ms": times,
            "speedup_vs_reference": ratio, "speedup_ci": [low, high], "reading": reading,
        })
    return out


def run(out_dir: str, quick: bool) -> list[dict]:
    device = torch.device("cuda")
    # The spin before each timed call must outlast the host's work for it, or device time counts
    # the GPU waiting for the host: a compiled forward+backward at 2048 tokens takes 1.3-2.4 ms of
    # host time (benchmarks/results/2026-11-27-h100-17), against the default spin's ~1 ms.
    plan = TimingPlan(spin_cycles=10_000_000)
    records = []
    for shape in QUICK_SHAPES if quick else SHAPES:
        for pass_ in ("forward", "forward_backward"):
            calls = _calls(*shape, device, pass_, plan)
            records += _records(time_interleaved(calls, device, plan), "device", shape, pass_, "eager-compiled")
            records += _records(time_wall(calls, device, batch=20, plan=plan), "wall", shape, pass_, "eager-compiled")
        graphs = _graph_calls(*shape, device, plan)
        for ours, theirs in (("ours-block-graph", "eager-block-graph"), ("ours-layer_norm-graph", "eager-layer_norm-graph")):
            pair = {ours: graphs[ours], theirs: graphs[theirs]}
            records += _records(time_wall(pair, device, batch=50, plan=plan), "wall", shape, "graph_replay", theirs)
    atomic_write_text(os.path.join(out_dir, "compiled_block.json"), json.dumps({
        "device": torch.cuda.get_device_name(device), "torch": torch.__version__,
        "records": records,
    }, indent=1))
    return records


def table(records: list[dict]) -> str:
    lines = [f"{'shape':>11} {'pass':>16} {'figure':>6} {'implementation':>24} {'median us':>10} {'vs ref':>7} {'95% CI':>15} reading"]
    for r in records:
        low, high = r["speedup_ci"]
        lines.append(f"{r['tokens']:>5}x{r['hidden']:<5} {r['pass']:>16} {r['figure']:>6} {r['implementation']:>24} "
                     f"{r['median_ms'] * 1e3:>10.1f} {r['speedup_vs_reference']:>7.3f} {f'[{low:.3f}, {high:.3f}]':>15} "
                     f"{r['reading']} (vs {r['reference']})")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    print(table(run(sys.argv[1], "--quick" in sys.argv[2:])))
    print(json.dumps({"written": os.path.join(sys.argv[1], "compiled_block.json")}))
