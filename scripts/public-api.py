#!/usr/bin/env python3
"""hipjit's public API as a sorted listing, one item per line, from rustdoc's JSON.

Usage: scripts/public-api.py CRATE.json > docs/public-api.txt

CRATE.json is what `scripts/public-api.sh` has rustdoc write (`--output-format json`, format
version FORMAT_VERSION). Every item a user can name is listed under every path that names it
(a re-export is API too; an item reached by several paths is listed whole under the shortest,
outside the prelude, and as `pub use SHORTEST as OTHER` under each other): modules, types with their fields, variants and inherent and trait
impls (blanket impls left out; of the auto traits, Send and Sync), functions and methods with
their signatures, constants, statics, type aliases, traits with their items, macros. Items
`#[doc(hidden)]`, and everything under them, are not public (docs/semver.md) and are left out.
"""

import json
import sys

FORMAT_VERSION = 57
AUTO_TRAITS_KEPT = {"Send", "Sync"}
# Traits no user names: the compiler's own marker behind derived equality.
TRAITS_LEFT_OUT = {"StructuralPartialEq"}


def hidden(item):
    for a in item.get("attrs") or []:
        text = a if isinstance(a, str) else json.dumps(a)
        if "doc(hidden)" in text.replace(" ", ""):
            return True
    return False


def non_exhaustive(item):
    for a in item.get("attrs") or []:
        text = a if isinstance(a, str) else json.dumps(a)
        if "non_exhaustive" in text:
            return True
    return False


