"""Families solved by counting with a dictionary instead of comparing every pair (or triple)."""
from __future__ import annotations

from ewa.data.mini.family import Family, arr, poly_sizes

ARRAY_IN = "Input: n on the first line, then the n integers on the second line."


def _words(rng, n, P, level):
    k = P["K"]
    return f"{n}\n" + " ".join("".join(rng.choice("ab") for _ in range(rng.randint(1, k + 2))) for _ in range(n)) + "\n"


FAMILIES = [
    Family(
        name="two_sum_count", topic="hashing", difficulty="easy",
        statement="You are given n integers. Count the pairs i < j with a_i + a_j = {T}. " + ARRAY_IN
                  + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 for j in range(i+1,n):
  if a[i]+a[j]==T:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
ans=0
for x in a:
 ans+=c.get(T-x,0)
 c[x]=c.get(x,0)+1
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
for x in a:c[x]=c.get(x,0)+1
print(sum(c.get(T-x,0) for x in a)//2)
""",),
        train=({"T": 10}, {"T": 40}, {"T": 100}, {"T": 250}), heldout=({"T": 24}, {"T": 160}),
        sizes=lambda P: poly_sizes(12000, 2),
        gen=lambda rng, n, P, level: arr([rng.randint(0, P["T"]) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="positions_value_k_times", topic="counting", difficulty="easy",
        statement="You are given n integers. Count the positions i whose value a_i occurs exactly {K} times "
                  "in the whole list. " + ARRAY_IN + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for x in a:
 if a.count(x)==K:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
for x in a:c[x]=c.get(x,0)+1
print(sum(1 for x in a if c[x]==K))
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
for x in a:c[x]=c.get(x,0)+1
print(sum(1 for x in a if c[x]>=K))
""",),
        train=({"K": 1}, {"K": 2}, {"K": 4}, {"K": 5}), heldout=({"K": 3}, {"K": 6}),
        sizes=lambda P: poly_sizes(30000, 2, tiny=(P["K"] + 1, P["K"] + 4)),
        gen=lambda rng, n, P, level: arr([rng.randint(1000, 1000 + max(2, n // P["K"])) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="equal_pairs_far_apart", topic="hashing", difficulty="medium",
        statement="You are given n integers. Count the pairs i < j with a_i = a_j and j - i >= {D}. "
                  + ARRAY_IN + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 for j in range(i+D,n):
  if a[i]==a[j]:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
ans=0
for j in range(D,n):
 x=a[j-D]
 c[x]=c.get(x,0)+1
 ans+=c.get(a[j],0)
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
ans=0
for j in range(D+1,n):
 x=a[j-D-1]
 c[x]=c.get(x,0)+1
 ans+=c.get(a[j],0)
print(ans)
""",),
        train=({"D": 1}, {"D": 3}, {"D": 4}, {"D": 10}), heldout=({"D": 2}, {"D": 6}),
        sizes=lambda P: poly_sizes(12000, 2, tiny=(P["D"] + 2, P["D"] + 5)),
        gen=lambda rng, n, P, level: arr([rng.randint(1, max(3, n // 3)) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="same_prefix_pairs", topic="hashing", difficulty="medium",
        statement="You are given n words. Two words match if both have at least {K} letters and their first "
                  "{K} letters are equal. Count the matching pairs. Input: n on the first line, then the n "
                  "words separated by spaces. Output: the count.",
        brute="""
import sys
n,*w=sys.stdin.read().split()
n=int(n)
ans=0
for i in range(n):
 for j in range(i+1,n):
  if len(w[i])>=K and len(w[j])>=K and w[i][:K]==w[j][:K]:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*w=sys.stdin.read().split()
c={}
for x in w:
 if len(x)>=K:c[x[:K]]=c.get(x[:K],0)+1
print(sum(v*(v-1)//2 for v in c.values()))
""",
        wrong=("""
import sys
n,*w=sys.stdin.read().split()
c={}
for x in w:c[x[:K]]=c.get(x[:K],0)+1
print(sum(v*(v-1)//2 for v in c.values()))
""",),
        train=({"K": 2}, {"K": 3}, {"K": 5}, {"K": 6}), heldout=({"K": 4}, {"K": 7}),
        sizes=lambda P: poly_sizes(9000, 2, tiny=(3, 5)),
        gen=_words,
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="pairs_with_difference", topic="hashing", difficulty="easy",
        statement="You are given n integers. Count the pairs i < j with |a_i - a_j| = {K}. " + ARRAY_IN
                  + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 for j in range(i+1,n):
  if abs(a[i]-a[j])==K:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
for x in a:c[x]=c.get(x,0)+1
print(sum(v*c.get(x+K,0) for x,v in c.items()))
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
s=set(a)
print(sum(1 for x in s if x+K in s))
""",),
        train=({"K": 1}, {"K": 2}, {"K": 5}, {"K": 7}), heldout=({"K": 3}, {"K": 12}),
        sizes=lambda P: poly_sizes(11000, 2),
        # Public tests hold distinct values; larger ones repeat values, which the set-based variant misses.
        gen=lambda rng, n, P, level: arr(rng.sample(range(1, 4 * n + 20), n) if level < 2 else
                                         [rng.randint(1, 2 * n) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="triplet_sum_count", topic="hashing", difficulty="hard",
        statement="You are given n integers. Count the triples i < j < k with a_i + a_j + a_k = {T}. "
                  + ARRAY_IN + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 for j in range(i+1,n):
  for k in range(j+1,n):
   if a[i]+a[j]+a[k]==T:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
ans=0
for j in range(n):
 for k in range(j+1,n):ans+=c.get(T-a[j]-a[k],0)
 c[a[j]]=c.get(a[j],0)+1
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
ans=0
for j in range(n):
 c[a[j]]=c.get(a[j],0)+1
 for k in range(j+1,n):ans+=c.get(T-a[j]-a[k],0)
print(ans)
""",),
        train=({"T": 30}, {"T": 60}, {"T": 120}, {"T": 200}), heldout=({"T": 45}, {"T": 150}),
        sizes=lambda P: poly_sizes(900, 3, tiny=(4, 7)),
        gen=lambda rng, n, P, level: arr([rng.randint(0, P["T"]) for _ in range(n)]),
        complexity=("O(n^3)", "O(n^2)"),
    ),
    Family(
        name="pair_sum_divisible", topic="counting residues", difficulty="medium",
        statement="You are given n integers. Count the pairs i < j whose sum a_i + a_j is divisible by {K}. "
                  + ARRAY_IN + " Output: the count.",
        # The brute force lists every pair sum first: its memory grows with n^2 as well as its time.
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
p=[a[i]+a[j] for i in range(n) for j in range(i+1,n)]
print(sum(1 for s in p if s%K==0))
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c=[0]*K
ans=0
for x in a:
 ans+=c[-x%K]
 c[x%K]+=1
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c=[0]*K
for x in a:c[x%K]+=1
print(sum(c[r]*c[-r%K] for r in range(K))//2)
""",),
        train=({"K": 3}, {"K": 4}, {"K": 7}, {"K": 10}), heldout=({"K": 6}, {"K": 9}),
        sizes=lambda P: poly_sizes(5000, 2),
        gen=lambda rng, n, P, level: arr([rng.randint(1000, 10**6) for _ in range(n)]),
        complexity=("O(n^2) time and memory", "O(n)"),
        memory_limit_mb=64,
    ),
]
