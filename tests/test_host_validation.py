"""The host functions refuse bad input before any kernel runs, with a message naming the problem."""

import numpy as np
import pytest
import torch

from kata import host, runtime


@pytest.fixture(params=["plain", "causal"])
def attend(request, solution):
    """One of the two attention host functions (they share their checks)."""
    if request.param == "plain":
        return solution("01").flash_attention
    return solution("02").causal_flash_attention


@pytest.fixture(scope="module")
def gating(solution):
    return solution("03").moe_top2_gating


def t(*shape, dtype=torch.float32, device=None):
    return torch.zeros(*shape, dtype=dtype, device=device or runtime.DEVICE)


# fmt: off
@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        pytest.param(
            lambda: (np.zeros((4, 8), np.float32), t(6, 8), t(6, 8)),
            TypeError, r"q must be a torch\.Tensor, got ndarray", id="q-is-numpy",
        ),
        pytest.param(
            lambda: (t(4, 8), [[0.0] * 8] * 6, t(6, 8)),
            TypeError, r"k must be a torch\.Tensor, got list", id="k-is-list",
        ),
        pytest.param(
            lambda: (t(4, 8), t(6, 8), None),
            TypeError, r"v must be a torch\.Tensor, got NoneType", id="v-is-none",
        ),
        pytest.param(
            lambda: (t(2, 4, 8), t(6, 8), t(6, 8)),
            ValueError, r"q must be 2-D, got shape \(2, 4, 8\)", id="q-3d",
        ),
        pytest.param(
            lambda: (t(4, 8), t(6, 8), t(48)),
            ValueError, r"v must be 2-D, got shape \(48,\)", id="v-1d",
        ),
        pytest.param(
            lambda: (t(4, 8), t(6, 16), t(6, 8)),
            ValueError, r"q and k must share the head dimension, got 8 and 16", id="head-dim-q-vs-k",
        ),
        pytest.param(
            lambda: (t(4, 8), t(6, 8), t(7, 8)),
            ValueError, r"k and v must have the same length, got 6 and 7", id="length-k-vs-v",
        ),
        pytest.param(
            lambda: (t(4, 8), t(6, 8), t(6, 4)),
            ValueError, r"v must have head dimension 8 like q, got 4", id="head-dim-v",
        ),
        pytest.param(
            lambda: (t(4, 8, dtype=torch.int32), t(6, 8), t(6, 8)),
            TypeError, r"q must have a floating-point dtype, got torch\.int32", id="q-int32",
        ),
        pytest.param(
            lambda: (t(4, 8), t(6, 8), t(6, 8, dtype=torch.int64)),
            TypeError, r"v must have a floating-point dtype, got torch\.int64", id="v-int64",
        ),
        pytest.param(
            lambda: (t(4, 8), t(6, 8, dtype=torch.bool), t(6, 8)),
            TypeError, r"k must have a floating-point dtype, got torch\.bool", id="k-bool",
        ),
        pytest.param(
            lambda: (t(4, 0), t(6, 0), t(6, 0)),
            ValueError, r"head dimension D must be at least 1", id="head-dim-0",
        ),
        pytest.param(
            lambda: (t(4, 8), t(0, 8), t(0, 8)),
            ValueError, r"k and v are empty", id="no-keys-for-4-queries",
        ),
    ],
)
# fmt: on
def test_attention_rejects(attend, args, error, match):
    with pytest.raises(error, match=match):
        attend(*args())


# fmt: off
@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        pytest.param(lambda: np.zeros((4, 8), np.float32), TypeError,
                     r"logits must be a torch\.Tensor, got ndarray", id="numpy"),
        pytest.param(lambda: t(8), ValueError, r"logits must be 2-D, got shape \(8,\)", id="1d"),
        pytest.param(lambda: t(2, 4, 8), ValueError, r"logits must be 2-D", id="3d"),
        pytest.param(lambda: t(4, 8, dtype=torch.int32), TypeError,
                     r"logits must have a floating-point dtype, got torch\.int32", id="int32"),
        pytest.param(lambda: t(4, 1), ValueError, r"at least 2 experts, got E=1", id="one-expert"),
        pytest.param(lambda: t(4, 0), ValueError, r"at least 2 experts, got E=0", id="no-experts"),
    ],
)
# fmt: on
def test_gating_rejects(gating, make, error, match):
    with pytest.raises(error, match=match):
        gating(make())


# Tensors on a device other than the kernels' one. "meta" tensors have shapes but no data, so
# they exist on every machine; on a GPU machine the CPU is a second, real device as well.
OTHER_DEVICES = [pytest.param("meta", id="meta")] + (
    [pytest.param("cpu", id="cpu")] if runtime.DEVICE != "cpu" else []
)


@pytest.mark.parametrize("other", OTHER_DEVICES)
def test_attention_rejects_tensors_on_two_devices(attend, other):
    q, k, v = t(4, 8), t(6, 8, device=other), t(6, 8)
    with pytest.raises(ValueError, match=rf"one device, got q on {runtime.DEVICE}.*, k on {other}"):
        attend(q, k, v)


@pytest.mark.parametrize("other", OTHER_DEVICES)
def test_attention_rejects_tensors_off_the_kernels_device(attend, other):
    q, k, v = (t(n, 8, device=other) for n in (4, 6, 6))
    with pytest.raises(ValueError, match=rf"tensors are on {other} but kernels run on"):
        attend(q, k, v)


@pytest.mark.parametrize("other", OTHER_DEVICES)
def test_gating_rejects_logits_off_the_kernels_device(gating, other):
    with pytest.raises(ValueError, match=rf"tensors are on {other} but kernels run on"):
        gating(t(4, 8, device=other))


def test_require_device_names_every_tensor_and_returns_the_shared_device():
    found = host._require_device(a=t(2, 2), b=t(3, 3))
    assert found.type == runtime.DEVICE
    with pytest.raises(ValueError, match=r"got a on \S+, b on meta, c on \S+"):
        host._require_device(a=t(2, 2), b=t(2, 2, device="meta"), c=t(2, 2))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_attention_rejects_tensors_on_two_gpus(attend):
    q, k, v = t(4, 8, device="cuda:0"), t(6, 8, device="cuda:1"), t(6, 8, device="cuda:0")
    with pytest.raises(ValueError, match=r"one device, got q on cuda:0, k on cuda:1"):
        attend(q, k, v)


def test_dispatch_takes_capacity_0_and_refuses_a_negative_one(solution):
    """CAPACITY >= 0 is the contract: 0 drops every pair and fills no row; -1 is refused (and
    so are a bool and a float) before the kernel runs."""
    dispatch = solution("09").moe_dispatch
    idx = torch.tensor([[0, 1], [1, 2], [0, 2]], dtype=torch.int32, device=runtime.DEVICE)
    counts, offsets, slot, _ = (x.cpu() for x in dispatch(idx, 3, 0))
    assert not counts.any() and not offsets.any() and (slot == -1).all()
    for bad in (-1, True, 1.0):
        with pytest.raises(ValueError, match="capacity must be an int >= 0"):
            host.check_dispatch_input(idx, 3, bad)
