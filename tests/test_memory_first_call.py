"""Issue 11: compiling costs about the memory the eager call costs (Note [Traced values]).

A training step written the PyTorch way (SGD with momentum, backward inside) on a 4-layer
512-wide tanh MLP. tracemalloc figures are deterministic for a given program:
- the tracer owns no array of the program: deleting it after a traced step frees only its
  graph (no copies of inputs, parameters or optimizer state, no intermediates);
- values a pass might read are never copies of floating data (only non-float values,
  which decide data-dependent shapes, are kept);
- the first compiled call (a trace that the optimizer's new momentum buffers keep from being
  cached) and the call that compiles peak within 1.5x of the eager step's peak (measured:
  1.14x and 1.24x; before the fix 2.9x and 8.2x).
"""
import gc
import json
import os
import subprocess
import sys
import tracemalloc
import warnings

import numpy as np

import tracegrad as tg
import tracegrad.nn.functional as F
from tracegrad import nn, optim
from tracegrad.tracing import Tracer

WIDTH = 512


def _step(layers=4, batch=128):
    tg.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(WIDTH, WIDTH), nn.Tanh()]
    model = nn.Sequential(*mods[:-1])
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((batch, WIDTH)).astype(np.float32))
    y = tg.tensor(rng.standard_normal((batch, WIDTH)).astype(np.float32))

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, x, y


def _peaks(step, x, y, calls):
    """tracemalloc peak of each call, above what was allocated before it."""
    out = []
    for _ in range(calls):
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        step(x, y)
        out.append(tracemalloc.get_traced_memory()[1] - base)
        tracemalloc.stop()
    return out


def _traced_step():
    step, x, y = _step()
    step(x, y)                               # momentum buffers exist: the traced call updates them
    tracer = Tracer("step")
    tracer.add_arg(x, "x")
    tracer.add_arg(y, "y")
    with tracer:
        step(x, y)
    return tracer, (step, x, y)             # the program's own state stays alive


def test_tracer_owns_no_array_of_the_traced_step():
    gc.collect()
    tracemalloc.start()
    try:
        tracer, _program = _traced_step()
        gc.collect()
        with_tracer = tracemalloc.get_traced_memory()[0]
        del tracer
        gc.collect()
        owned = with_tracer - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    weight = WIDTH * WIDTH * 4
    assert owned < weight / 2, f"the tracer owns {owned} bytes (one weight: {weight})"


def test_tracer_keeps_only_non_float_values():
    tracer, _program = _traced_step()
    assert all(a.dtype.kind not in "fc" for a in tracer._kept.values())
    # every parameter was overwritten in place: no value recorded before the update survives
    # as a copy (a floating value the tracer still knows is the live data of some tensor)
    assert not any(a.base is None and a.flags.owndata and a.dtype.kind == "f"
                   and not any(a is t._data for t in tracer.live_tensors())
                   for a in tracer.values.values())


def _first_call_figures():
    """(eager peaks, compiled peaks, traces) of two calls each, in this process."""
    warnings.simplefilter("ignore")
    eager = _peaks(*_step(), calls=2)        # first step (creates momentum), steady step
    step, x, y = _step()
    compiled = tg.compile(step)
    return eager, _peaks(compiled, x, y, calls=2), compiled.stats.traces, len(compiled.programs)


def test_first_calls_peak_near_the_eager_step():
    """Measured in a fresh interpreter: in a long test run, when the cycle collector last
    ran decides how much of the passes' garbage a peak still holds (a CI run once saw the
    compiling call at twice its usual peak)."""
    code = ("import json, sys; sys.path[:0] = sys.argv[1:]; "
            "import test_memory_first_call as m; print(json.dumps(m._first_call_figures()))")
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    out = subprocess.run([sys.executable, "-c", code, here, root], capture_output=True,
                         text=True, check=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    eager, (first, compiling), traces, programs = json.loads(out.stdout.strip().splitlines()[-1])
    assert traces == 2 and programs, "expected: trace, then compile"
    assert first <= 1.5 * eager[0], (first, eager)
    assert compiling <= 1.5 * eager[1], (compiling, eager)
