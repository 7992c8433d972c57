"""The checker's own code as it was before candidate code ran: a replaced piece is tampering.

A gate child runs the candidate in its own interpreter, beside the code that checks it:
the recording of every timed call (``gates.checked_calls``), the mutation and aliasing
checks of gate 2, the saving of what the parent compares.  A candidate that replaces one
of those functions (``CheckedCalls.record``, a module's ``same_values``) would have its
own outputs judged by its own code.  So the child snapshots every function, class,
method and submodule of the harness's packages (``gates``, ``kernelopt``) that is loaded,
and every method of ``torch.Tensor`` (its own and inherited), before any candidate code is imported;
``tampered()`` names whatever no longer holds the object it held, and ``restore()`` puts
it back.  Additions are not tampering, and plain data (a module's current phase, a
cache) is not watched.  A candidate that replaces a piece and puts it back between two
looks is written against this harness (gates/README.md, "Limits").  A function whose
code object or defaults are swapped in place (``f.__code__ = ...``) counts as replaced too.
So does torch's dispatch state left changed after the candidate's code returned
(``dispatch_state``): a mode on torch's dispatch or function stack sees every later
op, the harness's reads of an output included, so a forward that returns unfinished
memory could have its answer computed only when it is read, off the clock.
"""

from __future__ import annotations

import operator
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch

_ROOTS = ("gates", "kernelopt")
# descriptors a class's dict holds for itself, and pydantic's lazily built machinery
_SKIP_PREFIXES = ("__pydantic", "__dict__", "__weakref__")

Watched = tuple[str, Any, str]  # (label, owner, attribute)
DISPATCH_LABEL = "torch's dispatch state (a mode or dispatch key the candidate left on)"
_C = torch._C  # captured before candidate code runs


def dispatch_state() -> tuple[Any, ...]:
    """This thread's dispatch modes (torch-dispatch and torch-function stacks) and its
    included and excluded dispatch keys: what reroutes every op the harness runs next."""
    return (
        tuple(id(_C._get_dispatch_stack_at(i)) for i in range(_C._len_torch_dispatch_stack())),
        tuple(id(_C._get_function_stack_at(i)) for i in range(_C._len_torch_function_stack())),
        repr(_C._dispatch_tls_local_include_set()),
        repr(_C._dispatch_tls_local_exclude_set()),
    )


# Kernels registered through ``torch.library`` (``torch._C._dispatch_library``) for the
# ops the harness itself runs: a kernel of the candidate's own on ``aten::detach``'s CPU
# key sees every output the harness reads, as a mode does.  ``arm_libraries`` wraps the
# constructor before any candidate code is imported; every library made since is
# recorded, and each of its kernels for an ATen or prims op (or fallback for every op)
# on any dispatch key but ``Meta`` (shapes only, no values) is counted -- unless the op
# was itself defined since arming (Inductor defines prims of its own when first
# imported): the harness never runs an op that did not exist when it was armed.
_WATCHED_NAMESPACES = ("aten", "prims")
_HARMLESS_KEYS = ("Meta",)
_make_library = _C._dispatch_library  # torch's own, as imported


@dataclass
class _Registrations:
    """What the candidate's libraries registered since arming: labels, and their libraries."""

    labels: list[str] = field(default_factory=list)
    libraries: list[Any] = field(default_factory=list)  # each label's C++ object, to reset
    wrapper: Any = None  # the ``_dispatch_library`` in place since arming
    defined: set[str] = field(default_factory=set)  # "ns::name.overload" defined since


_REGISTRATIONS = _Registrations()


