"""Executing compiled programs: arenas, the on-disk module cache, call-time checks.

``runtime`` never imports ``compiler`` or ``dsl``.
"""
