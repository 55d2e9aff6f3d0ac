"""Third-party kernels for the same functions, benchmarked beside eager and torch.compile where
their library is installed (``harness.OptionalPeer``).

Liger-Kernel (``pip install liger-kernel``) is a public Triton kernel library with softmax,
LayerNorm, RMSNorm, SwiGLU and GEGLU (tanh form) behind ``torch.autograd.Function``s. Each peer
below takes the spec's reference arguments and calls Liger's op with Liger's defaults, except
where noted; a variant Liger does not implement is not timed (``applies``).
"""

from __future__ import annotations

from harness import OptionalPeer
from specs import _norm

LIGER = "pip install liger-kernel"


def _liger_softmax():
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    return lambda x: LigerSoftmaxFunction.apply(x)


def _liger_layer_norm():
    import torch
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction

    def layer_norm(x, weight, bias, eps, affine):
        # Liger takes both vectors: a left-out one is its identity (ones, zeros), the same function
        w = _norm.keep(affine, "weight", weight)
        b = _norm.keep(affine, "bias", bias)
        w = torch.ones_like(weight) if w is None else w
        b = torch.zeros_like(bias) if b is None else b
        return LigerLayerNormFunction.apply(x, w, b, eps)

    return layer_norm


def _liger_rms_norm():
    import torch
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    def rms_norm(x, weight, eps, weight_offset, scale):
        w = weight if scale != "none" else torch.ones_like(weight)
        offset = weight_offset if scale == "offset_weight" else 0.0
        # in_place=False: Liger's default writes dX into dY, which the benchmark's other
        # implementations read after it
        return LigerRMSNormFunction.apply(x, w, eps, offset, "llama", False)

    return rms_norm


def _liger_glu():
    from liger_kernel.ops.geglu import LigerGELUMulFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    functions = {"silu": LigerSiLUMulFunction, "gelu_tanh": LigerGELUMulFunction}
    return lambda a, b, activation: functions[activation].apply(a, b)


SOFTMAX = {"liger": OptionalPeer("liger", _liger_softmax, LIGER)}
LAYER_NORM = {"liger": OptionalPeer("liger", _liger_layer_norm, LIGER)}
RMS_NORM = {"liger": OptionalPeer("liger", _liger_rms_norm, LIGER)}
GLU = {"liger": OptionalPeer("liger", _liger_glu, LIGER,
                             applies=lambda scalars: scalars.get("activation") in ("silu", "gelu_tanh"))}
