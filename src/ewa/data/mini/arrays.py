"""Families on contiguous subarrays: prefix sums, Kadane, running minimum, sum identities."""
from __future__ import annotations

from ewa.data.mini.family import Family, arr, poly_sizes

ARRAY_IN = "Input: n on the first line, then the n integers on the second line."

FAMILIES = [
    Family(
        name="subarray_sum_equals", topic="prefix sums", difficulty="medium",
        statement="You are given n integers. Count the non-empty contiguous subarrays whose sum is exactly "
                  "{T}. " + ARRAY_IN + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 s=0
 for j in range(i,n):
  s+=a[j]
  if s==T:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c={0:1}
s=ans=0
for x in a:
 s+=x
 ans+=c.get(s-T,0)
 c[s]=c.get(s,0)+1
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c={}
s=ans=0
for x in a:
 s+=x
 ans+=c.get(s-T,0)
 c[s]=c.get(s,0)+1
print(ans)
""",),
        train=({"T": 1}, {"T": 2}, {"T": 4}, {"T": 5}), heldout=({"T": 3}, {"T": 6}),
        sizes=lambda P: poly_sizes(11000, 2),
        gen=lambda rng, n, P, level: arr([rng.randint(-4, 4) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="subarray_sum_divisible", topic="prefix sums", difficulty="medium",
        statement="You are given n non-negative integers. Count the non-empty contiguous subarrays whose sum "
                  "is divisible by {D}. " + ARRAY_IN + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 s=0
 for j in range(i,n):
  s+=a[j]
  if s%D==0:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
c=[0]*D
c[0]=1
s=ans=0
for x in a:
 s=(s+x)%D
 ans+=c[s]
 c[s]+=1
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
c=[0]*D
s=ans=0
for x in a:
 s=(s+x)%D
 ans+=c[s]
 c[s]+=1
print(ans)
""",),
        train=({"D": 3}, {"D": 5}, {"D": 6}, {"D": 9}), heldout=({"D": 4}, {"D": 7}),
        sizes=lambda P: poly_sizes(11000, 2),
        gen=lambda rng, n, P, level: arr([rng.randint(0, 30) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="max_sum_min_length", topic="prefix sums", difficulty="hard",
        statement="You are given n integers (n >= {W}). Find the maximum sum of a contiguous subarray of "
                  "length at least {W}. " + ARRAY_IN + " Output: the maximum sum.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
best=-10**18
for i in range(n):
 s=0
 for j in range(i,n):
  s+=a[j]
  if j-i+1>=W and s>best:best=s
print(best)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
p=[0]
for x in a:p.append(p[-1]+x)
best=-10**18
m=10**18
for j in range(W,n+1):
 m=min(m,p[j-W])
 best=max(best,p[j]-m)
print(best)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
p=[0]
for x in a:p.append(p[-1]+x)
best=-10**18
m=10**18
for j in range(W,n+1):
 m=min(m,p[j-W+1])
 best=max(best,p[j]-m)
print(best)
""",),
        train=({"W": 2}, {"W": 3}, {"W": 5}, {"W": 6}), heldout=({"W": 4}, {"W": 8}),
        sizes=lambda P: poly_sizes(10000, 2, tiny=(P["W"] + 1, P["W"] + 4)),
        # Mostly negative with rare spikes, so the length bound matters; public tests: one loss, then gains.
        gen=lambda rng, n, P, level: arr([-rng.randint(1, 9)] + [rng.randint(1, 9) for _ in range(n - 1)]
                                         if level < 2 else
                                         [rng.randint(20, 60) if rng.random() < 0.02 else -rng.randint(5, 15)
                                          for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="max_score_subarray", topic="Kadane", difficulty="medium",
        statement="You are given n integers. The score of a non-empty contiguous subarray is its sum minus "
                  "{C} times its length. Find the maximum score. " + ARRAY_IN + " Output: the maximum score.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
best=-10**18
for i in range(n):
 s=0
 for j in range(i,n):
  s+=a[j]-C
  if s>best:best=s
print(best)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
best=-10**18
s=0
for x in a:
 s=max(s,0)+x-C
 best=max(best,s)
print(best)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
best=s=0
for x in a:
 s=max(s,0)+x-C
 best=max(best,s)
print(best)
""",),
        train=({"C": 1}, {"C": 2}, {"C": 4}, {"C": 5}), heldout=({"C": 3}, {"C": 7}),
        sizes=lambda P: poly_sizes(11000, 2),
        # Level 2 is the all-losing edge case (every element below C): the answer is negative.
        gen=lambda rng, n, P, level: arr([rng.randint(-20, P["C"] - 1) if level == 2 else rng.randint(-10, 20)
                                          for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="stock_profit_fee", topic="running minimum", difficulty="easy",
        statement="You are given the prices of a stock on n days. Buy once and sell on a later day; a trade "
                  "costs a fee of {F}. Print the maximum profit, or 0 if no trade makes a profit. " + ARRAY_IN,
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
best=0
for i in range(n):
 for j in range(i+1,n):
  best=max(best,a[j]-a[i]-F)
print(best)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
best=0
m=a[0]
for x in a:
 m=min(m,x)
 best=max(best,x-m-F)
print(best)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
best=-10**18
m=a[0]
for x in a[1:]:
 best=max(best,x-m-F)
 m=min(m,x)
print(best)
""",),
        train=({"F": 1}, {"F": 3}, {"F": 5}, {"F": 10}), heldout=({"F": 2}, {"F": 7}),
        sizes=lambda P: poly_sizes(9000, 2, tiny=(3, 5)),
        # Level 2 falls every day (no profitable trade); the rest wander randomly.
        gen=lambda rng, n, P, level: arr(sorted((rng.randint(1, 1000) for _ in range(n)), reverse=True)
                                         if level == 2 else [rng.randint(1, 1000) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="pair_products_mod", topic="sum identities", difficulty="medium",
        statement="You are given n integers. Print the sum of a_i * a_j over all pairs i < j, modulo {M}. "
                  + ARRAY_IN,
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
s=0
for i in range(n):
 for j in range(i+1,n):
  s+=a[i]*a[j]
print(s%M)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
s=sum(a)
q=sum(x*x for x in a)
print((s*s-q)//2%M)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
s=sum(a)%M
q=sum(x*x for x in a)%M
print((s*s-q)//2%M)
""",),
        train=({"M": 1009}, {"M": 10007}, {"M": 100003}, {"M": 998244353}), heldout=({"M": 3001}, {"M": 1000003}),
        sizes=lambda P: poly_sizes(10000, 2, tiny=(2, 3)),
        gen=lambda rng, n, P, level: arr([rng.randint(1, 30 if level < 2 else 10**6) for _ in range(n)]),
        complexity=("O(n^2)", "O(n)"),
    ),
]
