"""Renderers of one `analysis.Report`: terminal, JSON, Markdown, HTML, SARIF and JUnit (`outputs` picks one by
name or file extension).

Each renderer is a function of the report; none of them reads the trace again unless it says so.
"""
