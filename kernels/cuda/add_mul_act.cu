// add_mul_act as a CUDA C++ extension: act(x + alpha * y + bias), forward and backward.
//
// Built at first use by kernels/cuda/_build.py (torch.utils.cpp_extension.load_inline), which
// places add_mul_act_math.h in front of this file. The Python side (kernels/cuda/add_mul_act.py)
// validates the arguments, describes x, y and grad as rows (kernels/_rows.py: row r starts
// (r / inner) * stride_outer + (r % inner) * stride_inner elements after the data pointer, the
// last dimension unit-stride), allocates the dense outputs and finishes grad_bias.
//
// Numerics are the Triton kernel's (kernels/add_mul_act.py): z = x + alpha * y + bias and the
// activation in fp32 for 16-bit tensors and in fp64 for fp32 tensors, rounded once at the
// store; grad_bias reduced in fp64 partial sums, one row per group of rows, with a fixed grouping
// (no atomics: bitwise reproducible).

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>

namespace {

using add_mul_act_math::activate;
using add_mul_act_math::activate_with_slope;

constexpr int kThreads = 256;      // threads per block
constexpr int kColsPerThread = 4;  // forward: columns per thread, kThreads apart (coalesced)
constexpr int64_t kMaxGridY = 65535;

struct Rows {
  int64_t inner, stride_outer, stride_inner;
  __device__ __forceinline__ int64_t offset(int64_t row) const {
    return (row / inner) * stride_outer + (row % inner) * stride_inner;
  }
};

template <typename scalar_t>
__device__ __forceinline__ float load_f32(const scalar_t* p) {
  return static_cast<float>(*p);
}

// z = x + alpha * y + bias in the compute type, as the Triton kernel forms it: fp32 for 16-bit
// results, fp64 for fp32 results, where its (at most two) roundings are far below an fp32 ulp.
// Formed in fp32, z carries up to 2 fp32 roundings, which a sigmoid's tail turns into ulps of the
// result: 2.65x eager's envelope on the H100 at z = -6.2.
template <typename compute_t, typename scalar_t>
__device__ __forceinline__ compute_t pre_activation(const scalar_t* x, const scalar_t* y, float bias, float alpha) {
  return static_cast<compute_t>(load_f32(x)) + static_cast<compute_t>(alpha) * static_cast<compute_t>(load_f32(y)) +
         static_cast<compute_t>(bias);
}

// Forward. Block (bx, by): columns [bx * kThreads * kColsPerThread, ...) of rows by, by + gridDim.y,
// ...; each thread kColsPerThread columns kThreads apart, so a warp's loads are consecutive.
template <typename scalar_t, typename compute_t, int ACT>
__global__ void __launch_bounds__(kThreads) add_mul_act_fwd_kernel(
    const scalar_t* __restrict__ x, const scalar_t* __restrict__ y, const scalar_t* __restrict__ bias,
    scalar_t* __restrict__ out, int64_t n_rows, int64_t n_cols, float alpha, Rows xr, Rows yr) {
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * (kThreads * kColsPerThread) + threadIdx.x;
  float b[kColsPerThread];
#pragma unroll
  for (int j = 0; j < kColsPerThread; ++j) {
    const int64_t c = col0 + static_cast<int64_t>(j) * kThreads;
    b[j] = c < n_cols ? load_f32(bias + c) : 0.0f;
  }
  for (int64_t row = blockIdx.y; row < n_rows; row += gridDim.y) {
    const scalar_t* x_row = x + xr.offset(row);
    const scalar_t* y_row = y + yr.offset(row);
    scalar_t* out_row = out + row * n_cols;
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      const int64_t c = col0 + static_cast<int64_t>(j) * kThreads;
      if (c < n_cols) {
        const compute_t z = pre_activation<compute_t>(x_row + c, y_row + c, b[j], alpha);
        out_row[c] = static_cast<scalar_t>(activate<ACT>(z));
      }
    }
  }
}

