"""The device the JAX backend's single-device programs run on (Note [Synchronous client]).

Note [Synchronous client]
JAX's CPU client dispatches asynchronously: a call of an executable whose cost analysis
counts 1000 flops or more is queued to a worker thread and returns at once, and whoever
reads the result waits for that worker. A JaxProgram always reads its results at once (they
become numpy arrays, or the backward program reads them next), so the queue buys it no
overlap, only a handoff between threads per call: the worker must wake, run, and wake the
caller. On a machine with few cores, busy with other work, that handoff costs more than the
program: measured on 2 cores, the 200-op chain's backward program (3172 flops, 62 kernels)
took 13 us run inline and 21 us queued, and alternating it with the forward program (723
flops, so already inline) 69 us a pair instead of 23 (a hand-made pair of `jax.jit`
executables alternating showed the same: 62 us against 21). JAX's switch,
`jax_cpu_enable_async_dispatch`, is process-wide and only read when JAX first makes its CPU
client, so the backend must not flip it behind the user's back.

So the backend makes a CPU client of its own, synchronous, once per process, and compiles
its single-device programs for that client's device (`SingleDeviceSharding`): every call
runs on the calling thread. Nothing of the user's JAX is touched: their arrays and jits stay
on JAX's client, and tracegrad tensors are numpy arrays, which either client reads in place
when aligned (Note [Aligned host arrays]). Values a forward program hands to its backward
program (saved values) stay on the private client. Data-parallel programs keep JAX's own
devices (a mesh over `jax.devices()`: the sharded step is JAX's partitioner's, and several
devices run in parallel anyway). When JAX's default platform is not the CPU, the user
turned async dispatch off already, or this JAX cannot make such a client (the call is a
private API, `jax._src.lib.xla_client.make_cpu_client`), `device()` is JAX's default device.

Note [Queued dispatch for large programs]
The handoff costs tens of microseconds; running a large program on the calling thread costs
more. Measured on 2 cores with the 784-512-512-10 training step written by hand in JAX
(2.4 ms), compiled for this private synchronous client against JAX's own: 1.05x in paired
runs alternating with JAX's step, 1.00x to 1.04x alone; for a private client made
asynchronous, 1.00x. So a path whose programs are large (`is_large`: an estimate of their
floating-point work from the IR, at least LARGE_FLOPS, about a millisecond here) runs all
its programs (forward, backward, speculative) on JAX's default device, dispatching as JAX
does; small paths keep the synchronous client. One path's programs share one device, since
saved values pass from its forward program to its backward program as device arrays. A
program reads its results before it returns (program.py), so queued or not, a call is over
when it returns.
"""
import logging
import math
import threading

import jax

log = logging.getLogger("tracegrad.compile")

_lock = threading.Lock()
_device = None


LARGE_FLOPS = 1e7
_CONTRACTIONS = {"mm", "mm_tn", "matmul", "addmm", "baddbmm", "linear", "linear_nobias",
                 "dot", "einsum"}


def _numel(v):
    return math.prod(v.type.shape)


def flops(graph):
    """A rough count of `graph`'s floating-point work: an element per output element, and
    for a contraction 2 * output elements * the contracted length, taken as
    sqrt(a * b / out) for operands of a and b elements (exact for a matrix product)."""
    total = 0
    for node in graph.nodes:
        out = node.output
        if out is None or not hasattr(out, "type"):
            continue
        n = _numel(out)
        ins = node.value_inputs()
        if node.prim.name in _CONTRACTIONS and len(ins) >= 2 and n:
            a, b = _numel(ins[-2]), _numel(ins[-1])
            n *= 2 * max(1.0, math.sqrt(a * b / n))
        total += n
    return total


def is_large(*graphs):
    """Whether programs of `graphs` (None skipped) run queued on JAX's default device (Note
    [Queued dispatch for large programs])."""
    return sum(flops(g) for g in graphs if g is not None) >= LARGE_FLOPS


def device(large=False):
    """The device single-device programs are compiled for (see the Notes): JAX's default
    device for a large path's programs, the synchronous client's otherwise."""
    if large:
        return jax.devices()[0]
    global _device
    if _device is None:
        with _lock:
            if _device is None:
                _device = _make()
    return _device


def _make():
    default = jax.devices()[0]
    if jax.default_backend() != "cpu" or not jax.config.read("jax_cpu_enable_async_dispatch"):
        return default
    try:                                 # a private API: another JAX version may lack it
        from jax._src.lib import xla_client
        return xla_client.make_cpu_client(asynchronous=False, num_devices=1).devices()[0]
    except Exception as e:               # (then JAX's own device, dispatching as it does)
        log.info("tracegrad: no synchronous CPU client (%s); using %s", e, default)
        return default
