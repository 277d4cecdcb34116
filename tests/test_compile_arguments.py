"""`tracegrad.compile` checks its own arguments at once, as `torch.compile` does."""
import pytest

import tracegrad as tg
from tracegrad.compiler.arguments import BACKENDS, InvalidBackend


@pytest.mark.parametrize("obj", [42, "loss_fn", 3.5, [1, 2], tg.ones(2)], ids=repr)
def test_non_callable_raises_type_error_at_once(obj):
    with pytest.raises(TypeError, match="expected a callable") as info:
        tg.compile(obj)
    assert type(obj).__name__ in str(info.value)
    assert isinstance(info.value, tg.TracegradError)


def test_non_callable_with_options_also_raises():
    with pytest.raises(TypeError, match="got int"):
        tg.compile(42, cache_limit=2)


@pytest.mark.parametrize("backend", ["nope", "NUMPY", "", None, 3])
def test_unknown_backend_names_the_valid_ones(backend):
    for call in (lambda: tg.compile(lambda x: x, backend=backend),
                 lambda: tg.compile(backend=backend)):          # decorator form, too
        with pytest.raises(RuntimeError, match="invalid backend") as info:
            call()
        message = str(info.value)
        assert all(repr(b) in message for b in ("numpy", "jax")), message
        assert isinstance(info.value, (InvalidBackend, ValueError))


def test_valid_calls_still_compile():
    assert "numpy" in BACKENDS and "jax" in BACKENDS
    f = tg.compile(lambda x: x * 2, backend="numpy")
    assert f(tg.ones(2)).tolist() == [2.0, 2.0]
    g = tg.compile(cache_limit=3)(lambda x: x + 1)
    assert g(tg.ones(1)).tolist() == [2.0]


def test_inputs_inside_containers_are_named_by_their_path():
    from collections import namedtuple
    Packed = namedtuple("Packed", "data batch_sizes")

    def f(batch, cfg, *rest, **kw):
        x, y = batch
        return (x * cfg["w"]).sum() + y.sum() + rest[0].sum() + kw["z"].sum() + \
            cfg["p"].batch_sizes.sum()

    c = tg.compile(f)
    for _ in range(2):
        c((tg.ones(2), tg.ones(3)), {"w": tg.ones(2), "p": Packed(tg.ones(1), tg.ones(1))},
          tg.ones(4), z=tg.ones(5))
    text = c.explain()
    for name in ("%batch[0]: f32[2]", "%batch[1]: f32[3]", "%cfg['w']: f32[2]",
                 "%cfg['p'].data: f32[1]", "%cfg['p'].batch_sizes: f32[1]", "%rest[0]: f32[4]",
                 "%kw['z']: f32[5]"):
        assert name in text
