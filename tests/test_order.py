"""One verdict on both backends: the order of a grid's programs (``grader.run.order``), judged in
the interpreter by running each case again with its programs in reverse order.

Graded through the launcher, in the interpreter only: on a GPU the programs' order is the GPU's.
"""

import dataclasses
import types

import pytest

from grader import specs
from grader.judge import checking
from grader.run import launcher, order, runner
from grader.validate import gallery
from kata import catalogue, runtime, skeletons

pytestmark = pytest.mark.skipif(
    not runtime.INTERPRETER, reason="the interpreter's program order (a GPU has its own)"
)

DISPATCH = "09_moe_dispatch"

# A kernel of 09's interface whose programs write only their own elements, one of them what the
# previous program had stored by then: counts[e] = e, offsets[e] = 1 if counts[e - 1] held e - 1
# when program e read it (program 0 reads nothing: 1). In order, 0, 1, 2, ..., every offset is
# 1; run last first, all but the first are 0. Every store stays inside its tensor.
TOY = """
import triton
import triton.language as tl


@triton.jit
def moe_dispatch_kernel(idx_ptr, counts_ptr, offsets_ptr, slot_ptr, token_ptr, M, K, E,
                        CAPACITY, BLOCK: tl.constexpr, BLOCK_E: tl.constexpr):
    e = tl.program_id(0)
    tl.store(counts_ptr + e, e)
    {read}
    tl.store(offsets_ptr + e, tl.where(previous == e - 1, 1, 0))
"""
READS_PREVIOUS = "previous = tl.load(counts_ptr + e - 1, mask=e > 0, other=-1)"
READS_OWN = "previous = tl.load(counts_ptr + e, mask=e > 0, other=0) - 1"


def _launch(tmp_path, read: str):
    spec = specs.load(DISPATCH)
    file = tmp_path / catalogue.find(DISPATCH).filename
    text = TOY.replace("{read}", read)
    file.write_text(text)
    only = {name: spec.cases[name] for name in ("e8-m40", "e9-m33")}
    small = dataclasses.replace(spec, cases=only)  # two cases: the toy is judged by no check
    return runner.launch(small, text, file, "interpreter", timeout=120.0, timed=False)


def test_the_reversed_run_of_a_program_that_reads_another_programs_store_is_sent(tmp_path):
    ran = _launch(tmp_path, READS_PREVIOUS)
    assert ran.error is None, ran.error
    runs = ran.outputs["e8-m40"]
    assert [label for label, _ in runs] == [None, order.REVERSED]
    (_, natural), (_, reversed_) = runs
    assert natural["offsets"].tolist() == [1] * 8
    assert reversed_["offsets"].tolist() == [1] + [0] * 7
    assert any("e8-m40" in w and order.WHY in w for w in ran.status["warnings"])


def test_a_program_that_reads_only_its_own_stores_runs_once(tmp_path):
    ran = _launch(tmp_path, READS_OWN)
    assert ran.error is None, ran.error
    assert [label for label, _ in ran.outputs["e8-m40"]] == [None]
    assert not any(order.WHY in w for w in ran.status["warnings"])


def test_the_reversed_run_is_judged_too(tmp_path):
    """09's reference, but program e shifts its block down a row when the previous expert's
    count was not stored yet (the programs out of order): right in the interpreter's natural
    order, wrong run last first; the rows stay inside the grader's guarded buffer."""
    spec = specs.load(DISPATCH)
    offset, rank = spec.reference["dest-slot"]
    late = "(tl.load(counts_ptr + e - 1, mask=e > 0, other=0) < 0).to(tl.int32)"
    text = gallery.fill(
        skeletons.pristine(DISPATCH), {**spec.reference, "dest-slot": (f"{offset} + {late}", rank)}
    )
    (tmp_path / catalogue.find(DISPATCH).filename).write_text(text)
    result = runner.grade_exercise(catalogue.find(DISPATCH), tmp_path, "interpreter", timed=False)
    assert result.score < result.max_score
    slots = next(c for c in result.checks if c.id == "slots-e8")
    assert slots.status == "failed"
    assert f"({order.REVERSED})" in slots.message
    assert any(order.WHY in w for w in result.warnings)


