"""Device probe: a faulting nightly case of flash_attention's backward, replayed through the
harness's check with each of the two launch fixes on or off, to be run under compute-sanitizer:

    python probe_flash_fixes.py MODE REPRO_SCRIPT

MODE: raw (strides as PyTorch gives them, operands as given), strides (size-1 dimensions get
their contiguous stride: kernels._rows.launch_strides), inner (operands copied to a unit head_dim
stride: _unit_inner), fixed (both, the code as it is).
"""
import sys

import kernels.flash_attention as fa
from harness.repro import load_script, replay

mode, script = sys.argv[1], sys.argv[2]
if mode in ("raw", "inner"):
    fa._rows.launch_strides = lambda t: tuple(t.stride())
if mode in ("raw", "strides"):
    fa._unit_inner = lambda t: t
case, implementation, check = load_script(script)
sys.exit(0 if replay(case, implementation=implementation, check=check) else 1)
