"""Named result tuples like `torch.return_types.frexp(mantissa=..., exponent=...)`: a tuple
subclass per op, with a property per field and PyTorch's repr; cached by op name."""

_CLASSES = {}


def named(name, fields, values):
    """`values` as `torch.return_types.<name>` with `fields` as attribute names.

    >>> r = named("aminmax", ("min", "max"), (a, b)); r.min is a
    True
    """
    cls = _CLASSES.get(name)
    if cls is None:
        def rep(self):
            body = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
            return f"torch.return_types.{name}(\n{body})"
        ns = {f: property(lambda self, i=i: self[i]) for i, f in enumerate(fields)}
        ns.update(__slots__=(), __repr__=rep, _fields=tuple(fields), __module__=__name__)
        cls = _CLASSES[name] = type(name, (tuple,), ns)
    return cls(values)


def copy_out(res, out):
    """`res`, or with an `out=` tuple given, each result copied into its tensor there and
    `out` returned (the functions returning several tensors)."""
    if out is None:
        return res
    for o, r in zip(out, res):
        o.copy_(r)
    return out
