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

Tried and dropped (November 2026): running large programs (estimated from the IR at 10^7
flops or more) queued on JAX's default device instead. Timed as the benchmark times (each
case repeated, bench/_timing.py), the 784-512-512-10 training step with SGD momentum was 2
to 5% slower queued, the 50-layer one 1 to 2%; only when alternating call by call with a
hand-written JAX step on JAX's own client was it faster (2.5%), since two clients' thread
pools then take turns.
"""
import logging
import threading

import jax

log = logging.getLogger("tracegrad.compile")

_lock = threading.Lock()
_device = None


def device():
    """The device single-device programs are compiled for (see the Note)."""
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
