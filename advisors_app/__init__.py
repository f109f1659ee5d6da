"""advisors_app: Spring AI's Advisor architecture as a reusable Django app.

This module imports nothing: ``advisors_app.core`` must stay importable without Django,
and importing a subpackage runs this file first.
"""
