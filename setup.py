"""Only the optional C extension lives here; everything else is in pyproject.toml.

`optional=True`: without a C compiler the build still succeeds and
jocko_py.protocol.records falls back to its pure-Python walk.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "jocko_py.protocol._recwalk",
            ["jocko_py/protocol/_recwalk.c"],
            optional=True,
        )
    ]
)
