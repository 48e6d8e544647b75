#!/usr/bin/env python3
"""Checks the HTML rustdoc wrote for one crate: every relative link resolves to a page that
exists (a link to a `#[doc(hidden)]` or private item is one that does not), and prints the
count of module pages and item pages (redirect pages left out).

With --feature-marks LIST (comma-separated features), also checks that each feature marks at
least one item ("Available on crate feature `F` only", what `doc(cfg)` writes on docs.rs).

Usage: scripts/doc-links.py DOC_DIR CRATE [--max-modules N] [--max-items N]
                            [--feature-marks LIST]
Exit status 1 when a link is broken, a count is over its maximum or a feature marks nothing,
naming each.
"""

import argparse
import html.parser
import os
import sys


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []
        self.redirect = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "meta" and a.get("http-equiv") == "refresh":
            self.redirect = True
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("doc_dir")
    ap.add_argument("crate")
    ap.add_argument("--max-modules", type=int)
    ap.add_argument("--max-items", type=int)
    ap.add_argument("--feature-marks", default="")
    args = ap.parse_args()
    wanted = [f for f in args.feature_marks.split(",") if f]
    marked = set()
    root = os.path.join(args.doc_dir, args.crate)
    broken = []
    modules = items = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".html"):
                continue
            page = os.path.join(dirpath, f)
            p = Links()
            with open(page, encoding="utf-8") as fh:
                text = fh.read()
            p.feed(text)
            for feature in wanted:
                if f"<strong>crate feature <code>{feature}</code></strong>" in text:
                    marked.add(feature)
            if p.redirect:
                continue
            if f == "index.html":
                modules += 1
            else:
                items += 1
            for href in p.hrefs:
                target = href.split("#", 1)[0]
                if not target or "://" in target or target.startswith(("mailto:", "javascript:")):
                    continue
                # rustdoc's own links end in .html (or a folder); others are text a foreign
                # crate's blanket impl left unresolved (`super::Span`), not this crate's.
                if not (target.endswith(".html") or target.endswith("/")):
                    continue
                path = os.path.normpath(os.path.join(dirpath, target))
                # Links into other crates' documentation (std is absolute) and rustdoc's own
                # static files are not this crate's to check.
                if not path.startswith(os.path.normpath(root) + os.sep):
                    continue
                if not os.path.exists(path):
                    broken.append(f"{os.path.relpath(page, root)}: {href}")
    problems = sorted(set(broken))
    for b in problems:
        print(f"broken link: {b}")
    print(f"{args.crate}: {modules} module pages, {items} item pages, {len(problems)} broken links")
    over = []
    if args.max_modules is not None and modules > args.max_modules:
        over.append(f"{modules} module pages, more than {args.max_modules}")
    if args.max_items is not None and items > args.max_items:
        over.append(f"{items} item pages, more than {args.max_items}")
    for f in wanted:
        if f not in marked:
            over.append(f"no item marked as needing the feature {f} (doc(cfg) on docs.rs)")
    if wanted:
        print(f"{args.crate}: features marked: {', '.join(f for f in wanted if f in marked) or 'none'}")
    for o in over:
        print(o)
    sys.exit(1 if problems or over else 0)


if __name__ == "__main__":
    main()
