"""Shared timing helpers for the benchmarks: interleaved rounds, medians, ratio tables.

Note [Interleaving]
On a shared machine the speed of the CPU drifts (other processes, frequency changes). Timing
implementation A for a while and then B for a while puts that drift into the A/B ratio.
`interleaved` instead runs every case once per round, round-robin, for many rounds, so
every case sees the same conditions; medians over rounds then discard the outliers (a
garbage collection, a context switch) without averaging them in.

Garbage collection stays enabled: a library that allocates more objects pays for it in
real programs too, so hiding it would flatter the slower side.
"""
import statistics
import time

_clock = time.perf_counter


def interleaved(cases, rounds, *, warmup=3, inner=1):
    """Time each callable in `cases` ({name: fn()}) once per round, round-robin.

    Returns {name: [seconds per call, one sample per round]}. Each sample is the mean of
    `inner` back-to-back calls (raise `inner` when one call is near the clock's resolution).

    >>> s = interleaved({"noop": lambda: None}, rounds=5)
    >>> len(s["noop"])
    5
    """
    names = list(cases)
    for _ in range(warmup):
        for n in names:
            cases[n]()
    samples = {n: [] for n in names}
    for r in range(rounds):
        # rotate the starting case so none always runs right after the same neighbour
        k = r % len(names)
        for n in names[k:] + names[:k]:
            fn = cases[n]
            t0 = _clock()
            for _ in range(inner):
                fn()
            samples[n].append((_clock() - t0) / inner)
    return samples


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
