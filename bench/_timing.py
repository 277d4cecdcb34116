"""Shared timing helpers for the benchmarks: interleaved rounds, medians, ratio tables.

Note [Interleaving]
On a shared machine the speed of the CPU drifts (other processes, frequency changes). Timing
implementation A for a while and then B for a while puts that drift into the A/B ratio.
`interleaved` instead runs every case once per round, for many rounds, so every case sees
the same conditions; medians over rounds then discard the outliers (a garbage collection,
a context switch) without averaging them in.

Each round visits the cases in a fresh random order (seeded, so runs are repeatable).
Rotating one fixed order would not do: a rotation keeps every case's neighbours, so one
case would always run right after the same other case and inherit its after-effects.

Note [Thread pools]
numpy's OpenBLAS and PyTorch's OpenMP each keep worker threads that busy-wait for a while
after a parallel call (OpenBLAS for about 2**28 cycles, ~0.1 s). On 2 cores, a case that
runs while the *other* library's workers still spin gets a fraction of the machine: measured
here, hand-written numpy timed right after PyTorch ran 2.4x slower than alone, and PyTorch
timed right after numpy up to 20x slower. So before its timed calls every case first runs
untimed for `settle` seconds (its own pool wakes, a foreign OpenMP pool goes quiet), and
the cases named in `apart` (those with a thread pool of their own, e.g. PyTorch) run at the
start of each round after a `pause` long enough for OpenBLAS's workers to fall asleep. With
both, every implementation's median matches its median measured alone in a process.

Garbage collection stays enabled: a library that allocates more objects pays for it in
real programs too, so hiding it would flatter the slower side.
"""
import random
import statistics
import time

_clock = time.perf_counter


def interleaved(cases, rounds, *, warmup=3, inner=1, settle=0.0, apart=(), pause=0.2,
                seed=0):
    """Time each callable in `cases` ({name: fn()}) once per round, in a random order.

    Returns {name: [seconds per call, one sample per round]}. Each sample is the mean of
    `inner` back-to-back calls (raise `inner` when one call is near the clock's resolution).
    `settle` seconds of untimed calls precede every sample; cases named in `apart` run first
    in each round, each after sleeping `pause` seconds (Note [Thread pools]).

    >>> s = interleaved({"noop": lambda: None}, rounds=5)
    >>> len(s["noop"])
    5
    """
    names = list(cases)
    together = [n for n in names if n not in apart]
    separate = [n for n in names if n in apart]
    for _ in range(warmup):
        for n in names:
            cases[n]()
    rng = random.Random(seed)
    samples = {n: [] for n in names}
    for _ in range(rounds):
        for n in separate:
            time.sleep(pause)
            samples[n].append(_sample(cases[n], inner, settle))
        for n in rng.sample(together, len(together)):
            samples[n].append(_sample(cases[n], inner, settle))
    return samples


def _sample(fn, inner, settle):
    """Seconds per call of `fn`, averaged over `inner` calls, after `settle` s untimed."""
    if settle:
        end = _clock() + settle
        fn()
        while _clock() < end:
            fn()
    t0 = _clock()
    for _ in range(inner):
        fn()
    return (_clock() - t0) / inner


def medians(samples):
    """{name: median of its samples}."""
    return {n: statistics.median(xs) for n, xs in samples.items()}


def spread(xs):
    """Interquartile range relative to the median (a noise indicator; 0.05 = 5%)."""
    if len(xs) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(xs, n=4)
    return (q3 - q1) / statistics.median(xs)


def ratio(meds, a, b):
    """meds[a] / meds[b], or None when either side is missing."""
    if a not in meds or b not in meds:
        return None
    return meds[a] / meds[b]


def format_table(headers, rows):
    """A plain-text table; numbers right-aligned, floats with 2 decimals, None as '-'.

    >>> print(format_table(["name", "us"], [["a", 1.5]]))
    name    us
    ----  ----
    a     1.50
    """
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.2f}"
        return str(v)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in text)) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               for i in range(len(headers))]

    def line(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(vals, widths, numeric)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in text]
    return "\n".join(out)


def ratio_rows(columns, pairs):
    """Rows `[f"{a} / {b}", ratio in column 1, ratio in column 2, ...]`.

    `columns` is a list of {name: median} dicts (e.g. one for forward+backward, one for
    forward only); pairs where `a` or `b` was not measured are left out.

    >>> ratio_rows([{"a": 2.0, "b": 1.0}], [("a", "b"), ("a", "c")])
    [['a / b', 2.0]]
    """
    rows = []
    for a, b in pairs:
        rs = [ratio(col, a, b) for col in columns]
        if all(r is not None for r in rs):
            rows.append([f"{a} / {b}", *rs])
    return rows
