"""The wrappers' host path (kata.host's run_* functions, behind 04, 05, 07, 08 and 09's
wrappers): the same results and messages as the launch helpers the grader uses, the autotuner
passed once per shape key, nothing read back from the device; and the bench's dry run, which
walks every row function of ``nox -s bench`` in the interpreter."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from kata import catalogue, host, runtime

slow = pytest.mark.slow
FAULT = runtime.interpreter_fault()  # the dry run needs a working interpreter


def same(got, want) -> bool:
    return all(
        g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w) for g, w in zip(got, want)
    )


@pytest.fixture
def no_readback(monkeypatch):
    """Within ``with no_readback():``, reading a tensor's value on the host raises: on a GPU each
    of these waits for the device (a sync), which the wrappers' host path must not make."""
    import contextlib

    @contextlib.contextmanager
    def guard():
        with monkeypatch.context() as m:
            for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):

                def refuse(*args, name=name, **kwargs):
                    raise AssertionError(f"the host path read a tensor back ({name})")

                m.setattr(torch.Tensor, name, refuse)
            yield

    return guard


GATING = [  # (M, E, dtype): powers of two and not, each logit size, one token, none
    pytest.param(37, 8, torch.float32, id="37x8-fp32"),
    pytest.param(20, 60, torch.bfloat16, id="20x60-bf16"),
    pytest.param(3, 5, torch.float16, id="3x5-fp16"),
    pytest.param(1, 2, torch.float32, id="1x2-fp32"),
    pytest.param(0, 6, torch.float32, id="no-tokens"),
]


@pytest.mark.parametrize(("M", "E", "dtype"), GATING)
def test_gating_wrapper_gives_the_launch_helpers_outputs(solution, randn, M, E, dtype):
    module = solution("05")
    logits = randn(M, E, seed=M + E, dtype=dtype)
    want = host.launch_fast_gating(module.moe_top2_gating_fast_kernel, logits)
    for _ in range(2):  # the first call per key through the autotuner, the second past it
        assert same(module.fast_top2_gating(logits), want)


def test_gating_wrapper_takes_strided_logits(solution, randn):
    module = solution("05")
    for logits in (randn(20, 16, seed=1)[:, ::2], randn(8, 30, seed=2).t(), randn(40, 8)[::2]):
        want = host.launch_fast_gating(module.moe_top2_gating_fast_kernel, logits)
        assert same(module.fast_top2_gating(logits), want)


def test_gating_wrapper_passes_the_autotuner_once_per_key(solution, randn, monkeypatch):
    """The autotuner's dispatch runs at the first call of an (E, dtype) and never again, and the
    cached launch uses the configuration it chose."""
    kernel = solution("05").moe_top2_gating_fast_kernel
    fast = solution("05").fast_top2_gating
    calls = []
    real = type(kernel).run
    monkeypatch.setattr(
        type(kernel), "run", lambda self, *a, **k: calls.append(1) or real(self, *a, **k)
    )
    logits = randn(9, 7, seed=3)
    for dtype in (torch.float32, torch.bfloat16):
        host._LAUNCHES.pop((kernel, (7, dtype)), None)
    fast(logits)
    assert len(calls) == 1
    fast(logits)
    fast(randn(33, 7, seed=4))  # another M: the same configuration, another grid
    assert len(calls) == 1
    fn, meta = host._LAUNCHES[kernel, (7, torch.float32)]
    assert fn is kernel.fn and meta["BLOCK_M"] == kernel.best_config.kwargs["BLOCK_M"]
    fast(randn(9, 7, seed=5, dtype=torch.bfloat16))  # another dtype: another key
    assert len(calls) == 2


