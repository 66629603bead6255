#!/usr/bin/env python3
"""Checks the Markdown pages of the repository (README.md, docs/, every other *.md):

- every relative link [text](path#anchor) names a file that exists, and an anchor names a
  heading of the Markdown file it points into (GitHub's heading ids);
- every code block announced by `<!-- excerpt: PATH -->` is, line for line, a contiguous
  part of PATH (so README's example is code that is built).

    tools/check_doc_links.py [ROOT]     (default: the repository this script is in)

Prints one line per broken link or excerpt and exits 1 if there is any, else says how many
pages, links and excerpts it checked. tests/docs:doc_links_test runs it over its runfiles.
"""
import os
import re
import sys

SKIP_DIRS = {".git", "third_party"}
LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
EXCERPT = re.compile(r"^<!-- excerpt: (\S+) -->$")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(root):
    pages = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("bazel-"))
        for name in sorted(files):
            if name.endswith(".md"):
                pages.append(os.path.relpath(os.path.join(folder, name), root))
    return pages


def slug(heading):
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(text):
    seen = {}
    ids = set()
    for _, line in prose_lines(text):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.add(base if n == 0 else "%s-%d" % (base, n))
    return ids


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def check_page(root, page, problems):
    text = read(os.path.join(root, page))
    links = 0
    for number, line in prose_lines(text):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            links += 1
            path, _, anchor = target.partition("#")
            where = "%s:%d: %s" % (page, number, target)
            file = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            full = os.path.join(root, file)
            if file.startswith(".."):
                problems.append(where + ": points outside the repository")
            elif not os.path.exists(full):
                problems.append(where + ": no such file " + file)
            elif anchor and file.endswith(".md") and anchor not in anchors(read(full)):
                problems.append(where + ": " + file + " has no heading with the id #" + anchor)
    return links


def check_excerpts(root, page, problems):
    lines = read(os.path.join(root, page)).split("\n")
    count = 0
    for i, line in enumerate(lines):
        m = EXCERPT.match(line.strip())
        if not m:
            continue
        count += 1
        where = "%s:%d: excerpt of %s" % (page, i + 1, m.group(1))
        if i + 1 >= len(lines) or not FENCE.match(lines[i + 1]):
            problems.append(where + ": no code block follows the marker")
            continue
        end = next((j for j in range(i + 2, len(lines)) if FENCE.match(lines[j])), None)
        source = os.path.join(root, m.group(1))
        if end is None:
            problems.append(where + ": the code block does not end")
        elif not os.path.exists(source):
            problems.append(where + ": no such file")
        else:
            block = lines[i + 2:end]
            code = read(source).split("\n")
            if not block or not any(code[k:k + len(block)] == block for k in range(len(code))):
                problems.append(where + ": the block is not a contiguous part of the file")
    return count


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pages = markdown_files(root)
    problems = []
    if "README.md" not in pages or not any(p.startswith("docs" + os.sep) for p in pages):
        problems.append("%s: no README.md or no docs/*.md found" % root)
    links = sum(check_page(root, p, problems) for p in pages)
    excerpts = sum(check_excerpts(root, p, problems) for p in pages)
    for p in problems:
        print(p)
    if problems:
        return 1
    print("%d pages, %d relative links, %d excerpts: all good" % (len(pages), links, excerpts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
