"""Write each inline <script> of a page once.

Sphinx 7.4 writes an inline script that an extension adds after the builder has started twice (it
adds it once as itself and once more when it replays the extensions' scripts before writing, and the
two copies do not compare equal). sphinx-thebe's declares ``const THEBE_JS_URL``, so the second copy
is a console error ("Identifier 'THEBE_JS_URL' has already been declared") on every page. This keeps
the first copy of every script.
"""


def _key(script):
    attributes = getattr(script, "attributes", {}) or {}
    return (getattr(script, "filename", str(script)) or "",
            tuple(sorted((name, str(value)) for name, value in attributes.items())))


def dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
