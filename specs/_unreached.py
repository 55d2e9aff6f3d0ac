"""Branches of the shared kernel helpers that the CPU suite cannot take both ways, and why
(``KernelSpec.unreached_on_cpu``; ``harness branches`` checks that every other branch is taken).
Each spec whose kernels use a helper includes its entries.

A leading underscore keeps the registry from looking for a spec here.
"""

NORMS = {
    "_sqrt: if PRECISE and x.dtype == tl.float32:":
        "fp32 rows compute in fp64 (kernels/_norm_tiling.py WIDE_FP32 = True), so PRECISE never meets an fp32 "
        "value; the branch serves WIDE_FP32 = False",
    "div: if PRECISE and a.dtype == tl.float32:":
        "the norms are its only PRECISE callers, and their fp32 rows compute in fp64 (WIDE_FP32)",
}

ACTIVATIONS = {
    "_erfc: if _LIBDEVICE:":
        "libdevice (CUDA's erfcf, what torch.erfc runs on the GPU) exists only on a GPU; the interpreter "
        "takes the fp64 evaluation of the same function",
    "gelu_grad_as_eager: if _LIBDEVICE:":
        "libdevice's uncontracted add (what keeps eager's two roundings apart) exists only on a GPU; the "
        "interpreter's numpy add never fuses into an fma",
    "_exp_as_eager: if _LIBDEVICE:":
        "libdevice (CUDA's expf, what torch.exp runs on the GPU) exists only on a GPU; the interpreter "
        "takes the fp64 evaluation rounded to fp32",
    "silu_as_eager: if _LIBDEVICE:":
        "libdevice (CUDA's expf, what F.silu runs on the GPU) exists only on a GPU; the interpreter "
        "takes the fp64 evaluation rounded to fp32",
    "reciprocal_moderate: if PRECISE and _NATIVE_RCP:":
        "the hardware reciprocal seed (rcp.approx, inline PTX) exists only on a GPU; the interpreter "
        "runs no PTX and divides in numpy",
    "reciprocal_moderate: elif not _NATIVE_RCP:":
        "the same: under the interpreter _NATIVE_RCP is always False, so the GPU's seed-and-refine "
        "way is the one not taken",
}

MATMUL = {
    "dot: elif a.dtype == tl.float32:":
        "no spec multiplies fp32 tiles: lora_linear, linear_act and flash_attention take fp16 and bf16",
}