class Lister:
    def __init__(self, doc):
        self.index = doc["index"]
        self.paths = doc.get("paths", {})
        self.lines = set()
        # Every public path of each item that is not a module, in the order found.
        self.found = {}

    def item(self, id_):
        return self.index.get(str(id_))

    # ---- types ---------------------------------------------------------------------------
    def generic_args(self, args):
        if not args:
            return ""
        if "angle_bracketed" in args:
            a = args["angle_bracketed"]
            parts = []
            for g in a.get("args", []):
                if "type" in g:
                    parts.append(self.ty(g["type"]))
                elif "lifetime" in g:
                    parts.append(g["lifetime"])
                elif "const" in g:
                    c = g["const"]
                    parts.append(c.get("expr", "_") if isinstance(c, dict) else str(c))
                else:
                    parts.append("_")
            for c in a.get("constraints", []):
                b = c.get("binding", {})
                if "equality" in b:
                    eq = b["equality"]
                    val = self.ty(eq["type"]) if "type" in eq else str(eq)
                    parts.append(f"{c['name']} = {val}")
                else:
                    parts.append(f"{c['name']}: " + " + ".join(self.bound(x) for x in b.get("constraint", [])))
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in args:
            p = args["parenthesized"]
            out = "(" + ", ".join(self.ty(t) for t in p.get("inputs", [])) + ")"
            if p.get("output"):
                out += " -> " + self.ty(p["output"])
            return out
        return ""

    def path(self, p):
        return p.get("path", p.get("name", "?")) + self.generic_args(p.get("args"))

    def bound(self, b):
        if "trait_bound" in b:
            t = b["trait_bound"]
            mod = {"maybe": "?", "maybe_const": "~const "}.get(t.get("modifier"), "")
            return mod + self.path(t["trait"])
        if "outlives" in b:
            return b["outlives"]
        if "use" in b:
            return "use<" + ", ".join(str(x) for x in b["use"]) + ">"
        return "?"

    def ty(self, t):
        if t is None:
            return "()"
        (k, v), = t.items()
        if k == "resolved_path":
            return self.path(v)
        if k == "generic":
            return v
        if k == "primitive":
            return v
        if k == "tuple":
            return "(" + ", ".join(self.ty(x) for x in v) + ("," if len(v) == 1 else "") + ")"
        if k == "slice":
            return "[" + self.ty(v) + "]"
        if k == "array":
            return "[" + self.ty(v["type"]) + "; " + str(v["len"]) + "]"
        if k == "borrowed_ref":
            lt = (v["lifetime"] + " ") if v.get("lifetime") else ""
            return "&" + lt + ("mut " if v["is_mutable"] else "") + self.ty(v["type"])
        if k == "raw_pointer":
            return "*" + ("mut " if v["is_mutable"] else "const ") + self.ty(v["type"])
        if k == "impl_trait":
            return "impl " + " + ".join(self.bound(b) for b in v)
        if k == "dyn_trait":
            parts = [self.path(p["trait"]) for p in v.get("traits", [])]
            if v.get("lifetime"):
                parts.append(v["lifetime"])
            return "dyn " + " + ".join(parts)
        if k == "qualified_path":
            tr = self.path(v["trait"]) if v.get("trait") else None
            base = f"<{self.ty(v['self_type'])} as {tr}>" if tr else self.ty(v["self_type"])
            return f"{base}::{v['name']}" + self.generic_args(v.get("args"))
        if k == "function_pointer":
            sig = v["sig"]
            ins = ", ".join(self.ty(x[1]) for x in sig["inputs"])
            hdr = v.get("header", {})
            pre = ("unsafe " if hdr.get("is_unsafe") else "") + self.abi(hdr.get("abi"))
            out = f"{pre}fn({ins})"
            if sig.get("output"):
                out += " -> " + self.ty(sig["output"])
            return out
        if k == "infer":
            return "_"
        return k

    @staticmethod
    def abi(abi):
        if abi in (None, "Rust"):
            return ""
        if isinstance(abi, dict):
            (name, _), = abi.items()
            return f'extern "{name}" '
        return f'extern "{abi}" '

    def generics(self, g):
        if not g:
            return "", ""
        params = []
        for p in g.get("params", []):
            kind = p.get("kind", {})
            if "lifetime" in kind:
                params.append(p["name"])
            elif "type" in kind:
                if kind["type"].get("is_synthetic"):
                    continue
                b = kind["type"].get("bounds", [])
                params.append(p["name"] + (": " + " + ".join(self.bound(x) for x in b) if b else ""))
            elif "const" in kind:
                params.append(f"const {p['name']}: {self.ty(kind['const']['type'])}")
        where = []
        for w in g.get("where_predicates", []):
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                where.append(self.ty(bp["type"]) + ": " + " + ".join(self.bound(x) for x in bp["bounds"]))
            elif "lifetime_predicate" in w:
                lp = w["lifetime_predicate"]
                where.append(lp["lifetime"] + ": " + " + ".join(lp["outlives"]))
            elif "eq_predicate" in w:
                ep = w["eq_predicate"]
                where.append(self.ty(ep["lhs"]) + " = " + json.dumps(ep["rhs"]))
        return ("<" + ", ".join(params) + ">" if params else ""), (" where " + ", ".join(where) if where else "")

    def fn_sig(self, name, f):
        hdr = f.get("header", {})
        pre = "".join(
            w for w, on in (
                ("const ", hdr.get("is_const")),
                ("async ", hdr.get("is_async")),
                ("unsafe ", hdr.get("is_unsafe")),
            ) if on
        ) + self.abi(hdr.get("abi"))
        gp, wh = self.generics(f.get("generics"))
        sig = f["sig"]
        ins = []
        for n, t in sig["inputs"]:
            if n == "self":
                tt = self.ty(t)
                ins.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(tt, "self: " + tt))
            else:
                ins.append(f"{n}: {self.ty(t)}")
        out = f"{pre}fn {name}{gp}(" + ", ".join(ins) + ")"
        if sig.get("output"):
            out += " -> " + self.ty(sig["output"])
        return out + wh

    # ---- walking -------------------------------------------------------------------------
    def add(self, line):
        self.lines.add(line)

    def walk_module(self, mod_item, path, seen):
        if mod_item["id"] in seen:
            return
        seen = seen | {mod_item["id"]}
        for id_ in mod_item["inner"]["module"]["items"]:
            it = self.item(id_)
            if it is None or it.get("visibility") != "public" or hidden(it):
                continue
            kind = next(iter(it["inner"]))
            if kind == "use":
                u = it["inner"]["use"]
                target = self.item(u["id"]) if u.get("id") is not None else None
                if u.get("is_glob"):
                    if target and next(iter(target["inner"])) == "module":
                        self.walk_module(target, path, seen)
                    else:
                        self.add(f"pub use {path}::{u['source']}::*")
                    continue
                if target is None:
                    self.add(f"pub use {u['source']} as {path}::{u['name']}")
                    continue
                if hidden(target):
                    continue
                self.visit(target, f"{path}::{u['name']}", seen, u["name"])
            else:
                self.visit(it, f"{path}::{it['name']}", seen, it["name"])

    def visit(self, it, path, seen, name):
        if next(iter(it["inner"])) == "module":
            self.walk_item(it, path, seen, name)
        else:
            self.found.setdefault(it["id"], []).append((path, name))

    def render(self):
        for id_, paths in self.found.items():
            def rank(p):
                return ("::prelude::" in p[0], p[0].count("::"), p[0])
            ordered = sorted(paths, key=rank)
            canonical, name = ordered[0]
            self.walk_item(self.item(id_), canonical, frozenset(), name)
            for other, _ in ordered[1:]:
                self.add(f"pub use {canonical} as {other}")

    def walk_item(self, it, path, seen, name):
        kind = next(iter(it["inner"]))
        v = it["inner"][kind]
        ne = "#[non_exhaustive] " if non_exhaustive(it) else ""
        if kind == "module":
            self.add(f"pub mod {path}")
            self.walk_module(it, path, seen)
        elif kind == "struct":
            gp, wh = self.generics(v.get("generics"))
            self.add(f"{ne}pub struct {path}{gp}{wh}")
            sk = v["kind"]
            if isinstance(sk, dict) and "plain" in sk:
                for fid in sk["plain"]["fields"]:
                    f = self.item(fid)
                    if f and f.get("visibility") == "public" and not hidden(f):
                        self.add(f"pub {path}::{f['name']}: {self.ty(f['inner']['struct_field'])}")
            elif isinstance(sk, dict) and "tuple" in sk:
                for i, fid in enumerate(sk["tuple"]):
                    f = self.item(fid) if fid is not None else None
                    if f and f.get("visibility") == "public" and not hidden(f):
                        self.add(f"pub {path}::{i}: {self.ty(f['inner']['struct_field'])}")
            self.impls(v.get("impls", []), path)
        elif kind == "enum":
            gp, wh = self.generics(v.get("generics"))
            self.add(f"{ne}pub enum {path}{gp}{wh}")
            for vid in v["variants"]:
                var = self.item(vid)
                if var is None or hidden(var):
                    continue
                vk = var["inner"]["variant"]["kind"]
                vne = "#[non_exhaustive] " if non_exhaustive(var) else ""
                if vk == "plain":
                    self.add(f"{vne}pub {path}::{var['name']}")
                elif "tuple" in vk:
                    tys = [self.ty(self.item(f)["inner"]["struct_field"]) if f is not None else "_" for f in vk["tuple"]]
                    self.add(f"{vne}pub {path}::{var['name']}(" + ", ".join(tys) + ")")
                elif "struct" in vk:
                    self.add(f"{vne}pub {path}::{var['name']}" + " {}")
                    for fid in vk["struct"]["fields"]:
                        f = self.item(fid)
                        if f and not hidden(f):
                            self.add(f"pub {path}::{var['name']}::{f['name']}: {self.ty(f['inner']['struct_field'])}")
            self.impls(v.get("impls", []), path)
        elif kind == "union":
            self.add(f"pub union {path}")
            self.impls(v.get("impls", []), path)
        elif kind == "function":
            self.add(f"pub {self.fn_sig(path, v)}")
        elif kind == "constant":
            self.add(f"pub const {path}: {self.ty(v['type'])}")
        elif kind == "static":
            self.add(f"pub static {'mut ' if v.get('is_mutable') else ''}{path}: {self.ty(v['type'])}")
        elif kind == "type_alias":
            gp, _ = self.generics(v.get("generics"))
            self.add(f"pub type {path}{gp} = {self.ty(v['type'])}")
        elif kind == "trait":
            gp, wh = self.generics(v.get("generics"))
            unsafe = "unsafe " if v.get("is_unsafe") else ""
            sealed = ""
            self.add(f"pub {unsafe}trait {path}{gp}{wh}{sealed}")
            for iid in v.get("items", []):
                self.assoc(self.item(iid), path)
        elif kind == "macro":
            self.add(f"pub macro {name}!")
        elif kind in ("proc_macro",):
            self.add(f"pub proc_macro {path}")
        else:
            self.add(f"pub {kind} {path}")

    def assoc(self, a, owner):
        if a is None or hidden(a):
            return
        k = next(iter(a["inner"]))
        v = a["inner"][k]
        if k == "function":
            self.add(f"pub {self.fn_sig(owner + '::' + a['name'], v)}")
        elif k == "assoc_type":
            b = v.get("bounds", [])
            self.add(f"pub type {owner}::{a['name']}" + (": " + " + ".join(self.bound(x) for x in b) if b else ""))
        elif k == "assoc_const":
            self.add(f"pub const {owner}::{a['name']}: {self.ty(v['type'])}")

    def impls(self, ids, path):
        for iid in ids:
            im = self.item(iid)
            if im is None or hidden(im):
                continue
            v = im["inner"]["impl"]
            if v.get("blanket_impl") is not None:
                continue
            tr = v.get("trait")
            if tr is None:
                for aid in v.get("items", []):
                    a = self.item(aid)
                    if a and a.get("visibility") == "public":
                        self.assoc(a, path)
                continue
            trait = self.path(tr)
            if tr.get("path", "").split("::")[-1] in TRAITS_LEFT_OUT:
                continue
            if v.get("is_synthetic") and tr.get("path", "").split("::")[-1] not in AUTO_TRAITS_KEPT:
                continue
            gp, wh = self.generics(v.get("generics"))
            neg = "!" if v.get("is_negative") else ""
            unsafe = "unsafe " if v.get("is_unsafe") else ""
            self.add(f"{unsafe}impl{gp} {neg}{trait} for {path}{wh}")


def main():
    doc = json.load(open(sys.argv[1]))
    if doc.get("format_version") != FORMAT_VERSION:
        sys.exit(
            f"public-api.py: rustdoc JSON format {doc.get('format_version')}, this script reads "
            f"{FORMAT_VERSION}: update it with the toolchain"
        )
    lister = Lister(doc)
    root = lister.item(doc["root"])
    name = root["name"]
    lister.add(f"pub mod {name}")
    lister.walk_module(root, name, frozenset())
    lister.render()
    for line in sorted(lister.lines):
        print(line)


if __name__ == "__main__":
    main()
