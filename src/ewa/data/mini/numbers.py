"""Number-theory families: sieves, closed forms, modular powers and fast doubling instead of loops."""
from __future__ import annotations

from math import gcd, isqrt

from ewa.data.mini.family import Family, arr

ONE_N = "Input: one integer n. Output: one integer."


def _magnitude(rng, top: int) -> int:
    """A random n with as many digits as `top` (at most `top`), so input size grows with the level."""
    return rng.randint(max(1, top * 6 // 10), top)


def _is_prime(q: int) -> bool:
    return q > 1 and all(q % d for d in range(2, isqrt(q) + 1))


def _prime_limit(rng, n, P, level):
    if level < 2:
        return f"{rng.randint(2, n)}\n"
    # n sits just above the square of a prime q with q*q = R (mod M): a sieve that stops before
    # isqrt(n) leaves q*q marked prime and counts it.
    q = isqrt(_magnitude(rng, n))
    while not (_is_prime(q) and q * q % P["M"] == P["R"]):
        q -= 1
    return f"{q * q + rng.randint(0, q)}\n"


def _or_limit(rng, n, P, level):
    lcm = P["A"] * P["B"] // gcd(P["A"], P["B"])
    if level == 0:
        return f"{rng.randint(1, 5)}\n"
    if level == 1:
        return f"{rng.randint(6, lcm - 1)}\n"
    return f"{_magnitude(rng, n)}\n"


def _multiple_limit(rng, n, P, level):
    m = _magnitude(rng, n)
    if level >= 2 and level % 2 == 0:
        m -= m % P["K"]  # n itself is a multiple of K: the inclusive bound matters
    return f"{max(m, 1)}\n"


def _shifted(rng, n, P, level):
    top = 10 ** n
    xs = []
    for i in range(12):
        if i % 2:
            xs.append(rng.randint(0, top))
        else:
            s = rng.randint(isqrt(P["K"]) + 1, isqrt(top))
            xs.append(s * s - P["K"])
    return arr(xs)


def _single(rng, n, P, level):
    return f"{_magnitude(rng, n)}\n"


FAMILIES = [
    Family(
        name="primes_in_class", topic="sieve", difficulty="medium",
        statement="Count the prime numbers p <= n with p mod {M} = {R}. " + ONE_N,
        brute="""
import sys
n=int(sys.stdin.read())
ans=0
for p in range(2,n+1):
 if all(p%d for d in range(2,int(p**0.5)+1)) and p%M==R:ans+=1
print(ans)
""",
        efficient="""
import sys
n=int(sys.stdin.read())
s=bytearray([1])*(n+1)
s[0]=s[1]=0
for i in range(2,int(n**0.5)+1):
 if s[i]:s[i*i::i]=bytearray(len(range(i*i,n+1,i)))
print(sum(s[R::M]))
""",
        wrong=("""
import sys
n=int(sys.stdin.read())
s=bytearray([1])*(n+1)
s[0]=s[1]=0
for i in range(2,int(n**0.5)):
 if s[i]:s[i*i::i]=bytearray(len(range(i*i,n+1,i)))
print(sum(s[R::M]))
""",),
        train=({"M": 3, "R": 1}, {"M": 4, "R": 1}, {"M": 6, "R": 1}, {"M": 10, "R": 1}),
        heldout=({"M": 5, "R": 1}, {"M": 8, "R": 1}),
        sizes=lambda P: [9, 60, 3000, 12000, 60000, 250000, 700000, 1500000],
        gen=_prime_limit,
        complexity=("O(n sqrt(n))", "O(n log log n)"),
    ),
    Family(
        name="self_power_sum", topic="modular exponentiation", difficulty="easy",
        statement="Print (1^1 + 2^2 + 3^3 + ... + n^n) modulo {M}. " + ONE_N,
        brute="""
import sys
n=int(sys.stdin.read())
s=0
for i in range(1,n+1):s+=i**i
print(s%M)
""",
        efficient="""
import sys
n=int(sys.stdin.read())
s=0
for i in range(1,n+1):s+=pow(i,i,M)
print(s%M)
""",
        wrong=("""
import sys
n=int(sys.stdin.read())
s=0
for i in range(1,n+1):s+=pow(i,i%M,M)
print(s%M)
""",),
        train=({"M": 7}, {"M": 13}, {"M": 19}, {"M": 31}), heldout=({"M": 11}, {"M": 23}),
        sizes=lambda P: [5, P["M"] - 1, 600, 1500, 3000, 5000, 10000, 20000],
        gen=lambda rng, n, P, level: f"{rng.randint(6 if level else 1, n) if level < 2 else _magnitude(rng, n)}\n",
        complexity=("O(n^2 log n) big integers", "O(n log n)"),
    ),
    Family(
        name="fibonacci_mod", topic="fast doubling", difficulty="hard",
        statement="F(0) = 0, F(1) = 1 and F(k) = F(k-1) + F(k-2). Print F(n) modulo {M}. "
                  "Input: one integer n (it can be as large as 10^18). Output: one integer.",
        brute="""
import sys
n=int(sys.stdin.read())
a,b=0,1
for _ in range(n):a,b=b,(a+b)%M
print(a)
""",
        efficient="""
import sys
n=int(sys.stdin.read())
def f(k):
 if k==0:return 0,1
 a,b=f(k//2)
 c=a*(2*b-a)%M
 d=(a*a+b*b)%M
 return (d,(c+d)%M) if k%2 else (c,d)
print(f(n)[0])
""",
        wrong=("""
import sys
n=int(sys.stdin.read())
r=5**0.5
print(round(((1+r)/2)**n/r)%M)
""",),
        train=({"M": 10}, {"M": 1000}, {"M": 10007}, {"M": 1000000007}), heldout=({"M": 97}, {"M": 65536}),
        sizes=lambda P: [9, 60, 2000, 20000, 200000, 4000000, 40000000, 10**18],
        gen=_single,
        complexity=("O(n)", "O(log n)"),
    ),
    Family(
        name="divisible_by_either", topic="inclusion-exclusion", difficulty="easy",
        statement="Count the integers x with 1 <= x <= n that are divisible by {A} or by {B}. " + ONE_N,
        brute="""
import sys
n=int(sys.stdin.read())
ans=0
for x in range(1,n+1):
 if x%A==0 or x%B==0:ans+=1
print(ans)
""",
        efficient="""
import sys
from math import gcd
n=int(sys.stdin.read())
L=A*B//gcd(A,B)
print(n//A+n//B-n//L)
""",
        wrong=("""
import sys
n=int(sys.stdin.read())
print(n//A+n//B-n//(A*B))
""",),
        train=({"A": 4, "B": 6}, {"A": 6, "B": 9}, {"A": 10, "B": 15}, {"A": 12, "B": 18}),
        heldout=({"A": 6, "B": 10}, {"A": 8, "B": 12}),
        sizes=lambda P: [5, 60, 1000, 10000, 100000, 2000000, 30000000, 10**12],
        gen=_or_limit,
        complexity=("O(n)", "O(1)"),
    ),
    Family(
        name="sum_of_multiples", topic="closed form", difficulty="easy",
        statement="Print the sum of all multiples of {K} between 1 and n inclusive. " + ONE_N,
        brute="""
import sys
n=int(sys.stdin.read())
s=0
for x in range(1,n+1):
 if x%K==0:s+=x
print(s)
""",
        efficient="""
import sys
n=int(sys.stdin.read())
m=n//K
print(K*m*(m+1)//2)
""",
        wrong=("""
import sys
n=int(sys.stdin.read())
m=(n-1)//K
print(K*m*(m+1)//2)
""",),
        train=({"K": 3}, {"K": 7}, {"K": 12}, {"K": 25}), heldout=({"K": 5}, {"K": 16}),
        sizes=lambda P: [9, 90, 1000, 10000, 100000, 2000000, 30000000, 10**12],
        gen=_multiple_limit,
        complexity=("O(n)", "O(1)"),
    ),
    Family(
        name="shifted_squares", topic="integer square root", difficulty="medium",
        statement="You are given n non-negative integers. Count those x for which x + {K} is a perfect "
                  "square. Input: n on the first line, then the n integers (up to 10^34) on the second line. "
                  "Output: the count.",
        brute="""
import sys
n,*a=map(int,sys.stdin.read().split())
ans=0
for x in a:
 r=0
 while r*r<x+K:r+=1
 if r*r==x+K:ans+=1
print(ans)
""",
        efficient="""
import sys
from math import isqrt
n,*a=map(int,sys.stdin.read().split())
print(sum(1 for x in a if isqrt(x+K)**2==x+K))
""",
        wrong=("""
import sys
n,*a=map(int,sys.stdin.read().split())
print(sum(1 for x in a if int((x+K)**0.5)**2==x+K))
""",),
        train=({"K": 1}, {"K": 3}, {"K": 7}, {"K": 10}), heldout=({"K": 2}, {"K": 5}),
        sizes=lambda P: [2, 3, 5, 7, 9, 11, 13, 34],  # decimal digits of the values
        gen=_shifted,
        complexity=("O(n sqrt(x))", "O(n log x)"),
    ),
]
