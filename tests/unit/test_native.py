"""The native host path (kernels/_native.py): how launches are recorded for C++, when the path is
on, and, on a GPU, that it computes bitwise what the Python path computes, forward and backward."""

from __future__ import annotations

import contextlib
import types

import pytest
import torch

from kernels import _launch, _native

GPU_REASON = "the native path launches compiled kernels: it needs a CUDA device (it is off under the interpreter)"
NODE = "fkh::NativeBackward"  # the native path's backward node (native.cpp's NativeNode)


def _launcher(signature: dict, tail: tuple, grid=(3, 2, 1), loose=("seed",), **metadata) -> _launch.Launcher:
    meta = dict(num_warps=4, shared=1024, num_ctas=1, launch_pdl=False, launch_cooperative_grid=False,
                global_scratch_size=0, profile_scratch_size=0, tensordesc_meta=[], name="k")
    meta.update(metadata)
    params = [types.SimpleNamespace(do_not_specialize=name in loose) for name in signature]
    compiled = types.SimpleNamespace(src=types.SimpleNamespace(signature=signature, fn=types.SimpleNamespace(params=params)),
                                     metadata=types.SimpleNamespace(**meta), name="k")
    return _launch.Launcher(None, grid, 1234, None, tail, 0, None, None, None, compiled)


SIGNATURE = {"x": "*fp32", "y": "*bf16", "eps": "fp32", "n": "i32", "seed": "i64", "scale": "fp64", "BLOCK": "constexpr"}


def test_a_launch_is_recorded_as_the_kernel_s_parameters_in_order_then_two_null_scratch_pointers():
    record = _native.Builder(1)
    (x,) = record.given
    y = record.empty((4, 8), torch.bfloat16)
    record.launch(_launcher(SIGNATURE, (7, record.int_arg(1), 0.5, 64)), x, y, record.float_arg(0))
    function, grid, threads, shared, params, name, maps = record.launches[0]
    assert (function, grid, threads, shared, name, maps) == (1234, [3, 2, 1], 128, 1024, "k", [])
    assert params == [
        (_native.TENSOR, 0, 1, 0.0), (_native.TENSOR, 1, 1, 0.0), (_native.FLOAT_F32, 0, 0, 0.0),
        (_native.CONST_I32, 0, 7, 0.0), (_native.INT_I64, 1, 0, 0.0), (_native.CONST_F64, 0, 0, 0.5),
        (_native.NULL, 0, 0, 0.0), (_native.NULL, 0, 0, 0.0),
    ]
    assert record.allocs == [([4, 8], torch.bfloat16)]


@pytest.mark.parametrize("metadata, why", [
    ({"num_ctas": 2}, "num_ctas"),
    ({"global_scratch_size": 256}, "global_scratch_size"),
    ({"profile_scratch_size": 8}, "profile_scratch_size"),
    ({"launch_pdl": True}, "launch_pdl"),
])
def test_a_launch_that_needs_more_than_cu_launch_kernel_is_not_recorded(metadata, why):
    record = _native.Builder(2)
    with pytest.raises(_native.Unsupported, match=why):
        record.launch(_launcher(SIGNATURE, (7, 3, 0.5, 64), **metadata), *record.given, 1e-5)


class PyCUtensorMap:
    """Stands for Triton's tensor-map object: a host address of 128 bytes (``tma_desc_cpu_ptr``,
    the form older Tritons give)."""

    def __init__(self, words):
        import ctypes

        self._buffer = (ctypes.c_int64 * 16)(*words)

    def tma_desc_cpu_ptr(self):
        import ctypes

        return ctypes.addressof(self._buffer)


DESCRIPTOR_SIGNATURE = {"xd": "tensordesc<fp16[1, 64]>", "x": "*fp16", "n": "i32", "BLOCK": "constexpr"}


def test_a_descriptor_argument_is_recorded_as_its_tensor_map_then_its_shape_and_strides(monkeypatch):
    # Triton's launcher expands a host descriptor into its tensor map, the shape (32-bit) and the
    # strides (64-bit); the record keeps the map's 128 bytes, which the program points at the
    # slot's tensor at every launch.
    from triton.backends.nvidia import driver

    words = [(-1) ** i * (i + 1) << 40 for i in range(16)]
    expanded = []
    monkeypatch.setattr(driver, "make_tensordesc_arg",
                        lambda arg, meta, _=None: expanded.append(meta) or [PyCUtensorMap(words), 8, 64, 64, 1])
    record = _native.Builder(1)
    (x,) = record.given
    descriptor = types.SimpleNamespace(shape=[8, 64], strides=[64, 1])
    meta = {"swizzle": 128, "elem_size": 2, "elem_type": 6, "block_size": [1, 64], "fp4_padded": False}
    launcher = _launcher(DESCRIPTOR_SIGNATURE, (64,), tensordesc_meta=[meta])
    record.launch(launcher, _native.TensorMap(x, descriptor), x, 8)
    *_, params, name, maps = record.launches[0]
    assert expanded == [meta]
    assert maps == [words]
    assert params == [
        (_native.TENSOR_MAP, 0, 0, 0.0), (_native.CONST_I32, 0, 8, 0.0), (_native.CONST_I32, 0, 64, 0.0),
        (_native.CONST_I64, 0, 64, 0.0), (_native.CONST_I64, 0, 1, 0.0),
        (_native.TENSOR, 0, 1, 0.0), (_native.CONST_I32, 0, 8, 0.0),
        (_native.NULL, 0, 0, 0.0), (_native.NULL, 0, 0, 0.0),
    ]


