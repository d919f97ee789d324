"""Print what pyproject.toml declares, one requirement per line, for an image's dependency layer.

    python requirements.py embeddings   # [project] dependencies plus the `embeddings` extra
    python requirements.py cpu          # plus the `cpu` extra (it names `embeddings` itself)

The images install these before copying the source, so a code change rebuilds only the last
layers, and pyproject.toml stays the one list. Standard library only: it runs before any install.
"""

import re
import sys
import tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
self_reference = re.compile(rf"{re.escape(project['name'])}\[(?P<extras>[^\]]+)\]$")


def expanded(extra: str) -> list[str]:
    found: list[str] = []
    for requirement in project["optional-dependencies"][extra]:
        inner = self_reference.match(requirement)
        if inner:
            for name in inner["extras"].split(","):
                found += expanded(name.strip())
        else:
            found.append(requirement)
    return found


requirements = list(project["dependencies"])
for extra in sys.argv[1:]:
    requirements += expanded(extra)
print("\n".join(dict.fromkeys(requirements)))