def test_a_direct_launch_passes_every_constexpr_in_the_kernels_order():
    """``_direct`` hands the launcher the launch's arguments, then each constexpr as
    ``JITFunction.run`` binds it: the configuration's, the caller's, and the defaults, in the
    kernel's order, options such as num_warps left out."""
    import types

    from triton.runtime.jit import JITFunction

    from kata.kinds import launch

    def kernel(x_ptr, n, scale, BLOCK: tl.constexpr, CAUSAL: tl.constexpr, PAD: tl.constexpr = 7):
        pass

    compiled = types.SimpleNamespace(run="launcher", function=1, packed_metadata=(4, 1))
    meta = {"CAUSAL": True, "BLOCK": 64, "num_warps": 4, "num_stages": 3}
    x = torch.empty(3)
    got = launch._direct(compiled, JITFunction(kernel), meta, (x, 3, 0.5))
    assert got == ("launcher", (1, (4, 1), None, None, None), (64, True, 7), ())
    # A launcher without scratch memory: its C function, with the flags its __call__ adds.
    compiled.run = types.SimpleNamespace(
        launch="c", global_scratch_size=0, profile_scratch_size=0,
        launch_cooperative_grid=False, launch_pdl=True,
    )  # fmt: skip
    got = launch._direct(compiled, JITFunction(kernel), meta, (x, 3, 0.5))
    assert got[:2] == ("c", (1, False, True, None, None, (4, 1), None, None, None))
    compiled.run.global_scratch_size = 4096  # scratch: the launcher allocates it, so through it
    assert launch._direct(compiled, JITFunction(kernel), meta, (x, 3, 0.5))[0] is compiled.run
    assert launch._direct(compiled, JITFunction(kernel), meta, (x, 3, "0.5")) is None
    assert launch._direct(None, JITFunction(kernel), meta, (x, 3, 0.5)) is None  # interpreted


def test_the_direct_launch_path_with_a_stand_in_launcher(monkeypatch):
    """The direct path's bookkeeping, on any machine: a Triton launch stand-in returns a compiled
    kernel whose launcher records its calls. The first call of a key goes through Triton, the
    next ones straight to the launcher with the constexprs appended; another specialisation
    (an int that differs, a misaligned tensor) and a rebound global the kernel read go through
    Triton once more; a launch hook sends every call through Triton. Tensors reach the launcher
    as their addresses."""
    import copy
    import types

    from triton import knobs
    from triton.runtime.jit import JITFunction

    from kata.kinds import launch

    def body(x_ptr, n, BLOCK: tl.constexpr, PAD: tl.constexpr = 3):
        pass

    kernel = JITFunction(body)
    module_globals = {"LIMIT": tl.constexpr(4)}
    calls = []

    def triton_run(self, *args, grid, warmup, **kwargs):
        calls.append("triton")
        # Triton keeps a deep copy of each global's value, never the object itself.
        value = copy.deepcopy(module_globals["LIMIT"])
        self.used_global_vals = {("LIMIT", 0): (value, module_globals)}
        compiled = types.SimpleNamespace(function=7, packed_metadata=(1,))
        compiled.run = lambda *a: calls.append(a)
        return compiled

    monkeypatch.setattr(JITFunction, "run", triton_run)
    monkeypatch.setattr(launch, "_DIRECT", [(lambda: 0, lambda device: 99)])
    x = torch.empty(64)

    def call(t, n):
        calls.clear()
        launch.launch_cached(
            kernel, ("k",), lambda meta: (n // meta["BLOCK"],), (t, n), {"BLOCK": 16}
        )
        return calls[0]

    assert call(x, 64) == "triton"
    assert call(x, 64) == (4, 1, 1, 99, 7, (1,), None, None, None, x.data_ptr(), 64, 16, 3)
    assert call(x, 48) == "triton"  # another int value: keyed apart
    assert call(x, 48)[:3] == (3, 1, 1)
    assert call(x[1:], 48) == "triton"  # 4 bytes in: another alignment
    module_globals["LIMIT"] = tl.constexpr(4)  # rebound, to an equal value
    assert call(x, 64) == "triton"
    assert call(x, 64)[0] == 4  # kept again, with the object now bound
    hook = lambda metadata: None  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        assert call(x, 64) == "triton"
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)