def test_a_launch_beyond_the_native_limits_or_a_map_triton_cannot_encode_is_not_recorded(monkeypatch):
    # The C++ program holds at most MAX_PARAMS parameters and MAX_TENSOR_MAPS maps a launch: a
    # launch beyond them keeps Triton's path (Unsupported), as does a map Triton fails to encode,
    # instead of failing the call.
    from triton.backends.nvidia import driver

    record = _native.Builder(1)
    (x,) = record.given
    many = {f"p{i}": "i32" for i in range(_native.MAX_PARAMS - 1)}
    with pytest.raises(_native.Unsupported, match=f"{_native.MAX_PARAMS + 1} parameters and 0 tensor maps"):
        record.launch(_launcher(many, tuple(range(_native.MAX_PARAMS - 1)), loose=()))
    maps = {f"d{i}": "tensordesc<fp16[1, 64]>" for i in range(_native.MAX_TENSOR_MAPS + 1)}
    meta = {"swizzle": 128, "elem_size": 2, "elem_type": 6, "block_size": [1, 64], "fp4_padded": False}
    monkeypatch.setattr(driver, "make_tensordesc_arg", lambda arg, meta, _=None: [PyCUtensorMap([0] * 16), 8, 64, 64, 1])
    descriptor = types.SimpleNamespace(shape=[8, 64], strides=[64, 1])
    head = [_native.TensorMap(x, descriptor)] * len(maps)
    with pytest.raises(_native.Unsupported, match=f"{_native.MAX_TENSOR_MAPS + 1} tensor maps"):
        record.launch(_launcher(maps, (), tensordesc_meta=[meta] * len(maps)), *head)

    def refuse(arg, meta, _=None):
        raise AssertionError("strides must be 16-byte aligned")

    monkeypatch.setattr(driver, "make_tensordesc_arg", refuse)
    with pytest.raises(_native.Unsupported, match="could not encode the tensor map"):
        record.launch(_launcher(DESCRIPTOR_SIGNATURE, (64,), tensordesc_meta=[meta]), _native.TensorMap(x, descriptor), x, 8)


@pytest.mark.parametrize("value, metadata, why", [
    ("slot", {"tensordesc_meta": [{"swizzle": 128}]}, "descriptor argument 0 is Slot\\(0\\), not a TensorMap"),
    ("map", {"tensordesc_meta": []}, "not a TensorMap of a kernel compiled with descriptor metadata"),
])
def test_a_descriptor_argument_needs_a_tensor_map_and_the_kernel_s_descriptor_metadata(value, metadata, why):
    record = _native.Builder(1)
    (x,) = record.given
    given = x if value == "slot" else _native.TensorMap(x, None)
    with pytest.raises(_native.Unsupported, match=why):
        record.launch(_launcher(DESCRIPTOR_SIGNATURE, (64,), **metadata), given, x, 8)


@pytest.mark.parametrize("head, why", [
    ((0, "slot", 1e-5), "pointer argument 0 is 0, not a slot"),
    (("slot", "slot", "slot"), "argument 2 of type 'fp32' given a tensor"),
    (("slot", "slot", _native.Builder.int_arg(0)), "argument 2 of type 'fp32' given a per-call int"),
    (("slot", "slot", "text"), "argument 2 of type 'fp32' = 'text'"),
])
def test_an_argument_the_kernel_cannot_take_is_refused_by_position(head, why):
    record = _native.Builder(1)
    head = tuple(record.given[0] if h == "slot" else h for h in head)
    with pytest.raises(_native.Unsupported, match=why):
        record.launch(_launcher(SIGNATURE, (7, 3, 0.5, 64), loose=("seed", "eps")), *head)


def test_a_per_call_int_must_be_a_parameter_triton_does_not_specialise():
    record = _native.Builder(2)
    with pytest.raises(_native.Unsupported, match="per-call int argument 4 is not a do_not_specialize parameter"):
        record.launch(_launcher(SIGNATURE, (7, record.int_arg(1), 0.5, 64), loose=()), *record.given, 1e-5)


def test_a_launch_whose_arguments_do_not_match_the_signature_is_refused():
    record = _native.Builder(2)
    with pytest.raises(_native.Unsupported, match="6 arguments for a signature of 7"):
        record.launch(_launcher(SIGNATURE, (7, 3, 0.5)), *record.given, 1e-5)


def test_a_launch_through_triton_s_own_path_is_not_recorded():
    through_triton = _launch._TritonLaunch(None, (1,), (), {})
    with pytest.raises(_native.Unsupported, match="Triton's own launch path"):
        _native.Builder(0).launch(through_triton)


def test_a_bad_setting_of_the_switch_is_an_error_naming_it(monkeypatch):
    monkeypatch.setattr(_native, "_STATE", [])
    monkeypatch.setenv("HARNESS_NATIVE", "sometimes")
    with pytest.raises(ValueError, match="HARNESS_NATIVE='sometimes'"):
        _native.enabled()


