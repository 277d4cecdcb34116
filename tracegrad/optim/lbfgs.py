"""`LBFGS`: limited-memory BFGS with PyTorch's options, closure API, state and numbers.

`step(closure)` runs up to `max_iter` iterations, each re-evaluating the loss and gradient
through `closure` (under enable_grad), over one flat view of every parameter: the search
direction comes from the two-loop recursion over the last `history_size` curvature pairs
(y = change of gradient, s = step), the step length is `lr` (the first iteration of a run
scales it by min(1, 1 / |g|_1)) or found by a strong-Wolfe line search with cubic
interpolation (`line_search_fn="strong_wolfe"`). The loop stops early on a small gradient
(`tolerance_grad`), a small change of loss or parameters (`tolerance_change`), or after
`max_eval` closure calls. State (kept on the first parameter, as PyTorch does):
`func_evals`, `n_iter`, `d`, `t`, `old_dirs`, `old_stps`, `ro`, `H_diag`,
`prev_flat_grad`, `prev_loss` (and `al`).

Note [LBFGS under compile]
Every iteration decides on values (`ys > 1e-10`, the stopping tests, the line search's
bracketing): a compiled step using it would be a different path per call, and the
history lists it grows are Python state a cached path cannot replay. So `step()` inside
`tracegrad.compile` reports an eager effect: the traced call computes eager's result and
calls like it run eagerly, with a warning naming the line (never a stale path).
"""
from .. import _effects, _mode
from .. import ops as O
from .._errors import TracegradValueError
from .._tensor import Tensor
from .optimizer import Optimizer


