"""The function runtime: runs the Python code of `function` and `code_execution` records
(`skills.declared`) inside the sandbox, like any component skill: under the call's deadline,
fuel and memory cap, with no capability at all (no files, network, environment or clock
beyond what WASI gives every guest).

`host/build.rs` builds it with componentize-py and embeds it in the binary; the host calls
its tools itself (they are never offered to a model):

- `check(code, mode)`: compiles the code (a syntax error comes back with its line) and, for a
  function, wants a top-level `def run(args)`.
- `run(code, args)`: runs the code's top level, then `run(args)`; the return value is the
  result (a string as is, anything else as JSON).
- `execute(code)`: runs the code as a script; the result is what it printed, then the value
  of its last line when that is an expression (as a notebook shows it).

An exception is a failed result naming its type, its message and the line of the code.

The component has no file system, so the code can import only what is inside it: the
modules imported below (componentize-py snapshots the interpreter after importing them) and
those built into the interpreter. `PRELOADED` lists them for the docs and the tests.
"""

import ast
import io
import json
import sys
import traceback

# What the code may import: the standard library's pure computation (no I/O modules).
import base64  # noqa: F401
import binascii  # noqa: F401
import bisect  # noqa: F401
import calendar  # noqa: F401
import cmath  # noqa: F401
import collections  # noqa: F401
import copy  # noqa: F401
import csv  # noqa: F401
import dataclasses  # noqa: F401
import datetime  # noqa: F401
import decimal  # noqa: F401
import difflib  # noqa: F401
import enum  # noqa: F401
import fractions  # noqa: F401
import functools  # noqa: F401
import hashlib  # noqa: F401
import heapq  # noqa: F401
import html  # noqa: F401
import ipaddress  # noqa: F401
import itertools  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import pprint  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import statistics  # noqa: F401
import string  # noqa: F401
import struct  # noqa: F401
import textwrap  # noqa: F401
import typing  # noqa: F401
import unicodedata  # noqa: F401
import urllib.parse  # noqa: F401
import uuid  # noqa: F401
import zlib  # noqa: F401

PRELOADED = sorted(
    """base64 binascii bisect calendar cmath collections copy csv dataclasses datetime decimal
    difflib enum fractions functools hashlib heapq html ipaddress itertools json math operator
    pprint random re statistics string struct textwrap typing unicodedata urllib.parse uuid zlib""".split()
)

from skillhost import ToolResult, tool

FILENAME = "<code>"


def _line(err: BaseException):
    """The last line of the record's code in the exception's traceback."""
    if isinstance(err, SyntaxError) and err.filename == FILENAME:
        return err.lineno
    line = None
    for frame, lineno in traceback.walk_tb(err.__traceback__):
        if frame.f_code.co_filename == FILENAME:
            line = lineno
    return line


def _failure(err: BaseException, printed: str = "") -> ToolResult:
    line = _line(err)
    where = f" (line {line})" if line is not None else ""
    details = {"kind": "exception", "exception": type(err).__name__, "line": line}
    if printed:
        details["output"] = printed
    return ToolResult.error(f"{type(err).__name__}: {err}{where}", **details)


def _encode(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


class _Captured:
    """Collects what the code prints (stdout and stderr)."""

    def __enter__(self):
        self.buffer = io.StringIO()
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout = sys.stderr = self.buffer
        return self

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.saved
        return False

    def text(self) -> str:
        return self.buffer.getvalue()


@tool
def check(code: str, mode: str) -> dict:
    """Whether the code compiles (and, for mode `function`, defines `run`)."""
    try:
        tree = compile(code, FILENAME, "exec", ast.PyCF_ONLY_AST)
    except SyntaxError as err:
        return {"ok": False, "line": err.lineno, "error": f"{type(err).__name__}: {err.msg}"}
    if mode == "function":
        defines_run = any(
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run" for node in tree.body
        )
        if not defines_run:
            return {"ok": False, "line": None, "error": "the code defines no top-level `def run(args)`"}
    return {"ok": True}


@tool
def run(code: str, args: str):
    """Runs the code's top level, then `run(args)` (args: JSON text)."""
    scope = {"__name__": "__function__"}
    with _Captured() as captured:
        try:
            exec(compile(code, FILENAME, "exec"), scope)
            value = scope["run"](json.loads(args))
        except BaseException as err:  # the model reads the failure, whatever it is
            return _failure(err, captured.text())
    return ToolResult.ok(_encode(value))


@tool
def execute(code: str):
    """Runs the code as a script: what it printed, then its last expression's value."""
    scope = {"__name__": "__main__"}
    with _Captured() as captured:
        try:
            tree = compile(code, FILENAME, "exec", ast.PyCF_ONLY_AST)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, FILENAME, "exec"), scope)
            value = eval(compile(last, FILENAME, "eval"), scope) if last is not None else None
        except BaseException as err:
            return _failure(err, captured.text())
    printed = captured.text()
    if value is not None:
        printed += repr(value) if not isinstance(value, str) else value
    return ToolResult.ok(printed if printed else "(no output)")