def test_the_switch_turns_the_native_path_off(monkeypatch):
    monkeypatch.setattr(_native, "_STATE", [])
    monkeypatch.setenv("HARNESS_NATIVE", "0")
    assert not _native.enabled()


@pytest.mark.parametrize("enter, leave, on", [
    (None, None, True), (types.SimpleNamespace(calls=[]), types.SimpleNamespace(calls=[]), True),
    (types.SimpleNamespace(calls=[print]), None, False), (None, types.SimpleNamespace(calls=[print]), False),
    (print, None, False),
])
def test_a_triton_launch_hook_turns_the_native_path_off(monkeypatch, enter, leave, on):
    """A hook (a profiler's: a HookChain with calls, or a plain function) sees only launches through
    Triton's launcher, so while one is installed every call takes that path."""
    runtime = types.SimpleNamespace(launch_enter_hook=enter, launch_exit_hook=leave)
    monkeypatch.setattr(_native, "_STATE", [object(), runtime])
    assert _native.enabled() is on


@pytest.mark.parametrize("shape", [(7, 33), (2, 3, 64), (1, 1, 5), (0, 16), (4, 0, 2), (9,)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bool])
def test_an_allocation_s_layout_is_the_contiguous_tensor_s(shape, dtype):
    """The programs give an output's gradient its allocation's layout (the layout the backward's
    kernels were bound for): it must be what a contiguous tensor of that shape has, zero-size and
    size-1 dimensions included."""
    builder = _native.Builder(1, like=(torch.empty(3),))
    slot = builder.empty(shape, dtype)
    want = torch.empty(shape, dtype=dtype)
    assert builder.layout(slot) == (dtype, list(want.shape), list(want.stride()))


def test_a_program_whose_backward_saves_a_broadcast_tensor_is_not_served():
    """A saved-tensor hook hands a saved tensor back as a copy, which the node lays out again as
    the program was built for: impossible in a layout that repeats memory (stride 0), so such a
    program is left to the op's Python path (decided before the extension is needed). A stride of
    0 along a dimension of one element repeats nothing."""
    broadcast = torch.zeros(4, 1).expand(4, 8)
    forward = _native.Builder(2, like=(broadcast, torch.zeros(4, 8)))
    given, plain = forward.given
    assert _native.program(forward, [plain], saved=[given], backward=_native.Builder(2)) is _native.NOT_SERVED
    single = _native.Builder(1, like=(torch.zeros(8).as_strided((1, 8), (0, 1)),))
    assert single.layout(single.given[0])[2] == [0, 1] and not _native._overlapping(single.layout(single.given[0]))
    assert _native._overlapping(forward.layout(given)) and not _native._overlapping(forward.layout(plain))


# -- on a GPU ------------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason=GPU_REASON)


def _ops():
    from kernels.layer_norm import layer_norm
    from kernels.rms_norm import rms_norm
    from kernels.softmax import softmax

    return {
        "layer_norm": (lambda x, w, b: layer_norm(x, w, b), 3),
        "layer_norm without affine": (lambda x: layer_norm(x), 1),
        "rms_norm with offset": (lambda x, w: rms_norm(x, w, 1e-6, 1.0), 2),
        "softmax": (lambda x: softmax(x), 1),
    }


def _call(fn, args, grad_dtype, expand_grad, native: bool):
    saved = _native._STATE[:]
    if not native:
        _native._STATE[:] = [None]
    try:
        y = fn(*args)
        # (a 16-bit linspace of this many points holds NaNs: it is made in fp32 and rounded)
        g = torch.ones((), dtype=grad_dtype, device=y.device).expand(y.shape) if expand_grad else \
            torch.linspace(-2, 2, y.numel(), device=y.device).reshape(y.shape).to(grad_dtype)
        if y.requires_grad:
            y.backward(g)
        return y
    finally:
        _native._STATE[:] = saved


def _assert_same_bits(ours, theirs):
    """Two calls' results (outputs, then gradients, None where not asked for) are the same, bit
    for bit, NaNs included."""
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs):
        assert (mine is None) == (other is None)
        if mine is not None:
            torch.testing.assert_close(mine, other, rtol=0, atol=0, equal_nan=True)


@needs_gpu
@pytest.mark.parametrize("name", ["layer_norm", "layer_norm without affine", "rms_norm with offset", "softmax"])
@pytest.mark.parametrize("shape, dtype", [((4, 64), torch.bfloat16), ((3, 5, 130), torch.float32),
                                          ((33, 5000), torch.float16), ((2, 16384), torch.bfloat16)])