@pytest.mark.skipif(runtime.BACKEND != "cuda", reason="the direct launch is a compiled kernel's")
def test_cached_launches_go_direct_and_respecialise_where_triton_would(
    solution, randn, monkeypatch
):
    """After the first call of a specialisation, 05's, 04's, 08's and 09's wrappers launch the compiled
    kernel without ``JITFunction.run``; the first call of a misaligned input or of another M,
    and every call under a launch hook (a profiler's), take Triton's path, and every result is the launch helper's."""
    from triton import knobs
    from triton.runtime.jit import JITFunction

    from kata.kinds import launch

    direct = triton.__version__.startswith(launch.DIRECT_LAUNCH_TRITON)
    assert bool(launch._direct_launches()) == direct
    runs = []
    real = JITFunction.run
    monkeypatch.setattr(
        JITFunction, "run", lambda self, *a, **k: runs.append(1) or real(self, *a, **k)
    )
    module = solution("05")
    kernel = module.moe_top2_gating_fast_kernel
    base = randn(65, 7, seed=11)
    for logits, through_triton in (
        (base[:64], True),  # the first call of (7, fp32)
        (base[:64], False),
        (base[1:], True),  # 28 bytes in: unaligned, another compiled kernel
        (base[1:], False),
        (base[:48], True),  # another M: the ints are keyed by value
        (base[:48], False),
    ):
        runs.clear()
        want = host.launch_fast_gating(kernel, logits)
        runs.clear()
        assert same(module.fast_top2_gating(logits), want)
        assert bool(runs) == (through_triton or not launch._direct_launches()), logits.shape
    hook = lambda metadata: None  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        runs.clear()
        assert same(module.fast_top2_gating(base[:64]), host.launch_fast_gating(kernel, base[:64]))
        assert len(runs) == 2  # the helper's and the wrapper's
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    attention = solution("04")
    for causal in (False, True):
        q, k, v = (randn(2, 3, 80, 64, seed=s, dtype=torch.bfloat16) for s in range(3))
        want = host.launch_fast_attention(attention.attention_fwd_kernel, q, k, v, causal=causal)
        for _ in range(3):
            runs.clear()
            assert same([attention.fast_attention(q, k, v, causal=causal)], [want])
        assert not runs or not launch._direct_launches()
    q, k, v = randn(4, 64, seed=1), randn(2, 96, 64, seed=2), randn(2, 96, 64, seed=3)
    lengths = torch.tensor([96, 17], device=runtime.DEVICE)
    idx = torch.rand(30, 8, generator=torch.Generator().manual_seed(0)).topk(2, dim=-1).indices
    idx = idx.to(runtime.DEVICE)
    for call in (
        lambda: solution("08").split_kv_decoding(q, k, v, lengths, 3, 32, check_lengths=False),
        lambda: solution("09").moe_dispatch(idx, 8, 9, check_ids=False)[:3],  # the rest: unset
    ):
        want = call()
        runs.clear()
        assert same(call(), want)
        assert not runs or not launch._direct_launches()


def test_the_graders_launch_helpers_cache_nothing(solution, randn):
    """The launch_* helpers launch through the kernel as its file defines it at every call (the
    grader pins configurations and counts launches): none leaves an entry in the wrappers'
    cache. (09's once did, by an edit meant for its run_* twin, and on a GPU the grader's
    stand-in kernels then failed in the direct launch.)"""
    host._LAUNCHES.clear()
    logits = randn(16, 8)
    q, k, v = (randn(1, 2, 32, 16, seed=s, dtype=torch.float16) for s in range(3))
    dq, dk, dv = randn(4, 16, seed=7), randn(2, 48, 16, seed=8), randn(2, 48, 16, seed=9)
    lengths = torch.tensor([48, 5], device=runtime.DEVICE)
    idx = torch.rand(30, 8).topk(2, dim=-1).indices.to(runtime.DEVICE)
    s08 = solution("08")
    for _ in range(2):
        host.launch_fast_gating(solution("05").moe_top2_gating_fast_kernel, logits)
        host.launch_fast_attention(solution("04").attention_fwd_kernel, q, k, v, causal=True)
        m, l, acc = host.launch_split_kv_partials(  # noqa: E741
            s08.split_kv_partial_kernel, dq, dk, dv, lengths, 3, block_n=16
        )
        host.launch_split_kv_merge(s08.split_kv_merge_kernel, m, l, acc)
        host.launch_moe_dispatch(solution("09").moe_dispatch_kernel, idx, 8, 9, block=128)
    assert host._LAUNCHES == {}


@pytest.mark.parametrize("M", [12, 37])
def test_gating_outputs_share_one_allocation_and_stay_aligned(solution, randn, M):
    """One allocation, and each output 16-byte aligned whatever M (one compiled kernel)."""
    outs = solution("05").fast_top2_gating(randn(M, 8))
    base = outs[0].untyped_storage().data_ptr()
    assert all(x.untyped_storage().data_ptr() == base for x in outs)
    assert all(x.is_contiguous() and x.data_ptr() % 16 == 0 for x in outs)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda t: t.cpu().numpy(), id="numpy"),
        pytest.param(lambda t: t.int(), id="int-logits"),
        pytest.param(lambda t: t[0], id="1-d"),
        pytest.param(lambda t: t[:, :1], id="one-expert"),
        pytest.param(lambda t: t[None], id="3-d"),
    ],
)
def test_gating_wrapper_refuses_what_the_launch_helper_refuses(solution, randn, bad):
    logits = bad(randn(4, 6))
    with pytest.raises((TypeError, ValueError)) as want:
        host.launch_fast_gating(solution("05").moe_top2_gating_fast_kernel, logits)
    with pytest.raises(want.type, match=f"^{re.escape(str(want.value))}$"):
        solution("05").fast_top2_gating(logits)


