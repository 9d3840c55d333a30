"""Merge a cell's stream outputs the way a terminal (and JupyterLab) shows them.

``nb_merge_streams: true`` makes myst-nb 1.4 join a cell's stdout chunks into one block, but its
``coalesce_streams`` strips every chunk after the first and appends a newline to it. A cell that prints
one token at a time (chapter 5's streaming: ``print(token, end="", flush=True)``, one chunk per token)
then shows one token per line on the website, while JupyterLab and Colab show them on one line. This
replaces that function with one that concatenates the chunks exactly, then applies ``\\b`` and ``\\r``
as a terminal would, and keeps myst-nb's stdout-before-stderr order.
"""

import copy
import re

import myst_nb.core.render

_BACKSPACE = re.compile(r"[^\n]\x08")
_CARRIAGE_RETURN = re.compile(r"[^\n]*\r(?=[^\n])")


def coalesce_streams(outputs):
    merged, streams = [], {}
    for output in outputs or []:
        if output["output_type"] != "stream":
            merged.append(output)
        elif output["name"] in streams:
            streams[output["name"]]["text"] += output["text"]
        else:
            output = copy.copy(output)  # not the notebook's own output
            merged.append(output)
            streams[output["name"]] = output
    for output in streams.values():
        text, old = output["text"], None
        while text != old:
            old, text = text, _BACKSPACE.sub("", text)
        output["text"] = _CARRIAGE_RETURN.sub("", text)
    for i, output in enumerate(merged):
        if (output["output_type"] == "stream" and output["name"] == "stderr" and i + 1 < len(merged)
                and merged[i + 1]["output_type"] == "stream" and merged[i + 1]["name"] == "stdout"):
            merged.insert(i, merged.pop(i + 1))
    return merged


def setup(app):
    myst_nb.core.render.coalesce_streams = coalesce_streams
    return {"parallel_read_safe": True, "parallel_write_safe": True}