// Backward. Block (bx, by): columns [bx * kThreads, ...), one per thread, over the rows of group
// by, [by * rows_per_group, (by + 1) * rows_per_group). Writes grad_x = grad * act'(z) and
// grad_y = alpha * grad_x, and the group's fp64 sum of grad_x per column into partial[by].
template <typename scalar_t, typename compute_t, int ACT>
__global__ void __launch_bounds__(kThreads) add_mul_act_bwd_kernel(
    const scalar_t* __restrict__ x, const scalar_t* __restrict__ y, const scalar_t* __restrict__ bias,
    const scalar_t* __restrict__ grad, scalar_t* __restrict__ grad_x, scalar_t* __restrict__ grad_y,
    double* __restrict__ partial, int64_t n_rows, int64_t n_cols, float alpha, int64_t rows_per_group,
    Rows xr, Rows yr, Rows gr) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= n_cols) {
    return;  // no block-level synchronisation below
  }
  const int64_t group = blockIdx.y;
  const int64_t first = group * rows_per_group;
  const int64_t last = first + rows_per_group < n_rows ? first + rows_per_group : n_rows;
  const float b = load_f32(bias + c);
  const compute_t a = static_cast<compute_t>(alpha);
  double acc = 0.0;
  // Unrolled so that several rows' loads are in flight per thread (the rows are independent but
  // for acc, whose additions stay in row order: the result does not depend on the unrolling).
#pragma unroll 4
  for (int64_t row = first; row < last; ++row) {
    const compute_t z = pre_activation<compute_t>(x + xr.offset(row) + c, y + yr.offset(row) + c, b, alpha);
    compute_t act, slope;
    activate_with_slope<ACT>(z, act, slope);
    const compute_t dz = static_cast<compute_t>(load_f32(grad + gr.offset(row) + c)) * slope;
    const int64_t dense = row * n_cols + c;
    grad_x[dense] = static_cast<scalar_t>(dz);
    grad_y[dense] = static_cast<scalar_t>(a * dz);
    acc += static_cast<double>(dz);
  }
  partial[group * n_cols + c] = acc;
}

void check_inputs(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda() && bias.is_cuda(), "add_mul_act (cuda): tensors must be on a CUDA device");
  TORCH_CHECK(x.scalar_type() == y.scalar_type() && x.scalar_type() == bias.scalar_type(),
              "add_mul_act (cuda): x, y and bias must share one dtype");
  TORCH_CHECK(bias.is_contiguous(), "add_mul_act (cuda): bias must be contiguous");
}

Rows rows_of(int64_t inner, int64_t stride_outer, int64_t stride_inner) {
  TORCH_CHECK(inner >= 1, "add_mul_act (cuda): inner row count must be >= 1");
  return Rows{inner, stride_outer, stride_inner};
}

