"""Pure functions from a Trace (and a selection) to Plotly figures, pandas tables and HTML.

No Gradio here: every function can be called from a notebook.
"""
