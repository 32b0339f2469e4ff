"""Cost model of the distributed ST-HOSVD and CP-ALS of tenfold::mpi (docs/distributed.md).

Per process, for the grid choose_grid picks: flops, words received and messages of each
phase, as the library implements them (tree broadcasts and reductions: log2 p messages;
all-gathers, all-to-alls and reduce-scatters: bandwidth-optimal, (p-1)/p of the data).
Prints the table of docs/distributed.md. Usage: python3 bench/mpi_cost_model.py
"""
import math

DATASETS = {  # TuckerMPI papers' combustion data sets (NumPy shapes) and assumed ranks
    "HCCI 672x672x33x627 (74 GB)": ((672, 672, 33, 627), (279, 250, 28, 37)),
    "TJLR 460x700x360x35x16 (0.52 TB)": ((460, 700, 360, 35, 16), (131, 192, 144, 27, 15)),
    "SP 500x500x500x11x400 (4.4 TB)": ((500, 500, 500, 11, 400), (81, 129, 127, 7, 328)),
}
CP_RANK = 32


def choose_grid(p, dims):
    primes, rest, f = [], p, 2
    while rest > 1:
        if rest % f == 0:
            primes.append(f)
            rest //= f
        else:
            f = rest if f * f > rest else f + 1
    shape = [1] * len(dims)
    for f in sorted(primes, reverse=True):
        ok = [n for n in range(len(dims)) if shape[n] * f <= dims[n]]
        best = max(ok, key=lambda n: (dims[n] / shape[n], -n))
        shape[best] *= f
    return shape


def lg(p):
    return math.ceil(math.log2(p)) if p > 1 else 0


def sthosvd(dims, ranks, grid):
    """Sum over the modes (in order of decreasing I_n / r_n) of Gram + TTM costs; also the
    Gram's words had the fibre's blocks been broadcast instead (the scheme before the
    redistribution: (P_n - 1) B plus the strips' reduction and gathering)."""
    cur = list(dims)
    order = sorted(range(len(dims)), key=lambda n: -dims[n] / ranks[n])
    p = math.prod(grid)
    flops = words = msgs = gram_words = broadcast_words = 0.0
    for n in order:
        block = math.prod(math.ceil(c / g) for c, g in zip(cur, grid))
        pn, i = grid[n], dims[n]
        # Gram: all-to-all within the fibre ((P_n - 1)/P_n of the block leaves), local
        # syrk on I_n x B/I_n (B I_n flops), I_n^2 reduced and broadcast over all p;
        # eigensolver replicated (about 9 I^3 flops)
        flops += block * i + 9 * i ** 3
        gram = block * (pn - 1) / pn + 2 * i * i
        gram_words += gram
        broadcast_words += (pn - 1) * block + 2 * i * i / pn + i * i * (pn - 1) / pn
        words += gram
        msgs += (pn - 1) + 2 * lg(p)
        # TTM: local product, reduce-scatter within the fibre
        flops += 2 * block * ranks[n]
        words += block / math.ceil(i / pn) * ranks[n] * (pn - 1) / pn
        msgs += lg(pn)
        cur[n] = ranks[n]
    return flops, words, msgs, gram_words, broadcast_words


def cp_iteration(dims, r, grid):
    p = math.prod(grid)
    block = math.prod(math.ceil(c / g) for c, g in zip(dims, grid))
    # Tensor-sized passes over the block per sweep: the dimension tree's two, or for
    # order 3 one per two updates (docs/algorithms.md)
    flops = (3 if len(dims) == 3 else 4) * block * r
    words = msgs = 0.0
    for n, i in enumerate(dims):
        pn = grid[n]
        flops += 2 * i * r * r + r ** 3 / 3  # replicated solve
        words += 2 * i * r / pn + i * r * (pn - 1) / pn
        msgs += 2 * lg(p // pn) + lg(pn)
    return flops, words, msgs


def main():
    print("| data set | P | grid | ST-HOSVD GFLOP | ST-HOSVD MWords | of which Gram | Gram by "
          "broadcasts | msgs | CP iter GFLOP | CP iter MWords | msgs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, (dims, ranks) in DATASETS.items():
        for p in (64, 256, 1024, 4096):
            grid = choose_grid(p, dims)
            st = sthosvd(dims, ranks, grid)
            cp = cp_iteration(dims, CP_RANK, grid)
            print(f"| {name} | {p} | {'x'.join(map(str, grid))} | {st[0] / 1e9:.1f} | "
                  f"{st[1] / 1e6:.1f} | {st[3] / 1e6:.1f} | {st[4] / 1e6:.1f} | {st[2]:.0f} | {cp[0] / 1e9:.2f} | {cp[1] / 1e6:.3f} | "
                  f"{cp[2]:.0f} |")


main()