template <typename scalar_t, typename compute_t>
void launch_forward(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& bias, torch::Tensor& out,
                    int64_t n_rows, int64_t n_cols, float alpha, int64_t act, Rows xr, Rows yr) {
  const int64_t cols_per_block = kThreads * kColsPerThread;
  const dim3 grid(static_cast<unsigned>((n_cols + cols_per_block - 1) / cols_per_block),
                  static_cast<unsigned>(std::min(n_rows, kMaxGridY)));
  const dim3 block(kThreads);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const auto* xp = x.data_ptr<scalar_t>();
  const auto* yp = y.data_ptr<scalar_t>();
  const auto* bp = bias.data_ptr<scalar_t>();
  auto* op = out.data_ptr<scalar_t>();
  switch (act) {
    case add_mul_act_math::kRelu:
      add_mul_act_fwd_kernel<scalar_t, compute_t, add_mul_act_math::kRelu>
          <<<grid, block, 0, stream>>>(xp, yp, bp, op, n_rows, n_cols, alpha, xr, yr);
      break;
    case add_mul_act_math::kSigmoid:
      add_mul_act_fwd_kernel<scalar_t, compute_t, add_mul_act_math::kSigmoid>
          <<<grid, block, 0, stream>>>(xp, yp, bp, op, n_rows, n_cols, alpha, xr, yr);
      break;
    case add_mul_act_math::kSilu:
      add_mul_act_fwd_kernel<scalar_t, compute_t, add_mul_act_math::kSilu>
          <<<grid, block, 0, stream>>>(xp, yp, bp, op, n_rows, n_cols, alpha, xr, yr);
      break;
    case add_mul_act_math::kGeluTanh:
      add_mul_act_fwd_kernel<scalar_t, compute_t, add_mul_act_math::kGeluTanh>
          <<<grid, block, 0, stream>>>(xp, yp, bp, op, n_rows, n_cols, alpha, xr, yr);
      break;
    default:
      TORCH_CHECK(false, "add_mul_act (cuda): unknown activation code ", act);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, typename compute_t>
void launch_backward(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& bias,
                     const torch::Tensor& grad, torch::Tensor& grad_x, torch::Tensor& grad_y, torch::Tensor& partial,
                     int64_t n_rows, int64_t n_cols, float alpha, int64_t act, int64_t rows_per_group,
                     Rows xr, Rows yr, Rows gr) {
  const int64_t groups = partial.size(0);
  const dim3 grid(static_cast<unsigned>((n_cols + kThreads - 1) / kThreads), static_cast<unsigned>(groups));
  const dim3 block(kThreads);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const auto* xp = x.data_ptr<scalar_t>();
  const auto* yp = y.data_ptr<scalar_t>();
  const auto* bp = bias.data_ptr<scalar_t>();
  const auto* gp = grad.data_ptr<scalar_t>();
  auto* gxp = grad_x.data_ptr<scalar_t>();
  auto* gyp = grad_y.data_ptr<scalar_t>();
  auto* pp = partial.data_ptr<double>();
  switch (act) {
    case add_mul_act_math::kRelu:
      add_mul_act_bwd_kernel<scalar_t, compute_t, add_mul_act_math::kRelu><<<grid, block, 0, stream>>>(
          xp, yp, bp, gp, gxp, gyp, pp, n_rows, n_cols, alpha, rows_per_group, xr, yr, gr);
      break;
    case add_mul_act_math::kSigmoid:
      add_mul_act_bwd_kernel<scalar_t, compute_t, add_mul_act_math::kSigmoid><<<grid, block, 0, stream>>>(
          xp, yp, bp, gp, gxp, gyp, pp, n_rows, n_cols, alpha, rows_per_group, xr, yr, gr);
      break;
    case add_mul_act_math::kSilu:
      add_mul_act_bwd_kernel<scalar_t, compute_t, add_mul_act_math::kSilu><<<grid, block, 0, stream>>>(
          xp, yp, bp, gp, gxp, gyp, pp, n_rows, n_cols, alpha, rows_per_group, xr, yr, gr);
      break;
    case add_mul_act_math::kGeluTanh:
      add_mul_act_bwd_kernel<scalar_t, compute_t, add_mul_act_math::kGeluTanh><<<grid, block, 0, stream>>>(
          xp, yp, bp, gp, gxp, gyp, pp, n_rows, n_cols, alpha, rows_per_group, xr, yr, gr);
      break;
    default:
      TORCH_CHECK(false, "add_mul_act (cuda): unknown activation code ", act);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

// out: dense (n_rows, n_cols), x's dtype. x and y: row layouts (see the top of this file).
void add_mul_act_forward(torch::Tensor x, torch::Tensor y, torch::Tensor bias, torch::Tensor out, int64_t n_rows,
                         int64_t n_cols, double alpha, int64_t act, int64_t x_inner, int64_t x_stride_outer,
                         int64_t x_stride_inner, int64_t y_inner, int64_t y_stride_outer, int64_t y_stride_inner) {
  check_inputs(x, y, bias);
  TORCH_CHECK(out.is_contiguous() && out.scalar_type() == x.scalar_type() && out.numel() == n_rows * n_cols,
              "add_mul_act (cuda): out must be a dense (rows, cols) tensor of x's dtype");
  if (n_rows == 0 || n_cols == 0) {
    return;
  }
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  const Rows xr = rows_of(x_inner, x_stride_outer, x_stride_inner);
  const Rows yr = rows_of(y_inner, y_stride_outer, y_stride_inner);
  const float a = static_cast<float>(alpha);
  switch (x.scalar_type()) {
    case at::kFloat:
      launch_forward<float, double>(x, y, bias, out, n_rows, n_cols, a, act, xr, yr);
      break;
    case at::kHalf:
      launch_forward<at::Half, float>(x, y, bias, out, n_rows, n_cols, a, act, xr, yr);
      break;
    case at::kBFloat16:
      launch_forward<at::BFloat16, float>(x, y, bias, out, n_rows, n_cols, a, act, xr, yr);
      break;
    default:
      TORCH_CHECK(false, "add_mul_act (cuda): unsupported dtype ", x.scalar_type());
  }
}

// grad_x, grad_y: dense (n_rows, n_cols), x's dtype; partial: fp64 (groups, n_cols), group g
// covering rows [g * rows_per_group, (g + 1) * rows_per_group).
void add_mul_act_backward(torch::Tensor x, torch::Tensor y, torch::Tensor bias, torch::Tensor grad,
                          torch::Tensor grad_x, torch::Tensor grad_y, torch::Tensor partial, int64_t n_rows,
                          int64_t n_cols, double alpha, int64_t act, int64_t rows_per_group, int64_t x_inner,
                          int64_t x_stride_outer, int64_t x_stride_inner, int64_t y_inner, int64_t y_stride_outer,
                          int64_t y_stride_inner, int64_t g_inner, int64_t g_stride_outer, int64_t g_stride_inner) {
  check_inputs(x, y, bias);
  TORCH_CHECK(grad.is_cuda() && grad.scalar_type() == x.scalar_type(), "add_mul_act (cuda): grad must match x");
  TORCH_CHECK(grad_x.is_contiguous() && grad_y.is_contiguous() && grad_x.numel() == n_rows * n_cols &&
                  grad_y.numel() == n_rows * n_cols && grad_x.scalar_type() == x.scalar_type() &&
                  grad_y.scalar_type() == x.scalar_type(),
              "add_mul_act (cuda): grad_x and grad_y must be dense (rows, cols) tensors of x's dtype");
  TORCH_CHECK(partial.is_contiguous() && partial.scalar_type() == at::kDouble && partial.dim() == 2 &&
                  partial.size(1) == n_cols,
              "add_mul_act (cuda): partial must be a dense float64 (groups, cols) tensor");
  TORCH_CHECK(rows_per_group >= 1 && partial.size(0) * rows_per_group >= n_rows &&
                  (partial.size(0) - 1) * rows_per_group < std::max<int64_t>(n_rows, 1) &&
                  partial.size(0) <= kMaxGridY,
              "add_mul_act (cuda): the row groups must cover the rows, each group non-empty");
  if (n_rows == 0 || n_cols == 0) {
    return;
  }
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  const Rows xr = rows_of(x_inner, x_stride_outer, x_stride_inner);
  const Rows yr = rows_of(y_inner, y_stride_outer, y_stride_inner);
  const Rows gr = rows_of(g_inner, g_stride_outer, g_stride_inner);
  const float a = static_cast<float>(alpha);
  switch (x.scalar_type()) {
    case at::kFloat:
      launch_backward<float, double>(x, y, bias, grad, grad_x, grad_y, partial, n_rows, n_cols, a, act,
                                     rows_per_group, xr, yr, gr);
      break;
    case at::kHalf:
      launch_backward<at::Half, float>(x, y, bias, grad, grad_x, grad_y, partial, n_rows, n_cols, a, act,
                                       rows_per_group, xr, yr, gr);
      break;
    case at::kBFloat16:
      launch_backward<at::BFloat16, float>(x, y, bias, grad, grad_x, grad_y, partial, n_rows, n_cols, a, act,
                                           rows_per_group, xr, yr, gr);
      break;
    default:
      TORCH_CHECK(false, "add_mul_act (cuda): unsupported dtype ", x.scalar_type());
  }
}
