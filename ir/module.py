"""``Module``: a program — global functions by name (they may call each other, recursion
included) and algebraic data type definitions.

A module is a mutable container (``add``, ``add_type``) of immutable functions; passes
return new modules. ``==`` is structural: the same global names and type names, each
function and definition structurally equal (``ir.structural_equal``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .expr import Constructor, Expr, Function, GlobalVar
from .structural import structural_equal
from .types import GlobalTypeVar, TypeData
from .vars import free_vars


class Module:
    """Global functions (``functions``: GlobalVar -> Function, in insertion order) and type
    definitions (``type_definitions``: GlobalTypeVar -> TypeData)."""

    def __init__(self, functions: Mapping[GlobalVar | str, Function] | None = None,
                 type_definitions: Mapping[GlobalTypeVar, TypeData] | None = None):
        self.functions: dict[GlobalVar, Function] = {}
        self.type_definitions: dict[GlobalTypeVar, TypeData] = {}
        self._constructors: dict[str, Constructor] = {}
        for data in (type_definitions or {}).values():
            self.add_type(data)
        for name, fn in (functions or {}).items():
            self.add(name, fn)

    # ------------------------------------------------------------------ global functions

    def add(self, name: str | GlobalVar, function: Function, update: bool = False) -> GlobalVar:
        """Define global ``name`` as ``function``; returns its GlobalVar. Redefining a name
        is an error unless ``update``."""
        gv = name if isinstance(name, GlobalVar) else GlobalVar(name)
        if not isinstance(function, Function):
            raise TypeError(f"@{gv.name}: a global is a Function, got {function!r}")
        if gv in self.functions and not update:
            raise ValueError(f"global @{gv.name} is already defined (pass update=True)")
        self.functions.pop(gv, None)  # keep the key object the caller passed
        self.functions[gv] = function
        return gv

    def get_global_var(self, name: str) -> GlobalVar:
        """The GlobalVar of global function ``name`` (KeyError if there is none)."""
        for gv in self.functions:
            if gv.name == name:
                return gv
        raise KeyError(f"no global function @{name} in the module")

    def __getitem__(self, key: str | GlobalVar | GlobalTypeVar) -> Function | TypeData:
        """The function of a global (by name or GlobalVar), or the definition of a type
        (by GlobalTypeVar)."""
        if isinstance(key, GlobalTypeVar):
            try:
                return self.type_definitions[key]
            except KeyError:
                raise KeyError(f"no type {key.name} in the module") from None
        gv = key if isinstance(key, GlobalVar) else GlobalVar(key)
        try:
            return self.functions[gv]
        except KeyError:
            raise KeyError(f"no global function @{gv.name} in the module") from None

    def __setitem__(self, name: str | GlobalVar, function: Function) -> None:
        self.add(name, function, update=True)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            key = GlobalVar(key)
        return key in self.functions or key in self.type_definitions

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    # ---------------------------------------------------------------------- type data

    def add_type(self, data: TypeData, update: bool = False) -> GlobalTypeVar:
        """Define an algebraic data type (its constructors become findable by name);
        returns its header."""
        if not isinstance(data, TypeData):
            raise TypeError(f"add_type takes a TypeData, got {data!r}")
        if data.header in self.type_definitions and not update:
            raise ValueError(f"type {data.header.name} is already defined (pass update=True)")
        old = self.type_definitions.pop(data.header, None)
        for c in old.constructors if old else ():
            self._constructors.pop(c.name, None)
        for c in data.constructors:
            if c.name in self._constructors:
                raise ValueError(f"constructor {c.name} is already defined by type "
                                 f"{self._constructors[c.name].belong_to.name}")
        self.type_definitions[data.header] = data
        self._constructors.update((c.name, c) for c in data.constructors)
        return data.header

    def get_global_type_var(self, name: str) -> GlobalTypeVar:
        """The header of type ``name`` (KeyError if there is none)."""
        for gtv in self.type_definitions:
            if gtv.name == name:
                return gtv
        raise KeyError(f"no type {name} in the module")

    def get_constructor(self, name: str) -> Constructor:
        """The constructor ``name`` of one of the module's types (KeyError if none)."""
        try:
            return self._constructors[name]
        except KeyError:
            raise KeyError(f"no constructor {name} in the module") from None

    # -------------------------------------------------------------------------- whole

    @staticmethod
    def from_expr(expr: Expr, functions: Mapping[GlobalVar | str, Function] | None = None,
                  type_definitions: Mapping[GlobalTypeVar, TypeData] | None = None) -> Module:
        """A module whose ``@main`` is ``expr`` — itself when it is a function, else a
        function of its free variables returning it — plus the given globals and types."""
        main = expr if isinstance(expr, Function) else Function(free_vars(expr), expr)
        mod = Module(functions, type_definitions)
        mod.add("main", main, update=True)
        return mod

    def copy(self) -> Module:
        """A new module holding the same (immutable) functions and definitions."""
        return Module(self.functions, self.type_definitions)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Module):
            return NotImplemented
        if (self.functions.keys() != other.functions.keys()
                or self.type_definitions.keys() != other.type_definitions.keys()):
            return False
        return (all(self.type_definitions[k] == other.type_definitions[k]
                    for k in self.type_definitions)
                and all(structural_equal(f, other.functions[k])
                        for k, f in self.functions.items()))

    __hash__ = None  # mutable

    def __str__(self) -> str:
        """The module in the text format (``ir.astext``); ``ir.parse`` reads it back."""
        from .text import astext

        return astext(self)

    def __repr__(self) -> str:
        fns = ", ".join("@" + gv.name for gv in self.functions)
        types = ", ".join(t.name for t in self.type_definitions)
        return f"Module(functions=[{fns}], types=[{types}])"
