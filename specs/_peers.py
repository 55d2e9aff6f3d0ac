"""Third-party kernels for the same functions, benchmarked beside eager and torch.compile where
their library is installed (``harness.OptionalPeer``).

Liger-Kernel (``pip install liger-kernel``) is a public Triton kernel library with softmax,
LayerNorm, RMSNorm, SwiGLU and GEGLU (tanh form) behind ``torch.autograd.Function``s. Each peer
below takes the spec's reference arguments and calls Liger's op with Liger's defaults, except
where noted; a variant Liger does not implement is not timed (``applies``).
"""

from __future__ import annotations

from harness import OptionalPeer

LIGER = "pip install liger-kernel"


def _liger_softmax():
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    return lambda x: LigerSoftmaxFunction.apply(x)


def _liger_layer_norm():
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction

    def layer_norm(x, weight, bias, eps):
        # Liger takes both vectors: a left-out one is its identity (ones, zeros), the same function
        cols = x.shape[-1:]
        w = x.new_ones(cols) if weight is None else weight
        b = x.new_zeros(cols) if bias is None else bias
        return LigerLayerNormFunction.apply(x, w, b, eps)

    return layer_norm


def _liger_rms_norm():
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    def rms_norm(x, weight, eps, weight_offset):
        w = x.new_ones(x.shape[-1:]) if weight is None else weight
        # in_place=False: Liger's default writes dX into dY, the grad_output it is handed, which
        # the benchmark hands it again on its next call
        return LigerRMSNormFunction.apply(x, w, eps, weight_offset, "llama", False)

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
