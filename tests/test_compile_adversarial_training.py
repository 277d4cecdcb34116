"""Adversarial review of compiled PyTorch-style training code: each test is a defect found
by running whole training steps (and `tg.compile(model)`) eagerly and compiled side by side,
written the way a user writes it. Compiled must equal eager (bitwise on numpy), or run
eagerly with a warning."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


def _eager_and_compiled(make, calls):
    """Run `calls(f, objects)` on a fresh `make()` eagerly and compiled; both results."""
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        f, objects = make(compiled)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(calls(f, objects))
    return out


# --- attributes a traced call creates (Note [New attributes] in compiler/state.py) ---

class _Stash(nn.Module):
    """A forward that keeps an activation for later inspection, and counts its calls."""

    def __init__(self, count):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.count = count

    def forward(self, x):
        h = self.fc(x)
        self.feat = h.detach()
        if self.count:
            self.calls = getattr(self, "calls", 0) + 1
        return h.relu()


@pytest.mark.parametrize("count", [False, True])
def test_a_forward_stashing_an_activation_in_a_new_attribute_is_never_stale(count):
    def make(compiled):
        m = _Stash(count)
        return (tg.compile(m) if compiled else m), m

    def calls(f, m):
        seen = []
        for k in range(4):
            y = f(tg.randn(2, 3))
            seen.append((y.detach().numpy().tobytes(), m.feat.numpy().tobytes(),
                         getattr(m, "calls", None)))
        return seen
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager


def test_a_step_recording_its_loss_on_a_plain_object_is_never_stale():
    class Log:
        pass

    def make(compiled):
        model = nn.Linear(3, 1)
        opt = tg.optim.SGD(model.parameters(), lr=0.1)
        log = Log()

        def step(x):
            opt.zero_grad(set_to_none=False)
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            log.last = loss.detach()
            return loss
        model(tg.randn(1, 3)).sum().backward()       # .grad set: no retrace for them
        return (tg.compile(step) if compiled else step), log

    def calls(f, log):
        return [(f(tg.randn(4, 3)).item(), log.last.item()) for _ in range(4)]
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager
