"""The cached launch path (``kernels._launch``): a compiled variant is reused only for arguments that
Triton would specialise alike, and a reuse passes the call's own arguments.

Triton is stood in for by a fake JIT function that records what reaches its own path and what
reaches the compiled variant's launcher, so that this runs without a GPU; the last test launches a
real kernel on a GPU where there is one.
"""

from types import SimpleNamespace

import pytest
import torch

from kernels import _launch


class _FakeJit:
    """A jit function's stand-in: params (x_ptr, n, scale, BLOCK: constexpr, FLAG: constexpr = 7)."""

    def __init__(self):
        self.params = [SimpleNamespace(name=n, default=d, is_constexpr=c) for n, d, c in (
            ("x_ptr", None, False), ("n", None, False), ("scale", None, False),
            ("BLOCK", None, True), ("FLAG", 7, True))]
        self.__name__ = "fake"
        self.jit_calls = []
        self.warmups = []
        self.launches = []

    def __getitem__(self, grid):
        def call(*args, **meta):
            self.jit_calls.append((grid, args, meta))
            return SimpleNamespace(run=self._run, function="fn", packed_metadata="md", _init_handles=lambda: None)
        return call

    def warmup(self, *args, grid, **meta):
        self.warmups.append((grid, args, meta))
        return SimpleNamespace(run=self._run, function="fn", packed_metadata="md", _init_handles=lambda: None)

    def _run(self, *launch):
        self.launches.append(launch)


def _knobs(enter=None, exit_=None, debug=False, instrumentation=""):
    return SimpleNamespace(runtime=SimpleNamespace(launch_enter_hook=enter, launch_exit_hook=exit_, debug=debug),
                           compilation=SimpleNamespace(instrumentation_mode=instrumentation))


def _kernel(device=0, hook=None, **knobs):
    fake = _FakeJit()
    kernel = _launch.Kernel(fake)
    kernel._bind_runtime(_knobs(enter=hook, **knobs), lambda: device, lambda index: f"stream{index}")
    return fake, kernel


def test_a_repeated_call_launches_the_remembered_variant_with_its_own_arguments():
    fake, kernel = _kernel()
    x = torch.zeros(64)
    kernel[(3,)](x, 33, 0.5, BLOCK=64)
    assert len(fake.jit_calls) == 1 and fake.launches == []
    kernel[(5, 2)](x, 49, 0.25, BLOCK=64)  # 33 and 49: both odd, neither 1: one variant
    assert len(fake.jit_calls) == 1
    (launch,) = fake.launches
    assert launch == (5, 2, 1, "stream0", "fn", "md", None, None, None, x, 49, 0.25, 64, 7)


@pytest.mark.parametrize("change", [
    "misaligned pointer", "other dtype", "int equal to 1", "int multiple of 16", "int past 32 bits",
    "other constexpr", "other launch option", "other device", "a constexpr of another type",
])
def test_every_change_that_triton_specialises_on_takes_triton_s_path(change):
    base = torch.zeros(64, dtype=torch.float32)
    args, meta, device = [base, 33, 0.5], {"BLOCK": 64}, 0
    fake, kernel = _kernel()
    kernel[(1,)](*args, **meta)
    if change == "misaligned pointer":
        args[0] = base[1:]  # 4 bytes on: no longer 16-byte aligned
    elif change == "other dtype":
        args[0] = torch.zeros(64, dtype=torch.float16)
    elif change == "int equal to 1":
        args[1] = 1
    elif change == "int multiple of 16":
        args[1] = 48
    elif change == "int past 32 bits":
        args[1] = 2**31 + 1
    elif change == "other constexpr":
        meta["BLOCK"] = 128
    elif change == "other launch option":
        meta["num_warps"] = 8
    elif change == "a constexpr of another type":
        meta["BLOCK"] = 64.0  # equal to 64, but Triton compiles it apart
    else:
        device = 1
        kernel._bind_runtime(_knobs(), lambda: device, lambda index: "s")
    kernel[(1,)](*args, **meta)
    assert len(fake.jit_calls) == 2 and fake.launches == []
    kernel[(1,)](*args, **meta)  # and that variant is remembered in its turn
    assert len(fake.jit_calls) == 2 and len(fake.launches) == 1


def test_a_launch_hook_a_keyword_runtime_argument_or_an_unknown_argument_always_take_triton_s_path():
    x = torch.zeros(8)
    fake, kernel = _kernel(hook=SimpleNamespace(calls=[print]))  # a profiler's hook chain
    for _ in range(2):
        kernel[(1,)](x, 3, 0.5, BLOCK=8)
    assert len(fake.jit_calls) == 2 and fake.launches == []

    fake, kernel = _kernel(hook=SimpleNamespace(calls=[]))  # an empty chain is no hook
    for _ in range(2):
        kernel[(1,)](x, 3, 0.5, BLOCK=8)
    assert len(fake.jit_calls) == 1 and len(fake.launches) == 1

    fake, kernel = _kernel()
    for _ in range(2):
        kernel[(1,)](x, 3, scale=0.5, BLOCK=8)  # its value would be part of the key
        kernel[(1,)](x, object(), 0.5, BLOCK=8)  # no modelled specialisation (a tensor descriptor)
        kernel[(1,)](x, 3, 0.5, 8)  # a constexpr by position: its value is not in the key
        kernel[(1,)](x, 3, 0.5, 16)
    assert len(fake.jit_calls) == 8 and fake.launches == []

    for knobs in ({"exit_": SimpleNamespace(calls=[print])}, {"debug": True}, {"instrumentation": "consan"}):
        fake, kernel = _kernel(**knobs)  # what changes the variant or watches the launch
        for _ in range(2):
            kernel[(1,)](x, 3, 0.5, BLOCK=8)
        assert len(fake.jit_calls) == 2 and fake.launches == [], knobs


