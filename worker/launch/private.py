"""The data directory is its owner's alone: it holds the database (the Stripe and webhook
secrets, every account's personal data), Redis's append-only files (the queued commands),
the logs, and beat's, Flower's and the emulator's state.

``up`` and the launch commands create what they write for the owner only, whatever the
umask they were started with (the usual 022 would let every local user read it all); their
children inherit the umask. ``up`` also tightens what an earlier run left readable.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

OWNER_ONLY_UMASK = 0o077
"""New directories 0700, new files 0600."""

NOT_THE_OWNER_S = 0o077
"""The group's and others' permission bits."""


def create_files_for_owner_only() -> None:
    """From now on, this process and the children it starts create files and directories
    that only their owner can read, write or enter."""
    os.umask(OWNER_ONLY_UMASK)


def make_private(directory: Path) -> list[Path]:
    """Create ``directory`` if it is missing, and take the group's and others' permissions
    from it and from everything under it (symbolic links are neither changed nor followed).
    Returns what could not be changed (another user's files)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    unchanged: list[Path] = []
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        paths = [here] if here == directory else []
        paths += [here / name for name in (*dirs, *files)]
        for path in paths:
            try:
                mode = path.lstat().st_mode
                if stat.S_ISLNK(mode) or not mode & NOT_THE_OWNER_S:
                    continue
                path.chmod(stat.S_IMODE(mode) & ~NOT_THE_OWNER_S)
            except FileNotFoundError:
                continue  # removed meanwhile (a log rotated, a temporary file)
            except OSError:
                unchanged.append(path)
    return unchanged
