"""Dynamic-programming families: a table or a rolling array instead of recursion or subset enumeration."""
from __future__ import annotations

from functools import lru_cache

from ewa.data.mini.family import COST_LADDER, Family, arr, cost_sizes, poly_sizes

# Recursive calls per CPU second of each brute force below on CPython, which the test sizes assume: the
# largest test asks for ~12 time limits' worth of calls (0.5 s each), see COST_LADDER.
BIG_S = 12 * 0.5
STAIRS_CALLS_PER_S, COIN_CALLS_PER_S, GRID_CALLS_PER_S = 2e6, 1e7, 1.5e7


@lru_cache(maxsize=None)
def _stairs_calls(k: int, n_max: int = 200) -> tuple[int, ...]:
    calls = [1]
    for n in range(1, n_max + 1):
        calls.append(1 + sum(calls[n - s] for s in range(1, min(k, n) + 1)))
    return tuple(calls)


@lru_cache(maxsize=None)
def _coin_calls(coins: tuple[int, ...], n_max: int = 6000) -> tuple[int, ...]:
    """Calls f(n, 0) makes in the brute force below, for n = 0..n_max (bottom-up: no recursion)."""
    nxt = [1] * (n_max + 1)  # i == len(C): one call that returns 0
    for c in reversed(coins):
        cur = [1] * (n_max + 1)
        for n in range(1, n_max + 1):
            cur[n] = 1 + (cur[n - c] if n >= c else 1) + nxt[n]
        nxt = cur
    return tuple(nxt)


def _grid_calls(g: list[list[str]]) -> int:
    """Calls the recursive brute force makes on grid g: one per path prefix it explores."""
    n = len(g)
    reach = [[0] * (n + 1) for _ in range(n + 1)]
    reach[0][0], total = 1, 0
    for i in range(n + 1):
        for j in range(n + 1):
            v = reach[i][j]
            total += v
            if v and i < n and j < n and g[i][j] == "." and (i, j) != (n - 1, n - 1):
                reach[i + 1][j] += v
                reach[i][j + 1] += v
    return total


GRID_SIDES = [2, 3, 12, 13, 14, 15, 16, 17]
GRID_CALLS = [BIG_S * GRID_CALLS_PER_S * t for t in COST_LADDER]  # levels 2..7


def _grid(rng, n, P, level):
    """An n x n grid with ~10% walls. Walls make the brute force's work vary ~25x at one side length,
    so hidden grids are redrawn until that work is near the level's budget."""
    while True:
        for _ in range(300):
            g = [["#" if rng.random() < 0.1 else "." for _ in range(n)] for _ in range(n)]
            g[0][0] = g[n - 1][n - 1] = "."
            if level < 2 or 0.7 <= _grid_calls(g) / GRID_CALLS[level - 2] <= 1.5:
                return f"{n} {n}\n" + "\n".join("".join(row) for row in g) + "\n"
        n += 1