@pytest.mark.parametrize("grads", ["all", "x only", "vectors only", "none", "fp32 grad", "expanded grad"])
def test_the_native_path_computes_bitwise_what_the_python_path_does(name, shape, dtype, grads):
    assert _native.enabled(), "the native extension did not build on this CUDA machine"
    fn, arity = _ops()[name]
    gen = torch.Generator(device="cuda").manual_seed(0)
    base = [torch.randn(shape, device="cuda", dtype=dtype, generator=gen)]
    base += [torch.randn(shape[-1], device="cuda", dtype=dtype, generator=gen) for _ in range(arity - 1)]
    results = []
    for native in (True, False):
        wants = {"all": lambda i: True, "fp32 grad": lambda i: True, "expanded grad": lambda i: True,
                 "x only": lambda i: i == 0, "vectors only": lambda i: i > 0, "none": lambda i: False}[grads]
        args = [t.clone().requires_grad_(wants(i)) for i, t in enumerate(base)]
        y = _call(fn, args, torch.float32 if grads == "fp32 grad" else dtype, grads == "expanded grad", native)
        if native and y.requires_grad:
            assert y.grad_fn.name() == NODE, "the call did not take the native path"
        results.append([y.detach(), *[a.grad for a in args]])
    _assert_same_bits(*results)


@needs_gpu
@pytest.mark.parametrize("name", ["layer_norm", "rms_norm with offset", "softmax"])
@pytest.mark.parametrize("saved_on_cpu", [False, True])
def test_rows_read_in_place_and_saved_tensors_moved_by_a_hook_give_the_python_path_s_bits(name, saved_on_cpu):
    """x a slice of wider rows (read in place: its row stride is in the programs); with
    ``save_on_cpu`` the saved x comes back to the backward contiguous, and is laid out again."""
    assert _native.enabled()
    fn, arity = _ops()[name]
    gen = torch.Generator(device="cuda").manual_seed(3)
    wide = torch.randn(33, 5008, device="cuda", dtype=torch.float16, generator=gen)
    vectors = [torch.randn(5000, device="cuda", dtype=torch.float16, generator=gen) for _ in range(arity - 1)]
    results = []
    for native in (True, False):
        x = wide.clone()[:, :5000].requires_grad_(True)
        args = [x] + [v.clone().requires_grad_(True) for v in vectors]
        hook = torch.autograd.graph.save_on_cpu(pin_memory=True) if saved_on_cpu else contextlib.nullcontext()
        with hook:
            y = _call(fn, args, torch.float16, False, native)
        if native:
            assert y.grad_fn.name() == NODE, "the call did not take the native path"
        results.append([y.detach(), *[a.grad for a in args]])
    _assert_same_bits(*results)


@needs_gpu
@pytest.mark.parametrize("shape, dtype", [((4, 64), torch.bfloat16), ((3, 5, 130), torch.float32),
                                          ((33, 5000), torch.float16)])
@pytest.mark.parametrize("options", [
    dict(norm="layer", p=0.25, seed=77),
    dict(norm="rms", p=0.5, seed=2**40 + 5, prenorm=True),
    dict(norm="layer", p=1.0, seed=3, prenorm=True, return_mask=True),
    dict(norm="layer", p=0.1, seed=9, prenorm=True, return_mask=True, unused_y=True),
    dict(norm="layer", p=0.3, seed=5, no_affine=True),
    dict(norm="layer", p=0.3, seed=5, prenorm=True, no_grad=True),
])
def test_dropout_add_norm_s_native_path_computes_bitwise_what_the_python_path_does(shape, dtype, options):
    from kernels.dropout_add_norm import dropout_add_norm

    assert _native.enabled(), "the native extension did not build on this CUDA machine"
    options = dict(options)
    unused_y = options.pop("unused_y", False)
    no_affine, no_grad = options.pop("no_affine", False), options.pop("no_grad", False)
    gen = torch.Generator(device="cuda").manual_seed(0)
    n = shape[-1]
    base = [torch.randn(shape, device="cuda", dtype=dtype, generator=gen) for _ in range(2)]
    base += [torch.randn(n, device="cuda", dtype=dtype, generator=gen) for _ in range(3)]
    if options["norm"] == "rms":
        base[4] = None
    if no_affine:
        base[2:] = [None, None, None]
    results = []
    for native in (True, False):
        saved = _native._STATE[:]
        if not native:
            _native._STATE[:] = [None]
        try:
            args = [t.clone().requires_grad_(not no_grad) if t is not None else None for t in base]
            outputs = dropout_add_norm(*args, **options)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            differentiable = [o for o in outputs if o.requires_grad][int(unused_y):]
            grads = [torch.linspace(-1, 1, o.numel(), device="cuda").reshape(o.shape).to(dtype) for o in differentiable]
            if differentiable:
                torch.autograd.backward(differentiable, grads)
        finally:
            _native._STATE[:] = saved
        if native and not no_grad:
            assert type(outputs[0].grad_fn).__name__ == "CppFunction", "the call did not take the native path"
        results.append([o.detach() for o in outputs] + [a.grad if a is not None else None for a in args])
    _assert_same_bits(*results)


@needs_gpu
def test_a_program_refuses_a_misaligned_tensor_in_place_of_the_aligned_one_it_was_built_for():
    from kernels import softmax as module

    x = torch.randn(8, 64, device="cuda")
    program = module._native_program(x, False)
    misaligned = torch.randn(8 * 64 + 1, device="cuda")[1:].view(8, 64)
    with pytest.raises(RuntimeError, match="misaligned"):
        _native.run(program, [misaligned], [], [])


