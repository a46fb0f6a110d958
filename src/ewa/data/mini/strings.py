"""String families: prefix counts, expanding around centres and sets of slices instead of rescanning."""
from __future__ import annotations

from ewa.data.mini.family import Family, poly_sizes

STRING_IN = "Input: n on the first line, then a string of n characters on the second line."


def _text(s: str) -> str:
    return f"{len(s)}\n{s}\n"


def _bits(rng, n, P, level):
    return _text("".join("1" if rng.random() < 0.3 else "0" for _ in range(n)))


def _letters(rng, n, P, level):
    return _text("".join(rng.choice("abc") for _ in range(n)))


def _windows(rng, n, P, level):
    if level < 2:  # public tests have period n - K: their last window repeats their first
        t = [rng.choice("abcdefghij") for _ in range(n - P["K"])]
        return _text("".join(t[i % len(t)] for i in range(n)))
    return _text("".join(rng.choice("abcdefghij") for _ in range(n)))


FAMILIES = [
    Family(
        name="substrings_k_ones", topic="prefix counts", difficulty="medium",
        statement="You are given a binary string. Count its non-empty substrings (by position) that contain "
                  "exactly {K} characters '1'. " + STRING_IN + " Output: the count.",
        brute="""
import sys
s=sys.stdin.read().split()[1]
n=len(s)
ans=0
for i in range(n):
 c=0
 for j in range(i,n):
  if s[j]=='1':c+=1
  if c==K:ans+=1
print(ans)
""",
        efficient="""
import sys
s=sys.stdin.read().split()[1]
c=[0]*(len(s)+1)
c[0]=1
p=ans=0
for ch in s:
 if ch=='1':p+=1
 if p>=K:ans+=c[p-K]
 c[p]+=1
print(ans)
""",
        wrong=("""
import sys
s=sys.stdin.read().split()[1]
c=[0]*(len(s)+1)
c[0]=1
p=ans=0
for ch in s:
 if ch=='1':p+=1
 if p>K:ans+=c[p-K]
 c[p]+=1
print(ans)
""",),
        train=({"K": 1}, {"K": 2}, {"K": 4}, {"K": 6}), heldout=({"K": 3}, {"K": 5}),
        sizes=lambda P: poly_sizes(11000, 2, tiny=(4, 8)),
        gen=_bits,
        complexity=("O(n^2)", "O(n)"),
    ),
    Family(
        name="long_palindromes", topic="expand around centre", difficulty="hard",
        statement="You are given a string. Count its substrings (by position) of length at least {L} that "
                  "are palindromes. " + STRING_IN + " Output: the count.",
        brute="""
import sys
s=sys.stdin.read().split()[1]
n=len(s)
ans=0
for i in range(n):
 for j in range(i+L,n+1):
  t=s[i:j]
  if t==t[::-1]:ans+=1
print(ans)
""",
        efficient="""
import sys
s=sys.stdin.read().split()[1]
n=len(s)
ans=0
for c in range(2*n-1):
 i,j=c//2,c//2+c%2
 while i>=0 and j<n and s[i]==s[j]:
  if j-i+1>=L:ans+=1
  i-=1
  j+=1
print(ans)
""",
        wrong=("""
import sys
s=sys.stdin.read().split()[1]
n=len(s)
ans=0
for c in range(n):
 i=j=c
 while i>=0 and j<n and s[i]==s[j]:
  if j-i+1>=L:ans+=1
  i-=1
  j+=1
print(ans)
""",),
        train=({"L": 2}, {"L": 3}, {"L": 5}, {"L": 6}), heldout=({"L": 4}, {"L": 7}),
        sizes=lambda P: poly_sizes(3000, 2.5, tiny=(4, 8)),
        gen=_letters,
        complexity=("O(n^3)", "O(n) expected"),
    ),
    Family(
        name="distinct_windows", topic="hash sets", difficulty="easy",
        statement="You are given a string. Count the distinct substrings of length exactly {K}. "
                  + STRING_IN + " Output: the count.",
        brute="""
import sys
s=sys.stdin.read().split()[1]
u=[]
for i in range(len(s)-K+1):
 t=s[i:i+K]
 if t not in u:u.append(t)
print(len(u))
""",
        efficient="""
import sys
s=sys.stdin.read().split()[1]
print(len({s[i:i+K] for i in range(len(s)-K+1)}))
""",
        wrong=("""
import sys
s=sys.stdin.read().split()[1]
print(len({s[i:i+K] for i in range(len(s)-K)}))
""",),
        train=({"K": 5}, {"K": 6}, {"K": 8}, {"K": 10}), heldout=({"K": 7}, {"K": 9}),
        sizes=lambda P: poly_sizes(40000, 2, tiny=(P["K"] + 2, P["K"] + 6)),
        gen=_windows,
        complexity=("O(n^2)", "O(n K)"),
    ),
]
