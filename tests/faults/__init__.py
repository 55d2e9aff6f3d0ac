"""Deliberately broken kernels: proof that the harness catches real bugs.

Each fault has the signature of the kernel it imitates and plants exactly one bug, described in its
docstring together with the inputs that expose it. The production modules in ``kernels/`` carry no
fault switches: the softmax faults run a small separate Triton softmax (``_softmax_base``) with the
bug compiled in, and the add_mul_act faults reuse the real kernels and break the step after them.

``SOFTMAX_FAULTS`` and ``ADD_MUL_ACT_FAULTS`` map each fault's name to its callable.
"""

from .add_mul_act_faults import FAULTS as ADD_MUL_ACT_FAULTS
from .softmax_faults import FAULTS as SOFTMAX_FAULTS

__all__ = ["ADD_MUL_ACT_FAULTS", "SOFTMAX_FAULTS"]