def _sqrt(x):
    return x.sqrt() if isinstance(x, Tensor) else x ** 0.5


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1, slope g1) and (x2, f2, slope g2),
    clamped to `bounds` (default: between x1 and x2); the midpoint when it has none."""
    if bounds is not None:
        lo, hi = bounds
    else:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = _sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, lo), hi)
    return (lo + hi) / 2.0


def _bracket_phase(obj_func, x, t, d, f, g, gtd, c1, c2, max_ls):
    """Grow the step until an interval holding a strong-Wolfe point is found (or one is)."""
    f_new, g_new = obj_func(x, t, d)
    evals, ls_iter = 1, 0
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            return ([t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()],
                    [gtd_prev, gtd_new], False, ls_iter, evals, t, f_new, g_new)
        if abs(gtd_new) <= -c2 * gtd:
            return [t], [f_new], [g_new], None, True, ls_iter, evals, t, f_new, g_new
        if gtd_new >= 0:
            return ([t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()],
                    [gtd_prev, gtd_new], False, ls_iter, evals, t, f_new, g_new)
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                          bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new.clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    # out of evaluations: the interval from the start to the last step
    return [0, t], [f, f_new], [g, g_new], None, False, ls_iter, evals, t, f_new, g_new


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step length `t` along `d` meeting the strong Wolfe conditions (bracketing, then
    zooming by cubic interpolation): (f_new, g_new, t, closure evaluations)."""
    d_norm = d.abs().max()
    g = g.clone()
    (bracket, bracket_f, bracket_g, bracket_gtd, done, ls_iter, evals, t, f_new,
     g_new) = _bracket_phase(obj_func, x, t, d, f, g, gtd, c1, c2, max_ls)
    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        hi_b, lo_b = max(bracket), min(bracket)
        eps = 0.1 * (hi_b - lo_b)
        if min(hi_b - t, t - lo_b) < eps:
            # too close to an end: move away from it if the last step made no progress
            if insuf_progress or t >= hi_b or t <= lo_b:
                t = hi_b - eps if abs(t - hi_b) < abs(t - lo_b) else lo_b + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.clone(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.clone(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """`LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
    tolerance_change=1e-9, history_size=100, line_search_fn=None)`; `step(closure)`.

    >>> opt = LBFGS(model.parameters(), line_search_fn="strong_wolfe")   # doctest: +SKIP
    >>> def closure():                                                   # doctest: +SKIP
    ...     opt.zero_grad(); loss = loss_fn(model(x), y); loss.backward(); return loss
    >>> opt.step(closure)                                                # doctest: +SKIP
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise TracegradValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise TracegradValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise TracegradValueError("LBFGS doesn't support per-parameter options "
                                      "(parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self):
        return O.cat([O.zeros(p.numel(), dtype=p.dtype) if p.grad is None
                      else p.grad.reshape(-1) for p in self._params], 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            n = p.numel()
            part = update[offset:offset + n].view_as(p)
            if isinstance(step_size, Tensor):
                p.add_(O.mul(part, step_size))
            else:
                p.add_(part, alpha=step_size)
            offset += n

    def _clone_param(self):
        return [p.clone() for p in self._params]

    def _set_param(self, params_data):
        for p, data in zip(self._params, params_data):
            p.copy_(data)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @_mode.no_grad()
    def step(self, closure):
        """Up to `max_iter` L-BFGS iterations; returns the loss the first closure call gave."""
        _effects.note("python", "LBFGS.step(): its iterations decide on values and grow "
                      "Python lists of history (Note [LBFGS under compile])")
        closure = _mode.enable_grad()(closure)
        group = self.param_groups[0]
        lr = group["lr"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max() <= group["tolerance_grad"]:
            return orig_loss
        run = _Run(self, state, group, closure, loss, flat_grad)
        run.iterate(lr)
        for key in ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad",
                    "prev_loss"):
            state[key] = getattr(run, key)
        return orig_loss


class _Run:
    """The iterations of one `LBFGS.step` call (its locals, as attributes)."""

    def __init__(self, opt, state, group, closure, loss, flat_grad):
        self.opt, self.state, self.group, self.closure = opt, state, group, closure
        self.loss, self.flat_grad = loss, flat_grad
        for key in ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad",
                    "prev_loss"):
            setattr(self, key, state.get(key))

    def direction(self):
        """The two-loop recursion: -H g from the stored curvature pairs."""
        st, g = self.state, self.flat_grad
        if st["n_iter"] == 1:
            self.d = O.neg(g)
            self.old_dirs, self.old_stps, self.ro, self.H_diag = [], [], [], 1
            return
        y = O.sub(g, self.prev_flat_grad)
        s = O.mul(self.d, self.t)
        ys = y.dot(s)
        if ys > 1e-10:
            if len(self.old_dirs) == self.group["history_size"]:
                self.old_dirs.pop(0)
                self.old_stps.pop(0)
                self.ro.pop(0)
            self.old_dirs.append(y)
            self.old_stps.append(s)
            self.ro.append(1.0 / ys)
            self.H_diag = ys / y.dot(y)
        n = len(self.old_dirs)
        if "al" not in st:
            st["al"] = [None] * self.group["history_size"]
        al = st["al"]
        q = O.neg(g)
        for i in range(n - 1, -1, -1):
            al[i] = self.old_stps[i].dot(q) * self.ro[i]
            q.add_(O.mul(self.old_dirs[i], -al[i]))
        self.d = r = O.mul(q, self.H_diag)
        for i in range(n):
            be_i = self.old_dirs[i].dot(r) * self.ro[i]
            r.add_(O.mul(self.old_stps[i], al[i] - be_i))

    def iterate(self, lr):
        grp, st, opt = self.group, self.state, self.opt
        max_iter, max_eval = grp["max_iter"], grp["max_eval"]
        tol_grad, tol_change = grp["tolerance_grad"], grp["tolerance_change"]
        evals, n_iter = 1, 0
        while n_iter < max_iter:
            n_iter += 1
            st["n_iter"] += 1
            self.direction()
            if self.prev_flat_grad is None:
                self.prev_flat_grad = self.flat_grad.clone()
            else:
                self.prev_flat_grad.copy_(self.flat_grad)
            self.prev_loss = self.loss
            if st["n_iter"] == 1:
                self.t = min(1.0, 1.0 / self.flat_grad.abs().sum()) * lr
            else:
                self.t = lr
            gtd = self.flat_grad.dot(self.d)
            if gtd > -tol_change:           # not a descent direction
                break
            ls_evals, opt_cond = 0, False
            if grp["line_search_fn"] is not None:
                if grp["line_search_fn"] != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = opt._clone_param()

                def obj_func(x, t, d):
                    return opt._directional_evaluate(self.closure, x, t, d)
                self.loss, self.flat_grad, self.t, ls_evals = _strong_wolfe(
                    obj_func, x_init, self.t, self.d, self.loss, self.flat_grad, gtd,
                    max_ls=max_eval - evals)
                opt._add_grad(self.t, self.d)
                opt_cond = self.flat_grad.abs().max() <= tol_grad
            else:
                opt._add_grad(self.t, self.d)
                if n_iter != max_iter:
                    with _mode.enable_grad():
                        self.loss = float(self.closure())
                    self.flat_grad = opt._gather_flat_grad()
                    opt_cond = self.flat_grad.abs().max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            st["func_evals"] += ls_evals
            if (n_iter == max_iter or evals >= max_eval or opt_cond
                    or O.mul(self.d, self.t).abs().max() <= tol_change
                    or abs(self.loss - self.prev_loss) < tol_change):
                break
