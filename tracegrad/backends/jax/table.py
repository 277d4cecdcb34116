"""The lowering-rule table: `RULES[primitive] -> rule`, keyed by the Primitive object.

A rule turns one IR node into jax.numpy / jax.lax operations:

    rule(ctx, node, *operands) -> jax array

`operands` are jax arrays for IR Values and the node's literals as they are (Python numbers,
tuples, numpy arrays); the node's attributes are `node.attrs`. The lowering casts a rule's
result to the node's IR dtype and checks its shape against the IR type, so a rule may rely on
jax's promotion and need not repeat numpy's. A rule that cannot lower one particular node
(a boolean mask, whose result shape is data) raises `Unsupported`; the path then runs on the
numpy backend. `ctx.check(bad)` records a 0-d bool computed in the program: when it comes
out True on a call (an integer division by zero, an index out of range), that call is run
again on the numpy backend, which raises exactly the error eager execution raises.
"""
RULES = {}


class Unsupported(Exception):
    """This node cannot be lowered; the path falls back to the numpy backend."""

    def __init__(self, prim, why=""):
        super().__init__(f"{prim.name}: {why}" if why else prim.name)
        self.prim = prim


def register(*prims):
    """Decorator: `@register(ADD, ADD_)` declares the rule for those primitives."""
    def deco(fn):
        for p in prims:
            RULES[p] = fn
        return fn
    return deco


def simple(prim, jfn):
    """A rule applying `jfn` to the operands (no attributes)."""
    RULES[prim] = lambda ctx, node, *args: jfn(*args)


DRAWS = {}      # random primitive -> (draw, spec): Note [Host draws] in lower.py


def host_draw(prim, spec):
    """Decorator: `@host_draw(MULTINOMIAL, spec)` declares the host half of a random draw whose
    distribution reads traced values: `draw(node)` draws its raw random numbers from the
    node's generator, an array of `spec(node) -> (shape, numpy dtype)`; the primitive's rule
    reads them as `ctx.draws[node]`."""
    def deco(fn):
        DRAWS[prim] = (fn, spec)
        return fn
    return deco
