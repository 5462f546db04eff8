"""Compiler passes: each a named unit with one entry point (fusion, buffer planning, ...)."""