@needs_gpu
def test_a_second_derivative_through_the_native_node_raises_as_once_differentiable_does():
    from kernels.layer_norm import layer_norm

    assert _native.enabled()
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    y = layer_norm(x)
    (gx,) = torch.autograd.grad(y, x, torch.ones_like(y, requires_grad=True), create_graph=True)
    with pytest.raises(RuntimeError, match="backward is not differentiable"):
        gx.sum().backward()


@needs_gpu
@pytest.mark.parametrize("heads, kv_heads, seq, head_dim", [
    (4, 4, 200, 64), (4, 4, 129, 128),
    # seq None: the shortest that keeps a whole group in one backward program (except causal at
    # head_dim 128, where a group of up to 8 takes one q head a program)
    (16, 8, None, 64), (4, 1, None, 128),
    # groups split in chunks, their partial sums added by a third launch, on a GPU of this size
    (4, 2, 129, 128), (3, 1, 64, 32), (32, 1, 33, 16),
])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("used", ["out and lse", "out only", "lse only", "q only", "none"])
@pytest.mark.parametrize("layout", ["contiguous", "seq-major"])
def test_flash_attention_s_native_path_computes_bitwise_what_the_python_path_does(heads, kv_heads, seq, head_dim,
                                                                                  causal, used, layout, monkeypatch):
    """Multi-head, grouped and multi-query attention (a group summed in one program, and groups
    split in chunks), each output's gradient used or not (the native
    backward takes zeros for an unused one), only q needing a gradient, and no graph; operands
    contiguous or (batch, seq, heads, head_dim) transposed; two calls of one program with two scales
    (a per-call float)."""
    from kernels import flash_attention as module
    from kernels._runtime import sm_count

    assert _native.enabled(), "the native extension did not build on this CUDA machine"
    group = heads // kv_heads
    if seq is None:  # 2 x kv_heads x key blocks >= 2 programs per SM, with the full grid's key blocks
        seq = module._GPU_BWD[head_dim][0].config.block_n1 * -(-sm_count(0) // kv_heads)
    runs = []
    monkeypatch.setattr(_native, "run", lambda *args, _run=_native.run: runs.append(1) or _run(*args))
    gen = torch.Generator(device="cuda").manual_seed(1)

    def operand(h):
        if layout == "contiguous":
            return torch.randn(2, h, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
        return torch.randn(2, seq, h, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen).transpose(1, 2)

    base = [operand(heads), operand(kv_heads), operand(kv_heads)]
    config = module._bwd_config(base[0].shape, causal, torch.device("cuda"))
    chunks = group // module._bwd_chunk_of(base[0], base[1], config, causal)  # for the message
    results, paths = [], []
    for native in (True, False):
        saved = _native._STATE[:]
        if not native:
            _native._STATE[:] = [None]
        try:
            got = []
            for scale in (0.3, 0.7):
                args = [t.detach().clone(memory_format=torch.preserve_format)
                        .requires_grad_(used != "none" and (used != "q only" or i == 0)) for i, t in enumerate(base)]
                out, lse = module.flash_attention(*args, causal=causal, scale=scale)
                pairs = [(out, torch.linspace(-1, 1, out.numel(), device="cuda").reshape(out.shape).to(out.dtype)),
                         (lse, torch.linspace(-2, 2, lse.numel(), device="cuda").reshape(lse.shape))]
                pairs = {"out only": pairs[:1], "lse only": pairs[1:]}.get(used, pairs)
                if used != "none":
                    torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
                got += [out.detach(), lse.detach()] + [a.grad for a in args]
        finally:
            _native._STATE[:] = saved
        paths.append(type(out.grad_fn).__name__ if out.grad_fn is not None else None)
        results.append(got)
    if used == "none":
        assert runs == [1, 1], "the forward without a graph did not take the native path"
    else:
        assert paths[0] == "CppFunction", (paths, chunks)
    assert paths[1] in (None, "_FlashAttentionBackward"), paths
    _assert_same_bits(*results)


# -- the entries: a signature's program found and run in C++ ------------------------------------

def test_an_entry_is_built_at_its_first_call_then_called_directly_and_forgotten_with_the_plans(monkeypatch):
    made = []

    class FakeEntry:
        def __init__(self, *shape):
            made.append(shape)
            self.programs = {}

        def __call__(self, *args):
            return self.programs.get(len(args))

        def remember(self, tensors, program):
            self.programs[len(tensors)] = program

        def clear(self):
            self.programs.clear()

        def __len__(self):
            return len(self.programs)

        def function(self, state):  # the C++ entry's call as a builtin function, reading state
            assert state is _native._STATE
            return self.__call__

    monkeypatch.setattr(_native, "_STATE", [types.SimpleNamespace(Entry=FakeEntry), None])
    monkeypatch.setattr(_launch, "_PLAN_TABLES", [])  # the fake entry is forgotten with the test
    entry = _native.Entry(2, floats=((0.0, None), (float("-inf"), 1)))
    assert made == [] and len(entry) == 0
    assert entry.call("x", "w", 1.0, 0.0) is None
    assert made == [(2, [0.0, float("-inf")], [-1, 1], 0, True, _launch.PLAN_LIMIT)]
    assert entry.call == entry._entry.__call__, "later calls do not go straight to the C++ entry's function"
    entry.remember(["a", "b", "c", "d"], "program")
    entry.remember(["a"], _native.NOT_SERVED)
    assert entry._entry.programs == {4: "program", 1: None}, "not served is recorded as None"
    _launch.forget_plans()
    assert len(entry) == 0


@needs_gpu
def test_a_recorded_signature_s_call_goes_through_triton_s_launcher_while_a_hook_is_installed():
    """The entries' C++ functions ask what enabled() asks: with a launch hook installed, a
    signature recorded before is launched through Triton's launcher, which calls the hook."""
    from triton import knobs

    from kernels.softmax import softmax

    if not hasattr(knobs.runtime.launch_enter_hook, "add"):
        pytest.skip("this Triton's launch hook is a plain function, not a chain a test can add to")
    x = torch.randn(8, 64, device="cuda")
    expected = softmax(x)  # records the signature
    assert torch.equal(softmax(x), expected)  # runs from the entry
    seen = []
    hook = lambda *args, **kwargs: seen.append(1)  # noqa: E731 - a hook only counts
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        hooked = softmax(x)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert seen, "the launch hook saw no launch: the call took the native path"
    assert torch.equal(hooked, expected)
    seen.clear()
    softmax(x)
    assert not seen


@needs_gpu
def test_an_entry_s_function_keeps_its_entry_alive_and_raises_torch_s_own_errors():
    """The fast-call function (METH_FASTCALL, no pybind11 dispatch) holds its entry, returns None
    for a signature with no program, and turns a C++ error into the exception torch's bindings
    raise: here torch.OutOfMemoryError from an allocation no device has room for."""
    import gc
    import weakref

    x = torch.zeros(4, device="cuda")
    entry = _native.module().Entry(1, [], [], 0, True, 8)
    call = entry.function(_native._STATE)
    held = weakref.ref(entry)
    del entry
    gc.collect()
    assert held() is not None, "the function does not keep its entry alive"
    assert call(x) is None, "a signature with no program runs something"
    assert call(x, x) is None, "a call with more arguments than the entry takes runs something"
    forward = _native.Builder(1, like=(x,))
    huge = forward.empty((1 << 50,), torch.float32)
    entry = _native.module().Entry(1, [], [], 0, True, 8)
    entry.remember((x,), _native.program(forward, [huge]))
    with pytest.raises(torch.OutOfMemoryError):
        entry.function(_native._STATE)(x)


def _fast_ops():
    from kernels import layer_norm, rms_norm, softmax

    return {  # the call, its number of tensors, the module and name of its Python checks
        "layer_norm": (lambda x, w, b: layer_norm.layer_norm(x, w, b), 3, layer_norm, "check_arguments"),
        "rms_norm with offset": (lambda x, w: rms_norm.rms_norm(x, w, 1e-6, 1.0), 2, rms_norm, "check_arguments"),
        "rms_norm without weight": (lambda x: rms_norm.rms_norm(x), 1, rms_norm, "check_arguments"),
        "softmax": (lambda x: softmax.softmax(x), 1, softmax, "check_tensor"),
    }


@needs_gpu
@pytest.mark.parametrize("name", ["layer_norm", "rms_norm with offset", "rms_norm without weight", "softmax"])
@pytest.mark.parametrize("shape, dtype", [((4, 64), torch.bfloat16), ((33, 5000), torch.float16)])
@pytest.mark.parametrize("grads", ["all", "x only", "vectors only"])
def test_a_signature_s_later_calls_run_from_its_entry_with_the_first_call_s_bits(name, shape, dtype, grads,
                                                                                monkeypatch):
    """The first call of a signature takes the Python path and records its program; later calls,
    with and without a graph, never reach the Python checks and compute the same bits."""
    assert _native.enabled()
    _launch.forget_plans()  # the first calls below record their signatures afresh
    fn, arity, module, checks = _fast_ops()[name]
    gen = torch.Generator(device="cuda").manual_seed(5)
    base = [torch.randn(shape, device="cuda", dtype=dtype, generator=gen)]
    base += [torch.randn(shape[-1], device="cuda", dtype=dtype, generator=gen) for _ in range(arity - 1)]
    grad = torch.linspace(-2, 2, base[0].numel(), device="cuda").reshape(shape).to(dtype)
    wants = {"all": lambda i: True, "x only": lambda i: i == 0, "vectors only": lambda i: i > 0}[grads]

    def run(needs_graph):
        args = [t.clone().requires_grad_(needs_graph and wants(i)) for i, t in enumerate(base)]
        y = fn(*args)
        if y.requires_grad:
            assert y.grad_fn.name() == NODE
            y.backward(grad)
        else:
            assert y.grad_fn is None
        return [y.detach()] + [a.grad for a in args]

    first = {graph: run(graph) for graph in (True, False)}  # the Python path records both programs
    original = getattr(module, checks)
    monkeypatch.setattr(module, checks, lambda *a, **k: pytest.fail(f"a recorded signature reached {checks}"))
    for graph in (True, False, True):
        _assert_same_bits(run(graph), first[graph])
    monkeypatch.setattr(module, checks, original)


@needs_gpu
def test_an_entry_leaves_bad_scalars_and_tensor_subclasses_to_the_python_path_s_checks(monkeypatch):
    from kernels import _norm_native, layer_norm, rms_norm

    assert _native.enabled()
    x = torch.randn(8, 64, device="cuda")
    w = torch.randn(64, device="cuda")
    layer_norm.layer_norm(x, w, None)
    rms_norm.rms_norm(x)
    assert len(_norm_native.LAYER_NORM) and len(_norm_native.RMS_NORM)
    with pytest.raises(ValueError, match="'eps' must be >= 0"):
        layer_norm.layer_norm(x, w, None, eps=-1.0)
    with pytest.raises(ValueError, match="'eps' must be finite"):
        layer_norm.layer_norm(x, w, None, eps=float("nan"))
    with pytest.raises(TypeError, match="'eps' must be a float"):
        layer_norm.layer_norm(x, w, None, eps=True)
    with pytest.raises(ValueError, match="'weight_offset' .* needs a weight"):
        rms_norm.rms_norm(x, None, 1e-6, 1.0)
    checked = []
    monkeypatch.setattr(layer_norm, "check_arguments",
                        lambda *a, _check=layer_norm.check_arguments: checked.append(1) or _check(*a))

    class Sub(torch.Tensor):
        pass

    y = layer_norm.layer_norm(x.as_subclass(Sub), w, None)
    assert checked == [1], "a tensor subclass did not take the Python path"
    torch.testing.assert_close(y.as_subclass(torch.Tensor), layer_norm.layer_norm(x, w, None), rtol=0, atol=0)
    assert checked == [1]


@needs_gpu
def test_forgetting_the_plans_empties_the_entries_and_the_next_call_records_again():
    from kernels import softmax

    assert _native.enabled()
    x = torch.randn(8, 64, device="cuda")
    softmax.softmax(x)
    assert len(softmax._ENTRY) >= 1
    _launch.forget_plans()
    assert len(softmax._ENTRY) == 0
    softmax.softmax(x)
    assert len(softmax._ENTRY) == 1


@needs_gpu
def test_the_node_frees_the_output_it_saves_and_refuses_a_second_backward():
    """softmax saves its own output: saved as an output (no reference cycle through its grad_fn),
    freed with the last reference; a second backward raises autograd's own error."""
    import gc
    import weakref

    from kernels.softmax import softmax

    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    y = softmax(x)
    assert y.grad_fn.name() == NODE
    alive = weakref.ref(y)
    del y
    gc.collect()
    assert alive() is None, "the node keeps its saved output alive: a reference cycle"
    y = softmax(x)
    y.backward(torch.ones_like(y), retain_graph=False)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward(torch.ones_like(y))


@needs_gpu
@pytest.mark.parametrize("graph", [True, False])
def test_a_dual_tensor_is_refused_rather_than_given_an_output_without_its_tangent(graph):
    import torch.autograd.forward_ad as fwAD

    from kernels.layer_norm import layer_norm

    x = torch.randn(8, 64, device="cuda")
    layer_norm(x.clone().requires_grad_(graph))  # the signature is recorded in the entry
    with fwAD.dual_level(), torch.set_grad_enabled(graph):
        dual = fwAD.make_dual(x.clone().requires_grad_(graph), torch.ones_like(x))
        with pytest.raises(RuntimeError, match="forward-mode AD"):
            layer_norm(dual)


@needs_gpu
@pytest.mark.parametrize("eps", [0, 1, 10 ** 400, "numpy"])
def test_scalars_the_entry_does_not_take_go_to_the_python_path_with_the_same_result(eps):
    """An int eps, one too large for a double, and a NumPy float: the C++ entry takes Python
    floats and ints within range only; the rest take the Python path, which checks them."""
    import numpy as np

    from kernels.layer_norm import layer_norm

    x = torch.randn(8, 64, device="cuda")
    value = np.float64(1e-5) if eps == "numpy" else eps
    if eps == 10 ** 400:
        with pytest.raises((TypeError, ValueError, OverflowError)):
            layer_norm(x, eps=value)
        return
    expected = torch.nn.functional.layer_norm(x, (64,), eps=float(value))
    for _ in range(2):  # the first call records the signature, the second may take the entry
        torch.testing.assert_close(layer_norm(x, eps=value), expected)


# -- the elementwise ops: add_mul_act, bias_gelu, glu --------------------------------------------

def _elementwise_ops():
    from kernels import add_mul_act, bias_gelu, glu

    return {  # the call; per argument "t" (a tensor of the shape) or "v" (one of its last dimension);
        # the module and name of its Python checks
        "add_mul_act relu": (lambda x, y, b: add_mul_act.add_mul_act(x, y, b, 0.5, "relu"), "ttv", add_mul_act,
                             "_validate"),
        "add_mul_act silu, int alpha": (lambda x, y, b: add_mul_act.add_mul_act(x, y, b, -2, "silu"), "ttv",
                                        add_mul_act, "_validate"),
        "bias_gelu": (lambda x, b: bias_gelu.bias_gelu(x, b), "tv", bias_gelu, "_validate"),
        "bias_gelu tanh": (lambda x, b: bias_gelu.bias_gelu(x, b, "tanh"), "tv", bias_gelu, "_validate"),
        "glu silu": (lambda a, b: glu.glu(a, b), "tt", glu, "check_tensor"),
        "glu gelu": (lambda a, b: glu.glu(a, b, "gelu"), "tt", glu, "check_tensor"),
    }


def _elementwise_args(kinds, shape, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(shape if kind == "t" else shape[-1:], device="cuda", dtype=dtype, generator=gen)
            for kind in kinds]


ELEMENTWISE_GRADS = {"all": lambda i, n: True, "first only": lambda i, n: i == 0, "last only": lambda i, n: i == n - 1,
                     "none": lambda i, n: False, "fp32 grad": lambda i, n: True, "expanded grad": lambda i, n: True}


@needs_gpu
@pytest.mark.parametrize("name", list(_elementwise_ops()))
@pytest.mark.parametrize("shape, dtype", [((4, 64), torch.bfloat16), ((3, 5, 130), torch.float32),
                                          ((33, 5000), torch.float16), ((7, 3), torch.float32)])
@pytest.mark.parametrize("grads", list(ELEMENTWISE_GRADS))
def test_the_elementwise_ops_native_path_computes_bitwise_what_the_python_path_does(name, shape, dtype, grads):
    """Forward and every gradient, the native program against the Python path (whose relu saves
    the slope's bits too; the other activations recompute z), rows narrower than a byte of bits
    included."""
    assert _native.enabled(), "the native extension did not build on this CUDA machine"
    fn, kinds, _, _ = _elementwise_ops()[name]
    base = _elementwise_args(kinds, shape, dtype, seed=0)
    results = []
    for native in (True, False):
        args = [t.clone().requires_grad_(ELEMENTWISE_GRADS[grads](i, len(kinds))) for i, t in enumerate(base)]
        y = _call(fn, args, torch.float32 if grads == "fp32 grad" else dtype, grads == "expanded grad", native)
        if native and y.requires_grad:
            assert y.grad_fn.name() == NODE, "the call did not take the native path"
        results.append([y.detach(), *[a.grad for a in args]])
    _assert_same_bits(*results)


@needs_gpu
@pytest.mark.parametrize("name", list(_elementwise_ops()))
@pytest.mark.parametrize("saved_on_cpu", [False, True])
def test_the_elementwise_ops_read_strided_rows_in_place_and_take_saved_tensors_back_from_a_hook(name, saved_on_cpu):
    assert _native.enabled()
    fn, kinds, _, _ = _elementwise_ops()[name]
    wide = _elementwise_args(kinds, (33, 5008), torch.float16, seed=3)
    results = []
    for native in (True, False):
        args = [(t.clone()[:, :5000] if kind == "t" else t.clone()[:5000]).requires_grad_(True)
                for t, kind in zip(wide, kinds)]
        hook = torch.autograd.graph.save_on_cpu(pin_memory=True) if saved_on_cpu else contextlib.nullcontext()
        with hook:
            y = _call(fn, args, torch.float16, False, native)
        if native:
            assert y.grad_fn.name() == NODE, "the call did not take the native path"
        results.append([y.detach(), *[a.grad for a in args]])
    _assert_same_bits(*results)


@needs_gpu
@pytest.mark.parametrize("name", list(_elementwise_ops()))
@pytest.mark.parametrize("shape, dtype", [((4, 64), torch.bfloat16), ((33, 5000), torch.float32)])
def test_an_elementwise_signature_s_later_calls_run_from_its_entry_with_the_first_call_s_bits(name, shape, dtype,
                                                                                             monkeypatch):
    assert _native.enabled()
    _launch.forget_plans()
    fn, kinds, module, checks = _elementwise_ops()[name]
    base = _elementwise_args(kinds, shape, dtype, seed=5)
    grad = torch.linspace(-2, 2, base[0].numel(), device="cuda").reshape(shape).to(dtype)

    def run(needs_graph):
        args = [t.clone().requires_grad_(needs_graph and i != 0) for i, t in enumerate(base)]
        y = fn(*args)
        if y.requires_grad:
            assert y.grad_fn.name() == NODE
            y.backward(grad)
        return [y.detach()] + [a.grad for a in args]

    first = {graph: run(graph) for graph in (True, False)}
    monkeypatch.setattr(module, checks, lambda *a, **k: pytest.fail(f"a recorded signature reached {checks}"))
    for graph in (True, False, True):
        _assert_same_bits(run(graph), first[graph])


@needs_gpu
def test_an_elementwise_entry_leaves_a_bad_choice_and_bad_alpha_to_the_python_checks():
    from kernels.add_mul_act import add_mul_act
    from kernels.bias_gelu import bias_gelu

    x, y, b = _elementwise_args("ttv", (4, 64), torch.float32, seed=1)
    add_mul_act(x, y, b, 0.5, "relu")  # recorded
    bias_gelu(x, b)
    with pytest.raises(ValueError, match="alpha"):
        add_mul_act(x, y, b, float("nan"), "relu")
    with pytest.raises(TypeError, match="alpha"):
        add_mul_act(x, y, b, True, "relu")
    with pytest.raises(ValueError, match="activation"):
        add_mul_act(x, y, b, 0.5, "RELU")
    with pytest.raises((TypeError, ValueError), match="activation"):
        add_mul_act(x, y, b, 0.5, ["relu"])
    with pytest.raises((TypeError, ValueError), match="approximate"):
        bias_gelu(x, b, ["none"])
