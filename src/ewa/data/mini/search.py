"""Families where sorting, two pointers, binary search or a stack replaces rescanning the input."""
from __future__ import annotations

from ewa.data.mini.family import Family, arr, poly_sizes

ARRAY_IN = "Input: n on the first line, then the n integers on the second line."


def _queries(rng, n, P, level):
    a = [rng.randint(1, 5 * n + 10) for _ in range(n)]
    x = [rng.randint(1, 5 * n + 10) for _ in range(n)]
    return f"{n} {n}\n{' '.join(map(str, a))}\n{' '.join(map(str, x))}\n"


def _parts(rng, n, P, level):
    a = [rng.randint(1, 20) for _ in range(n)]
    if level in (2, 5):  # one element at an end outweighs the rest: the answer is that element
        a[0 if level == 2 else -1] = 3 * sum(a)
    return arr(a)


def _lamps(rng, n, P, level):
    span = 2 * P["R"] + 1
    return arr(sorted(rng.randint(0, 3 * n * span // 2) for _ in range(n)))


def _falling(rng, n, P, level):
    # A falling trend with small noise: most elements have no greater element to their right, so a
    # forward scan per element costs n^2; equal neighbours appear from level 2 on.
    return arr([3 * (n - i) + rng.randint(0, 5) for i in range(n)])


FAMILIES = [
    Family(
        name="pairs_close_values", topic="two pointers", difficulty="medium",
        statement="You are given n integers. Count the pairs i < j with |a_i - a_j| <= {K}. " + ARRAY_IN
                  + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 for j in range(i+1,n):
  if abs(a[i]-a[j])<=K:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
ans=j=0
for i in range(n):
 while a[i]-a[j]>K:j+=1
 ans+=i-j
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
ans=j=0
for i in range(n):
 while a[i]-a[j]>=K:j+=1
 ans+=i-j
print(ans)
""",),
        train=({"K": 2}, {"K": 5}, {"K": 10}, {"K": 20}), heldout=({"K": 3}, {"K": 15}),
        sizes=lambda P: poly_sizes(10000, 2),
        gen=lambda rng, n, P, level: arr([rng.randint(1, 20 * n) for _ in range(n)]),
        complexity=("O(n^2)", "O(n log n)"),
    ),
    Family(
        name="pairs_sum_at_most", topic="two pointers", difficulty="medium",
        statement="You are given n integers. Count the pairs i < j with a_i + a_j <= {T}. " + ARRAY_IN
                  + " Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 for j in range(i+1,n):
  if a[i]+a[j]<=T:ans+=1
print(ans)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
ans=0
i,j=0,n-1
while i<j:
 if a[i]+a[j]<=T:
  ans+=j-i
  i+=1
 else:j-=1
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
ans=0
i,j=0,n-1
while i<j:
 if a[i]+a[j]<T:
  ans+=j-i
  i+=1
 else:j-=1
print(ans)
""",),
        train=({"T": 50}, {"T": 100}, {"T": 300}, {"T": 1000}), heldout=({"T": 75}, {"T": 500}),
        sizes=lambda P: poly_sizes(11000, 2),
        gen=lambda rng, n, P, level: arr([rng.randint(0, P["T"]) for _ in range(n)]),
        complexity=("O(n^2)", "O(n log n)"),
    ),
    Family(
        name="count_near_queries", topic="binary search", difficulty="medium",
        statement="You are given n integers and q queries. For each query x, print how many of the integers "
                  "a_i satisfy |a_i - x| <= {D}. Input: n and q on the first line, the n integers on the "
                  "second line, the q queries on the third line. Output: one count per line.",
        brute="""
import sys
d=list(map(int,sys.stdin.read().split()))
n,q=d[0],d[1]
a=d[2:2+n]
for x in d[2+n:]:print(sum(1 for v in a if abs(v-x)<=D))
""",
        efficient="""
import sys
from bisect import bisect_left,bisect_right
d=list(map(int,sys.stdin.read().split()))
n,q=d[0],d[1]
a=sorted(d[2:2+n])
for x in d[2+n:]:print(bisect_right(a,x+D)-bisect_left(a,x-D))
""",
        wrong=("""
import sys
from bisect import bisect_left,bisect_right
d=list(map(int,sys.stdin.read().split()))
n,q=d[0],d[1]
a=sorted(d[2:2+n])
for x in d[2+n:]:print(bisect_left(a,x+D)-bisect_left(a,x-D))
""",),
        train=({"D": 1}, {"D": 3}, {"D": 6}, {"D": 10}), heldout=({"D": 2}, {"D": 8}),
        sizes=lambda P: poly_sizes(9000, 2),
        gen=_queries,
        complexity=("O(n q)", "O((n + q) log n)"),
    ),
    Family(
        name="split_min_largest", topic="binary search on the answer", difficulty="hard",
        statement="You are given n positive integers. Split them into at most {D} contiguous non-empty parts "
                  "so that the largest part sum is as small as possible. " + ARRAY_IN
                  + " Output: that smallest possible largest part sum.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
c=max(a)
while True:
 k,s=1,0
 for x in a:
  if s+x>c:
   k+=1
   s=0
  s+=x
 if k<=D:break
 c+=1
print(c)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
lo,hi=max(a),sum(a)
while lo<hi:
 c=(lo+hi)//2
 k,s=1,0
 for x in a:
  if s+x>c:
   k+=1
   s=0
  s+=x
 if k<=D:hi=c
 else:lo=c+1
print(lo)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
lo,hi=1,sum(a)
while lo<hi:
 c=(lo+hi)//2
 k,s=1,0
 for x in a:
  if s+x>c:
   k+=1
   s=0
  s+=x
 if k<=D:hi=c
 else:lo=c+1
print(lo)
""",),
        train=({"D": 2}, {"D": 3}, {"D": 5}, {"D": 8}), heldout=({"D": 4}, {"D": 6}),
        sizes=lambda P: poly_sizes(round(3000 * P["D"] ** 0.5), 2, tiny=(P["D"] + 2, P["D"] + 5)),
        gen=_parts,
        complexity=("O(n * answer)", "O(n log(sum))"),
    ),
    Family(
        name="max_overlapping_meetings", topic="sweep with two pointers", difficulty="medium",
        statement="There are n meetings; meeting i starts at minute s_i and lasts {L} minutes, occupying "
                  "[s_i, s_i + {L}). Find the largest number of meetings running at the same moment. "
                  "Input: n on the first line, then the n start times. Output: that number.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
best=0
for t in a:
 c=0
 for s in a:
  if s<=t<s+L:c+=1
 best=max(best,c)
print(best)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
best=j=0
for i in range(n):
 while a[j]<=a[i]-L:j+=1
 best=max(best,i-j+1)
print(best)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
best=j=0
for i in range(n):
 while a[j]<a[i]-L:j+=1
 best=max(best,i-j+1)
print(best)
""",),
        train=({"L": 5}, {"L": 10}, {"L": 30}, {"L": 60}), heldout=({"L": 15}, {"L": 45}),
        sizes=lambda P: poly_sizes(11000, 2),
        # Start times on a 5-minute grid, so meetings that just touch (exactly L apart) are common.
        gen=lambda rng, n, P, level: arr([5 * rng.randint(0, n * P["L"] // 20 + 1) for _ in range(n)]),
        complexity=("O(n^2)", "O(n log n)"),
    ),
    Family(
        name="longest_chain_gap", topic="binary search DP", difficulty="hard",
        statement="You are given n integers. Find the longest subsequence (indices increasing) in which every "
                  "element is at least {D} larger than the previous one. " + ARRAY_IN
                  + " Output: its length.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
d=[1]*n
for i in range(n):
 for j in range(i):
  if a[j]+D<=a[i] and d[j]+1>d[i]:d[i]=d[j]+1
print(max(d))
""",
        efficient="""
import sys
from bisect import bisect_right
n,*a=map(int,sys.stdin.read().split())
t=[]
for x in a:
 k=bisect_right(t,x-D)
 if k==len(t):t.append(x)
 elif x<t[k]:t[k]=x
print(len(t))
""",
        wrong=("""
import sys
from bisect import bisect_left
n,*a=map(int,sys.stdin.read().split())
t=[]
for x in a:
 k=bisect_left(t,x-D)
 if k==len(t):t.append(x)
 elif x<t[k]:t[k]=x
print(len(t))
""", """
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
last=-10**18
for x in a:
 if x>=last+D:
  ans+=1
  last=x
print(ans)
"""),
        train=({"D": 1}, {"D": 2}, {"D": 5}, {"D": 7}), heldout=({"D": 3}, {"D": 10}),
        sizes=lambda P: poly_sizes(9000, 2, tiny=(4, 7)),
        gen=lambda rng, n, P, level: arr([rng.randint(1, 3 * n + 10) for _ in range(n)]),
        complexity=("O(n^2)", "O(n log n)"),
    ),
    Family(
        name="lamps_lit_points", topic="sorting and merging intervals", difficulty="medium",
        statement="There are n lamps at integer positions x_i; a lamp lights every integer point p with "
                  "|p - x_i| <= {R}. Count the integer points that are lit. Input: n on the first line, then "
                  "the n positions. Output: the count.",
        # The brute force stores every lit point, so large inputs exhaust memory before time.
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
s=set()
for x in a:s.update(range(x-R,x+R+1))
print(len(s))
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
ans=2*R+1
for i in range(1,n):ans+=min(2*R+1,a[i]-a[i-1])
print(ans)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
a.sort()
ans=2*R+1
for i in range(1,n):ans+=min(2*R,a[i]-a[i-1])
print(ans)
""",),
        train=({"R": 100}, {"R": 150}, {"R": 300}, {"R": 500}), heldout=({"R": 200}, {"R": 400}),
        sizes=lambda P: poly_sizes(round(10**7 / (2 * P["R"] + 1)), 1, tiny=(2, 3)),
        gen=_lamps,
        complexity=("O(n R) time and memory", "O(n log n)"),
        memory_limit_mb=64,
    ),
    Family(
        name="next_greater_distance", topic="monotonic stack", difficulty="hard",
        statement="You are given n integers. For each i, let d_i be j - i for the nearest j > i with "
                  "a_j > a_i, or 0 if there is none. Print the sum of all d_i modulo {M}. " + ARRAY_IN,
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for i in range(n):
 for j in range(i+1,n):
  if a[j]>a[i]:
   ans+=j-i
   break
print(ans%M)
""",
        efficient="""
import sys
n,*a=map(int,sys.stdin.read().split())
st=[]
ans=0
for j in range(n):
 while st and a[st[-1]]<a[j]:ans+=j-st.pop()
 st.append(j)
print(ans%M)
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
st=[]
ans=0
for j in range(n):
 while st and a[st[-1]]<=a[j]:ans+=j-st.pop()
 st.append(j)
print(ans%M)
""",),
        train=({"M": 97}, {"M": 1000}, {"M": 10007}, {"M": 65536}), heldout=({"M": 500}, {"M": 30011}),
        sizes=lambda P: poly_sizes(12000, 2, tiny=(3, 5)),
        gen=_falling,
        complexity=("O(n^2)", "O(n)"),
    ),
]
