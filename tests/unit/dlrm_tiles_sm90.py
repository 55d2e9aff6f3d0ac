"""Compile dlrm_interaction's kernels for an H100 (sm_90) without a GPU and print, per tile, its
shared memory and the bytes ptxas spills to local memory (Triton's own ptxas, ``-v``):
``TRITON_INTERPRET=0 python tests/unit/dlrm_tiles_sm90.py DTYPE KERNEL:BB,BT,BD,DT,W ...`` (KERNEL:
forward or backward; DT: D_TILES; W: num_warps).

Run as a script in its own process: the kernels must be decorated with the interpreter off, which a
pytest process on a CPU machine has already turned on. Prints ``DTYPE KERNEL BB,BT,BD,DT,W
SHARED SPILLED CHAINED`` a line, CHAINED the number of ``tt.dot`` ops whose accumulator is another
dot's result (Triton folds ``dot(a, b, 0) + c`` into one running sum: the fp32 heads must stay
apart from the split products' tails).
"""

import os
import re
import subprocess
import sys
import tempfile

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import kernels.dlrm_interaction as dlrm

_TARGET = GPUTarget("cuda", 90, 32)
_TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


_PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")


def spilled_bytes(ptx: str) -> int:
    """Bytes of spill stores ptxas reports for this PTX on sm_90a."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.ptx")
        with open(path, "w") as handle:
            handle.write(ptx)
        out = subprocess.run([_PTXAS, "-v", "--gpu-name", "sm_90a", path, "-o", os.path.join(tmp, "kernel.cubin")],
                             capture_output=True, text=True, check=True)
    return int(re.search(r"(\d+) bytes spill stores", out.stderr).group(1))


def chained_dots(ttir: str) -> int:
    """How many ``tt.dot`` ops in this TTIR take another ``tt.dot``'s result as their accumulator."""
    dots = re.findall(r"(%\S+) = tt\.dot (%\S+), (%\S+), (%\S+)[ ,]", ttir)
    results = {result for result, *_ in dots}
    return sum(acc.rstrip(",") in results for *_, acc in dots)


def compile_tile(kernel, n_pointers: int, dtype: str, block_b: int, block_t: int, block_d: int,
                 d_tiles: int, warps: int) -> tuple[int, int, int]:
    """(shared memory bytes, spilled bytes, chained dots) of the kernel compiled for sm_90 at this
    tile and warps."""
    names = kernel.arg_names
    tiles = dlrm.column_tiles(d_tiles, _TORCH_DTYPES[dtype], dlrm.GPU_UNROLLED_FP32_TILES)
    looped_k = dlrm.loop_k(block_t, _TORCH_DTYPES[dtype], dlrm.GPU_UNROLLED_FP32_K_TILES)
    constexprs = {"BLOCK_B": block_b, "BLOCK_T": block_t, "BLOCK_D": block_d, "LOOP_K": looped_k, **tiles}
    constexprs = {n: v for n, v in constexprs.items() if n in names}  # LOOP_K: the backward's
    signature = {n: ("*" + dtype if i < n_pointers else "i32") for i, n in enumerate(names) if n not in constexprs}
    signature |= {n: "constexpr" for n in constexprs}
    source = ASTSource(kernel, signature, constexprs={(names.index(n),): v for n, v in constexprs.items()})
    compiled = triton.compile(source, target=_TARGET, options={"num_warps": warps})
    return compiled.metadata.shared, spilled_bytes(compiled.asm["ptx"]), chained_dots(compiled.asm["ttir"])


_KERNELS = {"forward": (dlrm._interaction_fwd_kernel, 3), "backward": (dlrm._interaction_bwd_kernel, 5)}

if __name__ == "__main__":
    dtype = sys.argv[1]
    for item in sys.argv[2:]:
        name, tile = item.split(":")
        kernel, pointers = _KERNELS[name]
        print(dtype, name, tile, *compile_tile(kernel, pointers, dtype, *(int(v) for v in tile.split(","))), flush=True)