def test_wrappers_read_nothing_back(solution, randn, no_readback):
    """05, 04, 08 without its length check and 09 without its id check, after a first call:
    not one value read back from the device."""
    logits = randn(16, 8)
    q, k, v = (randn(1, 2, 32, 16, seed=s, dtype=torch.float16) for s in range(3))
    dq, dk, dv = randn(4, 16, seed=7), randn(2, 48, 16, seed=8), randn(2, 48, 16, seed=9)
    lengths = torch.tensor([48, 5], device=runtime.DEVICE)
    idx = torch.rand(30, 8).topk(2, dim=-1).indices.to(runtime.DEVICE)
    calls = [
        lambda: solution("05").fast_top2_gating(logits),
        lambda: solution("04").fast_attention(q, k, v, causal=True),
        lambda: solution("08").split_kv_decoding(dq, dk, dv, lengths, 3, 16, check_lengths=False),
        lambda: solution("09").moe_dispatch(idx, 8, 9, check_ids=False),
    ]
    for call in calls:
        call()
    with no_readback():
        for call in calls:
            call()


def test_attention_wrapper_gives_the_launch_helpers_output(solution, randn):
    module = solution("04")
    for causal in (False, True):
        q, k, v = (randn(1, 2, 40, 16, seed=s, dtype=torch.bfloat16) for s in range(3))
        want = host.launch_fast_attention(module.attention_fwd_kernel, q, k, v, causal=causal)
        for _ in range(2):
            assert same([module.fast_attention(q, k, v, causal=causal)], [want])
    # Strided (the transpose of a (B, S, H, D) tensor) takes the full check, and the same launch.
    q, k, v = (randn(1, 40, 2, 16, seed=s, dtype=torch.float16).transpose(1, 2) for s in range(3))
    want = host.launch_fast_attention(module.attention_fwd_kernel, q, k, v)
    assert same([module.fast_attention(q, k, v)], [want])


def test_07s_programs_per_head_fill_the_sms_and_never_cost_more_waves_than_a_tile_grid():
    from kata.kinds.bhsd_attention import persistent_programs

    def cost(p, BH, items, sms):  # waves of programs times the items each loops over
        return -(-p * BH // sms) * -(-items // p)

    # The bench's shapes on an H100 (132 SMs), items being pairs of query tiles: one program a
    # head where B * H fills the SMs at least once, else as many as fill them once (D = 128,
    # S = 4096: 64 heads of 16 pairs; S = 16384: 16 heads of 64).
    assert persistent_programs(1024, 512, 128, 132) == 1
    assert persistent_programs(1024, 256, 128, 132) == 1
    assert persistent_programs(4096, 128, 128, 132) == 1
    assert persistent_programs(4096, 64, 128, 132) == 2
    assert persistent_programs(16384, 16, 128, 132) == 8
    # 100 heads on 132 SMs: one program a head would leave 32 SMs idle for the whole run; a
    # program per pair takes 13 waves where that takes 16 pairs' time.
    assert persistent_programs(4096, 100, 128, 132) == 16
    for S in (1, 127, 128, 129, 383, 1000, 4096):
        for BH in (1, 7, 100, 131, 132, 133, 512):
            items = (-(-S // 128) + 1) // 2
            p = persistent_programs(S, BH, 128, 132)
            best = min(cost(r, BH, items, 132) for r in range(1, items + 1))
            assert 1 <= p <= items and cost(p, BH, items, 132) == best, (S, BH)
            assert all(cost(r, BH, items, 132) > best for r in range(1, p)), (S, BH)


def test_07s_launch_is_persistent_programs_a_head_by_b_times_h(monkeypatch):
    """The persistent grid is (programs a head, B * H), the count chosen for the device's SMs,
    or given; otherwise a program per query tile. A launch that read no SM count, or put B * H
    on the wrong axis, would give other grids."""
    from kata.kinds import bhsd_attention

    class StandIn:  # as the grader's stand-ins, launched through kernel[grid]
        def __getitem__(self, grid):
            return lambda *args, **constexprs: grids.append(grid({"BLOCK_M": 128}))

    grids = []
    monkeypatch.setitem(bhsd_attention._SMS, -1, 1024)  # a CPU tensor's device
    for B, H, D, dtype in ((16, 16, 128, torch.bfloat16), (16, 32, 64, torch.float16)):
        q = torch.empty(B, H, 1024, D, dtype=dtype)
        for persistent, programs in ((False, None), (True, None), (True, 3)):
            bhsd_attention.cached_attention_launch(
                StandIn(), q, q, q, q, False, persistent, programs
            )
    # 4 pairs a head on 1024 SMs: 256 heads take 4 programs each, 512 heads 2 (one wave).
    assert grids == [(8, 256), (4, 256), (3, 256), (8, 512), (2, 512), (3, 512)]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda x: x.float(), id="fp32"),
        pytest.param(lambda x: x[0], id="3-d"),
        pytest.param(lambda x: x[..., :8], id="head-dim-8"),
        pytest.param(
            lambda x: torch.cat([x.reshape(-1)[:1], x.reshape(-1)])[1:].view(x.shape),
            id="misaligned",
        ),
        pytest.param(lambda x: x.transpose(2, 3), id="last-dim-strided"),
    ],
)
def test_attention_wrapper_refuses_what_the_launch_helper_refuses(solution, randn, bad):
    q = randn(1, 2, 32, 16, dtype=torch.float16)
    args = (bad(q), randn(1, 2, 32, 16, seed=1, dtype=torch.float16), q)
    with pytest.raises((TypeError, ValueError)) as want:
        host.launch_fast_attention(solution("04").attention_fwd_kernel, *args)
    with pytest.raises(want.type) as got:
        solution("04").fast_attention(*args)
    assert str(got.value) == str(want.value)


