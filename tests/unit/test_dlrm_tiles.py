"""dlrm_interaction's GPU tiles fit an H100's shared memory, checked without a GPU.

Each launch that ``gpu_launch`` picks over the spec's GPU range of (features, dim) is compiled for
sm_90 by Triton's CUDA backend on this machine (``dlrm_tiles_sm90.py``, in a process of its own with
the interpreter off), and the compiled kernel's shared memory must fit in the 227 KB a block may
use. The H100 nightly run found the first overflow (65 x 257 in one tile asked 256 KB), and the
compile then found a second (4 samples of a 128 x 128 fp32 G + G^T, 353 KB).

With Triton's ptxas the same compile checks that the benchmark shapes' tiles keep their values in
registers.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kernels.dlrm_interaction as dlrm
from specs.dlrm_interaction import SPEC

ROOT = Path(__file__).resolve().parents[2]
H100_SHARED_PER_BLOCK = 232448  # cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90
SPLIT_GRAM_CROSS_PRODUCTS = 4  # the tail products of kernels._matmul.split_gram with bf16 pieces
SPLIT_DOT_CROSS_PRODUCTS = 7  # and of split_dot


_TORCH = {"fp32": torch.float32, "fp16": torch.float16}
needs_cuda_backend = pytest.mark.skipif(importlib.util.find_spec("triton.backends.nvidia") is None,
                                        reason="this Triton install has no CUDA backend to compile for sm_90 with")


def _tiles(features: int, dim: int, dtype: str) -> set[str]:
    """Both kernels' launches as KERNEL:BLOCK_B,BLOCK_T,BLOCK_D,D_TILES,WARPS. Unrolled 16-bit
    D_TILES are compiled as 1 or 2 (further unrolled column tiles repeat the second's code), but
    fp32's as they run (its unrolled split tiles share registers: at 128 rows of Z the forward
    spilled 0, 260 and 800 bytes at 2, 3 and 4 tiles), and its loop past GPU_UNROLLED_FP32_TILES as
    5 (the loop's code is the same for any count)."""
    tiles = set()
    for kernel in ("forward", "backward"):
        block_b, block_t, block_d, warps = dlrm.gpu_launch(features, dim, _TORCH[dtype], kernel)
        d_tiles = -(-dim // block_d)
        if dtype == "fp32":
            looped = dlrm.column_tiles(d_tiles, torch.float32, dlrm.GPU_UNROLLED_FP32_TILES)["LOOP_D"]
            d_tiles = 5 if looped else d_tiles
        else:
            d_tiles = min(2, d_tiles)
        tiles.add(f"{kernel}:{block_b},{block_t},{block_d},{d_tiles},{warps}")
    return tiles


def _split_chain_links(kernel: str, tile: str) -> int:
    """How many fp32 dots of a compiled tile accumulate onto another dot: only the split products'
    tails, each carried over a column tile's products (forward: over all column tiles; backward:
    over the tiles of PARTIAL_TERMS rows of Z, anew for each column tile). A looped tile's code
    holds one trip's products."""
    _, block_t, _, d_tiles, _ = (int(v) for v in tile.split(","))
    d_trips = 1 if d_tiles == 5 else d_tiles
    if kernel == "forward":
        return SPLIT_GRAM_CROSS_PRODUCTS * d_trips - 1
    k_tiles = block_t // dlrm.PARTIAL_TERMS.value
    k_trips = 1 if dlrm.loop_k(block_t, torch.float32, dlrm.GPU_UNROLLED_FP32_K_TILES) else k_tiles
    return d_trips * (SPLIT_DOT_CROSS_PRODUCTS * k_trips - 1)


def _compile(dtype: str, tiles) -> list[list[str]]:
    """The lines of dlrm_tiles_sm90.py for these launches: DTYPE KERNEL TILE SHARED SPILLED CHAINED."""
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(ROOT / "tests/unit/dlrm_tiles_sm90.py"), dtype,
                          *tiles],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line.split() for line in out.stdout.splitlines()]
    assert len(lines) == len(tiles)
    return lines


@needs_cuda_backend
@pytest.mark.parametrize("dtype", ["fp32"])  # 16-bit operands take half the bytes, in no larger tiles
def test_every_gpu_tile_fits_the_shared_memory_of_an_h100(dtype):
    features, dim = SPEC.dims["features"].gpu_max, SPEC.dims["dim"].gpu_max
    tiles = sorted(set().union(*(_tiles(f, d, dtype) for f in range(features + 1) for d in range(1, dim + 1))))
    lines = _compile(dtype, tiles)
    over = [line for line in lines if int(line[3]) > H100_SHARED_PER_BLOCK]
    assert not over, f"tiles over the H100's {H100_SHARED_PER_BLOCK} bytes of shared memory: {over}"


@needs_cuda_backend
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_benchmark_tiles_keep_their_registers_and_fp32_its_partial_sums(dtype):
    """The tiles of the benchmark shapes compile for sm_90 without spilling to local memory: fp32
    tiles of 8192 elements at 4 warps spilled, and the H100 ran that forward 4.7x slower. And the
    fp32 partial sums stay apart: Triton folds ``dot(a, b, 0) + c`` into one running sum, which the
    interpreter does not (a CPU run cannot show that partial sums merged). Only the split products'
    cross products chain (their tails, ``_split_chain_links``), and a head folded into a chain
    would add a link."""
    shapes = {(s.dims["features"], s.dims["dim"]) for s in SPEC.perf.shapes}
    tiles = sorted(set().union(*(_tiles(f, d, dtype) for f, d in shapes)))
    lines = _compile(dtype, tiles)
    spilled = [line for line in lines if int(line[4]) > 0]
    assert not spilled, f"tiles that spill registers (DTYPE KERNEL TILE SHARED SPILLED CHAINED): {spilled}"
    if dtype == "fp32":
        merged = [line for line in lines if int(line[5]) != _split_chain_links(line[1], line[2])]
        assert not merged, f"fp32 dots chained other than the split products' tails: {merged}"
