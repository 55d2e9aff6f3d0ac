"""Device probe: the nightly case that faulted in call 2 (flash_attention bf16 backward, seq 1,
head_dim strides of 0), replayed through the harness's backward check with the operands as the
case gives them (raw: kernels.flash_attention._unit_inner switched off) or copied to a unit inner
stride (fixed). Run each under compute-sanitizer's memcheck.

    python probe_flash_repro.py raw|fixed REPRO_SCRIPT
"""
import sys

import kernels.flash_attention as fa
from harness.repro import load_script, replay

mode, script = sys.argv[1], sys.argv[2]
if mode == "raw":
    fa._unit_inner = lambda t: t
case, implementation, check = load_script(script)
sys.exit(0 if replay(case, implementation=implementation, check=check) else 1)