def test_split_kv_wrapper_gives_the_launch_helpers_outputs(solution, randn):
    module = solution("08")
    q, k, v = randn(6, 24, seed=1), randn(3, 48, 24, seed=2), randn(3, 48, 24, seed=3)
    lengths = torch.tensor([48, 17, 1], device=runtime.DEVICE)
    for splits in (None, 3, 1):
        m, l, acc = host.launch_split_kv_partials(  # noqa: E741
            module.split_kv_partial_kernel, q, k, v, lengths, splits, block_n=16
        )
        want = host.launch_split_kv_merge(module.split_kv_merge_kernel, m, l, acc)
        assert same(module.split_kv_decoding(q, k, v, lengths, splits, 16), want)
        got = module.split_kv_decoding(q, k, v, lengths, splits, 16, check_lengths=False)
        assert same(got, want)
    with pytest.raises(ValueError, match="num_splits must be at least 1, got 0"):
        module.split_kv_decoding(q, k, v, lengths, 0, 16)


def test_dispatch_wrapper_gives_the_launch_helpers_outputs(solution):
    module = solution("09")
    idx = torch.rand(30, 8, generator=torch.Generator().manual_seed(0)).topk(2, dim=-1).indices
    for ids in (idx, idx[:0], idx.int().t().contiguous().t()):  # int64, empty, int32 strided
        ids = ids.to(runtime.DEVICE)
        want = host.launch_moe_dispatch(module.moe_dispatch_kernel, ids, 8, 9, block=128)
        got = module.moe_dispatch(ids, 8, 9)
        filled = int(want[0].sum())  # token_of_slot holds counts.sum() rows; the rest is unset
        assert same(got[:3], want[:3]) and same([got[3][:filled]], [want[3][:filled]])
        assert got[3].shape == want[3].shape
    with pytest.raises(ValueError, match=r"idx holds expert ids outside \[0, 8\)"):
        module.moe_dispatch(idx.to(runtime.DEVICE) + 7, 8, 9)