class _WatchedLibrary:
    """A ``torch._C._dispatch_library`` object that notes its kernels for watched ops."""

    def __init__(self, library: Any, kind: str, namespace: str, key: str) -> None:
        self._library, self._kind, self._namespace, self._key = library, kind, namespace, key

    def _qualified(self, name: str) -> str:
        namespace, _, op = name.strip().rpartition("::")
        return f"{namespace or self._namespace}::{op}"

    def _note(self, name: str, key: str) -> None:
        qualified = self._qualified(name)
        key = key or self._key or "CompositeImplicitAutograd"
        if (
            qualified.partition("::")[0] in _WATCHED_NAMESPACES
            and key not in _HARMLESS_KEYS
            and qualified not in _REGISTRATIONS.defined
        ):
            self._watched(f"a kernel the candidate registered for {qualified} ({key})")

    def _note_fallback(self, key: str) -> None:
        key = key or self._key
        if key not in _HARMLESS_KEYS:
            self._watched(f"a fallback kernel the candidate registered for every op ({key})")

    def _watched(self, label: str) -> None:
        _REGISTRATIONS.labels.append(label)
        _REGISTRATIONS.libraries.append(self._library)

    def define(self, schema: str, *args: Any, **kwargs: Any) -> Any:
        result = self._library.define(schema, *args, **kwargs)  # one that fails defines nothing
        _REGISTRATIONS.defined.add(self._qualified(schema.partition("(")[0]))
        return result

    def def_(self, schema: str, *args: Any, **kwargs: Any) -> Any:
        result = self._library.def_(schema, *args, **kwargs)  # one that fails defines nothing
        _REGISTRATIONS.defined.add(self._qualified(schema.partition("(")[0]))
        return result

    def impl(self, name: str, dispatch: str = "", *args: Any, **kwargs: Any) -> Any:
        self._note(name, dispatch)
        return self._library.impl(name, dispatch, *args, **kwargs)

    def impl_t_t(self, name: str, dispatch: str = "", *args: Any, **kwargs: Any) -> Any:
        self._note(name, dispatch)
        return self._library.impl_t_t(name, dispatch, *args, **kwargs)

    def impl_with_aoti_compile(self, namespace: str, name: str, dispatch: Any) -> Any:
        self._note(f"{namespace}::{name}", str(dispatch).rpartition(".")[2])
        return self._library.impl_with_aoti_compile(namespace, name, dispatch)

    def fallback(self, dispatch: Any = "", *args: Any, **kwargs: Any) -> Any:
        self._note_fallback(str(dispatch).rpartition(".")[2])
        return self._library.fallback(dispatch, *args, **kwargs)

    def fallback_fallthrough(self, dispatch: str = "") -> Any:
        self._note_fallback(dispatch)
        return self._library.fallback_fallthrough(dispatch)

    def register_ad_inplace_or_view_fallback(self, name: str) -> Any:
        self._note(name, "ADInplaceOrView")
        return self._library.register_ad_inplace_or_view_fallback(name)

    def __getattr__(self, name: str) -> Any:  # define, reset and the rest: as they are
        return getattr(self._library, name)


def _watched_library(kind: str, name: str, dispatch: str, *args: Any, **kwargs: Any) -> Any:
    library = _make_library(kind, name, dispatch, *args, **kwargs)
    return _WatchedLibrary(library, kind, name, dispatch)


def arm_libraries() -> None:
    """Wrap ``torch._C._dispatch_library`` (once) so that the kernels every library made
    from now on registers for ATen and prims ops are noted: call it before candidate code."""
    if _REGISTRATIONS.wrapper is None:
        _REGISTRATIONS.wrapper = _watched_library
        _C._dispatch_library = _watched_library


def library_items() -> list[Watched]:
    """The wrapped constructor itself: swapping torch's own back in is tampering."""
    return [("torch._C._dispatch_library", _C, "_dispatch_library")]


def _pop_modes(state: tuple[Any, ...]) -> None:
    """Pop the modes pushed since ``state`` (its keys' sets are left: the call fails anyway)."""
    while _C._len_torch_dispatch_stack() > len(state[0]):
        _C._pop_torch_dispatch_stack(None)
    while _C._len_torch_function_stack() > len(state[1]):
        _C._pop_torch_function_stack()


def _code_like(value: object) -> bool:
    return (
        callable(value)
        or isinstance(value, staticmethod | classmethod | property | types.ModuleType)
    ) and value is not None


def _members(label: str, owner: Any) -> list[Watched]:
    return [
        (f"{label}.{name}", owner, name)
        for name, value in list(vars(owner).items())
        if not name.startswith(_SKIP_PREFIXES) and _code_like(value)
    ]


def module_items(name: str, module: types.ModuleType) -> list[Watched]:
    """A module's code-like attributes and those of the classes it defines."""
    items = _members(name, module)
    for attr, value in list(vars(module).items()):
        if isinstance(value, type) and getattr(value, "__module__", "") == name:
            items += _members(f"{name}.{attr}", value)
    return items


def harness_items(seen: set[str] | None = None) -> list[Watched]:
    """Every code-like attribute of the loaded harness modules (and of the classes they
    define) and of ``torch.Tensor``: modules in ``seen`` are skipped, and added to it."""
    seen = set() if seen is None else seen
    items: list[Watched] = []
    for name, module in sorted(sys.modules.copy().items()):
        if module is None or name in seen or name.partition(".")[0] not in _ROOTS:
            continue
        seen.add(name)
        items += module_items(name, module)
    if "torch.Tensor" not in seen:
        seen.add("torch.Tensor")
        items += tensor_items()
    return items


def tensor_items() -> list[Watched]:
    """Every method of ``torch.Tensor``, inherited ones too: a subclass entry would shadow them."""
    return [
        (f"torch.Tensor.{name}", torch.Tensor, name)
        for name in dir(torch.Tensor)
        if not name.startswith(_SKIP_PREFIXES) and _code_like(getattr(torch.Tensor, name, None))
    ]


