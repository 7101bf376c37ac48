#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The property tables of docs/elements.md say what the elements have: for every element
of the plugin, every property it defines (its own and its project base classes', not
those of GStreamer's base classes) is named in the element's section ("## NAME", up to
the next "## " heading, its "### " subsections included), every row of that section's
property table names a property the element has, and the table's default is the property's default wherever the table gives it as
a value (a number, true/false, an enum nick or string in backticks, "unset" for an
empty string, "read-only" for a property that cannot be written). Other defaults
("5 ms") are compared by hand. Prints every mismatch and fails.

Usage: check_property_tables.py docs/elements.md  (GST_PLUGIN_PATH names the plugin build)
"""
import re
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GObject, Gst  # noqa: E402

ELEMENTS = ["visiondetect", "visiontrack", "visionoverlay", "visionjson", "visionmqtt"]
# properties of GStreamer's own base classes are theirs to document
GSTREAMER_CLASSES = {"GstObject", "GstElement", "GstBaseTransform", "GstBaseSink",
                     "GstBaseSrc", "GstVideoFilter", "GstAggregator", "GstBin"}


def sections(doc):
    """{element: text of its '## element' section, up to the next '# ' or '## ' heading
    (lines in ``` fences are never headings)}"""
    out = {}
    name = None
    fenced = False
    for line in doc.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,2} ", line):
            m = re.match(r"^## (\S+)\s*$", line)
            name = m.group(1) if m else None
            if name is not None:
                out[name] = ""
            continue
        if name is not None:
            out[name] += line + "\n"
    return out


def table_rows(text):
    """Rows (name, default) of the first '| property | default |' table of @text."""
    rows = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\|\s*property\s*\|\s*default\s*\|", line):
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                for name in re.findall(r"`([a-z0-9-]+)`", cells[0]):
                    rows.append((name, cells[1] if len(cells) > 1 else ""))
            break
    return rows


def check_default(element, pspec, text):
    """None when @text agrees with @pspec's default (or is not a comparable value),
    else a message."""
    t = text.strip()
    writable = bool(pspec.flags & GObject.ParamFlags.WRITABLE)
    if t == "read-only":
        return None if not writable else "the table says read-only, the property is writable"
    if not writable:
        return f"read-only property, the table gives the default {t!r}"
    value = pspec.default_value
    vtype = pspec.value_type
    if t == "unset":
        if vtype == GObject.TYPE_STRING or vtype.is_a(GObject.TYPE_BOXED) or \
                vtype == GObject.TYPE_STRV:
            return None if value in (None, "") or value == [] else f"default is {value!r}, not unset"
        return None
    m = re.fullmatch(r"`([^`]*)`", t)
    if m:
        word = m.group(1)
        if vtype.is_a(GObject.TYPE_ENUM):
            nick = getattr(value, "value_nick", None)
            if nick is None:
                # a plain int (newer PyGObject): the nick of the fresh element's value,
                # which GObject initialised to the default (unless the element changed it)
                current = element.get_property(pspec.name)
                if int(current) != int(value):
                    return (f"the element starts at {int(current)}, its default is "
                            f"{int(value)}")
                nick = current.value_nick
            return None if nick == word else f"default is {nick!r}, the table says {word!r}"
        if vtype == GObject.TYPE_STRING:
            return None if value == word else f"default is {value!r}, the table says {word!r}"
        return None
    if t in ("true", "false"):
        if vtype != GObject.TYPE_BOOLEAN:
            return f"the table gives {t}, the property is a {vtype.name}"
        return None if bool(value) == (t == "true") else f"default is {value}, the table says {t}"
    if re.fullmatch(r"-?\d+(\.\d+)?", t):
        if vtype in (GObject.TYPE_STRING, GObject.TYPE_BOOLEAN):
            return f"the table gives {t}, the property is a {vtype.name}"
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return None if abs(number - float(t)) <= 1e-6 * max(1.0, abs(number)) else \
            f"default is {value}, the table says {t}"
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    doc = open(sys.argv[1], encoding="utf-8").read()
    Gst.init(None)
    secs = sections(doc)
    problems = []
    checked = compared = 0
    for name in ELEMENTS:
        factory = Gst.ElementFactory.find(name)
        if factory is None:
            if name == "visionmqtt":
                print("visionmqtt not built (no libmosquitto): not checked")
                continue
            problems.append(f"{name}: no such element in the plugin")
            continue
        element = factory.create(None)
        if name not in secs:
            problems.append(f"{name}: no '## {name}' section in {sys.argv[1]}")
            continue
        text = secs[name]
        props = {p.name: p for p in GObject.list_properties(element)
                 if p.owner_type.name not in GSTREAMER_CLASSES}
        for p in props:
            checked += 1
            if not re.search(r"`" + re.escape(p) + r"[`=]", text):
                problems.append(f"{name}: property {p} is not named in its section")
        for row, default in table_rows(text):
            if row not in props:
                problems.append(f"{name}: the table has {row}, the element has no such "
                                "property")
                continue
            msg = check_default(element, props[row], default)
            compared += 1
            if msg:
                problems.append(f"{name}.{row}: {msg}")
    for p in problems:
        print("FAIL:", p)
    print(f"{checked} properties checked, {compared} table rows compared, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