@slow
@pytest.mark.skipif(FAULT is not None, reason=f"no interpreter here: {FAULT}")
def test_the_bench_dry_run_walks_every_row_function(tmp_path):
    """``python -m kata.authoring.bench --dry-run`` runs every row function on tiny shapes in the
    interpreter (it failed in gating_rows when Triton was imported before the backend was
    chosen), and its rows hold the keys the H200 run is read by: GPU time under CUDA graphs
    beside a same-size copy, and host time per call beside torch's and a bare launch's."""
    env = {**os.environ, "KATA_DEVICE": "interpreter", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = str(catalogue.ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "kata.authoring.bench", "--dry-run", "--no-grader"]
        + ["--out", str(tmp_path)],
        cwd=catalogue.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((tmp_path / "bench.json").read_text())
    assert (tmp_path / "bench.png").is_file()
    assert not (tmp_path / "bench.partial.json").exists()  # kept only while a run is unfinished
    host_keys = {f"{n}_host_us_per_call" for n in ("fast", "torch", "launch_floor")}
    for section, keys in {
        "gating": {"fast_ms", "fast_pct_of_copy", "fast_graph_ms", "same_size_copy_graph_ms"}
        | {"fast_pct_of_same_size_copy"},
        "decode": host_keys | {"fast_ms", "fast_graph_ms", "fast_pct_of_same_size_copy"},
        "attention": host_keys | {"fast_ms", "fast_tflops"},
        "split_kv": {"decode_ms", "merge_ms"},
        "dispatch": {"kernel_ms", "agrees_with_torch"},
        "host": host_keys | {"fast_host_over_launch_floor"},
        "attention_backward": {"baseline", "max_err_vs_sdpa", "speedup_vs_torch"}
        | {f"{n}_{k}" for n in ("ours", "torch") for k in ("ms", "spread", "tflops")},
    }.items():
        rows = data[section]
        assert rows, section
        for row in rows:
            assert keys <= set(row), (section, keys - set(row))
    # Each SDPA backend is timed beside ours, or left out with its error where it fails (on a
    # CPU, cuDNN and memory-efficient have no kernel): never both, never neither.
    from kata.authoring.bench import sdpa_backends

    for row in data["attention_backward"]:
        for b in sdpa_backends():
            timed = {f"sdpa_{b}_ms", f"sdpa_{b}_spread", f"speedup_vs_sdpa_{b}"}
            if f"sdpa_{b}_error" in row:
                assert not timed & set(row), (b, row)
            else:
                assert timed <= set(row), (b, row)
    # 04's and 05's rows time their wrapper's parts too, so that what each microsecond above
    # the bare launch is can be read off the run.
    parts = {f"{n}_host_us_per_call" for n in ("checks", "one_allocation", "cached_launch")}
    assert all(parts <= set(r) for r in data["host"] if r["wrapper"][:2] in ("04", "05"))
    wrappers = [row["wrapper"] for row in data["host"]]
    assert wrappers == ["04 fast_attention", "05 fast_top2_gating", "08 split_kv_decoding"] + [
        "09 moe_dispatch"
    ]
    assert all(row["agrees_with_torch"] for row in data["dispatch"])


@pytest.mark.skipif(runtime.DEVICE != "cuda", reason="a stream's scratch is a GPU's")
def test_the_descriptor_scratch_is_kept_per_stream_and_size_but_not_for_a_graph():
    """The scratch of a stream and size is reused by the next launch on that stream (which runs
    after the last), never shared with another stream, and a graph being captured gets its own:
    two graphs captured on one stream may be replayed at once."""
    from kata.kinds import bhsd_attention

    stream = torch.cuda.current_stream().cuda_stream
    first = bhsd_attention._descriptor_scratch(512, 128, stream)
    assert bhsd_attention._descriptor_scratch(512, 128, stream) is first
    assert first.numel() == 512 and first.is_cuda
    assert bhsd_attention._descriptor_scratch(1024, 128, stream) is not first
    side = torch.cuda.Stream()
    assert bhsd_attention._descriptor_scratch(512, 128, side.cuda_stream) is not first
    graph, captured = torch.cuda.CUDAGraph(), []
    with torch.cuda.graph(graph):
        here = torch.cuda.current_stream().cuda_stream
        captured += [bhsd_attention._descriptor_scratch(512, 128, here) for _ in range(2)]
    assert captured[0] is not captured[1]
    assert bhsd_attention._descriptor_scratch(512, 128, stream) is first


def test_the_bench_counts_the_descriptor_scratch_a_call_asks_for():
    """The attention host rows time the scratch Triton's launcher requests at each launch of a
    kernel that makes descriptors on the device; the count comes from the allocator the wrapper
    installs, looked up at call time, and the allocator is put back afterwards."""
    from grader.kinds.bhsd_attention.bench import scratch_requests
    from kata.kinds import bhsd_attention

    allocate = bhsd_attention._descriptor_scratch
    calls = lambda: [bhsd_attention._descriptor_scratch(n, 128, None) for n in (256, 512)]  # noqa: E731
    assert scratch_requests(calls) == [256, 512]
    assert scratch_requests(lambda: None) == []
    assert bhsd_attention._descriptor_scratch is allocate