def test_a_bound_launcher_compiles_once_and_launches_each_call_s_head_with_its_fixed_arguments():
    fake, kernel = _kernel()
    x, y = torch.zeros(64), torch.zeros(64)
    launch = kernel.bind((3,), (x, 33, 0.5), {"BLOCK": 64}, runtime=1)
    assert len(fake.warmups) == 1 and fake.launches == [] and fake.jit_calls == []  # compiled, not run
    launch(y)
    launch(x)
    assert fake.launches == [(3, 1, 1, "stream0", "fn", "md", None, None, None, t, 33, 0.5, 64, 7) for t in (y, x)]
    kernel.bind((5,), (x, 49, 0.25), {"BLOCK": 64}, runtime=2)  # the same variant: no second compile
    assert len(fake.warmups) == 1 and fake.jit_calls == []


def test_a_bound_launcher_takes_triton_s_path_while_a_launch_hook_is_installed():
    x = torch.zeros(8)
    chain = SimpleNamespace(calls=[])
    fake, kernel = _kernel(hook=chain)
    launch = kernel.bind((1,), (x, 3, 0.5), {"BLOCK": 8}, runtime=1)
    launch(x)
    assert len(fake.launches) == 1 and fake.jit_calls == []
    chain.calls.append(print)  # a profiler starts watching
    launch(x)
    assert len(fake.launches) == 1 and fake.jit_calls == [((1,), (x, 3, 0.5), {"BLOCK": 8})]


def test_a_checked_launcher_refuses_a_head_that_specialises_otherwise(monkeypatch):
    monkeypatch.setenv("HARNESS_CHECK_LAUNCH", "1")
    fake, kernel = _kernel()
    fake.params[1].do_not_specialize = True  # n: only its integer width counts
    base = torch.zeros(64)
    launch = kernel.bind((1,), (base, 33, 0.5), {"BLOCK": 64}, runtime=2)
    launch(torch.zeros(64), 48)  # another aligned tensor, another 32-bit n: the promise holds
    assert len(fake.launches) == 1
    for head in ((base[1:], 33), (base.half(), 33), (base, 2**40)):
        with pytest.raises(_launch.LaunchPromiseBroken, match="plan key"):
            launch(*head)
    assert len(fake.launches) == 1


def test_plan_tables_stay_bounded_and_are_forgotten_together():
    first, second = _launch.plan_table(), _launch.plan_table()
    for i in range(_launch.PLAN_LIMIT + 5):
        _launch.remember(first, i, str(i))
    assert len(first) <= _launch.PLAN_LIMIT and first[_launch.PLAN_LIMIT + 4] == str(_launch.PLAN_LIMIT + 4)
    _launch.remember(second, "k", "plan")
    _launch.forget_plans()
    assert first == {} and second == {}


def test_launch_keys_tell_apart_what_triton_does():
    key = _launch.launch_key
    t = torch.zeros(16)
    assert key((t, 3)) == key((torch.zeros(16), 5))
    assert len({key((t,)), key((t[1:],)), key((t.half(),))}) == 3
    assert len({key((v,)) for v in (1, 2, 16, 2**31, 2**63, True, False, 1.0, None)}) == 9
    assert key((-(2**31),)) != key((-(2**31) - 1,))
    with pytest.raises(_launch._NotCached):
        key(("text",))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="launches a compiled kernel: needs a CUDA device")
def test_the_cached_path_computes_what_triton_s_path_does_on_a_gpu():
    import triton.language as tl

    @_launch.jit
    def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    base = torch.randn(4099, device="cuda")
    for x in (base, base[1:], base[:4096], base[3:]):  # aligned and not, n odd and a multiple of 16
        for _ in range(3):  # Triton's path first, then the cached one
            y = torch.full_like(x, float("nan"))
            double[(triton_cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
            torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
    assert len(double._cache) == 4
    for x in (base, base[3:]):
        y = torch.full_like(x, float("nan"))
        launch = double.bind((triton_cdiv(x.numel(), 256),), (x, y, x.numel()), {"BLOCK": 256}, runtime=2)
        for _ in range(2):
            y.fill_(float("nan"))
            launch(x, y)
            torch.testing.assert_close(y, x * 2, rtol=0, atol=0)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="launches on a second GPU: needs two CUDA devices")
def test_a_launcher_bound_to_tensors_on_another_gpu_launches_there():
    """Plans are bound at an op's first call, whichever device is current then: the launcher must
    compile, load and launch on the device of its arguments."""
    import triton.language as tl

    from kernels.softmax import softmax

    @_launch.jit
    def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    with torch.cuda.device(0):
        x = torch.randn(1000, device="cuda:1")
        y = torch.full_like(x, float("nan"))
        launch = double.bind((4,), (x, y, x.numel()), {"BLOCK": 256}, runtime=2)
        launch(x, y)
        torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
        rows = torch.randn(64, 100, device="cuda:1")
        torch.testing.assert_close(softmax(rows), torch.softmax(rows, -1))
