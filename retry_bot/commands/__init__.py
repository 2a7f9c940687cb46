"""One module per ``retry-bot`` sub-command.

Each module defines ``register(subparsers)`` which adds its parser and sets
``func`` to a handler ``(args) -> int``.  Handlers import their heavy
dependencies lazily so ``retry-bot --help`` stays fast.
"""
