"""The prelude: algebraic data types and the usual functions on them, written in the IR's
own text format and parsed on first use.

Types: ``List[A]`` (``Cons(A, List[A])``, ``Nil``), ``Option[A]`` (``Some(A)``, ``None``)
and ``Tree[A]`` (``Rose(A, List[Tree[A]])``, a rose tree). Functions, polymorphic through
their type parameters: ``@map``, ``@foldl``, ``@foldr``, ``@nth`` (the n-th element, n an
int32 scalar; an incomplete ``match?`` — there is no element of an empty list),
``@length`` (an int32 scalar), ``@concat``, plus ``@hd`` and ``@tl``. A nullary
constructor is a value when called: ``Nil()`` (a bare ``Nil`` is the constructor itself,
a function ``fn [A]() -> List[A]``).

``prelude()`` returns a fresh copy each call (modules are mutable); the parsed nodes are
shared between copies (they are immutable).
"""

from __future__ import annotations

from .module import Module

PRELUDE_TEXT = """\
#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

type Option[A] {
  Some(A),
  None,
}

type Tree[A] {
  Rose(A, List[Tree[A]]),
}

def @hd[A](%l: List[A]) -> A {
  match? (%l) {
    Cons(%h, _) => %h,
  }
}

def @tl[A](%l: List[A]) -> List[A] {
  match? (%l) {
    Cons(_, %t) => %t,
  }
}

def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {
  match (%l) {
    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),
    Nil => Nil(),
  }
}

def @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %l: List[B]) -> A {
  match (%l) {
    Cons(%h, %t) => @foldl(%f, %f(%acc, %h), %t),
    Nil => %acc,
  }
}

def @foldr[A, B](%f: fn (A, B) -> B, %acc: B, %l: List[A]) -> B {
  match (%l) {
    Cons(%h, %t) => %f(%h, @foldr(%f, %acc, %t)),
    Nil => %acc,
  }
}

def @nth[A](%l: List[A], %n: int32) -> A {
  match? (%l) {
    Cons(%h, %t) => if (equal(%n, 0)) {
      %h
    } else {
      @nth(%t, subtract(%n, 1))
    },
  }
}

def @length[A](%l: List[A]) -> int32 {
  match (%l) {
    Cons(_, %t) => add(@length(%t), 1),
    Nil => 0,
  }
}

def @concat[A](%l1: List[A], %l2: List[A]) -> List[A] {
  match (%l1) {
    Cons(%h, %t) => Cons(%h, @concat(%t, %l2)),
    Nil => %l2,
  }
}
"""

_cache: Module | None = None


def prelude() -> Module:
    """A new module holding the prelude's types and functions (parsed once)."""
    global _cache
    if _cache is None:
        from .text import parse

        _cache = parse(PRELUDE_TEXT, source="<prelude>")
    return _cache.copy()
