"""`explain(compiled_fn)`: one readable report of every cached path.

Per path: why it was traced, its guards with source lines and expected outcomes, the
forward and backward IR, what each pass removed or merged, and the saved values.
"""


def explain(cf):
    lines = [f"compiled function '{cf.name}': {len(cf.programs)} path(s); {cf.stats!r}"]
    for k, p in enumerate(cf.programs):
        lines.append("")
        lines.append(f"== path {k} (traced because: {getattr(p, 'trace_reason', '?')}) ==")
        if p.guards:
            lines.append("guards:")
            for gd in p.guards:
                lines.append(f"  {gd.kind}({gd.value!r}) == {gd.expected!r}    at {gd.site}")
        else:
            lines.append("guards: none")
        if p.captured:
            lines.append("captured tensors (read by reference each call): " + ", ".join(
                repr(v) for v in p.functional.inputs[p.n_args:]))
        lines.append("passes:")
        for name, st in p.part.forward.pass_log:
            lines.append(f"  {name}: " + ", ".join(f"{a}={b}" for a, b in st.items()))
        lines.append("forward:")
        lines.append(str(p.part.forward))
        if p.part.backward is not None:
            sv = ", ".join(f"{v!r}: {v.type}" for v in p.part.saved)
            lines.append(f"saved for backward ({len(p.part.saved)}): {sv}")
            lines.append("backward:")
            lines.append(str(p.part.backward))
        else:
            lines.append("backward: none (no input requires grad, or grad mode was off)")
    text = "\n".join(lines)
    return text
