"""Private pieces of the record fallbacks; the public API is `phoenix_nb.notebook.render`."""