def _items(rng, n, P, level):
    w = P["W"]
    h = w // 2
    if level == 2:
        # A greedy-by-ratio trap: item A (h+1, 60) has the best ratio but excludes the pair B, C
        # (h, 55 each) that fills the capacity (W is even; fillers are heavier than h and worth little,
        # so no other pair fits). Greedy gets 60, the optimum is 110; reuse of B gives 110 too.
        items = [(h + 1, 60), (h, 55), (h, 55)] + [(rng.randint(h + 1, w), rng.randint(1, 50)) for _ in range(n - 3)]
        rng.shuffle(items)
        return f"{n}\n" + "".join(f"{a} {b}\n" for a, b in items)
    # Public items weigh over half the capacity, so reusing one is never possible there.
    lo, hi = (h + 1, w) if level < 2 else (1, w // 3)
    return f"{n}\n" + "".join(f"{rng.randint(lo, hi)} {rng.randint(1, 100)}\n" for _ in range(n))


SUBSET_SIZES = [2, 3, 8, 12, 15, 17, 20, 22]  # brute force enumerates 2^n subsets

FAMILIES = [
    Family(
        name="stairs_ways", topic="DP over a rolling window", difficulty="easy",
        statement="You climb a staircase of n steps, taking between 1 and {K} steps at a time. Print the "
                  "number of different ways to reach the top, modulo {M}. Input: one integer n. "
                  "Output: one integer.",
        brute="""
import sys
n=int(sys.stdin.read())
def f(n):
 if n==0:return 1
 return sum(f(n-s) for s in range(1,min(K,n)+1))
print(f(n)%M)
""",
        efficient="""
import sys
n=int(sys.stdin.read())
d=[1]+[0]*n
for i in range(1,n+1):d[i]=sum(d[max(0,i-K):i])%M
print(d[n])
""",
        wrong=("""
import sys
n=int(sys.stdin.read())
d=[1]+[0]*n
for i in range(1,n+1):d[i]=sum(d[max(0,i-K):i])
print(d[n])
""",),
        train=({"K": 2, "M": 1000}, {"K": 3, "M": 997}, {"K": 5, "M": 10007}, {"K": 6, "M": 5000}),
        heldout=({"K": 4, "M": 2023}, {"K": 7, "M": 9973}),
        sizes=lambda P: cost_sizes(_stairs_calls(P["K"]).__getitem__, BIG_S * STAIRS_CALLS_PER_S, tiny=(2, 4),
                                   n_max=200),
        gen=lambda rng, n, P, level: f"{n - rng.randint(0, 1) if 2 <= level <= 5 else n}\n",
        complexity=("O(K^n) recursion", "O(n K)"),
    ),
    Family(
        name="coin_combinations", topic="DP over amounts", difficulty="medium",
        statement="Coins have values {C} (unlimited supply). Count the ways to pay exactly n, where the "
                  "order of coins does not matter. Input: one integer n. Output: one integer.",
        brute="""
import sys
sys.setrecursionlimit(100000)
n=int(sys.stdin.read())
def f(n,i):
 if n==0:return 1
 if n<0 or i==len(C):return 0
 return f(n-C[i],i)+f(n,i+1)
print(f(n,0))
""",
        efficient="""
import sys
n=int(sys.stdin.read())
d=[1]+[0]*n
for c in C:
 for i in range(c,n+1):d[i]+=d[i-c]
print(d[n])
""",
        wrong=("""
import sys
n=int(sys.stdin.read())
d=[1]+[0]*n
for i in range(1,n+1):
 for c in C:
  if c<=i:d[i]+=d[i-c]
print(d[n])
""",),
        train=({"C": [1, 2, 5]}, {"C": [1, 3, 4]}, {"C": [2, 3, 7]}, {"C": [1, 5, 10, 25]}),
        heldout=({"C": [1, 2, 3]}, {"C": [3, 5, 11]}),
        # Public amounts up to the second coin: no two coin values mix, so order cannot matter yet.
        sizes=lambda P: cost_sizes(_coin_calls(tuple(P["C"])).__getitem__, BIG_S * COIN_CALLS_PER_S,
                                   tiny=(P["C"][1] - 1, P["C"][1]), n_max=6000),
        gen=lambda rng, n, P, level: f"{n - rng.randint(0, 2) if 2 <= level <= 5 else n}\n",
        complexity=("O(n^k) recursion", "O(n k)"),
    ),
    Family(
        name="grid_paths_mod", topic="grid DP", difficulty="medium",
        statement="A grid of r rows and c columns has free cells '.' and walls '#'. Moving only right or down "
                  "through free cells, count the paths from the top-left to the bottom-right cell, modulo "
                  "{M}. Input: r and c on the first line, then r lines of c characters. Output: the count.",
        brute="""
import sys
d=sys.stdin.read().split()
r,c=int(d[0]),int(d[1])
g=d[2:]
def f(i,j):
 if i>=r or j>=c or g[i][j]=='#':return 0
 if i==r-1 and j==c-1:return 1
 return f(i+1,j)+f(i,j+1)
print(f(0,0)%M)
""",
        efficient="""
import sys
d=sys.stdin.read().split()
r,c=int(d[0]),int(d[1])
g=d[2:]
w=[1]+[0]*(c-1)
for i in range(r):
 for j in range(c):
  if g[i][j]=='#':w[j]=0
  elif j:w[j]=(w[j]+w[j-1])%M
print(w[c-1])
""",
        wrong=("""
import sys
d=sys.stdin.read().split()
r,c=int(d[0]),int(d[1])
g=d[2:]
w=[1]*c
for i in range(r):
 for j in range(c):
  if g[i][j]=='#':w[j]=0
  elif i and j:w[j]=(w[j]+w[j-1])%M
print(w[c-1])
""",),
        train=({"M": 1000}, {"M": 997}, {"M": 12345}, {"M": 65521}), heldout=({"M": 10007}, {"M": 4096}),
        sizes=lambda P: GRID_SIDES,
        gen=_grid,
        complexity=("O(2^(r+c)) recursion", "O(r c)"),
    ),
    Family(
        name="max_sum_spaced", topic="DP with a gap", difficulty="hard",
        statement="You are given n integers. Choose some positions (possibly none) so that any two chosen "
                  "positions differ by at least {G}, maximizing the sum of the chosen values. " + "Input: n on "
                  "the first line, then the n integers on the second line. Output: the maximum sum.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
d=[0]*n
for i in range(n):
 d[i]=a[i]
 for j in range(i-G+1):d[i]=max(d[i],d[j]+a[i])
print(max([0]+d))
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
b=[0]*(n+G)
for i in range(n):b[i+G]=max(b[i+G-1],a[i]+b[i])
print(b[n+G-1])
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
b=[0]*(n+G)
for i in range(n):b[i+G]=max(b[i+G-1],a[i]+b[i+1])
print(b[n+G-1])
""",),
        train=({"G": 2}, {"G": 3}, {"G": 5}, {"G": 6}), heldout=({"G": 4}, {"G": 7}),
        sizes=lambda P: poly_sizes(10000, 2, tiny=(3, 5)),
        gen=lambda rng, n, P, level: arr([rng.randint(-50, 100) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="knapsack_capacity", topic="0/1 knapsack", difficulty="hard",
        statement="There are n items with weights w_i and values v_i. Choose items of total weight at most "
                  "{W}, each at most once, to maximize the total value. Input: n on the first line, then n "
                  "lines 'w_i v_i'. Output: the maximum total value.",
        brute="""
import sys
n,*d=map(int,sys.stdin.read().split())
best=0
for m in range(1<<n):
 w=v=0
 for i in range(n):
  if m>>i&1:
   w+=d[2*i]
   v+=d[2*i+1]
 if w<=W:best=max(best,v)
print(best)
""",
        efficient="""
import sys
n,*d=map(int,sys.stdin.read().split())
b=[0]*(W+1)
for i in range(n):
 w,v=d[2*i],d[2*i+1]
 for c in range(W,w-1,-1):b[c]=max(b[c],b[c-w]+v)
print(b[W])
""",
        wrong=("""
import sys
n,*d=map(int,sys.stdin.read().split())
b=[0]*(W+1)
for i in range(n):
 w,v=d[2*i],d[2*i+1]
 for c in range(w,W+1):b[c]=max(b[c],b[c-w]+v)
print(b[W])
""", """
import sys
n,*d=map(int,sys.stdin.read().split())
t=sorted(zip(d[0::2],d[1::2]),key=lambda p:-p[1]/p[0])
c=v=0
for w,x in t:
 if c+w<=W:
  c+=w
  v+=x
print(v)
"""),
        train=({"W": 50}, {"W": 100}, {"W": 200}, {"W": 400}), heldout=({"W": 150}, {"W": 300}),
        sizes=lambda P: SUBSET_SIZES,
        gen=_items,
        complexity=("O(2^n n)", "O(n W)"),
    ),
    Family(
        name="subset_sum_count", topic="counting DP", difficulty="medium",
        statement="You are given n positive integers. Count the subsets (by position) whose sum is exactly "
                  "{T}. Input: n on the first line, then the n integers on the second line. Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for m in range(1<<n):
 s=0
 for i in range(n):
  if m>>i&1:s+=a[i]
 if s==T:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c=[1]+[0]*T
for x in a:
 for s in range(T,x-1,-1):c[s]+=c[s-x]
print(c[T])
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c=[1]+[0]*T
for x in a:
 for s in range(x,T+1):c[s]+=c[s-x]
print(c[T])
""",),
        train=({"T": 20}, {"T": 50}, {"T": 100}, {"T": 250}), heldout=({"T": 35}, {"T": 160}),
        sizes=lambda P: SUBSET_SIZES,
        gen=lambda rng, n, P, level: arr([rng.randint(1, max(2, P["T"] // 3)) for _ in range(n)]),
        complexity=("O(2^n n)", "O(n T)"),
    ),
]
