#!/usr/bin/python3
"""html_dom.py - what mt-report --html's page shows, from the DOM headless
Chromium dumped after the page's script ran (chromium --dump-dom), as one
JSON object for tests/html.bats:

    ready     the script ran to its end (body data-ready="1")
    heading   the text of the page's h1
    summary   {key: {"v", "text"}} of the summary's cells (id "s-KEY":
              data-v, and the text shown)
    flame     [{"name", "match", "above"}] the flame graph's frames, in
              document order (root first)
    status    the flame graph's status line: {"text", "frames", "value"}
    xticks, yticks  the timeline's tick labels
    series    the timeline's lines drawn (data-key)
    sites, mapped_sites, procs  rows of those tables, each a list of its
              cells' data-v (or text when a cell has none)

    html_dom.py < dom.html
    html_dom.py --views VIEWS.html OUT

--views: VIEWS.html is a page of pages (tests/html.bats's views): each
page's DOM as the text of a <pre id="view-N">; each is read as above
into OUT.N.json.
"""
import json
import sys
from html.parser import HTMLParser


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.out = {"ready": False, "heading": "", "summary": {}, "flame": [], "status": {},
                    "xticks": [], "yticks": [], "series": [], "sites": [],
                    "mapped_sites": [], "procs": []}
        self.section = None
        self.text_of = None  # (list, key) that collects the next text
        self.row = None
        self.cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "body" and a.get("data-ready") == "1":
            self.out["ready"] = True
        if tag == "h1":
            self.text_of = (self.out, "heading")
        if tag == "section":
            self.section = a.get("id")
        if tag == "td" and (a.get("id") or "").startswith("s-"):
            cell = {"v": a.get("data-v"), "text": ""}
            self.out["summary"][a["id"][2:]] = cell
            self.text_of = (cell, "text")

        if tag == "g" and "f" in cls:
            self.out["flame"].append({"name": a.get("data-name"),
                                      "match": "match" in cls,
                                      "above": "above" in cls})
        if tag == "span" and a.get("id") == "fl-status":
            self.out["status"] = {"frames": a.get("data-matched-frames"),
                                  "value": a.get("data-matched-value"),
                                  "text": ""}
            self.text_of = (self.out["status"], "text")
        if tag == "text" and ("xtick" in cls or "ytick" in cls):
            key = "xticks" if "xtick" in cls else "yticks"
            self.out[key].append("")
            self.text_of = (self.out[key], -1)
        if tag == "path" and "series" in cls:
            self.out["series"].append(a.get("data-key"))
        if tag == "tr" and ("site" in cls or "proc" in cls):
            key = "procs" if "proc" in cls else \
                "sites" if self.section == "sites" else "mapped_sites"
            self.row = []
            self.out[key].append(self.row)
        if tag == "td" and self.row is not None:
            self.cell = a.get("data-v")
            self.row.append(self.cell if self.cell is not None else "")
            if self.cell is None:
                self.text_of = (self.row, -1)

    def handle_endtag(self, tag):
        if tag in ("span", "text", "td", "h1"):
            self.text_of = None
        if tag == "tr":
            self.row = None

    def handle_data(self, data):
        if self.text_of:
            holder, key = self.text_of
            holder[key] += data


class Views(HTMLParser):
    def __init__(self):
        super().__init__()
        self.views = {}
        self.at = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "pre" and (a.get("id") or "").startswith("view-"):
            self.at = int(a["id"][5:])
            self.views[self.at] = ""

    def handle_endtag(self, tag):
        if tag == "pre":
            self.at = None

    def handle_data(self, data):
        if self.at is not None:
            self.views[self.at] += data


def read(text):
    d = Dom()
    d.feed(text)
    return d.out


if len(sys.argv) == 4 and sys.argv[1] == "--views":
    v = Views()
    v.feed(open(sys.argv[2]).read())
    for n, text in v.views.items():
        with open("%s.%d.json" % (sys.argv[3], n), "w") as f:
            json.dump(read(text), f, indent=1)
else:
    json.dump(read(sys.stdin.read()), sys.stdout, indent=1)
    print()
