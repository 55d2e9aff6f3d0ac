"""Device probe: flash attention forward+backward with one operand's head_dim stride other than 1
(0: broadcast, 3: strided), each case in a fresh process (an illegal access poisons the context),
with the kernels given the strides as they are (raw) or the operands copied to a unit inner stride
first (fixed, kernels.flash_attention._unit_inner). Also the nightly case that faulted
(call 2: q, k and grad of head_dim stride 0, v of 9).

    python probe_flash_inner_stride.py OUT.json          # the whole grid, 14 processes at a time
    python probe_flash_inner_stride.py --one MODE CASE   # one case (JSON), prints one line
"""
import concurrent.futures
import itertools
import json
import subprocess
import os
import sys

DEVICE = os.environ.get("PROBE_DEVICE", "cuda")  # cpu: a dry run under the interpreter


def one(mode: str, case: dict) -> str:
    import torch

    import kernels.flash_attention as fa

    if mode == "raw":
        fa._unit_inner = lambda t: t
    seq, hd = case["seq"], case["hd"]
    gen = torch.Generator(device=DEVICE).manual_seed(0)

    def make(name):
        shape, strides = case.get("shapes", {}).get(name, (1, 2, seq, hd)), case["strides"].get(name)
        if strides is None:
            return torch.randn(shape, device=DEVICE, dtype=torch.bfloat16, generator=gen)
        size = 1 + case.get("offset", 0) + sum((n - 1) * s for n, s in zip(shape, strides))
        base = torch.randn(size, device=DEVICE, dtype=torch.bfloat16, generator=gen)
        return base.as_strided(shape, strides, case.get("offset", 0))

    q, k, v, do = (make(n) for n in ("q", "k", "v", "do"))
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, lse = fa.flash_attention(*leaves)
    grads = torch.autograd.grad(out, leaves, do)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    ref_leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    ref = torch.softmax(ref_leaves[0] @ ref_leaves[1].transpose(-1, -2) * hd ** -0.5, -1) @ ref_leaves[2]
    ref_grads = torch.autograd.grad(ref, ref_leaves, do.float())
    errs = [float((g.detach().float() - r.detach()).abs().max() / (r.detach().abs().max() + 1e-6))
            for g, r in zip((out, *grads), (ref, *ref_grads))]
    return f"ok rel errs out/dq/dk/dv {' '.join(f'{e:.2g}' for e in errs)}"


def cases():
    yield "nightly call 2", {"seq": 1, "hd": 64, "offset": 11,
                             "shapes": {n: (1, 1, 1, 64) for n in ("q", "k", "v", "do")},
                             "strides": {"q": (1, 12, 2, 0), "k": (18, 1, 3, 0), "v": (576, 3, 3, 9), "do": (0, 0, 0, 0)}}
    for name, inner, seq, hd in itertools.product(("q", "k", "v", "do"), (0, 3), (1, 17, 130), (32, 64)):
        strides = (2 * seq * hd, seq * hd, hd, 0) if inner == 0 else (6 * seq * hd, 3 * seq * hd, 3 * hd, 3)
        yield f"{name} inner {inner} seq {seq} hd {hd}", {"seq": seq, "hd": hd, "strides": {name: strides}}


def main(path: str) -> None:
    jobs = [(mode, label, case) for label, case in cases() for mode in ("raw", "fixed")]

    def run(job):
        mode, label, case = job
        try:
            done = subprocess.run([sys.executable, __file__, "--one", mode, json.dumps(case)], capture_output=True,
                                  text=True, timeout=180)
            lines = (done.stdout + done.stderr).strip().splitlines()
            last = next((l for l in reversed(lines) if l.startswith("ok")), None)
            error = next((l for l in lines if "Error" in l or "error" in l), lines[-1] if lines else "no output")
            return {"mode": mode, "case": label, "rc": done.returncode, "result": last or error[:300]}
        except subprocess.TimeoutExpired:
            return {"mode": mode, "case": label, "rc": None, "result": "timeout"}

    with concurrent.futures.ThreadPoolExecutor(14) as pool:
        results = list(pool.map(run, jobs))
    for r in results:
        print(f"{r['mode']:5s} {r['case']:28s} rc={r['rc']} {r['result']}")
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        print(one(sys.argv[2], json.loads(sys.argv[3])), flush=True)
    else:
        main(sys.argv[1])
