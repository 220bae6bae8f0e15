"""Exercise 04 (performance track), the instructor's checks and gallery.

The grader chooses the tiles, not the kernel's autotuner: every case runs with the tile
configuration it pins (``Case.config``) or under every configuration the file's own autotuner
offers on a GPU (``each_config``), on both backends. Between them the pinned ones cover tensor
descriptors (TMA) and pointer loads, BLOCK_M = BLOCK_N and BLOCK_M = 2 * BLOCK_N (a diagonal
that spans two key tiles), and sequence lengths one past and one short of a tile (a last key
tile that is mostly padding), causal or not.
"""

from grader.kinds.bhsd_attention.inputs import bhsd
from grader.kinds.bhsd_attention.traps import DIAGONAL_STAGE_MISSING, EXP2_CONSTANT_WRONG
from grader.model import Case, Check, right, wrong


def _tiles(bm: int, bn: int, tma: bool, warps: int = 4, stages: int = 2) -> dict:
    return {"BLOCK_M": bm, "BLOCK_N": bn, "TMA": tma, "num_warps": warps, "num_stages": stages}


TMA_64 = _tiles(64, 64, True)
TMA_128x64 = _tiles(128, 64, True)
PTR_64 = _tiles(64, 64, False, stages=3)
PTR_128x64 = _tiles(128, 64, False, warps=8, stages=3)
PTR_128 = _tiles(128, 128, False, warps=8, stages=3)


def _case(
    causal: bool, seed: int, B: int, H: int, S: int, D: int, dtype: str, config=None, note: str = ""
) -> Case:
    tag = "causal" if causal else "full"
    tiles = (
        f"{config['BLOCK_M']}x{config['BLOCK_N']} tiles, "
        f"{'tensor descriptors' if config['TMA'] else 'pointer loads'}"
        if config
        else "every tile configuration the kernel's autotuner offers"
    )
    short = {"float16": "fp16", "bfloat16": "bf16"}[dtype]
    return Case(
        name=f"{tag}-{short}-d{D}-s{S}" + ("-own" if config is None else ""),
        about=f"B={B}, H={H}, S={S}, D={D}, {dtype}, {tag}; {tiles}{note}",
        inputs=bhsd(seed, B, H, S, D, dtype),
        dtype=dtype,
        causal=causal,
        config=config,
        each_config=config is None,
    )


# fmt: off
CASES = [
    _case(False, 300, 1, 2, 128, 64, "float16", TMA_64),
    _case(False, 302, 2, 1, 256, 128, "bfloat16", PTR_128x64),
    _case(False, 304, 1, 1, 384, 32, "bfloat16", PTR_128),
    _case(False, 306, 1, 1, 193, 64, "float16", TMA_128x64, note="; S one past a 64-key tile"),
    _case(False, 308, 1, 1, 191, 32, "float16", note="; S one short of a 64-key tile"),
    _case(True, 301, 1, 2, 384, 64, "float16", PTR_128x64,
          note="; each diagonal spans two key tiles"),
    _case(True, 303, 2, 1, 256, 128, "bfloat16", TMA_64),
    _case(True, 305, 1, 1, 200, 32, "bfloat16", TMA_128x64, note="; S ragged"),
    _case(True, 307, 1, 1, 129, 64, "float16", PTR_64, note="; S one past a tile"),
    _case(True, 309, 1, 1, 191, 32, "float16", note="; S one short of a 64-key tile"),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="fast-attention-full", todo="exp2-scale", points=25,
          about="Non-causal: float16 and bfloat16, D = 32, 64, 128, ragged S, every tile kind",
          cases=tuple(c.name for c in CASES if not c.causal), judge="output",
          traps=(EXP2_CONSTANT_WRONG,)),
    Check(id="fast-attention-causal", todo="causal-stages", points=25,
          about="Causal: unmasked tiles, then the diagonal tiles; BLOCK_M = BLOCK_N and 2 x "
          "BLOCK_N, ragged S, every tile kind",
          cases=tuple(c.name for c in CASES if c.causal), judge="output",
          traps=(DIAGONAL_STAGE_MISSING,), requires="exp2-scale"),
]
# fmt: on

# Stage 2 as the formatter lays it out; ``strides`` is "<k stride>,\n    <v stride>".
_STAGE_2 = """\
acc, l_i, m_i = _attend_tiles(
    acc,
    l_i,
    m_i,
    q,
    k_src,
    v_src,
    {strides},
    offs_m,
    offs_d,
    pid_m * BLOCK_M,
    {hi},
    S,
    qk_scale,
    BLOCK_N,
    DIAGONAL,
    TMA,
)"""
REFERENCE = {
    "exp2-scale": "qk_scale = sm_scale * 1.4426950408889634",
    "causal-stages": _STAGE_2.format(
        strides="stride_ks,\n    stride_vs", hi="(pid_m + 1) * BLOCK_M"
    ),
}

# fmt: off
GALLERY = [
    wrong("04-exp2-constant-missing", "exp2 without log2(e) in the scale",
          fills={"exp2-scale": "qk_scale = sm_scale"}, traps=["exp2-constant-wrong"],
          breaks="exp2-scale", failed=["fast-attention-full"]),
    wrong("04-diagonal-stage-missing", "the causal loop's second, masked stage left out",
          fills={"causal-stages": ""}, traps=["diagonal-stage-missing"], breaks="causal-stages",
          failed=["fast-attention-causal"]),
    wrong("04-diagonal-spans-block-n", "the diagonal stage ends BLOCK_N keys past its start, not "
          "BLOCK_M rows: right whenever BLOCK_M = BLOCK_N (64x64, the interpreter's old only "
          "tiles), off by 0.6 at 128x64",
          fills={"causal-stages": _STAGE_2.format(strides="stride_ks,\n    stride_vs",
                                                  hi="pid_m * BLOCK_M + BLOCK_N")},
          breaks="causal-stages", failed=["fast-attention-causal"]),
    wrong("04-diagonal-strides-halved", "the diagonal stage steps through keys at half their "
          "stride: tensor descriptors carry their own strides and ignore it, pointer loads read "
          "the wrong rows", fills={"causal-stages": _STAGE_2.format(
              strides="stride_ks // 2,\n    stride_vs // 2", hi="(pid_m + 1) * BLOCK_M")},
          breaks="causal-stages", failed=["fast-attention-causal"]),
    wrong("04-diagonal-stops-at-whole-tiles", "the diagonal stage stops at the last whole key "
          "tile: right whenever S is a multiple of the tile, and the keys of a ragged last tile "
          "are never seen", fills={"causal-stages": _STAGE_2.format(
              strides="stride_ks,\n    stride_vs",
              hi="tl.minimum((pid_m + 1) * BLOCK_M, S - S % BLOCK_N)")},
          breaks="causal-stages", failed=["fast-attention-causal"]),
    right("04-diagonal-ends-at-s", "the diagonal stage stops at S itself: the same keys, fewer "
          "loads of padding", fills={"causal-stages": _STAGE_2.format(
              strides="stride_ks,\n    stride_vs", hi="tl.minimum((pid_m + 1) * BLOCK_M, S)")}),
]
# fmt: on
