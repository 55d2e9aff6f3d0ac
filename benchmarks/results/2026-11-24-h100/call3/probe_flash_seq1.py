"""Device probe for the illegal memory access seen twice on flash_attention's smallest case (fp16,
seq 1, head_dim 16, first example of a fresh process). One fresh process per configuration; in
each, forward and backward run separately with a synchronize after each launch group, so the
faulting step is named. Usage: python probe_flash_seq1.py            (runs all, in subprocesses)
                               python probe_flash_seq1.py one DTYPE SEQ HD CAUSAL"""
import os, subprocess, sys

def one(dtype, seq, hd, causal):
    import torch
    from kernels.flash_attention import flash_attention
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 1, seq, hd, device="cuda", dtype=dt, generator=g).requires_grad_() for _ in range(3))
    for rep in range(2):
        out, lse = flash_attention(q, k, v, causal=causal)
        torch.cuda.synchronize(); print("fwd ok", rep, flush=True)
        go, gl = torch.randn_like(out), torch.randn_like(lse)
        grads = torch.autograd.grad([out, lse], [q, k, v], [go, gl])
        torch.cuda.synchronize(); print("bwd ok", rep, flush=True)
        grads = torch.autograd.grad([out], [q, k, v], [go])
        torch.cuda.synchronize(); print("bwd (no dlse) ok", rep, flush=True)
    print("RESULT ok", flush=True)

if __name__ == "__main__":
    if sys.argv[1:2] == ["one"]:
        one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1")
        sys.exit(0)
    configs = [(d, s, h, c) for d in ("float16", "bfloat16") for s in (1, 17) for h in (16,) for c in (0, 1)]
    for blocking in ("0", "1"):
        env = dict(os.environ, CUDA_LAUNCH_BLOCKING=blocking, PYTHONPATH=os.getcwd())
        for d, s, h, c in configs:
            r = subprocess.run([sys.executable, __file__, "one", d, str(s), str(h), str(c)], env=env,
                               capture_output=True, text=True, timeout=120)
            tail = (r.stdout + r.stderr).strip().splitlines()
            status = "ok" if "RESULT ok" in r.stdout else "FAIL: " + " | ".join(l for l in tail if "Error" in l or "ok" in l or "error" in l)[-400:]
            print(f"blocking={blocking} {d} seq={s} hd={h} causal={c}: {status}", flush=True)
