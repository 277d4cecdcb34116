"""The compiler's middle (Note [Compilation record], compiler/pipeline.py): one typed record
per path, stages `record -> (record, stats)` in one list, statistics logged, every graph
verified after every stage under the test suite."""
import logging

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.compiler.pipeline import run_pipeline, stages_for
from tracegrad.compiler.record import Options, PathRecord
from tracegrad.ir import IRError
from training import sgd_step

STAGES = ["functionalize", "cse", "dce", "vjp", "check_inplace", "partition", "plan_replay",
          "cleanup", "lower", "plan_memory", "codegen", "decide_eager"]


def _mlp_step():
    return tg.compile(sgd_step(sizes=(4, 8, 3))[2])


def test_every_stage_is_logged_in_order_with_its_statistics():
    step = _mlp_step()
    x, y = tg.randn(5, 4), tg.tensor([0, 1, 2, 1, 0])
    step(x, y)
    step(x, y)
    for path in step.programs:
        assert [name for name, _ in path.log] == STAGES
        stats = dict(path.log)
        # backward ran inside: the loss's graph is consumed, no backward program is derived
        assert stats["vjp"] == {"differentiated": 0} and path.backward is None
        assert stats["partition"]["input_mutations"] == len(path.part.mutations) > 0
        assert stats["decide_eager"] == {"eager": False}
        assert stats["plan_memory"]["forward_planned_peak"] == path.forward_plan.planned_peak
    # explain shows the same log, one line per stage
    lines = [ln.split() for ln in str(step.explain()).splitlines()]
    shown = [ln[0] for ln in lines if ln and ln[0] in STAGES]
    assert shown == STAGES * len(step.programs)


def test_stage_statistics_reach_the_logger(caplog):
    f = tg.compile(lambda x: (x * 2).sin().sum())
    with caplog.at_level(logging.DEBUG, logger="tracegrad.compile"):
        f(tg.ones(3, requires_grad=True))
    assert dict(f.programs[0].log)["vjp"]["differentiated"] == 3     # mul, sin, sum
    logged = [r.getMessage() for r in caplog.records if r.name == "tracegrad.compile"]
    assert [m.split(": ")[2].split(" ")[0] for m in logged] == STAGES


def test_a_pass_that_breaks_the_ir_is_named_by_the_verifier():
    def drop_first_node(g):
        out = g.derive()
        out.inputs, out.nodes, out.outputs = list(g.inputs), list(g.nodes[1:]), list(g.outputs)
        return out
    cf = tg.compile(lambda x: (x.sin() * 2).sum(), passes=[drop_first_node])
    with pytest.raises(IRError, match="after stage 'drop_first_node', the functional graph"):
        cf(tg.ones(3, requires_grad=True))
    # the failed trace cached nothing; a correct function compiles fine afterwards
    assert cf.programs == []
    good = tg.compile(lambda x: (x.sin() * 2).sum())
    assert np.allclose(good(tg.ones(3)).item(), 2 * 3 * np.sin(1.0))


def test_stages_return_new_records_and_the_path_keeps_the_finished_one():
    seen = []

    def spy(stage):
        def wrapped(rec):
            new, stats = stage(rec)
            assert isinstance(new, PathRecord) and isinstance(stats, dict)
            seen.append((stage.__name__, new is rec))
            return new, stats
        wrapped.__name__ = stage.__name__
        return wrapped

    f = tg.compile(lambda x: (x * x).sum())
    f(tg.ones(2, requires_grad=True))
    rec = f.programs[0].record
    assert rec.values is None                 # traced data dropped once the vjp has run
    assert rec.forward_program is f.programs[0].forward_program
    # re-running the pipeline from a fresh trace record with spies: every stage that fills a
    # field returns a new record and leaves the one it was given alone
    from tracegrad.tracing import Tracer
    x = tg.ones(2, requires_grad=True)
    tr = Tracer("g")
    tr.add_arg(x, "x")
    with tr:
        out = (x * x).sum()
    tr.graph.outputs = [tr.value_of(out)]
    from tracegrad.compiler.trace_plan import record_from_trace
    start = record_from_trace("g", tr, [out], lambda o: o[0], Options(), 1)
    final = run_pipeline(start, [spy(s) for s in stages_for(Options())], verify_graphs=True)
    assert start.functional is None and start.part is None     # untouched
    assert final.forward_program is not None and final.backward_program is not None
    assert all(not same for name, same in seen if name in ("functionalize", "vjp", "partition",
                                                            "cleanup", "codegen"))


def test_the_jax_backend_is_a_stage_of_the_same_pipeline():
    pytest.importorskip("jax")
    f = tg.compile(lambda x: (x.tanh() * 3).sum(), backend="jax")
    x = tg.randn(4, requires_grad=True)
    f(x).backward()
    stats = dict(f.programs[0].log)
    assert stats["lower"] == {"lowered": True}
    assert stats["plan_memory"] == {} and stats["codegen"] == {}    # XLA's job there
    assert np.allclose(x.grad.numpy(), 3 * (1 - np.tanh(x.detach().numpy()) ** 2), atol=1e-6)