def listed(labels: list[str], most: int = 4) -> str:
    """The first ``most`` labels of what was replaced, and how many more, for a reason line."""
    more = f" and {len(labels) - most} more" if len(labels) > most else ""
    return ", ".join(labels[:most]) + more


class HarnessWatch:
    """Snapshots of watched attributes; ``tampered()`` names the replaced or deleted ones."""

    def __init__(self, extra: list[Watched] | None = None, *, loaded: bool = True) -> None:
        """``extra``: more attributes to watch; ``loaded``: also every loaded harness module."""
        self._modules: set[str] = set()
        self.dispatch = dispatch_state()  # as the harness runs its own code
        arm_libraries()  # before the snapshot: it holds the wrapper
        self.registered = len(_REGISTRATIONS.labels)  # those made before do not count
        # (label, owner, attribute, object, owned by the owner itself, its function's code)
        self._snapshot: list[tuple[str, Any, str, Any, bool, Any]] = []
        self._add(library_items() + (extra or []))
        if loaded:
            self.watch_loaded()

    def watch_loaded(self) -> None:
        """Also watch harness modules loaded since (no candidate code may have run yet)."""
        self._add(harness_items(self._modules))

    def _add(self, items: list[Watched]) -> None:
        for label, owner, attr in items:
            original = _current(owner, attr)
            own = attr in vars(owner)
            self._snapshot.append((label, owner, attr, original, own, _code(original)))

    def tampered(self, *instances: object) -> list[str]:
        """Labels of what was replaced; also entries of ``instances`` (the harness's objects
        in use) that shadow a method of their class."""
        return (
            [
                f"{type(obj).__module__}.{type(obj).__qualname__}.{name} (on the instance)"
                for obj in instances
                for name in _shadowing(obj)
            ]
            + [
                label
                for label, owner, attr, original, _own, code in self._snapshot
                if _current(owner, attr) is not original or not _same(_code(original), code)
            ]
            + ([DISPATCH_LABEL] if dispatch_state() != self.dispatch else [])
            + _REGISTRATIONS.labels[self.registered :]
        )

    def restore(self, *instances: object) -> None:
        _pop_modes(self.dispatch)
        _reset_libraries(self.registered)
        self.registered = len(_REGISTRATIONS.labels)  # taken back: no longer named
        for obj in instances:
            for name in _shadowing(obj):
                del vars(obj)[name]
        for _label, owner, attr, original, own, code in self._snapshot:
            if code is not None and not _same(_code(original), code):  # edited in place
                function = _function(original)
                function.__code__, function.__defaults__, function.__kwdefaults__ = code
            if original is None or _current(owner, attr) is original:
                continue
            if own:
                setattr(owner, attr, original)
            else:  # it was inherited: drop what shadows it
                delattr(owner, attr)


def _reset_libraries(since: int) -> None:
    """Take back every kernel of the libraries that registered one for a watched op since
    the ``since``-th was noted (a library's kernels all go together)."""
    done: list[Any] = []
    for library in _REGISTRATIONS.libraries[since:]:
        if not any(library is d for d in done):
            library.reset()
            done.append(library)


def _shadowing(obj: object) -> list[str]:
    """Names in ``obj``'s own dict that hide a function or descriptor of its class."""
    own = getattr(obj, "__dict__", {})
    return [name for name in own if _code_like(_current(type(obj), name))]


def _function(value: Any) -> Any:
    """The plain function behind a method wrapper or property (or ``value`` itself)."""
    if isinstance(value, staticmethod | classmethod):
        return value.__func__
    if isinstance(value, property):
        return value.fget
    return value


def _code(value: Any) -> tuple[Any, ...] | None:
    """A Python function's code object and defaults (None for builtins, classes, modules)."""
    function = _function(value)
    if not isinstance(function, types.FunctionType):
        return None
    return (function.__code__, function.__defaults__, function.__kwdefaults__)


