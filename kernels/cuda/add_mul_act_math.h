// Element math of add_mul_act's CUDA extension: the activations and their slopes.
//
// Plain C++ that nvcc compiles for the device (and the host) and a host C++ compiler compiles as
// it is, so that tests/unit/test_cuda_extension.py can check these formulas on a machine without
// CUDA. The forms are those of kernels/_activations.py, operation for operation:
//
//   * relu: z where z > 0, else 0 (NaN kept); slope 0 at z <= 0, else 1 (1 for NaN).
//   * sigmoid: from e = exp(-|z|), which never overflows: 1 / (1 + e) for z >= 0, e / (1 + e)
//     below; its slope e / (1 + e)^2, without the cancellation of s * (1 - s).
//   * silu: z * sigmoid(z); slope s + z * s'.
//   * gelu_tanh: 0.5 z (1 + tanh(u)) written as the identical z * sigmoid(2u),
//     u = sqrt(2/pi) (z + 0.044715 z^3): no tanh and no cancellation in the tail.
//
// T is the compute type: float for 16-bit results (expf and IEEE division, relative error ~1e-7,
// far below a 16-bit ulp) and double for fp32 results (as the Triton kernel's PRECISE path: the
// result is rounded once, to fp32, at the store).
#ifndef ADD_MUL_ACT_MATH_H_
#define ADD_MUL_ACT_MATH_H_

#if defined(__CUDACC__)
#define AMA_HD __host__ __device__ __forceinline__
#else
#define AMA_HD inline
#endif

#include <math.h>

namespace add_mul_act_math {

enum Activation : int { kRelu = 0, kSigmoid = 1, kSilu = 2, kGeluTanh = 3 };

// 2 * sqrt(2 / pi) and gelu's cubic coefficient: each written once, cast to T where used (the
// Triton kernel's constants are rounded to its compute dtype the same way).
constexpr double kTwoSqrt2OverPi = 1.5957691216057308;
constexpr double kGeluC = 0.044715;

AMA_HD float exp_(float v) { return expf(v); }
AMA_HD double exp_(double v) { return exp(v); }
AMA_HD float abs_(float v) { return fabsf(v); }
AMA_HD double abs_(double v) { return fabs(v); }

// sigmoid(z) and its slope sigmoid(z) * sigmoid(-z).
template <typename T>
AMA_HD void sigmoid_and_slope(T z, T& s, T& ds) {
  const T e = exp_(-abs_(z));
  const T inv = T(1) / (T(1) + e);
  s = z >= T(0) ? inv : e * inv;  // NaN: the comparison is false and e * inv is NaN
  ds = e * inv * inv;
}

// act(z) and act'(z) for ACT one of Activation.
template <int ACT, typename T>
AMA_HD void activate_with_slope(T z, T& y, T& dy) {
  if (ACT == kRelu) {
    y = z <= T(0) ? T(0) : z;
    dy = z <= T(0) ? T(0) : T(1);
  } else if (ACT == kSigmoid) {
    sigmoid_and_slope(z, y, dy);
  } else if (ACT == kSilu) {
    T s, ds;
    sigmoid_and_slope(z, s, ds);
    y = z * s;
    dy = s + z * ds;
  } else {  // kGeluTanh: z * sigmoid(2u), 2u = (z + c z^3) * 2 sqrt(2/pi)
    const T k = T(kTwoSqrt2OverPi);
    const T c = T(kGeluC);
    const T two_u = (z * z * z * c + z) * k;
    T s, ds;
    sigmoid_and_slope(two_u, s, ds);
    y = z * s;
    dy = s + z * ds * ((z * z * (T(3) * c) + T(1)) * k);
  }
}

template <int ACT, typename T>
AMA_HD T activate(T z) {
  T y, dy;
  activate_with_slope<ACT>(z, y, dy);
  return y;
}

}  // namespace add_mul_act_math

#endif  // ADD_MUL_ACT_MATH_H_