def test_a_run_is_named_by_its_tiles_and_its_order():
    assert checking._ran_with(None) == ""
    assert checking._ran_with("BLOCK=16") == " (tiles: BLOCK=16)"
    assert checking._ran_with(order.label(None)) == " (programs in reverse order)"
    assert checking._ran_with(order.label("BLOCK=16")) == (
        " (tiles: BLOCK=16; programs in reverse order)"
    )


def test_a_reversed_run_that_kills_the_launcher_fails_its_case_and_says_why(tmp_path):
    """09's gallery row: the offset read from the previous expert's program. Run last first,
    program E-1 reads rows never written and stores far outside token_of_slot: the launcher
    dies in its reversed run, after every natural run passed."""
    spec = specs.load(DISPATCH)
    variant = next(v for v in spec.gallery if v.name == "09-offset-read-from-e-1")
    (tmp_path / catalogue.find(DISPATCH).filename).write_text(gallery.source(variant, spec))
    result = runner.grade_exercise(catalogue.find(DISPATCH), tmp_path, "interpreter", timed=False)
    assert result.score < result.max_score
    failed = [c for c in result.checks if c.status != "passed"]
    assert failed and all(order.REVERSED in c.message for c in failed)
    assert any(order.WHY in c.message for c in failed)


# ---- forbidden operations, judged on what was compiled -----------------------------------------


def test_an_atomic_in_09_is_refused_on_its_compiled_ir(tmp_path):
    """09's atomic counter graded ``--free-form`` (a file run as written, past the region rules
    that refuse the name): the compile gate finds ``tt.atomic_rmw`` in its TTIR and refuses
    every launch with the rule's words, before anything runs in the interpreter (where the
    counter would hand out rows in order and pass)."""
    spec = specs.load(DISPATCH)
    variant = next(v for v in spec.gallery if v.name == "09-atomic-counter")
    (tmp_path / catalogue.find(DISPATCH).filename).write_text(gallery.source(variant, spec))
    result = runner.grade_exercise(
        catalogue.find(DISPATCH), tmp_path, "interpreter", timed=False, free_form=True
    )
    assert result.score == 0
    (rule,) = spec.forbidden
    assert "tt.atomic_rmw" in result.error
    assert rule.trap in result.error and rule.why in result.error
    assert result.compiled["refused"] > 0


def test_forbidden_ops_reads_the_ops_of_the_ttir():
    (rule,) = specs.load(DISPATCH).forbidden
    rmw = "%r = tt.atomic_rmw add, acq_rel, gpu, %p, %v, %m : (tensor<16x!tt.ptr<i32>>, ...)"
    cas = "%old = tt.atomic_cas acq_rel, gpu, %p, %c, %v : (!tt.ptr<i32>, i32, i32) -> i32"
    assert "`tt.atomic_rmw`" in launcher.forbidden_ops(rmw, [rule])
    assert "`tt.atomic_cas`" in launcher.forbidden_ops(cas, [rule])
    plain = '%x = tt.load %p : tensor<16x!tt.ptr<i32>> loc("atomic_counter.py":3:1)'
    assert launcher.forbidden_ops(plain, [rule]) is None
    assert launcher.forbidden_ops(rmw, []) is None


def test_on_a_gpu_the_compiled_kernels_ttir_is_read():
    """``forbidden_compiled`` walks what Triton keeps of a JITFunction's compiled kernels
    (``device_caches``: device -> (kernels by key, ...)); a stand-in here, no GPU needed."""
    (rule,) = specs.load(DISPATCH).forbidden

    def kernel(ttir):
        compiled = types.SimpleNamespace(asm={"ttir": ttir})
        return types.SimpleNamespace(device_caches={0: ({"key": compiled}, {}, None, None, None)})

    found = launcher.forbidden_compiled(kernel("%r = tt.atomic_rmw add, %p"), [rule])
    assert "`tt.atomic_rmw`" in found and rule.trap in found
    assert launcher.forbidden_compiled(kernel("%x = tt.load %p"), [rule]) is None