def _same(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    return a is b or (
        a is not None and b is not None and all(x is y for x, y in zip(a, b, strict=True))
    )


def _current(owner: Any, attr: str) -> Any:
    """What ``owner.attr`` resolves to, undecorated: a class's own or inherited dict entry
    (a bound method would be a new object on every look), a module's entry."""
    found = _found(_dicts(owner), attr)
    return None if found is _MISSING else found


def _dicts(owner: Any) -> tuple[Any, ...]:
    """The dicts an attribute of ``owner`` is looked up in, in order (its class's MRO)."""
    return tuple(vars(klass) for klass in (owner.__mro__ if isinstance(owner, type) else (owner,)))


def _found(dicts: tuple[Any, ...], attr: str) -> Any:
    for d in dicts:
        found = d.get(attr, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


_MISSING = object()
_is_same = operator.is_
_attribute = operator.attrgetter


class _QuickLook:
    """``RecordGuard``'s look, as C loops: it runs between every timed call and its record.

    For every watched attribute: the dict it was found in still holds the same object, no
    dict before it in the lookup order has gained the name, and a function's code and
    defaults are the same objects.  That is ``_found(dicts, attr) is original`` and the code
    check, item by item, grouped by dict so ``map`` does the walking instead of Python.
    The builtins it uses are taken when it is made, before candidate code.
    """

    def __init__(self, items: list[tuple[Any, str, Any, Any, Any]]) -> None:
        self._all, self._map, self._is = all, map, _is_same
        self._any, self._attr = any, _attribute
        groups: dict[tuple[int, int], tuple[Any, tuple[Any, ...], list[str], list[Any]]] = {}
        lookups: dict[int, tuple[Any, ...]] = {}  # per owner: its dicts, made once
        self._functions: list[Any] = []
        codes: list[tuple[Any, ...]] = []
        for owner, attr, original, function, code in items:
            if id(owner) not in lookups:
                lookups[id(owner)] = _dicts(owner)
            dicts = lookups[id(owner)]
            at = next((i for i, d in enumerate(dicts) if attr in d), 0)
            found, before = dicts[at], dicts[:at]
            group = groups.setdefault((id(owner), at), (found, before, [], []))
            group[2].append(attr)
            group[3].append(original)
            if code is not None:
                self._functions.append(function)
                codes.append(code)
        self._groups = list(groups.values())
        # a dict looked in before the one an entry was found in must not gain its name:
        # where that dict is smaller than the group, its keys are compared whole instead
        # (the same keys, the same objects, in order: any key added or removed shows)
        self._keys = {id(d): (len(d), list(d)) for _, before, _, _ in self._groups for d in before}
        # per part (code, defaults, keyword defaults): each function's, in order
        self._parts = [
            (name, [code[k] for code in codes])
            for k, name in enumerate(("__code__", "__defaults__", "__kwdefaults__"))
        ]

    def same(self) -> bool:
        every, each, same, anyone, part = self._all, self._map, self._is, self._any, self._attr
        for found, before, attrs, originals in self._groups:
            if not every(each(same, each(found.get, attrs), originals)):
                return False
            for earlier in before:
                count, keys = self._keys[id(earlier)]
                if count < len(attrs):
                    if len(earlier) != count or not every(each(same, earlier, keys)):
                        return False
                elif anyone(each(earlier.__contains__, attrs)):
                    return False
        for name, originals in self._parts:
            if not every(each(same, each(part(name), self._functions), originals)):
                return False
        return True


class RecordGuard:
    """A quick look at the code that records timed calls, taken before every record.

    The full watch looks after warm-up and after timing; a forward that replaces the
    records' code and has its replacement put the original back would be gone by then.
    This looks at the few modules on the record path (and ``torch.Tensor``'s methods), and
    at torch's dispatch state, between each call's return and its record: identity checks
    only, off the clock.  A thread that swaps code in between the look and the record is
    written against this harness (gates/README.md, "Limits").
    """

    def __init__(self, modules: list[str]) -> None:
        items = [i for name in modules for i in module_items(name, sys.modules[name])]
        self._watch = HarnessWatch(items + tensor_items(), loaded=False)
        self._code_names: dict[type, frozenset[str]] = {}
        self._quick = _QuickLook(
            [
                (owner, attr, original, _function(original), code)
                for _label, owner, attr, original, _own, code in self._watch._snapshot
            ]
        )

    def tampered(self, *instances: object) -> list[str]:
        """What was replaced since the guard was made (``HarnessWatch.tampered``'s labels)."""
        for obj in instances:
            if self._hides(obj):
                return self._watch.tampered(*instances)
        if (
            dispatch_state() != self._watch.dispatch
            or len(_REGISTRATIONS.labels) != self._watch.registered
        ):
            return self._watch.tampered(*instances)
        if not self._quick.same():
            return self._watch.tampered(*instances)  # rare: the slow look names them all
        return []

    def _hides(self, obj: object) -> bool:
        """Whether ``obj``'s own dict may hide code of its class (``_shadowing`` decides):
        a name of it is among the code-like names anywhere in the class's lookup order,
        kept per class after the first look, so a call costs one set intersection."""
        names = self._code_names.get(type(obj))
        if names is None:
            names = frozenset(
                name
                for klass in type(obj).__mro__
                for name, value in vars(klass).items()
                if _code_like(value)
            )
            self._code_names[type(obj)] = names
        own = getattr(obj, "__dict__", None)
        return bool(own) and not own.keys().isdisjoint(names)

    def restore(self, *instances: object) -> None:
        self._watch.restore(*instances)
